# ruff: noqa: B023  (each lambda is called at once, inside the loop that binds its variables)
"""rnnir.analysis.intarray against numpy, the oracle it replaced: the same elements and shape, and an error
exactly where numpy raises one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rnnir.analysis import intarray as ia
from rnnir.analysis.intarray import IntArray

SHAPES = [(), (1,), (5,), (2, 3), (3, 1, 4), (2, 3, 2, 2), (1, 1, 3)]


def _ours(a: np.ndarray) -> IntArray:
    return IntArray(tuple(a.shape), [int(x) for x in a.ravel()])


def _ids(shape: tuple[int, ...], base: int = 7) -> np.ndarray:
    return np.arange(base, base + int(np.prod(shape)), dtype=np.int64).reshape(shape)


def _same(numpy_call, ours_call) -> None:
    """Both give the same array, or both raise (ValueError/IndexError: what the tracer catches)."""
    try:
        want = numpy_call()
    except (ValueError, IndexError) as exc:
        with pytest.raises((ValueError, IndexError)):
            ours_call()
        return exc
    got = ours_call()
    if isinstance(want, list):
        assert [(g.shape, g.flat) for g in got] == [(tuple(w.shape), w.ravel().tolist()) for w in want]
    else:
        assert (got.shape, got.flat) == (tuple(want.shape), np.asarray(want).ravel().tolist())
    return None


def test_arange_and_full():
    assert (ia.arange(3, (2, 2)).shape, ia.arange(3, (2, 2)).flat) == ((2, 2), [3, 4, 5, 6])
    assert ia.arange(3, ()).flat == [3]
    assert (ia.full((2, 3), -2).shape, ia.full((2, 3), -2).flat) == ((2, 3), [-2] * 6)
    assert ia.full((2, 0), -1).flat == []
    assert ia.arange(0, (2, 3)).size == 6 and ia.arange(0, (2, 3)).ndim == 2


def test_strides_are_numpys():
    for shape in [(1,), (5,), (2, 3), (3, 1, 4), (2, 3, 2, 2)]:
        assert ia.strides(shape) == [s // 8 for s in _ids(shape).strides]


def test_take():
    for shape, axis, indices in itertools.product(SHAPES, [-4, -3, -2, -1, 0, 1, 2, 3], [[0], [1, 0], [-1], [[0, 1], [1, 0]], [2, -3], [3], [-6], 0]):
        a = _ids(shape)
        idx = np.array(indices, dtype=np.int64)
        _same(lambda: np.take(a, idx, axis=axis), lambda: ia.take(_ours(a), _ours(idx), axis))


def test_transpose():
    for shape in SHAPES:
        _transpose_case(shape)


def _transpose_case(shape):
    a = _ids(shape)
    _same(lambda: np.transpose(a), lambda: ia.transpose(_ours(a), None))
    for perm in itertools.permutations(range(len(shape))):
        _same(lambda: np.transpose(a, perm), lambda: ia.transpose(_ours(a), list(perm)))
    rank = len(shape)
    for bad in ([0] * (rank + 1), [rank] * rank, [-1] * rank, [k - rank for k in range(rank)], list(range(rank))[:-1]):
        _same(lambda: np.transpose(a, bad), lambda: ia.transpose(_ours(a), bad))


def test_reshape():
    a = _ids((2, 3))
    for target in [(6,), (3, 2), (-1,), (2, -1), (-1, 3), (-1, -1), (4, -1), (5,), (0, -1), (1, 6, 1), (-2, 3), (2, 3, 1), (0, 6), (6, 0)]:
        _same(lambda: a.reshape(target), lambda: ia.reshape(_ours(a), list(target)))


def test_reshape_of_nothing():
    a = np.zeros((0, 2), dtype=np.int64)
    for target in ((0, -1), (-1, 2), (2, 0), (0,)):
        _same(lambda: a.reshape(target), lambda: ia.reshape(_ours(a), list(target)))


def test_squeeze():
    a = _ids((1, 3, 1))
    for axes in [(), (0,), (1,), (-1,), (0, 2), (2, 0), (0, 0), (0, -3), (3,), (-4,), (1, 2)]:
        _same(lambda: np.squeeze(a, axis=axes), lambda: ia.squeeze(_ours(a), axes))


def test_expand_dims():
    a = _ids((2, 3))
    for axis in [-4, -3, -2, -1, 0, 1, 2, 3]:
        _same(lambda: np.expand_dims(a, axis), lambda: ia.expand_dims(_ours(a), axis))


def test_broadcast_shapes():
    for shapes in [((2, 3), (3,)), ((2, 1), (1, 4)), ((1,), (0,)), ((0,), (1,)), ((2,), (3,)), ((3,), (1, 1, 3)), ((2, 3), (-1,)),
                   ((1,), (-1,)), ((), (2, 2)), ((4, 1), (4, 1)), ((1, 5), (3, 1), (1, 1)), ((),), ((3,), (1,))]:
        try:
            want = np.broadcast_shapes(*shapes)
        except ValueError:
            with pytest.raises(ValueError):
                ia.broadcast_shapes(*shapes)
            continue
        assert ia.broadcast_shapes(*shapes) == want, shapes


def test_broadcast_to():
    for shape, target in [((3,), (2, 3)), ((1,), (4,)), ((2, 1), (2, 5)), ((2, 1), (3, 2, 4)), ((2, 3), (3,)), ((3,), (2, 4)), ((2,), (2, -1)),
                          ((1, 3), (1, 3)), ((), (2,)), ((1,), (0,)), ((2, 1), (2, 0)), ((1,), (-1,)), ((1,), (2, -1)), ((2, 3), (2, 3))]:
        a = _ids(shape)
        _same(lambda: np.array(np.broadcast_to(a, target)), lambda: ia.broadcast_to(_ours(a), target))


def test_concatenate():
    for axis, other in itertools.product([-3, -2, -1, 0, 1, 2], [(2, 3), (4, 3), (2, 5), (2, 3, 1), (3,), (2,)]):
        a, b = _ids((2, 3)), _ids(other, base=100)
        _same(lambda: np.concatenate([a, b, a], axis=axis), lambda: ia.concatenate([_ours(a), _ours(b), _ours(a)], axis))
        _same(lambda: np.concatenate([b, a], axis=axis), lambda: ia.concatenate([_ours(b), _ours(a)], axis))


def test_concatenate_refuses_nothing_and_scalars():
    with pytest.raises(ValueError):
        ia.concatenate([], 0)
    s = _ids(())
    _same(lambda: np.concatenate([s, s], axis=0), lambda: ia.concatenate([_ours(s), _ours(s)], 0))


def test_split():
    a = _ids((5, 4))
    for sizes, axis in itertools.product([[2, 3], [1, 1, 3], [3, 1], [5], [2, 2], [-2, 4], [0, 5], [4, 4], [6, 1]], [-3, -1, 0, 1, 2]):
        _same(lambda: list(np.split(a, np.cumsum(sizes)[:-1], axis=axis)), lambda: ia.split(_ours(a), sizes, axis))


def test_select_reads_slices_as_numpy():
    a = _ids((4, 3))
    for stops, step, axis in itertools.product([(0, 3), (1, 4), (-1, 2), (4, 0)], [1, 2, -1, -2], (0, 1)):
        index = [slice(None)] * 2
        index[axis] = slice(stops[0], stops[1], step)
        picks = [range(*sl.indices(n)) for sl, n in zip(index, a.shape)]
        _same(lambda: a[tuple(index)], lambda: ia.select(_ours(a), picks))


def _scatter_nd_numpy(data, idx, upd):
    """numpy's item assignment, row by row (a later row wins), with ONNX ScatterND's shapes."""
    out = np.array(data)
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    flat_upd = upd.reshape((flat_idx.shape[0], *out.shape[k:]))
    dims = out.shape[:k]
    np.ravel_multi_index(tuple(np.where(flat_idx < 0, flat_idx + np.array(dims, dtype=np.int64), flat_idx).T), dims)
    for row, where in enumerate(flat_idx):
        out[tuple(where)] = flat_upd[row]
    return out


SCATTER_CASES = [
        ([[0], [2]], (2, 3)),
        ([[1, 2], [0, 0]], (2,)),
        ([[-1], [0]], (2, 3)),
        ([[1], [1]], (2, 3)),  # the same row twice: the later one wins
        ([[[0, 1]], [[2, 2]]], (2, 1)),
        ([[3]], (1, 3)),
        ([[-4]], (1, 3)),
        ([[0, 3]], (1,)),
        ([[0, 0, 0]], (1,)),
        ([[0], [1]], (3, 3)),
        ([[0, 1, 2]], (1, 1)),
        ([[]], (1, 3, 3)),
        ([], ()),
        ([[0], [1], [2]], (3, 3)),
    ]


def test_scatter_nd():
    data = _ids((3, 3))
    for indices, upd_shape in SCATTER_CASES:
        idx = np.array(indices, dtype=np.int64)
        upd = _ids(upd_shape, base=100)
        _same(lambda: _scatter_nd_numpy(data, idx, upd), lambda: ia.scatter_nd(_ours(data), _ours(idx), _ours(upd)))


def test_scatter_nd_of_indices_that_split_into_no_whole_rows():
    data = _ours(_ids((3, 3)))
    with pytest.raises(ValueError):
        ia.scatter_nd(data, IntArray((5,), [0, 0, 1, 1, 2]), _ours(_ids((2,))))  # rows of 5 into a rank-2 array
    with pytest.raises(ValueError):
        ia.scatter_nd(data, IntArray((3, 2), [0, 0, 1, 1, 2]), _ours(_ids((2,))))  # 5 numbers in rows of 2


def test_a_new_array_never_shares_the_input_list():
    a = _ours(_ids((3, 3)))
    out = ia.scatter_nd(a, IntArray((1, 1), [0]), IntArray((1, 3), [0, 0, 0]))
    assert a.flat[:3] == [7, 8, 9] and out.flat[:3] == [0, 0, 0]
    assert repr(IntArray((2,), [1, 2])) == "IntArray((2,), [1, 2])"
