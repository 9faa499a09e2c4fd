"""Cells whose gate pre-activations change shape when the probes are stacked on axis 0 (mutation survivors of
rnnir/lower/cells.py's stacked probe: a run whose outputs are not one row per probe falls back to probing one
vector at a time, so the weights read off are the model's own).

Every model is built here with onnx.helper from weights drawn here: the cell a correct recogniser confirms and its
weights, or the part of a near-miss its reason names, are known without it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex
from tests.support.cell_graphs import lstm_nodes

I, H = 3, 4
_RNG = np.random.default_rng(21)
W = (_RNG.standard_normal((4 * H, I)) * 0.5).astype(np.float32)
R = (_RNG.standard_normal((4 * H, H)) * 0.5).astype(np.float32)
B = (_RNG.standard_normal(H) * 0.3).astype(np.float32)
N = helper.make_node


def _model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], states: list[str], outputs: list[str]) -> onnx.ModelProto:
    def info(name: str, size: int) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, size])

    graph = helper.make_graph(
        nodes, "cell", [info("x", I), *(info(s, H) for s in states)], [info(o, H) for o in outputs], [numpy_helper.from_array(a, n) for n, a in inits.items()]
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _scan(m: onnx.ModelProto, states: list[str]) -> CellScan:
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, s) for s in states])


def _rnn(middle: list[onnx.NodeProto], extra: dict[str, np.ndarray]) -> onnx.ModelProto:
    """h' = tanh(x @ W.T + h @ R.T + b) (the first H rows of W and R), the part from h to the sum given by ``middle``."""
    head = [N("MatMul", ["x", "WT"], ["xw"], name="mm_x")]
    return _model(head + middle, {"WT": W[:H].T.copy(), "RT": R[:H].T.copy(), "b": B, **extra}, ["h0"], ["hN"])


def _one_rnn(scan: CellScan, h_out: str) -> None:
    assert scan.candidates == []
    (m,) = scan.matches
    assert (m.kind, m.h_out, m.x, m.hidden_size) == ("RNN", h_out, ("x",), H)
    np.testing.assert_allclose(m.weights.W[0], W[:H], atol=1e-6)
    np.testing.assert_allclose(m.weights.R[0], R[:H], atol=1e-6)
    np.testing.assert_allclose(m.weights.B[0, :H] + m.weights.B[0, H:], B, atol=1e-6)


def test_a_pre_activation_that_broadcasts_across_stacked_probes_is_probed_one_vector_at_a_time():
    # h is read as [1, 1, H] (Unsqueeze axis 1) and x as [1, H]: one step gives [1, 1, H], but P probes stacked on
    # axis 0 give [P, 1, H] + [P, H] = [P, P, H], P*P rows of nothing: those must not be read as the probes' rows
    middle = [
        N("Unsqueeze", ["h0", "ax1"], ["h3"], name="view"),
        N("MatMul", ["h3", "RT"], ["hr"], name="mm_h"),
        N("Add", ["xw", "hr"], ["s"], name="add"),
        N("Add", ["s", "b"], ["pre"], name="bias"),
        N("Tanh", ["pre"], ["t"], name="act"),
        N("Squeeze", ["t", "ax1"], ["hN"], name="out"),
    ]
    _one_rnn(_scan(_rnn(middle, {"ax1": np.array([1], dtype=np.int64)}), ["h0"]), "t")


def test_a_pre_activation_flattened_to_one_axis_is_probed_one_vector_at_a_time():
    # Reshape(pre, [-1]): one step gives [H]; stacked probes give [P*H], one axis whose length is not P
    middle = [
        N("MatMul", ["h0", "RT"], ["hr"], name="mm_h"),
        N("Add", ["xw", "hr"], ["s"], name="add"),
        N("Add", ["s", "b"], ["s2"], name="bias"),
        N("Reshape", ["s2", "flat"], ["pre"], name="flatten"),
        N("Tanh", ["pre"], ["t"], name="act"),
        N("Reshape", ["t", "row"], ["hN"], name="out"),
    ]
    _one_rnn(_scan(_rnn(middle, {"flat": np.array([-1], dtype=np.int64), "row": np.array([1, H], dtype=np.int64)}), ["h0"]), "t")


def test_an_lstm_whose_input_gate_is_one_constant_is_refused_for_its_gate_sizes():
    # i = sigmoid(0.3), a scalar broadcast over the cell: the probes read 1 input-gate value, not H (a scalar stays
    # a scalar when the probes are stacked: no row per probe there either), so the cell is refused with the sizes
    nodes = lstm_nodes(replace={"i": N("Sigmoid", ["ci"], ["i"], name="i")})
    m = _model(nodes, {"W": W, "R": R, "ci": np.array(0.3, dtype=np.float32)}, ["h0", "c0"], ["hN", "cN"])
    scan = _scan(m, ["h0", "c0"])
    assert scan.matches == []
    assert [(c.kind, c.reason) for c in scan.candidates] == [("LSTM", "LSTM-like structure at node 'c_new': gate sizes [1, 4, 4, 4] do not match the state size 4")]
