"""A tick of every placed stream with the arenas bound whole, and the plan that repeats it.

:class:`WholeTick` is a :class:`~rnnir.runtime.binding.PingPong` (the same two-binding double buffer a
StatefulSession's steady call is made of) over the pool's arenas: binding k reads each arena's buffer k and
writes buffer 1-k, so no state row passes through numpy.  :class:`SteadyTick` remembers the last such tick
so that the next one of the same streams skips the pool's bookkeeping.

The plain outputs are written into buffers of the tick's own (one set per binding) and handed out as views,
without a copy.  A buffer is written again only when nothing outside the tick holds it (every view handed
out holds its base, so Python's reference count says whether one is still alive); binding k gets new buffers
before a run otherwise.  An output handed out never changes afterwards: it is the same as handing out a copy
and the allocator reusing the memory once the copy is dropped.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from rnnir.runtime.binding import COPY_FEED_BYTES, PingPong
from rnnir.runtime.ort import make_binding
from rnnir.serving.pool.arena import Arena
from rnnir.serving.pool.layout import BatchLayout
from rnnir.serving.pool.streams import PoolStats

__all__ = ["SteadyTick", "TickContext", "WholeTick"]

_KIND = operator.attrgetter("dtype", "shape")
_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")
_NDARRAY = np.ndarray
_REFS = sys.getrefcount


def _refs_in_loop(buffers: list[np.ndarray]) -> list[int]:
    """Each buffer's reference count, read as :meth:`WholeTick.run` reads it: a loop variable passed to getrefcount."""
    counts = []
    for buf in buffers:
        counts.append(_REFS(buf))
    return counts


# the references to a buffer held by nothing but its list, counted the way ``WholeTick.run`` counts them (the
# list's, the loop variable's, getrefcount's argument): measured, not assumed, since interpreters count borrowed
# ones apart (a plain loop: for the one to three outputs of a tick, faster than a ``map`` in C)
_ALONE = _refs_in_loop([np.empty(0)])[0]
# when the steady plan joins a tick's rows straight into a bound buffer, inputs up to this size are buffered:
# one copy of the joined rows beats binding a new array every tick
JOIN_BYTES = 2**20

# an input with a kept context: its axis (from the front), the kept size and the arena that keeps every stream's context
TickContext = tuple[int, int, Arena]
_NO_CONTEXTS: Mapping[str, TickContext] = MappingProxyType({})


class WholeTick:
    """A tick of every placed stream, the arenas bound whole: a :class:`PingPong` pre-bound once for a row
    count, feed signature and output list; a call binds only its plain inputs, runs, and swaps ``cur``/``spare``
    of every arena.  Plain outputs land in the tick's buffers of the binding that ran (``outs[k]``); the caller
    gets views of them (see the module docstring)."""

    __slots__ = ("key", "pingpong", "names", "outs", "bindings", "held", "feed_bufs", "arenas")

    def __init__(self, key: tuple[Any, ...], sess: Any, native: bool, arenas: Mapping[str, Arena], slots: Sequence[tuple[str, str]],
                 plain_shapes: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], feeds: Mapping[str, np.ndarray],
                 copy_limit: int = COPY_FEED_BYTES) -> None:
        self.key = key
        bindings = [make_binding(sess, native) for _ in range(2)]
        wrap = bindings[0].wrap
        # a feed up to ``copy_limit`` bytes (one stream's chunk, a sample rate; a tick's rows when the steady
        # plan joins them straight into it) is copied into a buffer bound once: cheaper than binding the
        # caller's array every tick; a larger one is bound as it is
        overridable = bindings[0].overridable
        self.feed_bufs = {name: np.empty(a.shape, a.dtype) for name, a in feeds.items()
                          if a.nbytes <= copy_limit and a.dtype.kind in "biuf" and name not in overridable}
        states: list[tuple[str, str | None, Any, Any]] = []
        held: list[np.ndarray] = []
        for state_in, state_out in slots:
            arena = arenas[state_in]
            spare = arena.spare
            if spare is None or spare.shape != arena.cur.shape:
                spare = arena.spare = np.empty_like(arena.cur)
            states.append((state_in, state_out, wrap(arena.cur), wrap(spare)))
            held += (arena.cur, spare)
        self.names = list(plain_shapes)
        # one buffer per plain output and binding (held by nothing else: see unshared); binding 1's replace
        # binding 0's, which PingPong binds on both
        self.outs = [[np.empty(shape, dtype) for shape, dtype in plain_shapes.values()] for _ in range(2)]
        self.held = held + list(self.feed_bufs.values())  # the values over numpy memory do not own it: keep it alive with the bindings
        self.pingpong = PingPong(bindings, states, [(name, wrap(buf)) for name, buf in self.feed_bufs.items()],
                                 list(zip(self.names, map(wrap, self.outs[0]))), raw=not any(name in overridable for name in feeds))
        self.bindings = bindings
        for name, buf in zip(self.names, self.outs[1]):
            bindings[1].bind_output_into(name, wrap(buf))
        self.arenas = tuple(arenas.values())  # the pool's arenas while this tick's key holds (a new set is a new gen)

    def run(self) -> list[np.ndarray]:
        """Run the binding whose turn it is (its plain inputs bound or copied already) and swap ``cur`` and
        ``spare`` of every arena; returns the plain output buffers it wrote.  Those are new buffers when a view
        of the binding's last ones is still alive (a view handed out holds its base).  A failing run raises
        what onnxruntime raised and leaves the arenas as they were: the new state went to ``spare``."""
        pp = self.pingpong
        k = pp.k
        outs = self.outs[k]
        for buf in outs:
            if _REFS(buf) != _ALONE:
                outs = self.renew(k)
                break
        pp.runs[k]()
        pp.k = k ^ 1
        for arena in self.arenas:  # spare is set for every arena when the tick is made
            arena.cur, arena.spare = arena.spare, arena.cur  # type: ignore[assignment]
        return outs

    def renew(self, k: int) -> list[np.ndarray]:
        """New plain output buffers for binding ``k`` (the old ones stay with the views that hold them)."""
        binding = self.bindings[k]
        outs = self.outs[k] = [np.empty_like(buf) for buf in self.outs[k]]
        for name, buf in zip(self.names, outs):
            binding.bind_output_into(name, binding.wrap(buf))
        return outs

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
        outs = self.run()
        return dict(zip(self.names, [buf[...] for buf in outs]))  # views: the buffers are not written again while one lives


class SteadyTick:
    """The last tick, when it bound the arenas whole with its requests in row order: its ids, requested outputs,
    the bound tick it ran and each batched input's shape.  A tick of the same ids and outputs, with no join or
    leave since (``gen`` still the pool's), needs neither the streams looked up nor the layout, row order or
    output shapes worked out again: only its feeds checked and stacked.  The pool drops the plan whenever it
    binds new buffers (another output list or chunk shape): the plan's bindings would then be out of their
    ping-pong parity with the arenas.

    When every input has a buffer in the tick and only plain outputs are asked for, :meth:`call` serves the
    whole tick itself (``lean``): each batched input's rows are checked (names, dtype, shape: one C loop per
    check over the requests) and joined straight into the bound buffer (an input with a kept context: into
    the part after the context, the context copied from its arena in front of them, and the new context kept
    once the run succeeded), and each plain output is split into one view per stream.  A plan of one input
    and one output (no kept context; rows-first outputs for many streams) keeps them in ``one`` (one stream)
    or ``single`` (many), and :meth:`call` makes the same checks on them without its loops.
    """

    __slots__ = ("gen", "ids", "outputs", "wanted", "tick", "shapes", "lean", "count", "rows", "joins", "shared", "ones", "contexts",
                 "splits", "stats", "single", "one")

    def __init__(self, gen: int, ids: Sequence[Hashable], outputs: tuple[str, ...] | None, wanted: Sequence[str], tick: WholeTick,
                 batch: Mapping[str, np.ndarray], layout: BatchLayout | None, stats: PoolStats,
                 contexts: Mapping[str, TickContext] = _NO_CONTEXTS) -> None:
        self.gen = gen
        self.ids = list(ids)  # compared with list(requests): a dict's keys into a list cost half what a tuple does
        self.outputs = outputs
        self.wanted = tuple(wanted)
        self.tick = tick
        self.shapes = tuple((name, a.shape, a.dtype) for name, a in batch.items())
        self.count = len(batch)
        self.rows: tuple[tuple[Callable[[Any], Any], tuple[np.dtype[Any], tuple[int, ...]], memoryview], ...] = ()
        self.joins: tuple[tuple[Callable[[Any], Any], tuple[np.dtype[Any], tuple[int, ...]], np.ndarray], ...] = ()
        self.shared: tuple[tuple[Callable[[Any], Any], tuple[np.dtype[Any], tuple[int, ...]], np.ndarray], ...] = ()
        self.ones: tuple[tuple[str, np.dtype[Any], tuple[int, ...], np.ndarray], ...] = ()
        self.contexts: tuple[tuple[np.ndarray, np.ndarray, Arena], ...] = ()
        self.splits: tuple[tuple[tuple[int, ...], tuple[int, ...] | None], ...] = ()
        self.stats = stats
        # the one batched input's row check and buffer, the one output's name and rows-first shape, when that is
        # all the plan holds (the usual model: an audio chunk in, a score out): call's shortest path
        self.single: tuple[Callable[[Any], Any], np.dtype[Any], tuple[int, ...], memoryview, str, tuple[int, ...]] | None = None
        # one stream's likewise: its id, the input's name, dtype, shape and buffer, the output's name
        self.one: tuple[Hashable, str, np.dtype[Any], tuple[int, ...], np.ndarray, str] | None = None
        self.lean = layout is not None and self._plan(batch, layout, contexts)

    def _plan(self, batch: Mapping[str, np.ndarray], layout: BatchLayout, contexts: Mapping[str, TickContext]) -> bool:
        """Prepare the lean call; False when a piece of the tick does not fit it."""
        tick = self.tick
        n = len(self.ids)
        if tick.names != list(self.wanted):
            return False  # a state output asked for, or the outputs in another order
        bufs = tick.feed_bufs
        if any(name not in bufs for name in batch):
            return False
        # an input with a kept context: its chunk goes after the context in the bound buffer; the context is
        # copied in front of it before the run and the buffer's tail kept after it
        into: dict[str, np.ndarray] = {}
        kept: list[tuple[np.ndarray, np.ndarray, Arena]] = []
        for name, (along, size, arena) in contexts.items():  # the pool's contexts of the inputs in ``batch``
            buf = bufs[name]
            head = (slice(None),) * along
            into[name] = buf[head + (slice(size, None),)]
            kept.append((buf[head + (slice(0, size),)], buf[head + (slice(buf.shape[along] - size, None),)], arena))
        if n == 1:
            self.ones = tuple((name, a.dtype, a.shape, into.get(name, bufs[name])) for name, a in batch.items())
            self.contexts = tuple(kept)
            if len(self.ones) == 1 and not kept and len(self.wanted) == 1:
                name, dtype, shape, buf = self.ones[0]
                self.one = (self.ids[0], name, dtype, shape, buf, self.wanted[0])
            return True
        rows = []
        joins = []
        shared: list[tuple[Callable[[Any], Any], tuple[np.dtype[Any], tuple[int, ...]], np.ndarray]] = []
        for name, a in batch.items():
            axis = layout.inputs.get(name)
            buf = bufs[name]
            if axis is None:
                if name in into:
                    return False
                shared.append((operator.itemgetter(name), (a.dtype, a.shape), buf))
                continue
            if math.prod(a.shape[:axis]) != 1 or not buf.flags.c_contiguous:
                return False  # the rows' bytes are not the batch's bytes one after the other
            row = (a.dtype, a.shape[:axis] + (1,) + a.shape[axis + 1 :])
            target = into.get(name)
            if target is None:
                flat: Any = buf.reshape(-1).view(np.uint8)
                rows.append((operator.itemgetter(name), row, memoryview(flat)))
            else:
                joins.append((operator.itemgetter(name), row, target))
        splits: list[tuple[tuple[int, ...], tuple[int, ...] | None]] = []
        for name, buf in zip(tick.names, tick.outs[0]):
            axis = layout.outputs.get(name)
            if axis is None:
                return False
            shape = buf.shape
            if math.prod(shape[:axis]) == 1:  # row k is bytes k of n: a plain reshape puts the rows first
                splits.append(((n,) + shape[:axis] + (1,) + shape[axis + 1 :], None))
            else:  # a unit axis after the batch axis, then the batch axis moved to the front
                splits.append((shape[: axis + 1] + (1,) + shape[axis + 1 :], (axis, *range(axis), *range(axis + 1, len(shape) + 1))))
        self.rows, self.joins, self.shared, self.splits, self.contexts = tuple(rows), tuple(joins), tuple(shared), tuple(splits), tuple(kept)
        if len(rows) == 1 and not joins and not shared and len(splits) == 1 and splits[0][1] is None:  # no join: no kept context
            getter, (dtype, one_row), into_bytes = self.rows[0]
            self.single = (getter, dtype, one_row, into_bytes, self.wanted[0], splits[0][0])
        return True

    def call(self, requests: Mapping[Hashable, Mapping[str, Any]]) -> dict[Hashable, dict[str, np.ndarray]] | None:
        """The lean tick (see the class docstring), or None with nothing run when a request differs from the
        plan's; a failing run raises (the state went to the spare buffers, no context was kept: the pool reruns
        the tick)."""
        ids = self.ids
        n = len(ids)
        tick = self.tick
        one = self.one
        if one is not None:
            # the checks below for one stream with one input and one output, without their loops (a loop's own
            # Python is ~2% of a one-stream call: bench/pool_floor.py --one)
            sid, name, dtype, shape, buf, out_name = one
            if len(requests) != 1:
                return None
            feeds = requests.get(sid)
            if type(feeds) is not dict or len(feeds) != 1:
                return None
            a = feeds.get(name)
            if type(a) is not _NDARRAY or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                return None
            buf[...] = a
            outs = tick.run()
            self.stats.steady_tick(1)
            return {sid: {out_name: outs[0][...]}}
        single = self.single
        if single is not None:
            # the checks and the split below for one batched input and one output, without their loops: the
            # loops' own Python costs a 64-stream tick ~1% (measured: bench/pool_floor.py)
            getter, dtype, row, flat, name, shape = single
            if list(requests) != ids:
                return None
            listed = list(requests.values())
            if sum(map(len, listed)) != n:  # one name each, looked up next
                return None
            try:
                arrays = list(map(getter, listed))
                if list(map(_DTYPE, arrays)).count(dtype) != n or list(map(_SHAPE, arrays)).count(row) != n:
                    return None
                flat[:] = b"".join(arrays)
            except (KeyError, AttributeError, TypeError, ValueError, BufferError):
                return None  # the general path checks again, and reports what is wrong
            outs = tick.run()
            self.stats.steady_tick(n)
            return dict(zip(ids, [{name: p} for p in outs[0].reshape(shape)]))
        if n == 1:
            if len(requests) != 1:
                return None
            feeds = requests.get(ids[0])
            if type(feeds) is not dict or len(feeds) != self.count:
                return None
            for name, dtype, shape, buf in self.ones:
                a = feeds.get(name)
                if type(a) is not _NDARRAY or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                    return None
                buf[...] = a
        else:
            if list(requests) != ids:
                return None
            listed = list(requests.values())
            # map, list.count and sum run the per-request checks in C: a generator per check costs more than
            # the rest of a 64-stream tick's Python.  Every name is looked up below, so each request holds at
            # least the plan's names, and the sizes' sum says that none holds another
            if sum(map(len, listed)) != n * self.count:
                return None
            try:
                for getter, (dtype, row), target in self.rows:
                    arrays = list(map(getter, listed))
                    # dtype and shape apart: the dtype is the array's own object, a (dtype, shape) pair a tuple more per row
                    if list(map(_DTYPE, arrays)).count(dtype) != n or list(map(_SHAPE, arrays)).count(row) != n:
                        return None
                    target[:] = b"".join(arrays)  # a row that is not C-contiguous is refused (BufferError)
                for getter, (dtype, row), part in self.joins:
                    arrays = list(map(getter, listed))
                    if list(map(_DTYPE, arrays)).count(dtype) != n or list(map(_SHAPE, arrays)).count(row) != n:
                        return None
                    part[...] = np.frombuffer(b"".join(arrays), dtype).reshape(part.shape)
                for getter, kind, buf in self.shared:
                    arrays = list(map(getter, listed))
                    if list(map(_KIND, arrays)).count(kind) != n:  # every request's value an array of the input's dtype and shape
                        return None
                    v = arrays[0]
                    if arrays.count(v) != n:  # the same object (or an equal value) in every request, as usual
                        return None
                    buf[...] = v
            except (KeyError, AttributeError, TypeError, ValueError, BufferError):
                return None  # the general path checks again, and reports what is wrong
        contexts = self.contexts
        if contexts:
            for before, _, arena in contexts:
                before[...] = arena.cur
        outs = tick.run()  # a failure leaves the arenas as they were: the new state went to ``spare``
        if contexts:
            for _, tail, arena in contexts:
                arena.cur[...] = tail
        self.stats.steady_tick(n)
        # views of the buffers the run wrote: they are not written again while one of these lives
        if n == 1:
            if len(outs) == 1:
                return {ids[0]: {self.wanted[0]: outs[0][...]}}
            return {ids[0]: dict(zip(self.wanted, [buf[...] for buf in outs]))}
        per_output = []
        for buf, (shape, front) in zip(outs, self.splits):
            out = buf.reshape(shape)
            per_output.append(out if front is None else out.transpose(front))  # its rows, iterated once below
        if len(per_output) == 1:
            name = self.wanted[0]
            return dict(zip(ids, [{name: p} for p in per_output[0]]))
        names = self.wanted
        return dict(zip(ids, [dict(zip(names, ps)) for ps in zip(*per_output)]))
