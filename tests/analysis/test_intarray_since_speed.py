"""rnnir.analysis.intarray at the edges numpy draws (one fast test, so a mutation run's time budget always runs it):
broadcasting nothing, broadcasting to fewer axes, concatenating one array, 1-d arrays, arrays of different ranks."""

from __future__ import annotations

import numpy as np
import pytest

from rnnir.analysis import intarray as ia
from rnnir.analysis.intarray import IntArray


def _ours(a: np.ndarray) -> IntArray:
    return IntArray(tuple(a.shape), [int(x) for x in a.ravel()])


def _ids(shape, base=0):
    return np.arange(base, base + int(np.prod(shape)), dtype=np.int64).reshape(shape)


def test_the_edges_numpy_draws():
    assert ia.broadcast_shapes() == np.broadcast_shapes() == ()
    assert ia.broadcast_shapes((), ()) == np.broadcast_shapes((), ()) == ()
    # a size-1 leading axis does not make an array broadcastable to fewer axes
    for shape, target in (((1, 3), (3,)), ((1, 1), (1,)), ((1,), ())):
        with pytest.raises(ValueError):
            np.broadcast_to(_ids(shape), target)
        with pytest.raises((ValueError, IndexError)):
            ia.broadcast_to(_ours(_ids(shape)), target)
    # one array alone, and 1-d arrays, concatenate
    for arrays, axis in (([(2, 3)], 0), ([(2, 3)], -1), ([(3,), (2,)], 0), ([(4,)], 0), ([(1,), (2,), (3,)], -1)):
        np_arrays = [_ids(s, base=10 * k) for k, s in enumerate(arrays)]
        got = ia.concatenate([_ours(a) for a in np_arrays], axis)
        want = np.concatenate(np_arrays, axis=axis)
        assert (got.shape, got.flat) == (want.shape, want.ravel().tolist()), arrays
    # arrays of different ranks never concatenate, even where the axes both have agree
    for arrays, axis in (([(2, 3), (2,)], 1), ([(2, 3), (2,)], -1), ([(2,), (2, 3)], 0), ([(2, 1), (2, 1, 1)], 1)):
        np_arrays = [_ids(s) for s in arrays]
        with pytest.raises(ValueError):
            np.concatenate(np_arrays, axis=axis)
        with pytest.raises((ValueError, IndexError)):
            ia.concatenate([_ours(a) for a in np_arrays], axis)
