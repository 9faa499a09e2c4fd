"""The streams of a pool and their rows: who is open, which row of every arena holds whose state, and the
states and contexts waiting for a row.

Every state input (and every kept input context) has one persistent batched buffer, an *arena*
(:mod:`rnnir.serving.pool.arena`), with one row per open stream along the model's batch axis.  Rows stay put
while the set of streams is unchanged; a join or leave marks the layout stale, and before the next call the
remaining streams move up in order and newcomers take the rows after them: one ``np.take`` per arena (a *row
map*), whatever the number of changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rnnir.errors import RnnirError, StateError
from rnnir.runtime.context import InputContext
from rnnir.runtime.session import StatefulSession
from rnnir.runtime.spec import SessionModel
from rnnir.serving.pool.arena import Arena, row_of
from rnnir.serving.pool.layout import BatchLayout

__all__ = ["PoolStats", "StreamTable", "UnknownSessionError"]


class UnknownSessionError(RnnirError, KeyError):
    """A call names a session id the pool does not hold (never opened, closed, or expired)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


@dataclass(slots=True)  # slots: the steady tick's four counters are its last Python before it returns
class PoolStats:
    """onnxruntime calls made, stream-calls served, the largest batch so far, streams expired, the calls that
    bound the state buffers whole (every open stream in one call: no row gathered or scattered), and the ticks
    the steady plan served (the same streams and outputs as the tick before: nothing looked up again)."""

    ort_calls: int = 0
    rows: int = 0
    largest_batch: int = 0
    expired: int = 0
    whole_calls: int = 0
    steady_ticks: int = 0

    def steady_tick(self, rows: int) -> None:
        """A tick the steady plan served: one call binding the state buffers whole, of ``rows`` stream-calls (its
        batch size counted in ``largest_batch`` when the plan was made)."""
        self.ort_calls += 1
        self.rows += rows
        self.whole_calls += 1
        self.steady_ticks += 1


class Stream:
    __slots__ = ("sid", "row", "last_used", "alive")

    def __init__(self, sid: Hashable, now: float) -> None:
        self.sid = sid
        self.row = -1  # no row yet: placed by the next _settle (one vectorised row map for every change)
        self.last_used = now  # read while the stream has no row; afterwards the pool's per-row array holds it
        self.alive = True


class StreamTable:
    """The streams, rows and arenas of a :class:`~rnnir.serving.pool.SessionPool` (its base class; the pool's
    constructor and ``_install`` set every attribute declared here)."""

    _lock: threading.Lock
    _model: SessionModel
    _solo: StatefulSession
    _contexts: tuple[InputContext, ...]
    _streams: dict[Hashable, Stream]
    _placed: list[Stream]
    _last_used: np.ndarray
    _dirty: bool
    _gen: int
    _tick_cache: tuple[tuple[Hashable, ...], int, list[Stream], np.ndarray] | None
    _rows_in_order: np.ndarray | None
    _arenas: dict[str, Arena] | None
    _ctx_arenas: dict[str, Arena] | None
    _pending: dict[Hashable, dict[str, np.ndarray]]
    _pending_ctx: dict[Hashable, dict[str, np.ndarray]]
    layout: BatchLayout | None
    batching: str
    idle_timeout: float | None
    clock: Callable[[], float]
    stats: PoolStats

    # -- what the pool holds -----------------------------------------------------------------
    @property
    def label(self) -> str:
        return self._model.label

    @property
    def fingerprint(self) -> str:
        return self._model.fingerprint

    @property
    def state_version(self) -> str | None:
        return self._model.state_version

    @property
    def sessions(self) -> list[Hashable]:
        """Open session ids: least recently used first when ``idle_timeout`` is set, else in order of joining."""
        with self._lock:
            if self.idle_timeout is None:
                return list(self._streams)
            streams = list(self._streams.values())
            used = [self._used(s) for s in streams]
            return [streams[k].sid for k in sorted(range(len(streams)), key=used.__getitem__)]

    def _used(self, stream: Stream) -> float:
        return float(self._last_used[stream.row]) if stream.row >= 0 else stream.last_used

    def __len__(self) -> int:
        return len(self._streams)

    def __contains__(self, sid: object) -> bool:
        return sid in self._streams

    # -- joining, leaving, resetting -----------------------------------------------------------
    def open(self, sid: Hashable) -> None:
        """A new stream, starting from the initial state.  Opening an open id is an error (reset() restarts one)."""
        with self._lock:
            self._open(sid, self.clock())

    def _open(self, sid: Hashable, now: float) -> Stream:
        if sid in self._streams:
            raise StateError(f"session {sid!r} is already open; reset({sid!r}) restarts it")
        stream = Stream(sid, now)
        self._streams[sid] = stream
        self._dirty = True
        self._gen += 1
        return stream

    def _all_arenas(self) -> list[Arena]:
        return list((self._arenas or {}).values()) + list((self._ctx_arenas or {}).values())

    def _check_rows(self, state: Mapping[str, np.ndarray], where: str) -> None:
        """``state`` is one stream's row of every arena (or, before the arenas exist, one row along each batch
        axis): checked before the pool is touched, since a state left pending that does not fit broke the next
        run of every other stream and was dropped."""
        layout = None if self.batching else self.layout
        for name, value in state.items():
            arena = None if self._arenas is None else self._arenas.get(name)
            if arena is not None:
                row_of(value, arena.initial.shape, f"{where}: state {name!r}")
                continue
            axis = None if layout is None else layout.states.get(name)
            if axis is not None and value.ndim > axis and value.shape[axis] != 1:
                raise StateError(f"{where}: state {name!r} has shape {value.shape}: {value.shape[axis]} rows along its batch axis {axis}, "
                                 "but a pool stream's state is one row")

    def _put_state(self, stream: Stream, state: Mapping[str, np.ndarray] | None) -> None:
        """One stream's state: ``state``, or the initial state when None; kept pending until it has a row."""
        self._pending.pop(stream.sid, None)
        if self._arenas is None or stream.row < 0:
            if state is not None:
                self._pending[stream.sid] = dict(state)
            return
        for name, arena in self._arenas.items():
            if state is None:
                arena.put(stream.row, arena.initial)
            else:
                arena.put(stream.row, row_of(state[name], arena.initial.shape, f"session {stream.sid!r}, state {name!r}"))

    def _put_context(self, stream: Stream, context: Mapping[str, np.ndarray] | None) -> None:
        """One stream's kept context: ``context`` (input name -> tail), or none (zeros) when None."""
        self._pending_ctx.pop(stream.sid, None)
        if self._ctx_arenas is None or stream.row < 0:
            if context:
                self._pending_ctx[stream.sid] = dict(context)
            return
        for name, arena in self._ctx_arenas.items():
            value = None if context is None else context.get(name)
            arena.put(stream.row, arena.initial if value is None else row_of(value, arena.initial.shape, f"session {stream.sid!r}, context {name!r}"))

    def _install_pending(self) -> None:
        """States and contexts waiting for a row (or for the arenas) go in once both exist."""
        if self._pending and self._arenas is not None:
            for sid, state in list(self._pending.items()):
                stream = self._streams.get(sid)
                if stream is None:
                    del self._pending[sid]
                elif stream.row >= 0:
                    self._put_state(stream, state)
        if self._pending_ctx and self._ctx_arenas is not None:
            for sid, context in list(self._pending_ctx.items()):
                stream = self._streams.get(sid)
                if stream is None:
                    del self._pending_ctx[sid]
                elif stream.row >= 0:
                    self._put_context(stream, context)

    def close(self, sid: Hashable) -> None:
        """The stream leaves; the rows are compacted (one vectorised row map) before the next call."""
        with self._lock:
            self._leave(self._get(sid))

    def _leave(self, stream: Stream) -> None:
        del self._streams[stream.sid]
        stream.alive = False
        self._pending.pop(stream.sid, None)
        self._pending_ctx.pop(stream.sid, None)
        self._dirty = True
        self._gen += 1

    def reset(self, sid: Hashable) -> None:
        """This stream (and its kept context) back to the initial state; every other stream untouched."""
        with self._lock:
            stream = self._get(sid)
            self._put_state(stream, None)
            self._put_context(stream, None)

    def expire(self) -> list[Hashable]:
        """Close the streams idle for more than ``idle_timeout``; returns their ids (least recently used first)."""
        with self._lock:
            return self._expire(self.clock())

    def _expire(self, now: float) -> list[Hashable]:
        if self.idle_timeout is None or not self._streams:
            return []
        idle = np.flatnonzero(now - self._last_used > self.idle_timeout)  # every placed row at once
        gone = [self._placed[r] for r in idle if self._placed[r].alive]
        if self._dirty:  # streams without a row yet (rare: joined since the last call)
            gone += [s for s in self._streams.values() if s.row < 0 and now - s.last_used > self.idle_timeout]
        if not gone:
            return []
        gone.sort(key=self._used)
        for stream in gone:
            self._leave(stream)
        self.stats.expired += len(gone)
        return [s.sid for s in gone]

    def _get(self, sid: Hashable) -> Stream:
        stream = self._streams.get(sid)
        if stream is None:
            raise UnknownSessionError(f"{self.label}: no open session {sid!r} (never opened, closed, or expired after {self.idle_timeout} s idle)")
        return stream

    def _settle(self) -> None:
        """Lay the rows out again after joins and leaves: the remaining streams keep their order and move up
        (one ``np.take`` per arena, whatever the number of changes), newcomers take the rows after them."""
        if not self._dirty:
            return
        survivors = [s for s in self._placed if s.alive]
        newcomers = [s for s in self._streams.values() if s.row < 0]
        rowmap = np.fromiter((s.row for s in survivors), dtype=np.intp, count=len(survivors))
        placed = survivors + newcomers
        rows = len(placed)
        last_used = np.empty(rows)
        last_used[: len(survivors)] = self._last_used[rowmap]
        last_used[len(survivors) :] = [s.last_used for s in newcomers]
        rowmap = self._row_map(rowmap)
        for arena in self._all_arenas():
            arena.relayout(rowmap, rows)
        for r, stream in enumerate(placed):
            stream.row = r
        self._placed = placed
        self._last_used = last_used
        self._dirty = False
        self._gen += 1
        self._install_pending()

    def state(self, sid: Hashable) -> dict[str, np.ndarray]:
        """A copy of one stream's state, shaped as a solo session's (batch of 1)."""
        with self._lock:
            stream = self._get(sid)
            if self._arenas is None or stream.row < 0:
                pending = self._pending.get(sid)
                if pending is not None:
                    return {k: np.array(v) for k, v in pending.items()}
                return self._solo.initial_state(batch=1)  # one stream is one row
            return {name: arena.row(stream.row) for name, arena in self._arenas.items()}

    def _streams_of(self, ids: tuple[Hashable, ...], open_missing: bool, now: float) -> tuple[list[Stream], np.ndarray]:
        """The streams of a tick (joining the missing ones when asked) and their rows, the rows laid out.
        The same ids as the last tick, with no join or leave since, reuse its lists (the usual serving loop)."""
        cache = self._tick_cache
        if cache is not None and cache[1] == self._gen and cache[0] == ids:
            return cache[2], cache[3]
        get = self._streams.get
        streams: list[Stream] = []
        for sid in ids:
            stream = get(sid)
            if stream is None:
                if not open_missing:
                    self._get(sid)  # raises
                stream = self._open(sid, now)
            streams.append(stream)
        self._settle()
        rows = self._rows_of(streams)
        self._tick_cache = (ids, self._gen, streams, rows)
        self._rows_in_order = rows if np.array_equal(rows, np.arange(len(rows))) else None
        return streams, rows

    # Where rows could cross between streams: one place each, so tests can check that a shifted row is caught.
    def _rows_of(self, streams: Sequence[Stream]) -> np.ndarray:
        """Each stream's row, in the streams' order."""
        return np.fromiter((s.row for s in streams), dtype=np.intp, count=len(streams))

    def _row_map(self, rowmap: np.ndarray) -> np.ndarray:
        """The old row of each remaining stream, in its new row order (see _settle)."""
        return rowmap

    def _gather(self, arena: Arena, rows: np.ndarray) -> np.ndarray:
        return arena.gather(rows)

    def _scatter(self, arena: Arena, rows: np.ndarray, value: np.ndarray) -> None:
        arena.scatter(rows, value)

    # -- arenas and the probe ----------------------------------------------------------------
    def _build_arenas(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Row shapes from the first call's feeds (one row), then every placed stream's row."""
        initial = self._solo.initial_state(self._model_feeds(feeds))
        layout = self.layout
        rows = len(self._placed)
        arenas: dict[str, Arena] = {}
        for name, value in initial.items():
            axis = None if layout is None or self.batching else layout.states[name]
            if axis is not None and value.shape[axis] != 1:
                raise StateError(f"{self.label}: the initial state {name!r} has {value.shape[axis]} rows along its batch axis {axis}; feed one row per stream")
            arenas[name] = Arena(axis, np.ascontiguousarray(value), rows)
        if self._ctx_arenas is None and self._contexts:
            ctx: dict[str, Arena] = {}
            for c in self._contexts:
                chunk = feeds.get(c.input)
                if chunk is None:
                    continue
                axis = None if layout is None or self.batching else layout.inputs.get(c.input)
                c_axis = c.axis if c.axis is not None else chunk.ndim - 1
                shape = list(chunk.shape)
                shape[c_axis] = c.size
                dtype = self._model.inputs[c.input].dtype or chunk.dtype
                ctx[c.input] = Arena(axis, np.zeros(shape, dtype=dtype), rows)
            self._ctx_arenas = ctx
        self._arenas = arenas
        self._gen += 1
        self._install_pending()

    def _model_feeds(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One row's feeds as the model sees them (with a zero context prepended), to resolve state shapes."""
        out = dict(feeds)
        for c in self._contexts:
            if c.input in out:
                chunk = out[c.input]
                axis = c.axis if c.axis is not None else chunk.ndim - 1
                shape = list(chunk.shape)
                shape[axis] = c.size
                out[c.input] = np.concatenate([np.zeros(shape, chunk.dtype), chunk], axis=axis)
        return out