"""Near-misses of an LSTM and of a GRU refused with the reason their structure calls for (mutation survivors of
rnnir/lower/cells.py: the state classes of an LSTM without h', and the reset gate left out of the affine walk).

The models are written here with onnx.helper from weights drawn here; which part of each is not a cell's is known
by construction, and the reasons quote the names given here.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex
from tests.support.cell_graphs import gru_gate_nodes, lstm_nodes

I, H = 3, 4
N = helper.make_node


def _scan(nodes: list[onnx.NodeProto], states: list[str], outputs: list[str], inits: dict[str, np.ndarray]) -> CellScan:
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, I if n == "x" else H]) for n in ("x", *states)]
    graph = helper.make_graph(
        nodes, "cell", info, [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, H]) for o in outputs], [numpy_helper.from_array(a, n) for n, a in inits.items()]
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, s) for s in states])


def _weights(gates: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"W": (rng.standard_normal((gates * H, I)) * 0.5).astype(np.float32), "R": (rng.standard_normal((gates * H, H)) * 0.5).astype(np.float32)}


def test_an_lstm_update_of_a_negated_cell_state_with_h_from_the_old_state_names_its_output_product():
    # c' = f*(-c) + i*g and h' = o*tanh(c): no o*tanh(c'), so the reason names the product that is there instead;
    # -c is no state view, so the two cannot be run side by side to say by how much they differ (no " by ...")
    nodes = lstm_nodes(
        replace={"fc": N("Mul", ["f", "minus_c"], ["fc"], name="fc"), "tanh_c": N("Tanh", ["c0"], ["tc"], name="tanh_c_old")},
        before={"fc": [N("Neg", ["c0"], ["minus_c"], name="negate")]},
    )
    scan = _scan(nodes, ["h0", "c0"], ["hN", "cN"], _weights(4, 91))
    assert scan.matches == []
    assert [(c.kind, c.reason) for c in scan.candidates] == [
        ("LSTM", "LSTM-like structure at node 'c_new' does not compute an LSTM cell: h' at node 'h_new' is o*tanh('c0'), not o*tanh(c'); it differs from o*tanh(c')")
    ]


def test_a_gru_candidate_that_also_adds_its_reset_gate_has_a_recurrent_bias_of_one():
    # n = tanh(xn + r*hn + r) = tanh(xn + r*(hn + 1)): ONNX's GRU (linear_before_reset 1) whose recurrent bias of n is
    # 1; the reset gate, reached twice, is set aside in the affine walk (probed as a constant), never walked into
    nodes = [
        *gru_gate_nodes(),
        N("Add", ["xn", "reset"], ["pn0"], name="add_n"),
        N("Add", ["pn0", "r"], ["pn"], name="plus_r"),
        N("Tanh", ["pn"], ["n"], name="n"),
        N("Sub", ["one", "z"], ["keep"], name="keep"),
        N("Mul", ["keep", "n"], ["kn"], name="kn"),
        N("Mul", ["z", "h0"], ["zh"], name="zh"),
        N("Add", ["kn", "zh"], ["hN"], name="blend"),
    ]
    w = _weights(3, 92)
    scan = _scan(nodes, ["h0"], ["hN"], {**w, "one": np.array(1.0, np.float32)})
    assert scan.candidates == []
    (m,) = scan.matches
    assert (m.kind, m.h_in, m.h_out, m.weights.linear_before_reset) == ("GRU", "h0", "hN", 1)
    np.testing.assert_allclose(m.weights.W[0], w["W"], atol=1e-5)  # split as z, r, n: ONNX's order
    np.testing.assert_allclose(m.weights.R[0], w["R"], atol=1e-5)
    expected_b = np.zeros(6 * H)
    expected_b[5 * H :] = 1.0  # Rb of n: the r added to r*hn
    np.testing.assert_allclose(m.weights.B[0], expected_b, atol=1e-5)
