"""Gates whose width does not fit the cell's state: a scalar gate in a fixed batch of two, and a gate zero wide
(mutation survivors of rnnir/lower/cells.py's probe rows and gate width).

The models are written here with onnx.helper; what each gate's width is, and so why it is no cell, is known by
construction.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex
from tests.support.cell_graphs import lstm_nodes

I, H = 3, 4
N = helper.make_node


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: dict[str, list[int]], inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "widths",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _scan(m: onnx.ModelProto, states: list[str]) -> CellScan:
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, s) for s in states])


def test_a_scalar_input_gate_in_a_batch_of_two_is_not_a_batch_of_rows():
    # batch 2: c' = f*c + i*g with i = sigmoid(0.3), one value for both rows: the probes read each gate as 2 rows,
    # and 1 element is no 2 rows, so the cell cannot be run (and the reason says so)
    rng = np.random.default_rng(61)
    W = (rng.standard_normal((4 * H, I)) * 0.5).astype(np.float32)
    R = (rng.standard_normal((4 * H, H)) * 0.5).astype(np.float32)
    nodes = lstm_nodes(replace={"i": N("Sigmoid", ["ci"], ["i"], name="i")})
    rows = {"x": [2, I], "h0": [2, H], "c0": [2, H]}
    m = _model(nodes, rows, {"hN": [2, H], "cN": [2, H]}, {"W": W, "R": R, "ci": np.array(0.3, np.float32)})
    scan = _scan(m, ["h0", "c0"])
    assert scan.matches == []
    assert [(c.kind, c.reason) for c in scan.candidates] == [("LSTM", "LSTM-like structure at node 'c_new' could not be run: a gate of 1 elements is not a batch of 2 rows")]


def test_a_gate_zero_wide_is_refused_for_its_gate():
    # h' = tanh(x @ WT + h @ RT) with a state of 0 elements: the gate has no width, which is what the reason names
    nodes = [
        N("MatMul", ["x", "WT"], ["xw"], name="mm_x"),
        N("MatMul", ["h0", "RT"], ["hr"], name="mm_h"),
        N("Add", ["xw", "hr"], ["pre"], name="add"),
        N("Tanh", ["pre"], ["hN"], name="act"),
    ]
    inits = {"WT": np.zeros((I, 0), np.float32), "RT": np.zeros((0, 0), np.float32)}
    scan = _scan(_model(nodes, {"x": [1, I], "h0": [1, 0]}, {"hN": [1, 0]}, inits), ["h0"])
    assert scan.matches == []
    assert [c.kind for c in scan.candidates] == ["RNN"]
    assert scan.candidates[0].reason.startswith("cell-like structure at node 'act': its gate 'pre' ")
