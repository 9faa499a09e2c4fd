"""A cell's weights held by Constant nodes in each attribute form: the recogniser must read value_floats /
value_float as constants as surely as a `value` tensor or an initializer, or a correct cell becomes "weights
computed at run time" and its state SD009. (cells.py's protobuf shortcut for these forms only saves an
evaluation: without it the Constant is evaluated, to the same value; the equivalents list says so.)"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes

I, H = 3, 4


def rnn_cell_with_constant_nodes(bias_attr: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """hn = tanh(x W + h0 R + b); W, R in Constant(value=...), b in Constant(<bias_attr>=...)."""
    rng = np.random.default_rng(11)
    W = (rng.standard_normal((I, H)) * 0.5).astype(np.float32)
    R = (rng.standard_normal((H, H)) * 0.5).astype(np.float32)
    b = np.full(H, 0.25, np.float32) if bias_attr == "value_float" else (rng.standard_normal(H) * 0.3).astype(np.float32)
    bias = {"value_floats": helper.make_node("Constant", [], ["b"], value_floats=b.tolist()),
            "value_float": helper.make_node("Constant", [], ["b"], value_float=0.25),
            "value": helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(b))}[bias_attr]
    nodes = [
        helper.make_node("Constant", [], ["W"], value=numpy_helper.from_array(W)),
        helper.make_node("Constant", [], ["R"], value=numpy_helper.from_array(R)),
        bias,
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("MatMul", ["h0", "R"], ["hr"]),
        helper.make_node("Add", ["xw", "hr"], ["s"]),
        helper.make_node("Add", ["s", "b"], ["t"]),
        helper.make_node("Tanh", ["t"], ["hn"], name="cell"),
    ]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "cell", [vi("x", TensorProto.FLOAT, [1, I]), vi("h0", TensorProto.FLOAT, [1, H])], [vi("hn", TensorProto.FLOAT, [1, H])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.checker.check_model(m, full_check=True)
    return m, {"W": W, "R": R, "b": b}


@pytest.mark.parametrize("bias_attr", ["value_floats", "value_float", "value"])
def test_a_cell_whose_bias_is_a_constant_node_is_recognised_and_verified(bias_attr):
    m, w = rnn_cell_with_constant_nodes(bias_attr)
    # onnxruntime: the model is the cell written above
    x, h0 = np.ones((1, I), np.float32), np.full((1, H), 0.5, np.float32)
    (hn,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["hn"], {"x": x, "h0": h0})
    np.testing.assert_allclose(hn, np.tanh(x @ w["W"] + h0 @ w["R"] + w["b"]), atol=1e-6)
    prog = rnnir.load(m)
    assert [(r.kind, r.recognition.value) for r in prog.recurrents] == [("RNN", "cell")]
    assert passes.run(prog) == []

