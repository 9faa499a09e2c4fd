"""Every case of ``test_pinned_cells_more`` in one test, in the order they are written, stopping at the first that fails.

Why a second copy (as ``test_pinned_cells_all`` does for ``test_pinned_cells``): the lines these cases pin (the
cone, constants, shapes and the zero-state search of rnnir/lower/cells.py) run for every model with state, so a
mutation run (tools/mutate.py) reaches them with hundreds of covering tests and tries only the cheapest of them plus
the cheapest of each file. This file has one test, so a planted bug on those lines meets every case here.
"""

from __future__ import annotations

import inspect

import test_pinned_cells_more as more

CASES = [f for name, f in vars(more).items() if name.startswith("test_") and callable(f) and not inspect.signature(f).parameters]


def test_every_case_of_test_pinned_cells_more():
    assert len(CASES) > 30  # the cases are found (a rename in test_pinned_cells_more must not empty this test)
    for case in CASES:
        try:
            case()
        except AssertionError as exc:
            raise AssertionError(f"{case.__name__}: {exc}") from exc
