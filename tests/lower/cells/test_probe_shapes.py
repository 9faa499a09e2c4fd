"""RNN cells written as plain ops whose shapes, magnitudes or storage are unusual (mutation survivors of
rnnir/lower/cells.py: which probe path a batch takes, the relative error measure, weights kept as external data).

Every model is h' = act(x @ W.T + h @ R.T + b), built here with onnx.helper from weights drawn here, so the cell a
correct recogniser confirms, and its exact weights, are known without it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex

I, H = 3, 4
_RNG = np.random.default_rng(11)
W = (_RNG.standard_normal((H, I)) * 0.5).astype(np.float32)
R = (_RNG.standard_normal((H, H)) * 0.5).astype(np.float32)
B = (_RNG.standard_normal(H) * 0.3).astype(np.float32)


def _rnn(x_shape: list[int], h_shape: list[int], act: str = "Tanh", scale: float = 1.0) -> onnx.ModelProto:
    """h' = act(x @ (scale W).T + h @ (scale R).T + scale b), with MatMul and Add (they broadcast over leading axes)."""
    inits = [numpy_helper.from_array(a, n) for a, n in ((W.T * scale, "WT"), (R.T * scale, "RT"), (B * scale, "b"))]
    nodes = [
        helper.make_node("MatMul", ["x", "WT"], ["xw"], name="mm_x"),
        helper.make_node("MatMul", ["h0", "RT"], ["hr"], name="mm_h"),
        helper.make_node("Add", ["xw", "hr"], ["s"], name="add"),
        helper.make_node("Add", ["s", "b"], ["pre"], name="bias"),
        helper.make_node(act, ["pre"], ["hN"], name="act"),
    ]
    graph = helper.make_graph(
        nodes,
        "rnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape), helper.make_tensor_value_info("h0", TensorProto.FLOAT, h_shape)],
        [helper.make_tensor_value_info("hN", TensorProto.FLOAT, h_shape)],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _scan(m: onnx.ModelProto) -> CellScan:
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, "h0")])


def _one_rnn(scan: CellScan, scale: float = 1.0) -> None:
    assert scan.candidates == []
    (m,) = scan.matches
    assert (m.kind, m.h_in, m.h_out, m.x, m.hidden_size) == ("RNN", "h0", "hN", ("x",), H)
    np.testing.assert_allclose(m.weights.W[0], W * scale, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(m.weights.R[0], R * scale, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(m.weights.B[0, :H] + m.weights.B[0, H:], B * scale, rtol=1e-6, atol=1e-6)


def test_a_batch_of_two_behind_a_leading_axis_of_one_is_probed_row_by_row():
    # x [1, 2, I] and h [1, 2, H]: axis 0 is 1 but the batch is 2 rows; probes stacked on axis 0 would not fit
    # (P probes of one row each cannot fill [P, 2, I]): probed one vector at a time, the cell is confirmed
    _one_rnn(_scan(_rnn([1, 2, I], [1, 2, H])))


def test_a_batch_of_one_with_a_leading_axis_is_confirmed_too():
    # the near-miss of the above: [1, 1, I] / [1, 1, H] is a batch of one (stacked probes)
    _one_rnn(_scan(_rnn([1, 1, I], [1, 1, H])))


def test_a_cell_with_huge_values_is_judged_by_its_error_relative_to_them():
    # Relu keeps the magnitude: every value is ~1e14, where float64 rounding alone differs by ~1e-2 between the
    # model's and the reference's order of additions; relative to the values that is ~1e-16, far under the tolerance
    scale = 1e14
    scan = _scan(_rnn([1, I], [1, H], act="Relu", scale=scale))
    _one_rnn(scan, scale)
    assert scan.matches[0].weights.activations == ("Relu",)
    assert scan.matches[0].max_error < 1e-12


def _external(m: onnx.ModelProto, folder: Path, keep_bytes: bool) -> onnx.ModelProto:
    """Every initializer marked as external data in ``folder``'s file weights.bin (written there, same bytes)."""
    blob = bytearray()
    for t in m.graph.initializer:
        raw = numpy_helper.to_array(t).tobytes()
        offset = len(blob)
        blob += raw
        t.ClearField("float_data")
        if keep_bytes:
            t.raw_data = raw
        else:
            t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(len(raw)))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    (folder / "weights.bin").write_bytes(bytes(blob))
    return m


def test_external_weights_whose_bytes_are_in_the_model_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # raw_data filled although the tensors are marked external (as after loading the data by hand): readable
    monkeypatch.chdir(tmp_path)
    _one_rnn(_scan(_external(_rnn([1, I], [1, H]), tmp_path, keep_bytes=True)))


def test_external_weights_without_their_bytes_are_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # the near-miss: only the location is in the model; the recogniser never opens files, so no weights, no cell
    monkeypatch.chdir(tmp_path)
    scan = _scan(_external(_rnn([1, I], [1, H]), tmp_path, keep_bytes=False))
    assert scan.matches == []
