"""Which product is an LSTM's h' when tanh(c') or c' is read again later (mutation survivors of
rnnir/lower/cells.py's search for h' = o*tanh(c')): the product whose gate reads the state is h', and a later one
gated by a constant does not replace it.

The models are written here with onnx.helper from weights drawn here: an LSTM in PyTorch's gate order (i, f, g, o),
whose weights in ONNX's order (i, o, f, g) are known without the recogniser.
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
_RNG = np.random.default_rng(101)
W = (_RNG.standard_normal((4 * H, I)) * 0.5).astype(np.float32)
R = (_RNG.standard_normal((4 * H, H)) * 0.5).astype(np.float32)


def _lstm(extra: list[onnx.NodeProto], extra_outputs: list[str]) -> CellScan:
    nodes = [
        *lstm_nodes(),
        N("Sigmoid", ["k"], ["o2"], name="constant_gate"),
        *extra,
    ]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, I if n == "x" else H]) for n in ("x", "h0", "c0")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, H]) for n in ("hN", "cN", *extra_outputs)]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(np.array(0.3, np.float32), "k")]
    m = helper.make_model(helper.make_graph(nodes, "lstm", info, outs, inits), opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, "h0"), (index.root, "c0")])


def _one_lstm(scan: CellScan) -> None:
    assert scan.candidates == []
    (m,) = scan.matches
    assert (m.kind, m.h_in, m.c_in, m.h_out, m.c_out) == ("LSTM", "h0", "c0", "hN", "cN")
    i, f, g, o = np.split(W, 4)
    np.testing.assert_allclose(m.weights.W[0], np.concatenate([i, o, f, g]), atol=1e-5)


def test_a_later_constant_gated_product_of_tanh_c_new_does_not_replace_h_new():
    # y = sigmoid(0.3) * tanh(c'), after h' = o * tanh(c') in graph order: y's gate reads no state, h' stays h'
    _one_lstm(_lstm([N("Mul", ["o2", "tc"], ["y"], name="later")], ["y"]))


def test_a_later_tanh_of_c_new_with_a_constant_gated_product_does_not_replace_h_new():
    # y = sigmoid(0.3) * tanh2(c'), tanh2 a second Tanh of c' after the first: h' stays the product of the first
    extra = [N("Tanh", ["cN"], ["tc2"], name="tanh_c_again"), N("Mul", ["o2", "tc2"], ["y"], name="later")]
    _one_lstm(_lstm(extra, ["y"]))
