"""A tick's requests (session id -> feeds, one row each) checked and stacked into one batch, and the batched
outputs split back into one dict per stream."""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from rnnir.runtime.feeds import FeedError, feed_array
from rnnir.runtime.spec import SessionModel

__all__ = ["checked_feeds", "groups", "split_rows", "stack_requests", "stack_rows", "uniform"]

_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")


def stack_requests(feeds: list[Mapping[str, Any]], dtypes: Mapping[str, np.dtype[Any]], axes: Mapping[str, int | None]) -> dict[str, np.ndarray] | None:
    """The batch of a usual tick (every request one row of the same inputs, shapes, dtypes and shared
    values), stacked without a Python pass per request per check; None when anything differs (the
    general path then checks, converts, groups and reports)."""
    n = len(feeds)
    # list comprehensions and list.count run the per-request checks in C: a generator per check costs
    # more than the rest of a 64-stream tick's Python
    if list(map(len, feeds)).count(len(dtypes)) != n:
        return None  # with every name looked up below, equal sizes mean equal names
    batch: dict[str, np.ndarray] = {}
    for name, dtype in dtypes.items():
        try:
            arrays = list(map(operator.itemgetter(name), feeds))
            # an object without .dtype/.shape is no array (AttributeError); a numpy scalar has shape ()
            if list(map(_DTYPE, arrays)).count(dtype) != n:
                return None
        except (KeyError, AttributeError):
            return None
        v = arrays[0]
        axis = axes.get(name)
        if axis is None:
            if type(v) is not np.ndarray:
                return None
            if len({id(a) for a in arrays}) != 1:  # not one object: compare the values, all at once
                try:
                    same = np.array_equal(np.stack(arrays), np.broadcast_to(v, (n, *v.shape)))
                except ValueError:  # shapes differ
                    return None
                if not same:
                    return None
            batch[name] = v
            continue
        shape = v.shape
        if len(shape) <= axis or shape[axis] != 1 or list(map(_SHAPE, arrays)).count(shape) != n:
            return None
        batch[name] = v if n == 1 else stack_rows(arrays, shape, axis, dtype)
    return batch


def stack_rows(arrays: list[np.ndarray], shape: tuple[int, ...], axis: int, dtype: np.dtype[Any]) -> np.ndarray:
    """Rows of one shape and dtype (``shape[axis] == 1``) stacked along ``axis``.  When nothing but unit dims
    precede the axis, the batch is the rows' bytes one after the other: ``bytes.join`` reads each array
    through the buffer protocol in one C loop, several times faster than ``np.concatenate`` on many small
    arrays.  A row that is not C-contiguous is refused by the buffer protocol, and concatenate takes over."""
    if math.prod(shape[:axis]) == 1:
        try:
            joined = b"".join(cast("list[bytes]", arrays))
        except (TypeError, BufferError, ValueError):
            pass
        else:
            return np.frombuffer(joined, dtype=dtype).reshape(shape[:axis] + (len(arrays),) + shape[axis + 1 :])
    return np.concatenate(arrays, axis=axis)


def split_rows(
    sids: Sequence[Hashable], out: Mapping[str, np.ndarray], pick: np.ndarray | None, n: int, axes: Mapping[str, int]
) -> dict[Hashable, dict[str, np.ndarray]]:
    """Each stream's rows of the batched outputs (views, each with its batch axis of size 1)."""
    if n == 1:
        return {sids[0]: dict(out)}
    names = list(out)
    per_output: list[list[np.ndarray]] = []
    for name in names:
        value = out[name]
        axis = axes[name]
        shape = value.shape
        # row k as a view with a batch axis of size 1: a new unit axis after the batch axis, the batch
        # axis moved to the front, and list() makes the n views in one C loop
        front = (axis, *range(axis), *range(axis + 1, len(shape) + 1))
        pieces = list(value.reshape(shape[: axis + 1] + (1,) + shape[axis + 1 :]).transpose(front))
        per_output.append(pieces if pick is None else [pieces[r] for r in pick])
    if len(names) == 1:
        name = names[0]
        return {sid: {name: p} for sid, p in zip(sids, per_output[0])}
    return {sid: dict(zip(names, ps)) for sid, ps in zip(sids, zip(*per_output))}


def checked_feeds(m: SessionModel, dtypes: Mapping[str, np.dtype[Any]], sid: Hashable, feeds: Mapping[str, Any], cast: bool) -> dict[str, np.ndarray]:
    """One request's feeds, each an array of its input's dtype (converted when ``cast``), or a FeedError."""
    if feeds.keys() == dtypes.keys():  # the common case: every plain input, arrays of the right dtype
        for name, value in feeds.items():
            if type(value) is not np.ndarray or value.dtype != dtypes[name]:
                break
        else:
            return feeds if type(feeds) is dict else dict(feeds)
    out: dict[str, np.ndarray] = {}
    for name, value in feeds.items():
        spec = m.inputs.get(name)
        if spec is None or name in m.slot_by_input:
            what = "a state input (the pool keeps it)" if spec is not None else "not an input"
            raise FeedError(f"{m.label}: session {sid!r} feeds {name!r}, {what}; inputs are {m.plain_inputs}")
        out[name] = feed_array(m.label, spec, value, cast)
    missing = [n for n in m.required_inputs if n not in out]
    if missing:
        raise FeedError(f"{m.label}: session {sid!r} is missing input(s) {missing}")
    return out


def groups(feeds: list[dict[str, np.ndarray]], axes: Mapping[str, int | None]) -> list[list[int]]:
    """Request indices that can share one call: equal shared inputs, equal row shapes.  A FeedError, before anything
    runs, for a request whose batched input has no batch axis at all (fewer dims): stacking it with others would
    be numpy's AxisError (or "zero-dimensional arrays cannot be concatenated"), naming neither request nor input."""
    if len(feeds) == 1:
        return [[0]]
    for i, f in enumerate(feeds):
        for name, a in f.items():
            axis = axes.get(name)
            if axis is not None and a.ndim <= axis:
                raise FeedError(f"request {i} of the tick feeds {name!r} of shape {a.shape}: it has no batch axis {axis} to stack the tick's rows along")
    if uniform(feeds, axes):
        return [list(range(len(feeds)))]
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for i, f in enumerate(feeds):
        key = tuple(
            (n, a.dtype.str, a.shape) if axes.get(n) is not None else (n, a.dtype.str, a.shape, a.tobytes())
            for n, a in f.items()
        )
        by_key.setdefault(key, []).append(i)
    return list(by_key.values())


def uniform(feeds: list[dict[str, np.ndarray]], axes: Mapping[str, int | None]) -> bool:
    """Every request has the first one's names, shapes and dtypes, and its shared inputs' values (the usual tick)."""
    first = feeds[0]
    names = tuple(first)
    shapes = [(a.shape, a.dtype) for a in first.values()]
    shared = [(n, a) for n, a in first.items() if axes.get(n) is None]
    if not axes and len(feeds) > 1:
        return False  # no batch layout: nothing may share a call
    for f in feeds[1:]:
        if tuple(f) != names:
            return False
        for (shape, dtype), a in zip(shapes, f.values()):
            if a.shape != shape or a.dtype != dtype:
                return False
        for n, a in shared:
            b = f[n]
            if b is not a and not np.array_equal(a, b):
                return False
    return True