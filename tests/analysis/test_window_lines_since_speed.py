"""Sliding windows read off a written-back cache line by line (rnnir.analysis.elements ``_window_of``, rewritten by
the lint-speed change to parse one line and check the rest against it): caches made by hand on every axis of ranks
1 to 3, with one to three windows and new values of fewer axes, are read back as made; changing any one element
but the first (to a stale frame, a frame of another line, another new frame, an id of nothing) is no window."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np

from rnnir.analysis import elements
from rnnir.analysis.intarray import IntArray
from rnnir.analysis.statekinds import END, Cut


def _make(rng: random.Random):
    rank = rng.choice([1, 2, 2, 3, 3])
    axis = rng.randrange(rank)
    segs = [(rng.randint(1, 3), rng.randint(1, 3)) for _ in range(rng.randint(1, 3))]
    n = sum(k + s for k, s in segs)
    shape = tuple(n if q == axis else rng.randint(1, 3) for q in range(rank))
    ids = elements._Ids(None)
    old = ids.block(("slot", "c"), shape, slot="c")
    news = []
    for i, (_k, s) in enumerate(segs):
        lead = rng.randint(0, axis)  # the new value has the slot's last axes
        nshape = list(shape[lead:])
        nshape[axis - lead] = s + rng.randint(0, 2)  # its newest s frames are written
        news.append((ids.block(("value", str(i)), tuple(nshape)), lead))
    flat = []
    for coords in np.ndindex(*shape):
        t, p = coords[axis], 0
        for (k, s), (block, lead) in zip(segs, news):
            if t < p + k:  # an old frame, s places toward the past
                src = list(coords)
                src[axis] = t + s
                flat.append(old.base + int(np.ravel_multi_index(src, shape)))
                break
            if t < p + k + s:  # the newest s frames of the new value, in order
                place = list(coords[lead:])
                place[axis - lead] = block.shape[axis - lead] - s + (t - p - k)
                flat.append(block.base + int(np.ravel_multi_index(place, block.shape)))
                break
            p += k + s
    return ids, old, news, shape, axis, segs, IntArray(shape, flat)


def _window(ids, out, shape):
    return elements._window_of(ids, SimpleNamespace(name="c"), shape, out, SimpleNamespace(producer=None, name="c_new"))


def _replacements(rng, ids, old, shape, axis, out, at):
    """Ids that cannot stand at flat position ``at``: a stale frame (not moved), a frame of the next line along the
    axis, any other old frame, another frame of the same new value, the id of nothing (-1, past every block)."""
    coords = list(np.unravel_index(at, shape))
    cands = [old.base + at, -1, ids.next, old.base + rng.randrange(int(np.prod(shape)))]
    step = int(np.prod(shape[axis + 1 :]))  # past the line's end: a frame of the next line, when there is one
    if at + (shape[axis] - coords[axis]) * step < int(np.prod(shape)):
        cands.append(old.base + at + (shape[axis] - coords[axis]) * step)
    owner = ids.owner(out.flat[at])
    if owner is not None and owner[0].slot is None:  # a new frame: another frame of its own value (the newest frame
        block = owner[0]  # of another value may stand in it: each window on each line takes any value's frames)
        cands.append(block.base + rng.randrange(int(np.prod(block.shape))))
    return [c for c in cands if c != out.flat[at]]


def test_windows_made_by_hand_are_read_back_and_one_changed_element_breaks_them():
    rng = random.Random(28)
    made = broken = 0
    for _ in range(150):
        ids, old, news, shape, axis, segs, out = _make(rng)
        w = _window(ids, out, shape)
        layout, p = [], 0
        for k, s in segs:
            layout.append((p, k + s))
            p += k + s
        assert w is not None, (shape, axis, segs)
        shifts = {s for _, s in segs}
        want_cut = Cut(axis, -(segs[0][0] + segs[0][1]), END, 1) if len(segs) == 1 else Cut(axis, 0, END, 1)
        assert (w.slot, w.axis, w.segments, w.new_len, w.cut) == ("c", axis, tuple(layout), shifts.pop() if len(shifts) == 1 else None, want_cut)
        made += 1
        size = int(np.prod(shape))
        if size == shape[axis]:
            continue  # one line: a changed element may make another window of it
        for at in rng.sample(range(1, size), min(6, size - 1)):
            for bad in _replacements(rng, ids, old, shape, axis, out, at):
                flat = list(out.flat)
                flat[at] = bad
                assert _window(ids, IntArray(shape, flat), shape) is None, (shape, axis, segs, at, bad)
                broken += 1
    assert made == 150 and broken > 500
