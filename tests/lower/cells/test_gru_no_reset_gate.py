"""A tanh blended with run-time values but with no reset-gated product inside it is no GRU: the GRU check waits for
a state input ("its output blend reads no state input") only for a candidate that has its reset gate already."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import rnnir

I, H = 3, 4  # noqa: E741


def _tanh_blended_with_inputs() -> onnx.ModelProto:
    """h' = tanh(W x + b + R h), and beside it y = h' * x2 + x3 with x2, x3 graph inputs (no sigmoid, no reset)."""
    vi = helper.make_tensor_value_info
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Gemm", ["x", "W", "b"], ["gx"], transB=1),
        helper.make_node("Gemm", ["h0", "R"], ["gh"], transB=1),
        helper.make_node("Add", ["gx", "gh"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["h_new"]),
        helper.make_node("Identity", ["h_new"], ["hn"]),
        helper.make_node("Mul", ["h_new", "x2"], ["p"]),
        helper.make_node("Add", ["p", "x3"], ["y"]),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in (("W", (H, I)), ("b", (H,)), ("R", (H, H)))]
    inputs = [vi("x", TensorProto.FLOAT, [1, I]), vi("h0", TensorProto.FLOAT, [1, H]), vi("x2", TensorProto.FLOAT, [1, H]), vi("x3", TensorProto.FLOAT, [1, H])]
    g = helper.make_graph(nodes, "g", inputs, [vi("hn", TensorProto.FLOAT, [1, H]), vi("y", TensorProto.FLOAT, [1, H])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


def test_a_tanh_without_a_reset_gate_is_never_reported_as_a_gru_waiting_for_its_state():
    prog = rnnir.load(_tanh_blended_with_inputs(), pairs={"h0": "hn"})
    assert [c.reason for c in prog.recurrence_candidates if "GRU" in c.reason] == []
