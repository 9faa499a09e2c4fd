"""The run budget of rnnir/lower/cells.py's evaluator, alone in its file: its case builds chains of 4,000 ops, too
slow to share a mutation run's time budget with the quick cases of ``test_pinned_cells_more`` (a file's fastest
covering test is always run, so alone here it always is)."""

from __future__ import annotations

import numpy as np

from tests.lower.cells import test_constant_initial_state as pc
from tests.lower.cells.test_constant_initial_state import scan
from tests.lower.cells.test_recogniser_cases import rnn_on_a_view_chain


def test_views_are_compared_by_running_at_most_4096_nodes():
    # h' = tanh(Gemm(x) + h0 R^T + v R2^T) with v = h0 through `length` Identity ops: the two views are told to hold
    # the same elements by running v's chain on random data; 4,096 Identity ops are within the run budget, 4,097 are
    # not, and then v is read as another input of the cell
    model, v, R2 = rnn_on_a_view_chain(4096)
    (m,) = scan(model, ["h0"])[0].matches
    assert m.x == ("x",) and sorted(m.h_views) == sorted(["h0", v])
    np.testing.assert_allclose(m.weights.R[0], pc.R4 + R2, atol=1e-5)
    model, v, R2 = rnn_on_a_view_chain(4097)
    (m,) = scan(model, ["h0"])[0].matches
    assert len(m.x) == 2 and len(m.h_views) == 1
