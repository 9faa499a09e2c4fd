"""The bound on a gate's affine part, pinned at its exact limit (mutation survivor of rnnir/lower/cells.py's
_MAX_AFFINE): a gate spans at most 512 values. Its own file, so that it is the file's fastest test (a constant's
mutant runs the fastest test of each covering file).

The model is built here with onnx.helper; the count is worked out by hand in the test from the model's values.
"""

from __future__ import annotations

from tests.support.cell_graphs import rnn_with_zero_adds as _rnn_with_zero_adds
from tests.support.cell_graphs import scan as _scan


def test_a_gate_affine_over_512_values_is_a_cell_and_over_513_is_none():
    # the walk back from tanh's input sees t_adds .. t_1, t0, zero (once), hr, h0 (the state), xw (x's projection,
    # walked through: its weight is W) and x: adds + 6 values. 506 adds: 512, a cell; 507 adds: 513, no cell (the
    # bound keeps a residual stack, affine over the whole model, from being walked as one gate)
    scan, _ = _scan(_rnn_with_zero_adds(506), ["h0"])
    assert [(m.kind, m.h_out) for m in scan.matches] == [("RNN", "hN")]
    scan, _ = _scan(_rnn_with_zero_adds(507), ["h0"])
    assert (scan.matches, scan.candidates) == ([], [])
