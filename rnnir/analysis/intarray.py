"""Integer n-d arrays in plain Python: the layout ops the element tracer applies to element ids, as numpy does them.

The element tracer (:mod:`rnnir.analysis.elements`) moves arrays of element ids through Gather, Slice, Split,
Concat, Transpose, Reshape, Squeeze, Unsqueeze, Expand and ScatterND.  The arrays are small (a cache of a few
thousand elements) and every op only picks elements, so a flat list and a shape do it; numpy, which these ops
were written in first, costs more to import than such a model's whole lint (GTCRN).  Each function gives what
numpy gives for the same call (``tests/analysis/test_intarray.py`` compares them) and raises ValueError or
IndexError where numpy raises, so the tracer's failures stay what they were.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import accumulate

__all__ = [
    "IntArray",
    "arange",
    "broadcast_shapes",
    "broadcast_to",
    "concatenate",
    "expand_dims",
    "full",
    "reshape",
    "scatter_nd",
    "select",
    "split",
    "squeeze",
    "take",
    "transpose",
]


class IntArray:
    """``shape`` and the elements in C order; never changed once made (arrays are shared between values)."""

    __slots__ = ("flat", "shape")

    def __init__(self, shape: tuple[int, ...], flat: list[int]) -> None:
        self.shape = shape
        self.flat = flat

    @property
    def size(self) -> int:
        return len(self.flat)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"IntArray({self.shape}, {self.flat})"


def arange(base: int, shape: tuple[int, ...]) -> IntArray:
    return IntArray(shape, list(range(base, base + math.prod(shape))))


def full(shape: tuple[int, ...], value: int) -> IntArray:
    return IntArray(shape, [value] * math.prod(shape))


def strides(shape: Sequence[int]) -> list[int]:
    """Elements between neighbours along each axis, in C order."""
    out = [1] * len(shape)
    for q in range(len(shape) - 2, -1, -1):
        out[q] = out[q + 1] * shape[q + 1]
    return out


def _axis(axis: int, ndim: int) -> int:
    """``axis`` counted from the front, as numpy normalises it (its AxisError is a ValueError and an IndexError)."""
    if not -ndim <= axis < ndim:
        raise IndexError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis + ndim if axis < 0 else axis


def select(a: IntArray, picks: Sequence[Sequence[int]], order: Sequence[int] | None = None) -> IntArray:
    """The elements at every combination of ``picks[k]`` (positions along source axis ``order[k]``), C order:
    slicing, gathering, transposing and broadcasting (a position picked again) in one primitive."""
    axes = range(len(picks)) if order is None else order
    st = strides(a.shape)
    offsets = [0]
    for k, pick in zip(axes, picks):
        step = st[k]
        offsets = [o + p * step for o in offsets for p in pick]
    flat = a.flat
    return IntArray(tuple(len(p) for p in picks), [flat[o] for o in offsets])


def take(a: IntArray, indices: IntArray, axis: int) -> IntArray:
    """``np.take(a, indices, axis)`` (numpy reads a scalar as one element along axis 0)."""
    if not a.shape:
        a = IntArray((1,), a.flat)
    axis = _axis(axis, a.ndim)
    n = a.shape[axis]
    picked = []
    for i in indices.flat:
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        picked.append(i + n if i < 0 else i)
    picks: list[Sequence[int]] = [range(d) for d in a.shape]
    picks[axis] = picked
    out = select(a, picks)
    return IntArray(a.shape[:axis] + indices.shape + a.shape[axis + 1 :], out.flat)


def transpose(a: IntArray, perm: Sequence[int] | None) -> IntArray:
    """``np.transpose(a, perm)``."""
    if perm is None:
        order = list(range(a.ndim))[::-1]
    else:
        if len(perm) != a.ndim:
            raise ValueError("axes don't match array")
        order = [_axis(p, a.ndim) for p in perm]
        if len(set(order)) != len(order):
            raise ValueError("repeated axis in transpose")
    return select(a, [range(a.shape[k]) for k in order], order)


def reshape(a: IntArray, shape: Sequence[int]) -> IntArray:
    """``a.reshape(shape)``: one dimension may be negative (numpy reads any as -1), inferred."""
    shape = [int(d) for d in shape]
    unknown = [k for k, d in enumerate(shape) if d < 0]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if unknown:
        known = math.prod(d for k, d in enumerate(shape) if k != unknown[0])
        if known == 0 or a.size % known:
            raise ValueError(f"cannot reshape array of size {a.size} into shape {tuple(shape)}")
        shape[unknown[0]] = a.size // known
    if math.prod(shape) != a.size:
        raise ValueError(f"cannot reshape array of size {a.size} into shape {tuple(shape)}")
    return IntArray(tuple(shape), a.flat)


def squeeze(a: IntArray, axes: Iterable[int]) -> IntArray:
    """``np.squeeze(a, axis=tuple(axes))``."""
    drop = [_axis(ax, a.ndim) for ax in axes]
    if len(set(drop)) != len(drop):
        raise ValueError("repeated axis")
    if any(a.shape[k] != 1 for k in drop):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return IntArray(tuple(d for k, d in enumerate(a.shape) if k not in drop), a.flat)


def expand_dims(a: IntArray, axis: int) -> IntArray:
    """``np.expand_dims(a, axis)`` for one axis."""
    axis = _axis(axis, a.ndim + 1)
    return IntArray(a.shape[:axis] + (1,) + a.shape[axis:], a.flat)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """``np.broadcast_shapes(*shapes)``."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        if any(d < 0 for d in s):
            raise ValueError("negative dimensions are not allowed")
        for k, d in enumerate(s, rank - len(s)):
            if d != out[k]:
                if out[k] != 1 and d != 1:
                    raise ValueError(f"shape mismatch: objects cannot be broadcast to a single shape: {shapes}")
                if d != 1:
                    out[k] = d
    return tuple(out)


def broadcast_to(a: IntArray, shape: Sequence[int]) -> IntArray:
    """``np.array(np.broadcast_to(a, shape))``."""
    shape = tuple(int(d) for d in shape)
    lead = len(shape) - a.ndim
    if lead < 0 or any(d < 0 for d in shape):
        raise ValueError(f"cannot broadcast a shape {a.shape} array to shape {shape}")
    picks: list[Sequence[int]] = []
    for k, d in enumerate(a.shape):
        target = shape[lead + k]
        if d == target:
            picks.append(range(d))
        elif d == 1:
            picks.append([0] * target)
        else:
            raise ValueError(f"cannot broadcast a shape {a.shape} array to shape {shape}")
    out = select(a, picks)
    copies = math.prod(shape[:lead])
    return IntArray(shape, out.flat * copies)


def concatenate(arrays: Sequence[IntArray], axis: int) -> IntArray:
    """``np.concatenate(arrays, axis)``."""
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    first = arrays[0]
    if first.ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = _axis(axis, first.ndim)
    for a in arrays:
        if a.ndim != first.ndim or a.shape[:axis] != first.shape[:axis] or a.shape[axis + 1 :] != first.shape[axis + 1 :]:
            raise ValueError("all the input array dimensions except for the concatenation axis must match exactly")
    outer = math.prod(first.shape[:axis])
    inner = math.prod(first.shape[axis + 1 :])
    chunks = [(a.flat, a.shape[axis] * inner) for a in arrays]
    flat: list[int] = []
    for o in range(outer):
        for f, c in chunks:
            flat.extend(f[o * c : (o + 1) * c])
    shape = first.shape[:axis] + (sum(a.shape[axis] for a in arrays),) + first.shape[axis + 1 :]
    return IntArray(shape, flat)


def split(a: IntArray, sizes: Sequence[int], axis: int) -> list[IntArray]:
    """``np.split(a, np.cumsum(sizes)[:-1], axis)``: the last part is the rest, whatever its size says."""
    axis = _axis(axis, a.ndim)
    n = a.shape[axis]
    cuts = [0, *list(accumulate(sizes))[:-1], n]
    picks: list[Sequence[int]] = [range(d) for d in a.shape]
    parts = []
    for start, stop in zip(cuts, cuts[1:]):
        picks[axis] = range(*slice(start, stop).indices(n))
        parts.append(select(a, picks))
    return parts


def scatter_nd(data: IntArray, indices: IntArray, updates: IntArray) -> IntArray:
    """ONNX ScatterND without reduction, row by row as numpy's item assignment does it (a later row wins)."""
    if indices.ndim == 0:
        raise IndexError("tuple index out of range")
    k = indices.shape[-1]
    if k == 0 or k > data.ndim:
        raise ValueError(f"indices of depth {k} into an array of rank {data.ndim}")
    rows, rest = divmod(indices.size, k)
    if rest:
        raise ValueError(f"cannot reshape indices of size {indices.size} into rows of {k}")
    dims = data.shape[:k]
    chunk = math.prod(data.shape[k:])
    if updates.size != rows * chunk:
        raise ValueError(f"cannot reshape updates of size {updates.size} into {rows} rows of {chunk}")
    st = strides(dims)
    out = list(data.flat)
    idx = indices.flat
    upd = updates.flat
    for row in range(rows):
        place = 0
        for q, (i, d) in enumerate(zip(idx[row * k : (row + 1) * k], dims)):
            if not -d <= i < d:
                raise ValueError(f"index {i} out of bounds for axis {q} with size {d}")
            place += (i + d if i < 0 else i) * st[q]
        out[place * chunk : (place + 1) * chunk] = upd[row * chunk : (row + 1) * chunk]
    return IntArray(data.shape, out)
