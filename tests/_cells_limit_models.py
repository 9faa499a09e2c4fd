"""Builders the cells.py bound tests share (tests/test_pinned_cells_limit*.py): one small graph made with
onnx.helper, and a scan of it. Each bound test keeps a file of its own (a constant's mutant runs the fastest
test of each covering file), so the model code lives here once."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex

H = 4
N = helper.make_node


def model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: list[str], inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "limits",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None if o.startswith("d") else [1, H]) for o in outputs],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


def scan(m: onnx.ModelProto, states: list[str]) -> tuple[CellScan, ModelIndex]:
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, s) for s in states]), index


def rnn_with_zero_adds(adds: int, inputs: int = 3) -> onnx.ModelProto:
    """h' = tanh(t_adds), t_0 = x @ WT + h @ RT, t_j = t_(j-1) + zero: an RNN cell whatever the number of adds."""
    rng = np.random.default_rng(41)
    nodes = [N("MatMul", ["x", "WT"], ["xw"], name="mm_x"), N("MatMul", ["h0", "RT"], ["hr"], name="mm_h"), N("Add", ["xw", "hr"], ["t0"], name="add0")]
    nodes += [N("Add", [f"t{j - 1}", "zero"], [f"t{j}"], name=f"add{j}") for j in range(1, adds + 1)]
    nodes.append(N("Tanh", [f"t{adds}"], ["hN"], name="act"))
    inits = {"WT": (rng.standard_normal((inputs, H)) * 0.5).astype(np.float32), "RT": (rng.standard_normal((H, H)) * 0.5).astype(np.float32), "zero": np.zeros(H, np.float32)}
    return model(nodes, {"x": [1, inputs], "h0": [1, H]}, ["hN"], inits)
