"""A tick of every placed stream with the arenas bound whole, and the plan that repeats it.

:class:`WholeTick` is a :class:`~rnnir.runtime.binding.PingPong` (the same two-binding double buffer a
StatefulSession's steady call is made of) over the pool's arenas: binding k reads each arena's buffer k and
writes buffer 1-k, so no state row passes through numpy.  :class:`SteadyTick` remembers the last such tick
so that the next one of the same streams skips the pool's bookkeeping.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from rnnir.runtime.binding import COPY_FEED_BYTES, PingPong
from rnnir.runtime.ort import make_binding
from rnnir.serving.pool.arena import Arena

__all__ = ["SteadyTick", "WholeTick"]


class WholeTick:
    """A tick of every placed stream, the arenas bound whole: a :class:`PingPong` pre-bound once for a row
    count, feed signature and output list; a call binds only its plain inputs, runs, and swaps ``cur``/``spare``
    of every arena.  Plain outputs land in pre-bound buffers and the caller gets one copy of each (a fresh
    array per tick)."""

    __slots__ = ("key", "pingpong", "plain", "held", "feed_bufs", "arenas")

    def __init__(self, key: tuple[Any, ...], sess: Any, native: bool, arenas: Mapping[str, Arena], slots: Sequence[tuple[str, str]],
                 plain_shapes: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], feeds: Mapping[str, np.ndarray]) -> None:
        self.key = key
        bindings = [make_binding(sess, native) for _ in range(2)]
        wrap = bindings[0].wrap
        # a small feed (one stream's chunk, a sample rate) is copied into a buffer bound once: cheaper than
        # binding the caller's array every tick; a large one (a batch of many rows) is bound as it is
        overridable = bindings[0].overridable
        self.feed_bufs = {name: np.empty(a.shape, a.dtype) for name, a in feeds.items()
                          if a.nbytes <= COPY_FEED_BYTES and a.dtype.kind in "biuf" and name not in overridable}
        states: list[tuple[str, str | None, Any, Any]] = []
        held: list[np.ndarray] = []
        for state_in, state_out in slots:
            arena = arenas[state_in]
            spare = arena.spare
            if spare is None or spare.shape != arena.cur.shape:
                spare = arena.spare = np.empty_like(arena.cur)
            states.append((state_in, state_out, wrap(arena.cur), wrap(spare)))
            held += (arena.cur, spare)
        # one buffer per plain output serves both bindings: the caller gets a copy right after the run
        self.plain = [(name, np.empty(shape, dtype)) for name, (shape, dtype) in plain_shapes.items()]
        held += [buf for _, buf in self.plain] + list(self.feed_bufs.values())
        self.held = held  # the values over numpy memory do not own it: keep it alive with the bindings
        self.pingpong = PingPong(bindings, states, [(name, wrap(buf)) for name, buf in self.feed_bufs.items()],
                                 [(name, wrap(buf)) for name, buf in self.plain], raw=not any(name in overridable for name in feeds))
        self.arenas = tuple(arenas.values())  # the pool's arenas while this tick's key holds (a new set is a new gen)

    def call(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        pp = self.pingpong
        bind = pp.binders[pp.k]
        bufs = self.feed_bufs
        for name, array in batch.items():
            buf = bufs.get(name)
            if buf is not None and buf.shape == array.shape:
                buf[...] = array  # the same dtype: the tick's key holds the feeds' dtypes
            else:
                bind(name, array)  # not owned by the native binding: the caller's batch holds it during the run
        pp.run()  # a failure leaves ``cur`` untouched: the new state went to ``spare``
        for arena in self.arenas:  # spare is set for every arena when the tick is made
            arena.cur, arena.spare = arena.spare, arena.cur  # type: ignore[assignment]
        # the buffers are written again by the next tick: the caller gets copies
        plain = self.plain
        if len(plain) == 1:
            name, buf = plain[0]
            return {name: buf.copy()}
        return {name: buf.copy() for name, buf in plain}


class SteadyTick:
    """The last tick, when it bound the arenas whole with its requests in row order: its ids, requested outputs,
    the bound tick it ran and each batched input's shape.  A tick of the same ids and outputs, with no join or
    leave since (``gen`` still the pool's), needs neither the streams looked up nor the layout, row order or
    output shapes worked out again: only its feeds checked and stacked.  The pool drops the plan whenever it
    binds new buffers (another output list or chunk shape): the plan's bindings would then be out of their
    ping-pong parity with the arenas."""

    __slots__ = ("gen", "ids", "outputs", "wanted", "tick", "shapes")

    def __init__(self, gen: int, ids: tuple[Hashable, ...], outputs: tuple[str, ...] | None, wanted: Sequence[str], tick: WholeTick,
                 batch: Mapping[str, np.ndarray]) -> None:
        self.gen = gen
        self.ids = ids
        self.outputs = outputs
        self.wanted = tuple(wanted)
        self.tick = tick
        self.shapes = tuple((name, a.shape, a.dtype) for name, a in batch.items())
