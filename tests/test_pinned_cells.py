"""Cells written as plain ops that start from zeros the model makes (mutation survivors of rnnir/lower/cells.py):
h' = tanh(W x + R h0 + b) with h0 zeros from a Constant node, a ConstantOfShape or an initializer is an RNN cell
that starts afresh on every call (SD010); h0 a non-zero constant is a bias, no state. The cell is written here by
hand, so what it computes is known."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import rnnir
from rnnir import passes

H, I = 4, 3


def cell(h0_from: str, value: float = 0.0):
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32), "R"),
        numpy_helper.from_array(np.zeros(H, np.float32), "b"),
    ]
    nodes = []
    if h0_from == "Constant":
        nodes.append(helper.make_node("Constant", [], ["h0"], value=numpy_helper.from_array(np.full((1, H), value, np.float32))))
    elif h0_from == "ConstantOfShape":
        inits.append(numpy_helper.from_array(np.array([1, H], np.int64), "shape"))
        nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["h0"], value=numpy_helper.from_array(np.full(1, value, np.float32))))
    else:
        inits.append(numpy_helper.from_array(np.full((1, H), value, np.float32), "h0"))
    nodes += [
        helper.make_node("Gemm", ["x", "W", "b"], ["gx"], transB=1),
        helper.make_node("Gemm", ["h0", "R"], ["gh"], transB=1),
        helper.make_node("Add", ["gx", "gh"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["hn"], name="act"),
    ]
    graph = helper.make_graph(nodes, "c", [helper.make_tensor_value_info("x", 1, [1, I])], [helper.make_tensor_value_info("hn", 1, [1, H])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("h0_from", ["Constant", "ConstantOfShape", "initializer"])
def test_a_cell_starting_from_zeros_the_model_makes_is_recognised_and_starts_afresh(h0_from):
    prog = rnnir.load(cell(h0_from))
    assert [(r.kind, r.hidden_size) for r in prog.recurrents] == [("RNN", H)]
    assert [d.code for d in passes.run(prog)] == ["SD010"]


@pytest.mark.parametrize("h0_from", ["Constant", "ConstantOfShape", "initializer"])
def test_a_non_zero_constant_in_the_place_of_the_state_is_a_bias_not_a_state(h0_from):
    prog = rnnir.load(cell(h0_from, value=0.5))
    assert prog.recurrents == []
    assert [d.code for d in passes.run(prog)] == ["SD009"]  # nothing to verify, said as information


@pytest.mark.parametrize("near_miss", ["tanh_cprev", "gate_tanh", "c_through_matmul"])
@pytest.mark.parametrize("real_first", [True, False])
def test_a_cell_beside_a_near_miss_is_one_recurrence_and_one_candidate(near_miss, real_first):
    # two LSTM-shaped structures on separate states in one graph: each keeps its own verdict whatever the order
    import sys
    from pathlib import Path

    from onnx import compose

    sys.path.insert(0, str(Path(__file__).parent))
    import _cell_models as cm

    real, _ = cm.lstm_cell()
    fake, _ = cm.lstm_cell(mutant=near_miss)
    first, second = (real, fake) if real_first else (fake, real)
    m = compose.merge_models(compose.add_prefix(first, "a_"), compose.add_prefix(second, "b_"), io_map=[])
    prog = rnnir.load(m)
    real_prefix, fake_prefix = ("a_", "b_") if real_first else ("b_", "a_")
    assert [(r.kind, r.provenance.node[:2]) for r in prog.recurrents] == [("LSTM", real_prefix)]
    (candidate,) = prog.recurrence_candidates
    assert f"node '{fake_prefix}" in candidate.reason
