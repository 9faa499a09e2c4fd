"""``rnnir.fix(expose_state=True)`` on recurrences of other layouts and types: a batch-first (layout 1) float64 RNN,
one packed state of a single op, a packed state whose default names are taken; and when the ops of two If branches
share one state (same op, role, shape and dtype) or not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rnnir
from rnnir.fixes.edits import FixError
from rnnir.fixes.onnx_edit import GraphRef
from rnnir.fixes.state_plan import Alternative, StatePlan, same_shape
from rnnir.runtime import StatefulSession

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _ort(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _batch_first_rnn(dtype: type = np.float32) -> onnx.ModelProto:
    """RNN(layout=1) on x [batch 2, T, 2] of ``dtype``, starting from zeros, returning only Y [2, T, 1, 3]."""
    rng = np.random.default_rng(61)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(dtype), n) for n, s in (("W", (1, 3, 2)), ("R", (1, 3, 3)))]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("RNN", ["x", "W", "R"], ["y"], name="rnn", hidden_size=3, layout=1)
    g = helper.make_graph([node], "batch_first", [helper.make_tensor_value_info("x", elem, [2, "T", 2])],
                          [helper.make_tensor_value_info("y", elem, [2, "T", 1, 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(m, full_check=True)
    return m


def test_a_batch_first_rnn_gets_a_batch_first_state_of_its_type() -> None:
    for dtype, text in ((np.float32, "float32"), (np.float64, "float64")):
        result = rnnir.fix(_batch_first_rnn(dtype), expose_state=True)
        assert [str(e) for e in result.edits] == [
            "EXPOSE [safe] exposed the h state of RNN 'rnn': RNN 'rnn' initial_h / Y_h: initial state absent (zeros), final state "
            f"not returned -> graph input 'h0' {text}[2,1,3] (required: feed zeros on the first call; StatefulSession does), graph output 'hn'"
        ]
    model = _batch_first_rnn()
    result = rnnir.fix(model, expose_state=True)
    # onnxruntime has no batch-first RNN: onnx.reference is the oracle, the state fed back by hand
    x = np.random.default_rng(62).standard_normal((2, 6, 2)).astype(np.float32)
    whole = ReferenceEvaluator(model).run(["y"], {"x": x})[0]
    fixed = ReferenceEvaluator(result.model)
    h, ys = np.zeros((2, 1, 3), np.float32), []
    for k in (0, 2, 4):
        y, h = fixed.run(["y", "hn"], {"x": x[:, k : k + 2], "h0": h})
        ys.append(y)
    np.testing.assert_allclose(np.concatenate(ys, axis=1), whole, atol=1e-6)
    with pytest.raises(FixError, match="--packed needs every exposed op in layout 0"):
        rnnir.fix(model, expose_state=True, packed=True)


def test_packed_state_of_one_op_and_when_its_names_are_taken() -> None:
    path = SAMPLES / "sd010_gru_no_initial_state.onnx"
    one = rnnir.fix(str(path), expose_state=True, packed=True)
    assert [(e.target, e.message) for e in one.edits] == [
        ("graph input 'state' / output 'stateN'", "exposed packed state float32[1,1,4] (required: feed zeros on the first call; StatefulSession does)")
    ]
    assert {p.key: p.value for p in one.model.metadata_props}["rnnir.pairs"] == '{"state": "stateN"}'
    taken = onnx.load(str(path))  # a value of the graph is already called stateN
    g = taken.graph
    g.node.extend([helper.make_node("Relu", ["y"], ["stateN"], name="relu"), helper.make_node("Identity", ["stateN"], ["y2"], name="ident")])
    g.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["T", 1, 1, 4]))
    result = rnnir.fix(taken, expose_state=True, packed=True)
    assert [e.target for e in result.edits] == ["graph input 'rnn_state' / output 'rnn_stateN'"]
    assert {p.key: p.value for p in result.model.metadata_props}["rnnir.pairs"] == '{"rnn_state": "rnn_stateN"}'
    x = np.random.default_rng(63).standard_normal((6, 1, 3)).astype(np.float32)
    whole = _ort(taken).run(["y2"], {"x": x})[0]
    session = StatefulSession(result.model)
    np.testing.assert_allclose(np.concatenate([session.run({"x": x[k : k + 3]})["y2"] for k in (0, 3)]), whole, atol=1e-6)


def test_ops_share_a_state_only_when_kind_role_shape_and_dtype_agree() -> None:
    node = helper.make_node("GRU", ["x"], ["y"])
    alt = Alternative(GraphRef(onnx.GraphProto()), [], "", node, 1, "")

    def plan(op: str = "GRU", role: str = "h", shape: tuple[object, ...] = (1, 1, 4), dtype: int = TensorProto.FLOAT) -> StatePlan:
        return StatePlan(role, op, "g", dtype, list(shape), [alt], None)

    base = [plan()]
    rows = [
        ([plan()], True),
        ([plan(op="LSTM")], False),
        ([plan(role="c")], False),
        ([plan(shape=(1, 1, 5))], False),
        ([plan(dtype=TensorProto.DOUBLE)], False),
        ([plan(), plan()], False),
        ([], False),
    ]
    assert [same_shape(base, other) for other, _ in rows] == [want for _, want in rows]
    assert same_shape([plan(), plan(role="c")], [plan(), plan(role="c")])
    assert not same_shape([plan(), plan(role="c")], [plan(), plan(role="c", shape=(1, 1, 5))])
