"""Keras models exported by tf2onnx (tests/data/keras, made by tests/data/make_keras_models.py): cells in Keras'
column layout, layers written as one ONNX Loop each, and states of stacked layers packed on inner axes.

The truth is Keras itself: each ``.calls.npz`` holds Keras' outputs of three calls with the state fed back, so
onnxruntime, the stateful session and rnnir's verdicts are all checked against what the model's authors' framework
computes. tf2onnx writes a layer that is not unrolled as a ``while`` Loop whose body reads the layer's weights as
loop-carried values it hands back unchanged, and counts time with a carried counter of its own (0, +1 per step):
inside the body those weights are the initializers outside it, and ``Gather(seq, time)`` is the step's input.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.runtime import StatefulSession

pytestmark = pytest.mark.realmodel

KERAS = pathlib.Path(__file__).parents[2] / "data" / "keras"

#: file stem -> (recurrences as (kind, recognition), slices verified); how each was built is in its generator
EXPECTED = {
    "keras_lstm_cell": ([("LSTM", "cell")], 2),
    "keras_gru_cell": ([("GRU", "cell")], 1),
    "keras_lstm_unrolled": ([("LSTM", "unrolled")], 2),
    "keras_lstm_loop": ([("LSTM", "loop")], 2),
    "keras_gru_loop": ([("GRU", "loop")], 1),
    "keras_lstm_stacked_packed": ([("LSTM", "loop"), ("LSTM", "loop")], 4),  # h and c of two layers packed on inner axes
}
FILES = sorted(p.stem for p in KERAS.glob("*.onnx"))


def _calls(stem: str) -> dict[str, np.ndarray]:
    with np.load(KERAS / f"{stem}.calls.npz") as z:
        return {k: z[k] for k in z.files}


def _pairs(stem: str) -> dict[str, str | None]:
    return {str(a): str(b) for a, b in _calls(stem)["pairs"]}


def test_every_export_has_an_expectation():
    assert FILES and set(FILES) == set(EXPECTED)


@pytest.mark.parametrize("stem", FILES)
def test_onnxruntime_reproduces_keras(stem):
    """The oracle is Keras' own float32 output: a float LSTM/GRU agrees to 1e-5 on any CPU."""
    data = _calls(stem)
    sess = ort.InferenceSession(str(KERAS / f"{stem}.onnx"), providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    for k in range(3):
        feeds = {i.name: data[f"call{k}_in_{i.name}"] for i in sess.get_inputs()}
        for name, got in zip(outs, sess.run(outs, feeds)):
            np.testing.assert_allclose(got, data[f"call{k}_out_{name}"], atol=1e-5)


@pytest.mark.parametrize("stem", FILES)
def test_recognised_and_never_a_false_alarm(stem):
    kinds, verified = EXPECTED[stem]
    prog = rnnir.load(KERAS / f"{stem}.onnx", pairs=_pairs(stem))
    assert sorted((r.kind, r.recognition.value) for r in prog.recurrents) == sorted(kinds)
    v = passes.verify(prog)
    assert all(d.severity.value == "info" for d in v.diagnostics), v.diagnostics
    if verified is not None:
        assert v.diagnostics == []
        assert [s.verdict.value for s in v.slices] == ["verified"] * verified, [(s.slice, s.verdict, s.reason) for s in v.slices]


@pytest.mark.parametrize("stem", [s for s in FILES if EXPECTED[s][1] is not None])
def test_stateful_session_follows_keras_over_three_calls(stem):
    """rnnir's own session, fed only each call's input, keeps the state exactly as Keras did."""
    data = _calls(stem)
    pairs = _pairs(stem)
    sess = StatefulSession(KERAS / f"{stem}.onnx", pairs=pairs)
    x = next(n for n in (i.name for i in onnx.load(KERAS / f"{stem}.onnx").graph.input) if n not in pairs)
    for k in range(3):
        got = sess.run({x: data[f"call{k}_in_{x}"]})
        for name, value in got.items():
            np.testing.assert_allclose(value, data[f"call{k}_out_{name}"], atol=1e-5)


def _swap_outputs(m: onnx.ModelProto, a: str, b: str) -> onnx.ModelProto:
    for node in m.graph.node:
        node.output[:] = [f"{o}__orig" if o in (a, b) else o for o in node.output]
        node.input[:] = [f"{i}__orig" if i in (a, b) else i for i in node.input]
    m.graph.node.extend([helper.make_node("Identity", [f"{b}__orig"], [a]), helper.make_node("Identity", [f"{a}__orig"], [b])])
    return m


@pytest.mark.parametrize("stem", [s for s in FILES if len(_pairs(s)) == 2])
def test_h_and_c_swapped_on_the_way_out_is_sd002(stem):
    m = _swap_outputs(onnx.load(KERAS / f"{stem}.onnx"), "Identity_1:0", "Identity_2:0")
    codes = {(d.code, d.severity.value) for d in passes.run(rnnir.load(m, pairs=_pairs(stem)))}
    assert codes == {("SD002", "error")}


def _loop(m: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.op_type == "Loop")


def _carried_weight(m: onnx.ModelProto, loop: onnx.NodeProto) -> int:
    """Body input position of the first carried weight: handed back unchanged, a 2-D initializer outside the Loop."""
    body = loop.attribute[0].g
    outs = [o.name for o in body.output]
    weights = {t.name for t in m.graph.initializer if len(t.dims) == 2}
    return next(i for i, vi in enumerate(body.input) if i >= 2 and outs[i - 1] == vi.name and loop.input[i] in weights)


@pytest.mark.parametrize("stem", ["keras_lstm_loop", "keras_gru_loop"])
def test_a_carried_weight_the_body_changes_is_no_constant(stem):
    """Near-miss: the body hands the weight back changed (w + 1 each step), so it is not the initializer outside
    the Loop after step one. The cell is then not confirmed and the state is unverified, never verified."""
    m = onnx.load(KERAS / f"{stem}.onnx")
    loop = _loop(m)
    body = loop.attribute[0].g
    pos = _carried_weight(m, loop)
    w = body.input[pos].name
    body.node.extend([helper.make_node("Constant", [], ["__one"], value=numpy_helper.from_array(np.float32(1.0))),
                      helper.make_node("Add", [w, "__one"], ["__w_next"])])
    body.output[pos - 1].name = "__w_next"
    prog = rnnir.load(m, pairs=_pairs(stem))
    v = passes.verify(prog)
    assert all(d.severity.value == "info" for d in v.diagnostics), v.diagnostics
    assert v.slices and all(s.verdict.value != "verified" for s in v.slices)


@pytest.mark.parametrize(("start", "step"), [(0, 1), (1, 1), (0, 2)])
def test_the_upper_layer_reads_step_t_only_through_a_counter_that_is_the_step_number(start, step):
    """The second layer's Loop reads the first layer's whole output as Gather(seq, time). With tf2onnx's counter
    (0, +1) that is step t's input and both layers are recognised; a counter that starts at 1 or counts by 2
    (near-misses) reads other steps, so the upper Loop is no recurrence over the sequence: one layer is
    recognised, and nothing is an error (the upper Loop's result may reach the write-back as a warning: such a
    model reads the wrong steps, so it is not a correct model)."""
    m = onnx.load(KERAS / "keras_lstm_stacked_packed.onnx")
    loop = [n for n in m.graph.node if n.op_type == "Loop"][1]
    body = loop.attribute[0].g
    counter = body.input[2].name
    init = {t.name: t for t in m.graph.initializer}
    first = init[loop.input[2]]
    m.graph.initializer.append(numpy_helper.from_array(np.array(start, dtype=numpy_helper.to_array(first).dtype), "__start"))
    loop.input[2] = "__start"
    add = next(n for n in body.node if n.op_type == "Add" and counter in n.input)
    one = next(i for i in add.input if i != counter)
    dtype = numpy_helper.to_array(next(t for t in list(body.initializer) + list(m.graph.initializer) if t.name == one)).dtype
    body.initializer.append(numpy_helper.from_array(np.array(step, dtype=dtype), "__step"))
    add.input[list(add.input).index(one)] = "__step"
    prog = rnnir.load(m, pairs=_pairs("keras_lstm_stacked_packed"))
    layers = 2 if (start, step) == (0, 1) else 1
    assert [(r.kind, r.recognition.value) for r in prog.recurrents] == [("LSTM", "loop")] * layers
    found = passes.run(prog)
    assert all(d.severity.value != "error" for d in found), found
    assert layers == 1 or all(d.severity.value == "info" for d in found), found


@pytest.mark.parametrize("stem", [s for s in FILES if EXPECTED[s][1] is not None])
def test_simulator_follows_keras_over_three_calls(stem):
    """rnnir's own simulator of the lowered program (reference cells, no onnxruntime) computes what Keras did:
    for a Loop layer it must read the sequence the body indexes with its step counter."""
    from rnnir.check.simulate import run_calls

    data, pairs = _calls(stem), _pairs(stem)
    prog = rnnir.load(KERAS / f"{stem}.onnx", pairs=pairs)
    x = next(n for n in (i.name for i in onnx.load(KERAS / f"{stem}.onnx").graph.input) if n not in pairs)
    outs = run_calls(prog, [{x: data[f"call{k}_in_{x}"]} for k in range(3)])
    for k, got in enumerate(outs):
        assert set(got) == {n[len(f"call{k}_out_"):] for n in data if n.startswith(f"call{k}_out_")}
        for name, value in got.items():
            np.testing.assert_allclose(np.asarray(value), data[f"call{k}_out_{name}"], atol=1e-5)


@pytest.mark.parametrize("stem", ["keras_lstm_loop", "keras_gru_loop"])
def test_one_step_per_call_equals_the_whole_sequence_at_once(stem):
    """Chunked versus whole: three one-step calls through rnnir's session give the sequence Keras computes in one."""
    data, pairs = _calls(stem), _pairs(stem)
    sess = StatefulSession(KERAS / f"{stem}.onnx", pairs=pairs)
    x = next(n for n in (i.name for i in onnx.load(KERAS / f"{stem}.onnx").graph.input) if n not in pairs)
    steps = [np.array(sess.run({x: data[f"call{k}_in_{x}"]})["Identity:0"], copy=True) for k in range(3)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), data["full_out_Identity:0"], atol=1e-5)


@pytest.mark.parametrize("stem", ["keras_lstm_loop", "keras_gru_loop"])
def test_a_keras_loop_layer_pairs_by_dataflow_when_names_say_nothing(stem):
    """``input_2 -> Identity_1:0`` share no name: the Loop carries input_2 into the cell's h and returns its final
    value, so the dataflow pairs them, and every slice verifies with no pair declared."""
    prog = rnnir.load(KERAS / f"{stem}.onnx")
    assert {p.input: (p.output, p.source.value) for p in prog.state_pairs} == {i: (o, "dataflow") for i, o in _pairs(stem).items()}
    v = passes.verify(prog)
    assert v.diagnostics == [] and [s.verdict.value for s in v.slices] == ["verified"] * len(_pairs(stem))


def _producer(m: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in m.graph.node if name in n.output)


@pytest.mark.parametrize("swap", ["layers", "h/c of layer 1", "h/c of layer 2"])
def test_a_swap_inside_the_packed_state_is_sd002(swap):
    """DTLN-style packing ``[1, layers, H, (h, c)]``: the final Concat stacks the layers (axis 1), each layer's
    Concat stacks h and c on the innermost axis. Swapping either is a state written into another slice."""
    m = onnx.load(KERAS / "keras_lstm_stacked_packed.onnx")
    layers = _producer(m, "Identity_1:0")
    assert layers.op_type == "Concat" and len(layers.input) == 2
    if swap == "layers":
        node = layers
    else:
        unsqueeze = _producer(m, layers.input[0 if swap.endswith("1") else 1])
        node = _producer(m, unsqueeze.input[0])
        assert node.op_type == "Concat" and len(node.input) == 2
    node.input[0], node.input[1] = node.input[1], node.input[0]
    found = passes.run(rnnir.load(m, pairs=_pairs("keras_lstm_stacked_packed")))
    assert {(d.code, d.severity.value) for d in found} == {("SD002", "error")}, found
