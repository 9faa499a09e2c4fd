"""Shapes a cell check needs that the model does not declare (TorchScript time loops, unrolled and stacked cells,
Keras ``while`` loops): computed by running their producers on zeros, with onnx's shape inference as the fallback.

The oracle is shape inference itself: with the zeros path switched off, every model lowers to the same
recurrences, the same weights and the same unconfirmed candidates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import NodeProto, TensorProto, helper, numpy_helper

import rnnir
from rnnir.lower.cells.net import Net
from rnnir.onnxio import proto as onnxproto

ROOT = Path(__file__).resolve().parents[3]
CELLS = ROOT / "tests" / "data" / "torch_cells"
KERAS = ROOT / "tests" / "data" / "keras"


def _lowered(model: object) -> tuple[list[tuple[object, ...]], list[str]]:
    prog = rnnir.load(model)  # type: ignore[arg-type]
    recs = [
        (r.kind, r.recognition.name, r.hidden_size, tuple(r.recognised_from), *(np.asarray(r.port(p).const).tobytes() for p in ("W", "R", "B")))
        for r in prog.recurrents
    ]
    return recs, [c.reason for c in prog.recurrence_candidates]


def _count_inference(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"n": 0}
    real = onnxproto.infer_shapes

    def counting(model: object) -> object:
        calls["n"] += 1
        return real(model)  # type: ignore[arg-type]

    monkeypatch.setattr(onnxproto, "infer_shapes", counting)
    return calls


@pytest.mark.parametrize(
    ("path", "inferences"),
    [
        (CELLS / "lstm_cell_unrolled.ts.onnx", 0),  # x_t = Gather(x, t) and each step's new state: all undeclared
        (CELLS / "lstm_hand_loop.ts.onnx", 0),  # Gather(x, t) with t the Loop's iteration number (a run-time index)
        (CELLS / "gru_cell_stacked.ts.onnx", 0),
        (KERAS / "keras_lstm_loop.onnx", 0),
        # the upper layer reads step t of a Reshape to [-1, 1, 8] of the lower layer's Loop output: the step's shape
        # does not depend on the sequence length nothing declares
        (KERAS / "keras_lstm_stacked_packed.onnx", 0),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else str(v),
)
def test_undeclared_shapes_come_from_zeros_and_agree_with_shape_inference(path: Path, inferences: int, monkeypatch: pytest.MonkeyPatch):
    calls = _count_inference(monkeypatch)
    got = _lowered(str(path))
    assert calls["n"] == inferences
    assert got[0], "the model's cells are recognised"
    monkeypatch.setattr(Net, "_shape_by_zeros", lambda self, k, depth: None)  # inference alone, as before
    calls["n"] = 0
    assert _lowered(str(path)) == got
    assert calls["n"] == 1


def _rnn_step_on(x: str) -> list[NodeProto]:
    """hn = tanh(x @ W + h0 @ R): an RNN cell on input ``x`` (initializers W, R and input h0 are the caller's)."""
    return [
        helper.make_node("MatMul", [x, "W"], ["xw"]),
        helper.make_node("MatMul", ["h0", "R"], ["hr"]),
        helper.make_node("Add", ["xw", "hr"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["hn"]),
    ]


def _rnn_reading(sliced_by: str) -> object:
    """An RNN cell whose input is x[:, 2:end] of x [B, 4] (named batch), ``end`` a constant or computed from x's values
    at run time: only the first slice has a shape that running it on zeros tells."""
    H, I = 3, 2
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((I, H)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32), "R"),
        numpy_helper.from_array(np.array([2], np.int64), "start"),
        numpy_helper.from_array(np.array([1], np.int64), "axis"),
    ]
    nodes = []
    if sliced_by == "constants":
        inits.append(numpy_helper.from_array(np.array([4], np.int64), "end"))
    else:
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "axis0"))
        nodes += [
            helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT64),
            helper.make_node("ReduceMax", ["xi"], ["top"], keepdims=0),
            helper.make_node("Unsqueeze", ["top", "axis0"], ["end"]),
        ]
    nodes += [
        helper.make_node("Slice", ["x", "start", "end", "axis"], ["xt"]),
        *_rnn_step_on("xt"),
    ]
    graph = helper.make_graph(
        nodes,
        "rnn_slice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, ["B", H])],
        [helper.make_tensor_value_info("hn", TensorProto.FLOAT, ["B", H])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_a_slice_by_constant_bounds_is_computed_from_zeros(monkeypatch: pytest.MonkeyPatch):
    calls = _count_inference(monkeypatch)
    recs, candidates = _lowered(_rnn_reading("constants"))
    assert calls["n"] == 0
    assert [r[:3] for r in recs] == [("RNN", "CELL", 3)] and candidates == []


def test_a_slice_by_a_run_time_bound_is_left_to_shape_inference(monkeypatch: pytest.MonkeyPatch):
    # near miss: zeros would give x[:, 2:0], no elements, while the real bound depends on x: inference is asked; it
    # names the width a new symbol, run as 1, so the probe does not fit the weights and the look-alike stays unconfirmed
    calls = _count_inference(monkeypatch)
    recs, candidates = _lowered(_rnn_reading("run time"))
    assert calls["n"] == 1
    assert recs == [] and [c.split(":")[0] for c in candidates] == ["RNN-like structure at node 'Tanh(hn)' could not be run"]


def _rnn_reading_a_step_of(target: list[int], axis: int) -> object:
    """An RNN cell whose input is step ``t`` (a scalar input) along ``axis`` of ``Reshape(Abs(x), target)``: the
    Reshape's input shape is one running on zeros does not follow (Abs is not among the shape ops)."""
    H, I = 3, 2
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.standard_normal((I, H)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32), "R"),
        numpy_helper.from_array(np.array(target, np.int64), "target"),
    ]
    nodes = [
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Reshape", ["ax", "target"], ["seq"]),
        helper.make_node("Gather", ["seq", "t"], ["xt"], axis=axis),
        *_rnn_step_on("xt"),
    ]
    graph = helper.make_graph(
        nodes,
        "rnn_step",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, I]),
            helper.make_tensor_value_info("t", TensorProto.INT64, []),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, H]),
        ],
        [helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, H])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_a_step_of_a_reshape_along_its_computed_axis_needs_no_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_inference(monkeypatch)
    got = _lowered(_rnn_reading_a_step_of([-1, 1, 2], 0))
    assert calls["n"] == 0
    assert [r[:3] for r in got[0]] == [("RNN", "CELL", 3)] and got[1] == []
    monkeypatch.setattr(Net, "_reshaped_but_axis", lambda self, k, axis: None)  # inference alone, as before
    assert _lowered(_rnn_reading_a_step_of([-1, 1, 2], 0)) == got
    assert calls["n"] == 1


def test_a_step_along_another_axis_or_a_copied_dim_is_left_to_shape_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    # one function, not a parametrize: every row is a different guard (the mutation tool runs one case of a test)
    for target, axis, inferences in [
        ([1, -1, 2], 0, 1),  # the computed dim is not the one the Gather drops: its length is the step's shape
        ([0, 1, 2], 0, 1),  # a 0 copies the input's dim: only the input's shape tells the rest
        ([-1, 1, 2], 1, 1),  # a step along another axis keeps the computed dim
        ([-1, 1, 2], 3, 1),  # an axis past the target's rank: not the shortcut's to judge (inference finds no shape)
        ([-1, 1, 2], -3, 0),  # the computed axis counted from the end is the same axis: no inference
        ([-1, 1, 2], -2, 1),  # ... and the one before it is not
    ]:
        calls = _count_inference(monkeypatch)
        recs, reasons = _lowered(_rnn_reading_a_step_of(target, axis))
        assert calls["n"] == inferences, (target, axis)
        # the cell is recognised wherever the step's shape is known, and only the out-of-range axis leaves it unknown
        assert (recs == [], bool(reasons)) == ((True, True) if axis == 3 else (False, False)), (target, axis, reasons)


def _rnn_reading_a_step_of_a(producer: str) -> object:
    """:func:`_rnn_reading_a_step_of` ([-1, 1, 2] along axis 0) with the sequence made otherwise (``producer``)."""
    model = _rnn_reading_a_step_of([-1, 1, 2], 0)
    g = model.graph  # type: ignore[attr-defined]
    reshape = next(n for n in g.node if n.op_type == "Reshape")
    if producer == "a Reshape of another domain":
        reshape.domain = "com.example"
        model.opset_import.append(helper.make_opsetid("com.example", 1))  # type: ignore[attr-defined]
    elif producer == "a Reshape to a target fed at run time":
        g.initializer.remove(next(t for t in g.initializer if t.name == "target"))
        g.input.append(helper.make_tensor_value_info("target", TensorProto.INT64, [3]))
    elif producer == "a Mul by a constant holding -1":  # not a Reshape: its second input is no shape
        reshape.op_type = "Mul"
        g.initializer.remove(next(t for t in g.initializer if t.name == "target"))
        g.initializer.append(numpy_helper.from_array(np.array([-1.0, 2.0], np.float32), "target"))
    elif producer == "a Reshape to a target of two dims":  # not a shape: onnx refuses it; rnnir must not guess
        g.initializer.remove(next(t for t in g.initializer if t.name == "target"))
        g.initializer.append(numpy_helper.from_array(np.array([[-1, 1, 2]], np.int64), "target"))
    elif producer == "a graph input of no declared shape":
        g.node.remove(reshape)
        g.input.append(helper.make_tensor_value_info("seq", TensorProto.FLOAT, None))
    return model


def test_only_a_reshape_of_the_default_domain_to_a_constant_target_gives_a_step_its_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    # each is left to shape inference, as before the shortcut; the shortcut would give a wrong shape or fail on them
    for producer in ("a Reshape of another domain", "a Reshape to a target fed at run time", "a Mul by a constant holding -1",
                     "a Reshape to a target of two dims", "a graph input of no declared shape"):
        calls = _count_inference(monkeypatch)
        _lowered(_rnn_reading_a_step_of_a(producer))
        assert calls["n"] == 1, producer
