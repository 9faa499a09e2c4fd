"""Pairs from dataflow when names say nothing (issue 22, item 4).

PyTorch's tracer names outputs by number (``35``, ``36``) and inputs after the forward's arguments; tf2onnx names a
Keras model's state input ``input_5`` and the stacked state it returns ``tf_op_layer_stack_5``.  No naming convention
pairs them: the dataflow does, when the input starts a recurrence's state and the output returns exactly that
state's final value.  The oracles are the PyTorch outputs committed with the exports (``tests/data/torch``), one
onnxruntime call over the whole stream, and rnnir's own verdicts on the same model with state names.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.check.multicall.check import check_multicall
from rnnir.ir.pairs import PairSource
from rnnir.passes import run as lint
from rnnir.passes import verify
from rnnir.runtime import StatefulSession
from tests.support import realmodels


def _renamed(model: onnx.ModelProto, mapping: dict[str, str]) -> onnx.ModelProto:
    """``model`` with the values in ``mapping`` renamed everywhere (every graph, subgraphs included)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)

    def fix(g: onnx.GraphProto) -> None:
        for vi in (*g.input, *g.output, *g.value_info):
            vi.name = mapping.get(vi.name, vi.name)
        for node in g.node:
            node.input[:] = [mapping.get(x, x) for x in node.input]
            node.output[:] = [mapping.get(x, x) for x in node.output]
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    fix(a.g)
                for sub in a.graphs:
                    fix(sub)

    fix(out.graph)
    return out


def _tracer_names(pairs: dict[str, str]) -> dict[str, str]:
    """State inputs named like the tracer's ``onnx::LSTM_k`` and state outputs by number, as in a torch export without
    ``input_names``/``output_names``: names that say nothing."""
    mapping = {}
    for k, (i, o) in enumerate(sorted(pairs.items())):
        mapping[i] = f"onnx::LSTM_{k + 1}"
        mapping[o] = str(35 + k)
    return mapping


TORCH_STATEFUL = [n for n in realmodels.TORCH_MODELS if n != "gru_encoder_stateless"]


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
@pytest.mark.parametrize("name", TORCH_STATEFUL)
def test_torch_export_with_tracer_names_is_paired_by_dataflow_and_runs_as_pytorch_does(name, kind):
    path = realmodels.torch_models_dir() / f"{name}.{kind}.onnx"
    oracle = realmodels.torch_calls(name)
    named_pairs = {str(i): str(o) for i, o in oracle["pairs"]}
    mapping = _tracer_names(named_pairs)
    m = _renamed(onnx.load(str(path)), mapping)
    prog = rnnir.load(m)
    assert {(p.input, p.output) for p in prog.state_pairs} == {(mapping[i], mapping[o]) for i, o in named_pairs.items()}
    assert all(p.source is PairSource.DATAFLOW for p in prog.state_pairs)
    # the same findings and verdicts as with its own names (a bidirectional export's SD006 included)
    named = rnnir.load(str(path))
    assert [(d.code, d.severity) for d in lint(prog)] == [(d.code, d.severity) for d in lint(named)]
    assert [s.verdict for s in verify(prog).slices] == [s.verdict for s in verify(named).slices]
    # three calls with the state the session keeps equal PyTorch's three calls
    session = StatefulSession(m)
    for k in range(3):
        ins = {mapping.get(key[len(f"call{k}_in_"):], key[len(f"call{k}_in_"):]): v for key, v in oracle.items() if key.startswith(f"call{k}_in_")}
        if k:
            ins = {n: v for n, v in ins.items() if n not in mapping.values()}  # the state comes from the slots
        got = session.run_dict(ins)
        for key, want in oracle.items():
            if key.startswith(f"call{k}_out_"):
                out = key[len(f"call{k}_out_"):]
                np.testing.assert_allclose(got[mapping.get(out, out)], want, atol=1e-4, rtol=1e-4, err_msg=f"call {k} {out}")


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
def test_a_stateless_torch_encoder_gets_no_dataflow_pair(kind):
    m = onnx.load(str(realmodels.torch_models_dir() / f"gru_encoder_stateless.{kind}.onnx"))
    assert rnnir.load(_renamed(m, {o.name: str(35 + k) for k, o in enumerate(m.graph.output)})).state_pairs == ()


# -- a Keras-like graph: one packed state input, a stack of the final states out -------------------------------------

H, F = 3, 2


def _keras_like(stack=("Y_h", "Y_c")):
    """tf2onnx-style LSTM: x [B, T, F] (batch first) and input_5 [2, B, H] (h and c stacked) in;
    tf_op_layer_stack_5 = stack(h', c') out.  ``stack`` orders what is stacked (a crossed stack swaps h and c)."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array((0.6 * rng.standard_normal((1, 4 * H, F))).astype(np.float32), "kernel"),
        numpy_helper.from_array((0.6 * rng.standard_normal((1, 4 * H, H))).astype(np.float32), "recurrent_kernel"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    ]
    nodes = [
        helper.make_node("Transpose", ["input_4"], ["x_tbf"], perm=[1, 0, 2]),
        helper.make_node("Gather", ["input_5", "zero"], ["h_b"], axis=0),
        helper.make_node("Gather", ["input_5", "one"], ["c_b"], axis=0),
        helper.make_node("Unsqueeze", ["h_b", "axis0"], ["h_1b"]),
        helper.make_node("Unsqueeze", ["c_b", "axis0"], ["c_1b"]),
        helper.make_node("LSTM", ["x_tbf", "kernel", "recurrent_kernel", "", "", "h_1b", "c_1b"], ["Y", "Y_h", "Y_c"], hidden_size=H, name="lstm_1"),
        helper.make_node("Squeeze", ["Y", "axis1"], ["y_tbh"]),
        helper.make_node("Transpose", ["y_tbh"], ["lstm_1_out"], perm=[1, 0, 2]),
        helper.make_node("Concat", list(stack), ["tf_op_layer_stack_5"], axis=0),
    ]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        nodes,
        "keras_like",
        [vi("input_4", TensorProto.FLOAT, ["B", "T", F]), vi("input_5", TensorProto.FLOAT, [2, "B", H])],
        [vi("lstm_1_out", TensorProto.FLOAT, ["B", "T", H]), vi("tf_op_layer_stack_5", TensorProto.FLOAT, [2, "B", H])],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_a_keras_like_packed_state_is_paired_by_dataflow_and_verified():
    prog = rnnir.load(_keras_like())
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("input_5", "tf_op_layer_stack_5", PairSource.DATAFLOW)]
    assert prog.state_pairs[0].reason == (
        "'input_5' starts initial_c -> Y_c of 'lstm_1' and initial_h -> Y_h of 'lstm_1', whose final value 'tf_op_layer_stack_5' returns"
    )
    v = verify(prog)
    assert v.diagnostics == [] and v.all_verified and len(v.slices) == 2
    report = check_multicall(_keras_like(), chunk_sizes=[3], length=12)
    assert report.persistent_matches_whole is True and report.status == "pass", report.verdict


def test_a_dataflow_pair_does_not_hide_a_crossed_stack():
    # h' and c' stacked the other way round: still the input's own states, so still the pair -- and the crossing,
    # which the pair exists to check, is an error naming the slot; chunked calls differ from one whole call
    crossed = _keras_like(stack=("Y_c", "Y_h"))
    prog = rnnir.load(crossed)
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("input_5", "tf_op_layer_stack_5", PairSource.DATAFLOW)]
    errors = [d for d in lint(prog) if d.severity.value == "error"]
    assert {d.code for d in errors} == {"SD002"} and {d.slot for d in errors} == {"input_5"}
    report = check_multicall(crossed, chunk_sizes=[3], length=12)
    assert report.status == "fail" and report.persistent_matches_whole is False


def test_an_output_stacking_another_value_with_the_final_state_is_no_dataflow_pair():
    m = _keras_like(stack=("Y_h", "h_1b"))  # h' stacked with the incoming h: not made of final states alone
    # only position (the weakest source, same place and type) pairs what is left
    assert [(p.input, p.output, p.source) for p in rnnir.load(m).state_pairs] == [("input_5", "tf_op_layer_stack_5", PairSource.POSITION)]


# -- Scan: a state variable is state only when the body computes it from its old value -------------------------------


def _scan(body_op):
    """Scan-9 over x [T, 2] with one state variable s [2]: the body yields ``body_op(s_in, x_t)`` as the new state
    (``Identity``: s_in handed back unchanged) and x_t + s_in as the scan output."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Identity", ["s_in"], ["s_out"]) if body_op == "Identity" else helper.make_node(body_op, ["s_in", "x_t"], ["s_out"]),
             helper.make_node("Add", ["x_t", "s_in"], ["z_t"])]
    body = helper.make_graph(nodes, "body", [vi("s_in", TensorProto.FLOAT, [2]), vi("x_t", TensorProto.FLOAT, [2])],
                             [vi("s_out", TensorProto.FLOAT, [2]), vi("z_t", TensorProto.FLOAT, [2])])
    scan = helper.make_node("Scan", ["acc", "xs"], ["total", "zs"], num_scan_inputs=1, body=body)
    g = helper.make_graph([scan], "g", [vi("acc", TensorProto.FLOAT, [2]), vi("xs", TensorProto.FLOAT, ["T", 2])],
                          [vi("total", TensorProto.FLOAT, [2]), vi("zs", TensorProto.FLOAT, ["T", 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])


def test_a_scan_state_variable_pairs_by_dataflow_only_when_its_body_computes_it():
    got = rnnir.load(_scan("Add")).state_pairs
    assert [(p.input, p.output, p.source) for p in got] == [("acc", "total", PairSource.DATAFLOW)]
    # near-miss: the body hands the value back unchanged, so nothing is carried (and position never pairs xs with zs,
    # which stream the scan): no pair at all
    assert rnnir.load(_scan("Identity")).state_pairs == ()
