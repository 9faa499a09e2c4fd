"""Small ONNX builders shared by the pinned-behaviour tests (tests/test_pinned_*.py)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

H, I, T = 4, 3, 5
F32 = TensorProto.FLOAT


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def weights(kind, directions=1, prefix=""):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    rng = np.random.default_rng(3)
    return [
        numpy_helper.from_array(rng.standard_normal((directions, gates * H, I)).astype(np.float32), prefix + "W"),
        numpy_helper.from_array(rng.standard_normal((directions, gates * H, H)).astype(np.float32), prefix + "R"),
    ]


def model(nodes, inputs, outputs, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits)), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m
