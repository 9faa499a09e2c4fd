"""The recogniser's bounds, pinned at their exact limits (mutation survivors of rnnir/lower/cells.py's constants):
a cell is probed with at most 8192 unit vectors, and at most three output blends of a GRU candidate are tried
(the affine part's and the output region's bounds have files of their own: test_pinned_cells_limit_*.py).

Every model is built here with onnx.helper; the counts are worked out by hand in each test from the model's values.
"""

from __future__ import annotations

import numpy as np
import onnx

from tests.support.cell_graphs import H, N, gru_gate_nodes
from tests.support.cell_graphs import model as _model
from tests.support.cell_graphs import rnn_with_zero_adds as _rnn_with_zero_adds
from tests.support.cell_graphs import scan as _scan


def test_a_cell_with_input_plus_hidden_over_8192_is_refused_before_probing():
    # x has 8189 elements, h 4: 8193 unit vectors would be probed (8192 is the most), so the cell is not run at all.
    # (The cell at exactly 8192 would be confirmed, but probing it takes two 8192 x 8192 arrays: not a unit test.)
    scan, _ = _scan(_rnn_with_zero_adds(1, inputs=8189), ["h0"])
    assert scan.matches == []
    assert [(c.kind, c.reason) for c in scan.candidates] == [("RNN", "RNN-like structure at node 'act' could not be run: input 8189 + hidden 4 is too large to probe")]


def _gru_with_decoys(decoys: int) -> onnx.ModelProto:
    """A GRU (ONNX semantics, linear_before_reset 1) whose candidate n is first read by ``decoys`` values n + z*h,
    which look like its new state (n, one sigmoid, the state) but are not a GRU's, before the real (1-z)*n + z*h."""
    I = 3  # noqa: E741
    rng = np.random.default_rng(43)
    W = (rng.standard_normal((3 * H, I)) * 0.5).astype(np.float32)
    R = (rng.standard_normal((3 * H, H)) * 0.5).astype(np.float32)
    nodes = [
        *gru_gate_nodes(),
        N("Add", ["xn", "reset"], ["pn"], name="add_n"),
        N("Tanh", ["pn"], ["n"], name="n"),
        N("Mul", ["z", "h0"], ["zh"], name="zh"),
    ]
    nodes += [N("Add", ["n", "zh"], [f"d{j}"], name=f"decoy{j}") for j in range(1, decoys + 1)]
    nodes += [N("Sub", ["one", "z"], ["keep"], name="keep"), N("Mul", ["keep", "n"], ["kn"], name="kn"), N("Add", ["kn", "zh"], ["hN"], name="blend")]
    inits = {"W": W, "R": R, "one": np.array(1.0, np.float32)}
    return _model(nodes, {"x": [1, I], "h0": [1, H]}, ["hN", *(f"d{j}" for j in range(1, decoys + 1))], inits)


def test_a_gru_candidate_tries_three_output_blends():
    # the decoys are met first (n's own consumers), the real blend one step further: with two decoys it is the
    # third blend tried and the GRU is confirmed; with three it would be the fourth, and the last one tried, d3, is
    # what the reason names
    scan, _ = _scan(_gru_with_decoys(2), ["h0"])
    assert [(m.kind, m.h_out) for m in scan.matches] == [("GRU", "hN")]
    scan, _ = _scan(_gru_with_decoys(3), ["h0"])
    assert scan.matches == []
    assert [c.kind for c in scan.candidates] == ["GRU"]
    assert scan.candidates[0].reason.startswith("GRU-like structure at node 'n' does not compute a GRU cell: the new state at 'd3' differs from (1-z)*n + z*h")
