"""What an LSTM-like structure claims: its activations are never also taken for an RNN or a GRU cell, and a
confirmed LSTM's weights carry no GRU option (mutation survivors of rnnir/lower/cells.py's LSTM recogniser).

Every model is written here with onnx.helper from weights drawn here (tests/_cell_models.py for the plain cell),
so which cell is there, and which structure is none, is known without the recogniser.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex
from tests.support.cell_graphs import lstm_nodes
from tests.support.cell_models import lstm_cell

I, H = 4, 4  # x as wide as h, so that h' + x is a model's residual output
_RNG = np.random.default_rng(31)
W = (_RNG.standard_normal((4 * H, I)) * 0.5).astype(np.float32)
R = (_RNG.standard_normal((4 * H, H)) * 0.5).astype(np.float32)
N = helper.make_node


def _scan(m: onnx.ModelProto, states: list[str]) -> CellScan:
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, s) for s in states])


def _lstm_like(forget_act: str, forget_operand: str, residual: bool, peephole: bool = False) -> onnx.ModelProto:
    """c' = f*<forget_operand> + i*g, h' = o*tanh(c') with f = <forget_act>(...); outputs h' (plus x when residual), c'.
    peephole: f's pre-activation adds c itself (f = sigmoid(... + c))."""
    peep = N("Add", ["pf", "c0"], ["pf_peep"], name="peep") if peephole else N("Identity", ["pf"], ["pf_peep"], name="no_peep")
    nodes = lstm_nodes(
        replace={"f": N(forget_act, ["pf_peep"], ["f"], name="f"), "fc": N("Mul", ["f", forget_operand], ["fc"], name="fc")},
        before={"f": [peep]},
    )
    outputs = ["hN", "cN"]
    if residual:
        nodes.append(N("Add", ["hN", "x"], ["y"], name="residual"))
        outputs.append("y")
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, H]) for n in ("x", "h0", "c0")]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(np.full((1, H), 0.5, np.float32), "K")]
    graph = helper.make_graph(nodes, "cell", info, [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, H]) for n in outputs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def test_the_tanh_forget_gate_of_an_lstm_like_structure_is_not_an_rnn_cell():
    # f = tanh(Wf x + Rf h + bf) alone would be an RNN cell, but here it is the (wrong) forget gate of
    # c' = f*K + i*g: the structure is reported for its forget gate and f is no cell of its own
    scan = _scan(_lstm_like("Tanh", "K", residual=False), ["h0", "c0"])
    assert scan.matches == []
    assert [(c.kind, c.reason) for c in scan.candidates] == [("LSTM", "LSTM-like structure at node 'c_new': its forget gate Tanh 'f' is not a sigmoid")]


def test_the_tanh_of_c_new_is_no_gru_candidate_when_h_new_meets_a_residual_add():
    # y = h' + x: tanh(c') is blended (through o*tanh(c') and the Add) with a value that is no state, which for a
    # GRU candidate would be worth waiting for; but tanh(c') belongs to the LSTM: one LSTM, nothing else reported
    scan = _scan(_lstm_like("Sigmoid", "c0", residual=True), ["h0", "c0"])
    assert scan.candidates == []
    (m,) = scan.matches
    assert (m.kind, m.h_in, m.c_in, m.h_out, m.c_out) == ("LSTM", "h0", "c0", "hN", "cN")
    ifgo = np.split(W, 4)  # this model's rows are i, f, g, o; ONNX's order is i, o, f, g
    np.testing.assert_allclose(m.weights.W[0], np.concatenate([ifgo[0], ifgo[3], ifgo[1], ifgo[2]]), atol=1e-6)


def test_the_tanh_of_c_new_is_no_gru_candidate_when_the_lstm_like_structure_is_refused():
    # the same residual model with a peephole (f reads c): refused for it, and c' stays no state source; tanh(c'),
    # blended through h' and the residual Add with x, belongs to the LSTM-like structure: only that one is reported
    scan = _scan(_lstm_like("Sigmoid", "c0", residual=True, peephole=True), ["h0", "c0"])
    assert scan.matches == []
    assert [(c.kind, c.reason) for c in scan.candidates] == [
        ("LSTM", "LSTM-like structure at node 'c_new': its gates read the cell state 'c0' (peepholes or a swapped state)")
    ]


def test_a_confirmed_lstm_has_no_linear_before_reset():
    # linear_before_reset is a GRU attribute: an LSTM's weights say 0 (ONNX's default, the only value an LSTM takes)
    model, exp = lstm_cell()
    (m,) = _scan(model, [exp.h_in, exp.c_in]).matches
    assert (m.kind, m.weights.linear_before_reset) == ("LSTM", 0)
    np.testing.assert_allclose(m.weights.W, exp.W, atol=1e-5)
