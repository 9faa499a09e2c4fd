"""Graph pieces the pinned cells.py tests share (tests/test_pinned_cells_*.py): the canonical plain-op LSTM and GRU
node lists each test varies a line of, a small model made with onnx.helper, and a scan of it. Those tests keep
files of their own (a mutant runs the fastest test of each covering file), so the graph code lives here once."""

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


def lstm_nodes(replace: dict[str, onnx.NodeProto] | None = None, before: dict[str, list[onnx.NodeProto]] | None = None) -> list[onnx.NodeProto]:
    """c' = f*c0 + i*g, h' = o*tanh(c') from x, h0, c0 and weights W [4H, I], R [4H, H] (Gemm, transB), gates
    split in the order i, f, g, o. ``replace`` swaps the node of that name, ``before`` inserts nodes ahead of it."""
    nodes = [
        N("Gemm", ["x", "W"], ["gx"], transB=1, name="gemm_x"),
        N("Gemm", ["h0", "R"], ["gh"], transB=1, name="gemm_h"),
        N("Add", ["gx", "gh"], ["g4"], name="gates"),
        N("Split", ["g4"], ["pi", "pf", "pg", "po"], axis=1, num_outputs=4, name="split"),
        N("Sigmoid", ["pi"], ["i"], name="i"),
        N("Sigmoid", ["pf"], ["f"], name="f"),
        N("Tanh", ["pg"], ["g"], name="g"),
        N("Sigmoid", ["po"], ["o"], name="o"),
        N("Mul", ["f", "c0"], ["fc"], name="fc"),
        N("Mul", ["i", "g"], ["ig"], name="ig"),
        N("Add", ["fc", "ig"], ["cN"], name="c_new"),
        N("Tanh", ["cN"], ["tc"], name="tanh_c"),
        N("Mul", ["o", "tc"], ["hN"], name="h_new"),
    ]
    replace, before = replace or {}, before or {}
    assert set(replace) | set(before) <= {n.name for n in nodes}, "no node of that name"
    return [m for n in nodes for m in [*before.get(n.name, []), replace.get(n.name, n)]]


def gru_gate_nodes() -> list[onnx.NodeProto]:
    """An ONNX-style GRU's gates up to the reset product (linear_before_reset 1): z, r and reset = r * hn from x, h0
    and weights W [3H, I], R [3H, H] (Gemm, transB), split in the order z, r, n; the candidate and blend are the test's."""
    return [
        N("Gemm", ["x", "W"], ["gx"], transB=1, name="gemm_x"),
        N("Gemm", ["h0", "R"], ["gh"], transB=1, name="gemm_h"),
        N("Split", ["gx"], ["xz", "xr", "xn"], axis=1, num_outputs=3, name="split_x"),
        N("Split", ["gh"], ["hz", "hr", "hn"], axis=1, num_outputs=3, name="split_h"),
        N("Add", ["xz", "hz"], ["pz"], name="add_z"),
        N("Sigmoid", ["pz"], ["z"], name="z"),
        N("Add", ["xr", "hr"], ["pr"], name="add_r"),
        N("Sigmoid", ["pr"], ["r"], name="r"),
        N("Mul", ["r", "hn"], ["reset"], name="reset"),
    ]
