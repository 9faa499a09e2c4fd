"""A GRU-like output blend whose expression reuses one value many times is walked once per value (mutation
survivor of rnnir/lower/cells.py's blend walk: walking a value again for every path to it takes 2**depth steps).

The model is written here with onnx.helper: n and z as in ONNX's GRU, and h' = n + z * d26 with d0 = h - n and
d(j+1) = d(j) + d(j), so h' = n + z * 2**26 * (h - n): the shape of a GRU's blend, but not a GRU's new state.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import find_cells
from rnnir.lower.scope import ModelIndex
from tests.support.cell_graphs import gru_gate_nodes

I, H = 3, 4
N = helper.make_node


def test_a_blend_that_reuses_a_value_26_times_is_walked_in_linear_time_and_refused():
    rng = np.random.default_rng(81)
    W = (rng.standard_normal((3 * H, I)) * 0.5).astype(np.float32)
    R = (rng.standard_normal((3 * H, H)) * 0.5).astype(np.float32)
    nodes = [
        *gru_gate_nodes(),
        N("Add", ["xn", "reset"], ["pn"], name="add_n"),
        N("Tanh", ["pn"], ["n"], name="n"),
        N("Sub", ["h0", "n"], ["d0"], name="d0"),
    ]
    nodes += [N("Add", [f"d{j}", f"d{j}"], [f"d{j + 1}"], name=f"d{j + 1}") for j in range(26)]
    nodes += [N("Mul", ["z", "d26"], ["zd"], name="zd"), N("Add", ["n", "zd"], ["hN"], name="blend")]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, I if n == "x" else H]) for n in ("x", "h0")]
    graph = helper.make_graph(nodes, "gru", info, [helper.make_tensor_value_info("hN", TensorProto.FLOAT, [1, H])], [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    index = ModelIndex(m, "test")
    scan = find_cells(index, [(index.root, "h0")])
    assert scan.matches == []
    assert [c.kind for c in scan.candidates] == ["GRU"]
    assert scan.candidates[0].reason.startswith("GRU-like structure at node 'n' does not compute a GRU cell: the new state at 'hN' differs from (1-z)*n + z*h")
