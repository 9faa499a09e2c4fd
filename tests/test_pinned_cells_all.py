"""Every case of ``test_pinned_cells`` in one test, in the order they are written, stopping at the first that fails.

Why a second copy: the lines those cases pin (the zero-state search, the cone, the role tests of
rnnir/lower/cells.py) run for every model with state, so a mutation run (tools/mutate.py) reaches them
with hundreds of covering tests and tries only the cheapest of them plus the cheapest of each file. This
file has one test, so it is always that file's cheapest: a planted bug on those lines meets every
hand-built case here, not just the one the time budget happened to pick.
"""

from __future__ import annotations

import inspect

import test_pinned_cells as pinned

CASES = [f for name, f in vars(pinned).items() if name.startswith("test_") and callable(f) and not inspect.signature(f).parameters]


def test_every_pinned_cell_case():
    assert len(CASES) > 50  # the cases are found (a rename in test_pinned_cells must not empty this test)
    for case in CASES:
        try:
            case()
        except AssertionError as exc:
            raise AssertionError(f"{case.__name__}: {exc}") from exc
