"""Building the IR values (rnnir/lower/values.py), pinned through the public lowering: external values made once,
provenance, recurrent attributes' defaults, and how a recurrence recognised in plain ops becomes one Recurrent (its X
from the cell inputs, its Y and the Squeezes back to the model's values). Where numbers can tell, the oracle is
onnxruntime running the original model call after call, against rnnir's simulator running the lowered IR; the IR's
shape is read off the graph by hand (a cell's state is [batch, hidden], an op's port is [directions, batch, hidden],
its Y is [steps, directions, batch, hidden])."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.check.simulate import run_calls
from rnnir.ir import Compute, Provenance, Recognition
from tests.support.cell_models import gru_cell, lstm_loop, unrolled_lstm
from tests.support.recurrent_op_models import H, I, T, model, vi, weights
from tests.support.recurrent_op_models import stored_value as _stored
from tests.support.recurrent_op_models import value_chain as _chain


def _matches_onnxruntime(m, prog, feeds, state):
    """Run ``m`` in onnxruntime call after call, handing each call's ``state`` outputs (output -> input) back as the
    next call's inputs (zeros at first, like the slots), and compare every output with rnnir's simulator of ``prog``."""
    sess = ort.InferenceSession(m.SerializeToString())
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
    carried = {inp: np.zeros(shapes[inp], np.float32) for inp in state.values()}
    simulated = run_calls(prog, feeds)
    names = [o.name for o in m.graph.output]
    for call, (feed, sim) in enumerate(zip(feeds, simulated)):
        got = dict(zip(names, sess.run(None, {**feed, **carried})))
        for name in names:
            np.testing.assert_allclose(sim[name], got[name], rtol=1e-5, atol=1e-6, err_msg=f"{name} at call {call}")
        carried = {inp: got[out] for out, inp in state.items()}


def _rng_feeds(shapes, calls=3, seed=0):
    rng = np.random.default_rng(seed)
    return [{n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()} for _ in range(calls)]


# -- plain ops and recurrent ops ----------------------------------------------------------------------------------


def test_a_constant_read_twice_on_the_state_path_is_one_external_value():
    # h_in = (h0 * decay) * decay: both Muls are built (they read the state) and read the same initializer
    nodes = [
        helper.make_node("Mul", ["h0", "decay"], ["h_half"], name="first"),
        helper.make_node("Mul", ["h_half", "decay"], ["h_in"], name="second"),
        helper.make_node("GRU", ["x", "W", "R", "", "", "h_in"], ["Y", "hn"], hidden_size=H, name="gru"),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], [*weights("GRU"), numpy_helper.from_array(np.float32(0.5), "decay")])
    prog = rnnir.load(m)
    first, second = prog.nodes_of(Compute)
    assert first.inputs[1] is second.inputs[1] is prog.externals["decay"]
    assert sorted(prog.externals) == ["R", "W", "decay", "x"]
    assert prog.externals["decay"].const.tolist() == 0.5
    # each built node says which ONNX node and value it stands for
    assert (first.provenance, second.provenance) == (Provenance(node="first", value="h_half"), Provenance(node="second", value="h_in"))


def test_an_lstm_without_input_forget_does_not_couple_its_gates():
    # ONNX's default input_forget is 0; with 1 the input gate is 1 - forget gate, which changes every number
    def lstm(**attrs):
        node = helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "hn", "cn"], hidden_size=H, name="lstm", **attrs)
        return model([node], [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), vi("c0", [1, 1, H])], [vi("hn", [1, 1, H]), vi("cn", [1, 1, H])], weights("LSTM"))

    for attrs, coupled in (({}, 0), ({"input_forget": 1}, 1)):
        m = lstm(**attrs)
        prog = rnnir.load(m)
        (rec,) = prog.recurrents
        assert rec.input_forget == coupled
        _matches_onnxruntime(m, prog, _rng_feeds({"x": (T, 1, I)}, calls=2), {"hn": "h0", "cn": "c0"})


# -- recurrences written as plain ops -----------------------------------------------------------------------------


def test_a_recognised_cell_takes_its_input_as_one_step_and_has_no_sequence_output():
    m, _ = gru_cell()
    prog = rnnir.load(m)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.CELL
    assert _chain(rec.port("X")) == ["Unsqueeze", "external x"]  # x [batch, input] -> [1 step, batch, input]
    assert rec.port("Y") is None  # one step: nothing reads a sequence
    _matches_onnxruntime(m, prog, _rng_feeds({"x": (1, 5)}), {"hn": "h0"})


def test_an_unrolled_loop_stacks_its_steps_inputs_as_one_sequence():
    # three LSTM steps threaded h -> h, c -> c, each reading x[t] (a Gather outside the state path)
    m = unrolled_lstm()
    prog = rnnir.load(m)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.UNROLLED
    x = rec.port("X")
    assert x.producer.op == "Concat" and x.producer.attributes["axis"] == 0
    assert [_chain(part) for part in x.producer.inputs] == [["Unsqueeze", f"external {n}"] for n in ("gather_5", "gather_37", "gather_69")]
    _matches_onnxruntime(m, prog, _rng_feeds({"x": (3, 1, 3)}), {"hn": "h0", "cn": "c0"})


def test_a_state_after_an_inner_step_is_read_from_y_without_the_directions_axis():
    # the same loop writing back the state after step 1 of 0..2 (write_prev): h is Y[1] ([directions, batch, hidden])
    # with the directions axis squeezed away (its c has no ONNX port: a CellState the simulator cannot run)
    prog = rnnir.load(unrolled_lstm(thread="write_prev"))
    written = _stored(prog, "h0")
    assert _chain(written) == ["Identity", "Squeeze", "Gather", "LSTM.Y"]
    squeeze = written.producer.inputs[0].producer
    gather = squeeze.inputs[0].producer
    assert squeeze.inputs[1].const.tolist() == [0]
    assert gather.inputs[1].const.tolist() == 1 and gather.attributes["axis"] == 0


def test_a_loop_over_a_cell_gives_its_per_step_outputs_from_y_without_the_directions_axis():
    # lstm_loop plus a scan output: each step's new h, stacked by the Loop into ys [steps, batch, hidden]
    m = lstm_loop()
    loop = next(n for n in m.graph.node if n.op_type == "Loop")
    body = next(a for a in loop.attribute if a.name == "body").g
    body.node.append(helper.make_node("Identity", ["h_next"], ["y_t"], name="yield_y"))
    body.output.append(vi("y_t", [1, H]))
    loop.output.append("ys")
    m.graph.output.append(vi("ys", [3, 1, H]))
    prog = rnnir.load(m, pairs={"h0": "hn", "c0": "cn"})
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.LOOP
    ys = prog.outputs[2]
    assert ys.name == "ys"
    squeeze = _stored(prog, "ys").producer
    assert _chain(_stored(prog, "ys")) == ["Squeeze", "LSTM.Y"] and squeeze.inputs[1].const.tolist() == [1]
    _matches_onnxruntime(m, prog, _rng_feeds({"x": (3, 1, 3)}), {"hn": "h0", "cn": "c0"})


def test_an_output_of_a_replaced_loop_that_carries_no_state_stays_an_external_value():
    # lstm_loop also counting its steps (a float carried beside h and c): `steps` is no state of the LSTM, so the
    # recurrence does not produce it; it is an external value of the program, with its type
    m = lstm_loop()
    loop = next(n for n in m.graph.node if n.op_type == "Loop")
    body = next(a for a in loop.attribute if a.name == "body").g
    body.input.append(vi("n_in", [], TensorProto.FLOAT))
    body.node.append(helper.make_node("Add", ["n_in", "one"], ["n_next"], name="count"))
    body.initializer.append(numpy_helper.from_array(np.float32(1), "one"))
    body.output.append(vi("n_next", [], TensorProto.FLOAT))
    loop.input.append("n_start")
    loop.output.append("steps")
    m.graph.initializer.append(numpy_helper.from_array(np.float32(0), "n_start"))
    m.graph.output.append(vi("steps", [], TensorProto.FLOAT))
    sess = ort.InferenceSession(m.SerializeToString())
    feed = {"x": np.ones((3, 1, 3), np.float32), "h0": np.zeros((1, H), np.float32), "c0": np.zeros((1, H), np.float32)}
    assert sess.run(["steps"], feed)[0].tolist() == 3.0
    prog = rnnir.load(m)
    assert [r.recognition for r in prog.recurrents] == [Recognition.LOOP]
    steps = prog.externals["steps"]
    assert steps.producer is None and (steps.type.dtype, steps.type.shape) == ("float32", ())


def _two_part_input_lstm():
    """An LSTM cell whose gates add three projections in turn: (xa W_a + b + h0 R) + xb W_b, two inputs xa [1, 2]
    and xb [1, 3]."""
    rng = np.random.default_rng(0)
    arrays = {
        "Wa": rng.standard_normal((4 * H, 2)) * 0.5,
        "Wb": rng.standard_normal((4 * H, 3)) * 0.5,
        "Rh": rng.standard_normal((4 * H, H)) * 0.5,
        "b": rng.standard_normal(4 * H) * 0.3,
    }
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in arrays.items()]
    nodes = [
        helper.make_node("Gemm", ["xa", "Wa", "b"], ["pa"], transB=1),
        helper.make_node("Gemm", ["xb", "Wb"], ["pb"], transB=1),
        helper.make_node("Gemm", ["h0", "Rh"], ["ph"], transB=1),
        helper.make_node("Add", ["pa", "ph"], ["pah"]),
        helper.make_node("Add", ["pah", "pb"], ["gates"]),
        helper.make_node("Split", ["gates"], ["gi", "gf", "gg", "go"], axis=1, num_outputs=4),
        helper.make_node("Sigmoid", ["gi"], ["i"]),
        helper.make_node("Sigmoid", ["gf"], ["f"]),
        helper.make_node("Tanh", ["gg"], ["g"]),
        helper.make_node("Sigmoid", ["go"], ["o"]),
        helper.make_node("Mul", ["f", "c0"], ["fc"]),
        helper.make_node("Mul", ["i", "g"], ["ig"]),
        helper.make_node("Add", ["fc", "ig"], ["cn"]),
        helper.make_node("Tanh", ["cn"], ["tc"]),
        helper.make_node("Mul", ["o", "tc"], ["hn"]),
    ]
    inputs = [vi("xa", [1, 2]), vi("xb", [1, 3]), vi("h0", [1, H]), vi("c0", [1, H])]
    m = helper.make_model(
        helper.make_graph(nodes, "two_inputs", inputs, [vi("hn", [1, H]), vi("cn", [1, H])], inits), opset_imports=[helper.make_opsetid("", 18)]
    )
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def test_a_cell_with_two_inputs_takes_them_side_by_side():
    m = _two_part_input_lstm()
    prog = rnnir.load(m)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.CELL
    joined = rec.port("X").producer.inputs[0].producer
    assert joined.op == "Concat" and joined.attributes["axis"] == 1  # [batch, 2] and [batch, 3] -> [batch, 5]
    assert sorted(v.name for v in joined.inputs) == ["xa", "xb"]
    _matches_onnxruntime(m, prog, _rng_feeds({"xa": (1, 2), "xb": (1, 3)}), {"hn": "h0", "cn": "c0"})


def test_a_cell_whose_input_is_no_matrix_or_a_constant_keeps_x_absent():
    # x of rank 1 ([input], MatMul broadcasts it): no [batch, input] step to stack
    m, _ = gru_cell(proj="matmul", split="split_sizes")
    (x,) = [v for v in m.graph.input if v.name == "x"]
    x.CopyFrom(vi("x", [5]))
    ort.InferenceSession(m.SerializeToString())
    prog = rnnir.load(m)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.CELL and rec.port("X") is None
    # x a constant: the projection folds into the constants, the cell has no input at all
    m, _ = gru_cell()
    (x,) = [v for v in m.graph.input if v.name == "x"]
    m.graph.input.remove(x)
    m.graph.initializer.append(numpy_helper.from_array(np.full((1, 5), 0.3, np.float32), "x"))
    prog = rnnir.load(m)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.CELL and rec.port("X") is None


def test_a_recognised_cell_is_built_though_its_new_state_goes_nowhere():
    # a GRU cell written as plain ops whose new state no output reads: the recurrence is still in the IR, starting
    # from the loaded state (so SD001 can name it)
    m, _ = gru_cell()
    g = m.graph
    kept = [n for n in g.node if n.output[0] != "hn"]
    del g.node[:]
    g.node.extend([*kept, helper.make_node("Identity", ["x"], ["x_copy"])])
    del g.output[:]
    g.output.append(vi("x_copy", [1, 5]))
    prog = rnnir.load(m, pairs={"h0": None})
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.CELL
    assert _chain(rec.port("initial_h")) == ["Unsqueeze", "load h0"]
