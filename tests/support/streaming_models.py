"""Small models for the streaming-deployment tests, each with a behaviour one can work out by hand.

One frame per call (``x[1, W]``, state ``h_in[1, W]`` -> ``h_out``, output ``y = h_out``):

* ``decay``       h' = 0.5 h + x   forgets: a perturbation d is d / 2^k after k calls
* ``integrator``  h' = h + x       never forgets: a lost chunk is a permanent offset
* ``growing``     h' = h + |x|     the state grows without bound
* ``exploding``   h' = 1e10 h + x  the state overflows float32 within a few calls

``lstm_b`` is one LSTM layer with a free batch dim ``B`` (x[T, B, I], h0/c0[1, B, H]),
``mixing`` an RNN whose output subtracts the batch mean (rows leak into each other),
and ``context_probe`` shows the input it was given (for hand-checked input context).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
PAIRS = {"h_in": "h_out"}


def _model(graph: onnx.GraphProto, opset: int = 17) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def toy(kind: str, width: int = 4) -> onnx.ModelProto:
    vi = [helper.make_tensor_value_info(n, F, [1, width]) for n in ("x", "h_in", "y", "h_out")]
    inits: list[onnx.TensorProto] = []
    if kind == "integrator":
        nodes = [helper.make_node("Add", ["h_in", "x"], ["h_out"])]
    elif kind in ("decay", "exploding"):
        factor = 0.5 if kind == "decay" else 1e10
        inits = [numpy_helper.from_array(np.array(factor, np.float32), "a")]
        nodes = [helper.make_node("Mul", ["h_in", "a"], ["ha"]), helper.make_node("Add", ["ha", "x"], ["h_out"])]
    elif kind == "growing":
        nodes = [helper.make_node("Abs", ["x"], ["ax"]), helper.make_node("Add", ["h_in", "ax"], ["h_out"])]
    else:
        raise ValueError(kind)
    nodes.append(helper.make_node("Identity", ["h_out"], ["y"]))
    return _model(helper.make_graph(nodes, kind, vi[:2], vi[2:], inits))


def lstm_b(inp: int = 3, hidden: int = 5, seed: int = 0, name: str = "lstm_b") -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w = (0.5 * rng.standard_normal((1, 4 * hidden, inp))).astype(np.float32)
    r = (0.5 * rng.standard_normal((1, 4 * hidden, hidden))).astype(np.float32)
    b = (0.1 * rng.standard_normal((1, 8 * hidden))).astype(np.float32)
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["Y", "hn", "cn"], hidden_size=hidden)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info("x", F, ["T", "B", inp]), helper.make_tensor_value_info("h0", F, [1, "B", hidden]),
         helper.make_tensor_value_info("c0", F, [1, "B", hidden])],
        [helper.make_tensor_value_info("Y", F, ["T", 1, "B", hidden]), helper.make_tensor_value_info("hn", F, [1, "B", hidden]),
         helper.make_tensor_value_info("cn", F, [1, "B", hidden])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"), numpy_helper.from_array(b, "B")],
    )
    return _model(graph)


def mixing(hidden: int = 2) -> onnx.ModelProto:
    """h' = tanh(h + g x); y = h' - mean over the batch of h': every row depends on the others.
    ``g`` is a scalar shared by the rows of a call, like silero's ``sr``."""
    nodes = [
        helper.make_node("Mul", ["x", "g"], ["gx"]),
        helper.make_node("Add", ["h_in", "gx"], ["s"]),
        helper.make_node("Tanh", ["s"], ["h_out"]),
        helper.make_node("ReduceMean", ["h_out"], ["m"], axes=[0], keepdims=1),
        helper.make_node("Sub", ["h_out", "m"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mixing",
        [helper.make_tensor_value_info("x", F, ["B", hidden]), helper.make_tensor_value_info("h_in", F, ["B", hidden]),
         helper.make_tensor_value_info("g", F, [])],
        [helper.make_tensor_value_info("y", F, ["B", hidden]), helper.make_tensor_value_info("h_out", F, ["B", hidden])],
    )
    return _model(graph, opset=13)


def context_probe(total: int = 6) -> onnx.ModelProto:
    """``seen = x`` (the input as the model received it) and a running sum of it as state: ``x[1, total]``."""
    nodes = [
        helper.make_node("Identity", ["x"], ["seen"]),
        helper.make_node("ReduceSum", ["x"], ["xs"], keepdims=1),
        helper.make_node("Add", ["h_in", "xs"], ["h_out"]),
    ]
    graph = helper.make_graph(
        nodes, "context_probe",
        [helper.make_tensor_value_info("x", F, [1, total]), helper.make_tensor_value_info("h_in", F, [1, 1])],
        [helper.make_tensor_value_info("seen", F, [1, total]), helper.make_tensor_value_info("h_out", F, [1, 1])],
    )
    return _model(graph, opset=11)
