"""The element tracer's integer arithmetic agrees with numpy's, which it replaced for speed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rnnir.analysis.elements import _unravel


@pytest.mark.parametrize("shape", [(1,), (5,), (2, 3), (4, 1, 5), (2, 3, 4, 2), (1, 1, 1)])
def test_unravel_is_numpys_unravel_index(shape):
    size = int(np.prod(shape))
    got = [_unravel(d, shape) for d in range(size)]
    assert got == [[int(c) for c in np.unravel_index(d, shape)] for d in range(size)]
    assert sorted(map(tuple, got)) == list(itertools.product(*(range(m) for m in shape)))  # each place once
