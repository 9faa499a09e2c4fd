"""Many streams of one model, keyed by session id, batched into one onnxruntime call.

    from rnnir.pool import SessionPool
    pool = SessionPool("silero_vad.onnx", context={"input": 64}, idle_timeout=30.0)
    pool.open("alice"); pool.open("bob")
    out = pool.run({"alice": {"input": a, "sr": sr}, "bob": {"input": b, "sr": sr}})   # ONE ORT call, 2 rows
    out["alice"]["output"]                      # equals running alice's stream alone
    pool.reset("bob"); pool.close("alice"); pool.expire()

The anchor is Triton's sequence batcher with implicit state: the server keeps
each sequence's state, and requests of different sequences that arrive together
run as one batch.  Here the requests of one :meth:`SessionPool.run` call are
the ones that "arrive together"; a serving loop collects them and calls
``run`` once per tick.

How a batch is made
-------------------
Every state input (and every kept input context) has one persistent batched
buffer, an *arena*, with one row per open stream along the model's batch axis:
row ``r`` is the state of the stream placed at ``r``, and the arena has exactly
as many rows as there are streams.  Rows stay put while the set of streams is
unchanged; a join or leave marks the layout stale, and before the next call the
remaining streams move up in order and newcomers take the rows after them: one
``np.take`` per arena (a *row map*), whatever the number of changes.

A tick in which every open stream calls (the usual serving loop) binds the
arenas whole with ``IOBinding``: the state input reads buffer A and the state
output is written into buffer B, the next tick the reverse (ping-pong, as
``StatefulSession`` does for one stream), so no state row passes through numpy.
The requests' inputs are stacked in row order (moved there in one ``np.take``
when they arrive in another order), and each stream gets views of its rows of
the outputs.  A tick of some of the streams gathers their rows along the batch
axis (one fancy-index per state), runs, and scatters the new rows back.  Inputs
without a batch axis (silero's ``sr``) are shared by the rows of one call:
requests that differ in them, or in any input's shape, run as separate calls.

The batch axes come from the model: for each state input its one dynamic dim
(or a symbol shared with an input); for each plain input the dim sharing that
symbol, the batch axis of a recurrent op's ``X`` it feeds, or its leading
dynamic dim; inputs without dynamic dims are shared.  ``batch_axes=`` overrides
any of them.  Before the first batched call the pool **probes** the model: three
different rows run as one batch must equal the same rows run one at a time
(1e-5), which also finds each output's batch axis.  A model whose batch is
fixed (``state[2, 1, 128]``) or that fails the probe runs one stream per call
(``pool.batching`` says why): the pool stays correct, only slower.

Streams join (:meth:`open`, or ``run(..., open_missing=True)``) and leave
(:meth:`close`) at any call; :meth:`reset` puts one stream back to its initial
state; streams idle for more than ``idle_timeout`` seconds (per ``clock``, which
tests replace) are closed by :meth:`expire`, which every ``run`` calls first.
:meth:`upgrade` swaps the model under running streams, carrying their state
by the rules of :mod:`rnnir.versioning`.  :class:`Batcher` batches calls that
arrive from many threads within a short window into ticks.
"""

from __future__ import annotations

import json
import math
import operator
import os
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnxruntime as ort

from .context import ContextSpec, InputContext
from .errors import RnnirError, StateError
from .runtime import FeedError, StatefulSession, feed_array
from .statefile import STATE_FORMAT, read_state_file, write_atomically
from .versioning import StateMigrations, StateOrigin, VersionOutcome, VersionPolicy, compatible, reconcile

__all__ = ["BatchLayout", "Batcher", "PoolStats", "SessionPool", "UnknownSessionError"]

_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")
_PROBE_ROWS = 3
_PROBE_TOL = 1e-5
_COPY_FEED_BYTES = 8 * 2**10  # as StatefulSession's: a feed up to this size is copied into a buffer bound once


class UnknownSessionError(RnnirError, KeyError):
    """A call names a session id the pool does not hold (never opened, closed, or expired)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class BatchLayout:
    """Where the batch is: plain input -> axis (None: shared by every row), state input -> axis, output -> axis."""

    inputs: dict[str, int | None]
    states: dict[str, int]
    outputs: dict[str, int] = field(default_factory=dict)


@dataclass
class PoolStats:
    """onnxruntime calls made, stream-calls served, the largest batch so far, streams expired, and the
    calls that bound the state buffers whole (every open stream in one call: no row gathered or scattered)."""

    ort_calls: int = 0
    rows: int = 0
    largest_batch: int = 0
    expired: int = 0
    whole_calls: int = 0


class _Stream:
    __slots__ = ("sid", "row", "last_used", "alive")

    def __init__(self, sid: Hashable, now: float) -> None:
        self.sid = sid
        self.row = -1  # no row yet: placed by the next _settle (one vectorised row map for every change)
        self.last_used = now  # read while the stream has no row; afterwards the pool's per-row array holds it
        self.alive = True


class _Arena:
    """One state (or kept context) for every placed stream: ``cur`` holds row ``r`` of stream ``r`` along the
    batch axis, with exactly as many rows as streams are placed, so a tick of every stream binds ``cur`` whole.

    ``spare`` is the other buffer of the ping-pong: a tick of every stream reads ``cur`` and onnxruntime
    writes the new state into ``spare``; then the two swap.  ``axis`` None: the model cannot batch;
    ``cur[row]`` holds a stream's whole value.
    """

    __slots__ = ("axis", "cur", "spare", "initial", "head")

    def __init__(self, axis: int | None, initial: np.ndarray, rows: int) -> None:
        self.axis = axis
        self.initial = initial  # one stream's starting value, shaped as a solo session's (batch of 1)
        self.head = (slice(None),) * (0 if axis is None else axis)
        self.cur = self._blank(rows)
        self.spare: np.ndarray | None = None

    def _blank(self, rows: int) -> np.ndarray:
        """``rows`` rows of the initial value."""
        if self.axis is None:
            return np.repeat(self.initial[np.newaxis], rows, axis=0)
        return np.ascontiguousarray(np.repeat(self.initial, rows, axis=self.axis))

    def relayout(self, rowmap: np.ndarray, rows: int) -> None:
        """New row i holds old row ``rowmap[i]``; rows past ``len(rowmap)`` start from the initial value."""
        axis = 0 if self.axis is None else self.axis
        fresh = self._blank(rows)
        if len(rowmap):
            fresh[self.head + (slice(0, len(rowmap)),)] = np.take(self.cur, rowmap, axis=axis)
        self.cur = fresh
        self.spare = None

    def gather(self, rows: np.ndarray) -> np.ndarray:
        if self.axis is None:  # unbatched: exactly one row, stored whole
            return np.asarray(self.cur[int(rows[0])])
        return np.take(self.cur, rows, axis=self.axis)

    def scatter(self, rows: np.ndarray, value: np.ndarray) -> None:
        if self.axis is None:
            self.cur[int(rows[0])] = value
        else:
            self.cur[self.head + (rows,)] = value

    def put(self, row: int, value: np.ndarray) -> None:
        """Set one stream's value (shaped as a solo session's)."""
        if self.axis is None:
            self.cur[row] = value
        else:
            self.cur[self.head + (slice(row, row + 1),)] = value

    def row(self, row: int) -> np.ndarray:
        """A copy of one stream's value, shaped as a solo session's (batch axis of size 1)."""
        if self.axis is None:
            return np.array(self.cur[row])
        return np.array(self.cur[self.head + (slice(row, row + 1),)])


class _Native:
    """onnxruntime's pybind layer when the installed version has it (the public wrappers cost about as much
    Python per call as a small batch computes), else the documented API."""

    def __init__(self, sess: Any, native: bool = True) -> None:
        self.sess = sess
        try:
            if not native:
                raise ImportError("the documented API was asked for")
            from onnxruntime.capi import _pybind_state as C

            self.device = ort.OrtDevice.make("cpu", 0)._get_c_device()
            self.wrap: Callable[[np.ndarray], Any] = lambda a: C.OrtValue.ortvalue_from_numpy(a, self.device)
            self.new_binding: Callable[[], Any] = lambda: sess.io_binding()._iobinding
            self.runner: Callable[[Any], Callable[[], object]] = lambda b: partial(sess._sess.run_with_iobinding, b, None)
            self.native = True
        except (ImportError, AttributeError, TypeError):
            self.wrap = ort.OrtValue.ortvalue_from_numpy
            self.new_binding = sess.io_binding
            self.runner = lambda b: partial(sess.run_with_iobinding, b)
            self.native = False

    def bind_input(self, binding: Any, name: str, array: np.ndarray) -> None:
        if self.native:
            binding.bind_input(name, array)  # not referenced by the binding: the caller keeps ``array`` alive
        else:
            binding.bind_cpu_input(name, array)


class _WholeTick:
    """A tick of every placed stream, the arenas bound whole: two IOBindings with the state buffers swapped
    (binding k reads buffer k and writes buffer 1-k), pre-bound once for a row count, feed signature and
    output list; a call binds only its plain inputs, runs, and swaps ``cur``/``spare`` of every arena.
    Plain outputs land in pre-bound buffers and the caller gets one copy of each (a fresh array per tick)."""

    __slots__ = ("key", "bindings", "k", "plain", "native", "held", "feed_bufs", "bind", "runs", "arenas")

    def __init__(self, key: tuple[Any, ...], native: _Native, arenas: Mapping[str, _Arena], slots: Sequence[tuple[str, str]],
                 plain_shapes: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], feeds: Mapping[str, np.ndarray]) -> None:
        self.key = key
        self.native = native
        self.bind = native.bind_input
        self.k = 0
        # a small feed (one stream's chunk, a sample rate) is copied into a buffer bound once: cheaper than
        # binding the caller's array every tick; a large one (a batch of many rows) is bound as it is
        self.feed_bufs = {name: np.empty(a.shape, a.dtype) for name, a in feeds.items() if a.nbytes <= _COPY_FEED_BYTES and a.dtype.kind in "biuf"}
        bufs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, arena in arenas.items():
            spare = arena.spare
            if spare is None or spare.shape != arena.cur.shape:
                spare = arena.spare = np.empty_like(arena.cur)
            bufs[name] = (arena.cur, spare)
        self.held = bufs  # the pybind values do not own the numpy memory they wrap: keep it alive with the bindings
        self.plain: list[list[tuple[str, np.ndarray]]] = [[], []]
        self.bindings: list[Any] = []
        for k in (0, 1):
            b = native.new_binding()
            for state_in, state_out in slots:
                b.bind_ortvalue_input(state_in, native.wrap(bufs[state_in][k]))
                b.bind_ortvalue_output(state_out, native.wrap(bufs[state_in][1 - k]))
            for name, (shape, dtype) in plain_shapes.items():
                buf = np.empty(shape, dtype)
                b.bind_ortvalue_output(name, native.wrap(buf))
                self.plain[k].append((name, buf))
            for name, buf in self.feed_bufs.items():
                b.bind_ortvalue_input(name, native.wrap(buf))
            self.bindings.append(b)
        self.runs = [native.runner(b) for b in self.bindings]
        self.arenas = tuple(arenas.values())  # the pool's arenas while this tick's key holds (a new set is a new gen)

    def call(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        k = self.k
        b = self.bindings[k]
        bufs = self.feed_bufs
        for name, array in batch.items():
            buf = bufs.get(name)
            if buf is not None and buf.shape == array.shape:
                buf[...] = array  # the same dtype: the tick's key holds the feeds' dtypes
            else:
                self.bind(b, name, array)
        self.runs[k]()  # a failure leaves ``cur`` untouched: the new state went to ``spare``
        for arena in self.arenas:  # spare is set for every arena when the tick is made (no cast(): a call per arena)
            arena.cur, arena.spare = arena.spare, arena.cur  # type: ignore[assignment]
        plain = self.plain[k]
        self.k = k ^ 1
        # the buffers are written again two ticks later: the caller gets copies
        if len(plain) == 1:
            name, buf = plain[0]
            return {name: buf.copy()}
        return {name: buf.copy() for name, buf in plain}


class _SteadyTick:
    """The last tick, when it bound the arenas whole with its requests in row order: its ids, requested outputs,
    the bound tick it ran and each batched input's shape.  A tick of the same ids and outputs, with no join or
    leave since (``gen`` still the pool's), needs neither the streams looked up nor the layout, row order or
    output shapes worked out again: only its feeds checked and stacked.  The pool drops the plan whenever it
    binds new buffers (another output list or chunk shape): the plan's bindings would then be out of their
    ping-pong parity with the arenas."""

    __slots__ = ("gen", "ids", "outputs", "wanted", "tick", "shapes")

    def __init__(self, gen: int, ids: tuple[Hashable, ...], outputs: tuple[str, ...] | None, wanted: Sequence[str], tick: _WholeTick,
                 batch: Mapping[str, np.ndarray]) -> None:
        self.gen = gen
        self.ids = ids
        self.outputs = outputs
        self.wanted = tuple(wanted)
        self.tick = tick
        self.shapes = tuple((name, a.shape, a.dtype) for name, a in batch.items())


class SessionPool:
    """Concurrent streams of one model, each keyed by a session id, run as batched onnxruntime calls.

    ``model``, ``pairs``, ``session_options``, ``providers``, ``state_shapes``,
    ``cast_inputs`` and ``context`` are as for :class:`~rnnir.runtime.StatefulSession`
    (``context`` is kept per stream; a feed of another dtype than its input's is
    refused unless ``cast_inputs=True``).  ``batch_axes`` overrides the batch axis of named inputs
    and state inputs (None: shared input).  ``max_batch`` caps the rows of one
    onnxruntime call.  ``idle_timeout`` (seconds of ``clock``) closes streams
    that made no call for that long.  One pool is used by one thread at a time
    (calls are serialised by a lock); see the module docstring.
    """

    def __init__(
        self,
        model: Any,
        pairs: Mapping[str, str | None] | None = None,
        *,
        context: ContextSpec | None = None,
        batch_axes: Mapping[str, int | None] | None = None,
        max_batch: int | None = None,
        idle_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        session_options: Any = None,
        providers: Sequence[Any] | None = None,
        state_shapes: Mapping[str, Sequence[int]] | None = None,
        cast_inputs: bool = False,
    ) -> None:
        if max_batch is not None and max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if idle_timeout is not None and idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive, got {idle_timeout}")
        self._options = {"session_options": session_options, "providers": providers, "state_shapes": state_shapes, "cast_inputs": cast_inputs}
        self._context_arg = context
        self._batch_axes_arg = dict(batch_axes or {})
        self.max_batch = max_batch
        self.idle_timeout = idle_timeout
        self.cast_inputs = bool(cast_inputs)  # as StatefulSession's: a feed of another dtype is refused unless True
        self.clock = clock
        self._lock = threading.Lock()
        self._streams: dict[Hashable, _Stream] = {}  # in order of joining
        self._placed: list[_Stream] = []  # row r belongs to _placed[r] (closed ones until the next _settle)
        self._last_used = np.zeros(0)  # per row: when its stream last ran (per stream while it has no row)
        self._dirty = False  # streams joined or left since the rows were laid out
        self._gen = 0  # changes whenever rows may have moved: cached row lists and bindings are stale
        self._tick_cache: tuple[tuple[Hashable, ...], int, list[_Stream], np.ndarray] | None = None
        self._rows_in_order: np.ndarray | None = None  # the cached tick's rows when they are 0, 1, 2, ...
        self._ctx_arenas: dict[str, _Arena] | None = None
        self._pending_ctx: dict[Hashable, dict[str, np.ndarray]] = {}  # kept contexts to install when rows exist
        self.stats = PoolStats()
        self._install(StatefulSession(model, pairs, context=context, **self._options))

    def _install(self, solo: StatefulSession) -> None:
        """Use ``solo``'s model from now on (construction and upgrade)."""
        m = solo._model
        for slot in m.slots:
            if slot.output is None:
                raise StateError(f"{m.label}: state input {slot.input!r} has no paired output: the pool has nothing to carry")
            if slot.output_dtype is not None and slot.output_dtype != slot.dtype:
                raise StateError(f"{m.label}: state output {slot.output!r} is {slot.output_dtype}, its input {slot.dtype} (SD005)")
        self._solo = solo
        self._model = m
        self._plain_dtypes: dict[str, np.dtype[Any]] = {n: d for n in m.plain_inputs if (d := m.inputs[n].dtype) is not None}
        self._ort = m.ort
        self._native = _Native(m.ort)
        self._slot_names = [(slot.input, cast(str, slot.output)) for slot in m.slots]
        self._contexts: tuple[InputContext, ...] = solo.context
        for c in self._contexts:
            if self._batch_axes_arg.get(c.input, -1) == c.axis:
                raise StateError(f"{m.label}: the context of {c.input!r} runs along its batch axis {c.axis}")
        layout, why = _static_layout(solo, self._batch_axes_arg)
        for c in self._contexts:
            if layout is not None and layout.inputs.get(c.input) == c.axis:
                layout, why = None, f"the context of {c.input!r} runs along what looks like its batch axis {c.axis}"
        self.layout: BatchLayout | None = layout
        self.batching = why  # "" while batching is possible; why not otherwise
        self._probed = False
        self._arenas: dict[str, _Arena] | None = None
        self._pending: dict[Hashable, dict[str, np.ndarray]] = {}  # states to install when arenas and rows exist
        self._whole: _WholeTick | None = None
        self._steady: _SteadyTick | None = None  # the last tick's plan, while it holds (see run)
        self._batch_signature: tuple[Any, ...] | None = None  # the last run_batch tick that passed every check
        self._whole_shapes: dict[tuple[Any, ...], dict[str, tuple[tuple[int, ...], np.dtype[Any]]]] = {}
        self._gen += 1

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

    def _used(self, stream: _Stream) -> float:
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

    def _open(self, sid: Hashable, now: float) -> _Stream:
        if sid in self._streams:
            raise StateError(f"session {sid!r} is already open; reset({sid!r}) restarts it")
        stream = _Stream(sid, now)
        self._streams[sid] = stream
        self._dirty = True
        self._gen += 1
        return stream

    def _all_arenas(self) -> list[_Arena]:
        return list((self._arenas or {}).values()) + list((self._ctx_arenas or {}).values())

    def _check_rows(self, state: Mapping[str, np.ndarray], where: str) -> None:
        """``state`` is one stream's row of every arena (or, before the arenas exist, one row along each batch
        axis): checked before the pool is touched, since a state left pending that does not fit broke the next
        run of every other stream and was dropped."""
        layout = None if self.batching else self.layout
        for name, value in state.items():
            arena = None if self._arenas is None else self._arenas.get(name)
            if arena is not None:
                _row_of(value, arena.initial.shape, f"{where}: state {name!r}")
                continue
            axis = None if layout is None else layout.states.get(name)
            if axis is not None and value.ndim > axis and value.shape[axis] != 1:
                raise StateError(f"{where}: state {name!r} has shape {value.shape}: {value.shape[axis]} rows along its batch axis {axis}, "
                                 "but a pool stream's state is one row")

    def _put_state(self, stream: _Stream, state: Mapping[str, np.ndarray] | None) -> None:
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
                arena.put(stream.row, _row_of(state[name], arena.initial.shape, f"session {stream.sid!r}, state {name!r}"))

    def _put_context(self, stream: _Stream, context: Mapping[str, np.ndarray] | None) -> None:
        """One stream's kept context: ``context`` (input name -> tail), or none (zeros) when None."""
        self._pending_ctx.pop(stream.sid, None)
        if self._ctx_arenas is None or stream.row < 0:
            if context:
                self._pending_ctx[stream.sid] = dict(context)
            return
        for name, arena in self._ctx_arenas.items():
            value = None if context is None else context.get(name)
            arena.put(stream.row, arena.initial if value is None else _row_of(value, arena.initial.shape, f"session {stream.sid!r}, context {name!r}"))

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

    def _leave(self, stream: _Stream) -> None:
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

    def _get(self, sid: Hashable) -> _Stream:
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

    # -- a stream's state on disk: bound to the model, its state version and the session -----
    def save_state(self, sid: Hashable, path: str | os.PathLike[str]) -> Path:
        """Write one stream's state (and kept context) in :meth:`StatefulSession.save_state`'s format,
        naming the session: :meth:`load_state` puts it back into that session only."""
        with self._lock:
            stream = self._get(sid)
            if self._arenas is None or stream.row < 0:
                pending = self._pending.get(sid)
                snap = {k: np.array(v) for k, v in pending.items()} if pending is not None else None
            else:
                snap = {name: arena.row(stream.row) for name, arena in self._arenas.items()}
            if self._ctx_arenas is None or stream.row < 0:
                context = {name: np.array(v) for name, v in self._pending_ctx.get(sid, {}).items()}
            else:
                context = {name: arena.row(stream.row) for name, arena in self._ctx_arenas.items()}
        if snap is None:
            raise StateError(f"session {sid!r} has not run yet: its state is the initial state, nothing to save")
        meta = {
            "format": STATE_FORMAT, "fingerprint": self.fingerprint, "state_version": self.state_version, "model": self.label,
            "session": str(sid), "session_key": _session_key(sid), "slots": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in snap.items()},
        }
        target = Path(path)
        entries = {f"slot:{k}": v for k, v in snap.items()} | {f"context:{k}": v for k, v in context.items()}
        # atomic, as StatefulSession's: a full disk leaves the previous file as it was and raises StateError
        write_atomically(target, lambda f: np.savez(f, __rnnir_state__=np.array(json.dumps(meta)), **entries))  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
        return target

    def load_state(
        self,
        sid: Hashable,
        path: str | os.PathLike[str],
        *,
        on_version_mismatch: VersionPolicy | str = VersionPolicy.REFUSE,
        migrations: StateMigrations | None = None,
        from_session: Hashable | None = None,
    ) -> VersionOutcome:
        """Put a saved state into stream ``sid`` (opened if needed).  A state saved from a pool names its
        session: it loads into that session only, unless ``from_session`` names it (a deliberate move;
        another stream's state is otherwise exactly the leak the pool must not allow).  A state saved by a
        StatefulSession names none.  Model and version as for :meth:`StatefulSession.load_state`.
        The kept context comes back with the state, also before the pool's first call."""
        target = Path(path)
        policy = VersionPolicy(on_version_mismatch)
        # StatefulSession's reader: only a regular file, sizes bounded before anything is decompressed
        meta, entries = read_state_file(target, self._solo._state_file_limit(exact=policy is VersionPolicy.REFUSE and migrations is None))
        arrays = {k[len("slot:") :]: v for k, v in entries.items() if k.startswith("slot:")}
        contexts = {k[len("context:") :]: v for k, v in entries.items() if k.startswith("context:")}
        if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
            raise StateError(f"{target}: not a state file of format {STATE_FORMAT}")
        owner = meta.get("session")
        # the typed key tells 1 from "1"; files written before it was saved name the session by str() alone
        owner_key = meta.get("session_key")
        if owner_key is not None:
            foreign = owner_key != _session_key(sid) and (from_session is None or _session_key(from_session) != owner_key)
        else:
            foreign = owner is not None and owner != str(sid) and (from_session is None or str(from_session) != owner)
        if foreign:
            raise StateError(
                f"{target} holds the state of session {owner!r}, not of {sid!r}: one stream's state must not reach "
                "another; pass from_session= to move it deliberately"
            )
        saved = StateOrigin(str(meta.get("fingerprint")), meta.get("state_version"), str(meta.get("model")))
        mine = StateOrigin(self.fingerprint, self.state_version, self.label)
        outcome, state = reconcile(saved, mine, arrays, policy, migrations, where=str(target))
        if state is not None:
            _check_state(state, self._solo, str(target))
            self._check_rows(state, str(target))
        kept = {c.input: contexts[c.input] for c in self._contexts if c.input in contexts}
        if state is not None and self._ctx_arenas is not None:
            for name, value in kept.items():  # checked before anything changes
                if name in self._ctx_arenas:
                    _row_of(value, self._ctx_arenas[name].initial.shape, f"{target}: context {name!r}")
        with self._lock:
            stream = self._streams.get(sid) or self._open(sid, self.clock())
            self._put_state(stream, state)  # None (reset policy): the initial state, and the context cleared
            self._put_context(stream, kept if state is not None else None)
        return outcome

    # -- calls -------------------------------------------------------------------------------
    def run(
        self,
        requests: Mapping[Hashable, Mapping[str, Any]],
        outputs: Sequence[str] | None = None,
        *,
        open_missing: bool = False,
    ) -> dict[Hashable, dict[str, np.ndarray]]:
        """One call for each stream in ``requests`` (session id -> its feeds, one row each), batched.

        Returns session id -> the requested outputs (every graph output by default), as the stream's
        solo session would return them.  Unknown ids raise :class:`UnknownSessionError` unless
        ``open_missing`` (they join first).
        """
        with self._lock:
            idle = self.idle_timeout is not None
            now = self.clock() if idle else 0.0  # without a timeout only a joining stream needs the time
            if idle:
                self._expire(now)
            steady = self._steady
            if steady is not None and steady.gen == self._gen and (
                steady.outputs is None if outputs is None else steady.outputs == tuple(outputs)
            ):
                fast = self._run_steady(steady, requests)
                if fast is not None:
                    if idle:
                        self._last_used[:] = now  # a whole tick: every placed row ran
                    return fast
            if not idle:
                now = self.clock()
            feeds_in = list(requests.values())
            stacked = self._stack_fast(feeds_in)
            # checked before anyone joins; the fast path's checks are the stacking itself
            feeds: list[dict[str, np.ndarray]] = (
                cast("list[dict[str, np.ndarray]]", feeds_in) if stacked is not None
                else [self._checked(sid, f) for sid, f in requests.items()]
            )
            if outputs is not None:
                unknown = [n for n in outputs if n not in self._model.output_specs]
                if unknown:
                    raise FeedError(f"{self.label}: the model has no output(s) {unknown}; outputs are {self._model.output_names}")
            streams, rows = self._streams_of(tuple(requests), open_missing, now)
            if self._arenas is None and feeds:
                self._build_arenas(feeds[0])
            n = len(streams)
            limit = 1 if self.batching else (self.max_batch or n)
            if stacked is not None and n <= limit:
                wanted = self._model.output_names if outputs is None else list(outputs)
                whole_calls = self.stats.whole_calls
                out, pick = self._dispatch(rows, stacked, wanted)
                results = self._split(list(requests), out, pick, n)
                if pick is None and self.stats.whole_calls != whole_calls and self._whole is not None:
                    # bound whole, in row order: the next tick of these ids and outputs can skip to _run_steady
                    ids = self._tick_cache[0] if self._tick_cache is not None else tuple(requests)
                    self._steady = _SteadyTick(self._gen, ids, None if outputs is None else tuple(outputs), wanted, self._whole, stacked)
            else:
                results = {}
                for group in self._groups(streams, feeds):
                    for start in range(0, len(group), limit):
                        part = group[start : start + limit]
                        self._run_group([streams[i] for i in part], [feeds[i] for i in part], results, outputs)
                if list(results) != list(requests):
                    results = {sid: results[sid] for sid in requests}
            if self.idle_timeout is not None:
                self._last_used[rows] = now
            return results

    def _run_steady(self, steady: _SteadyTick, requests: Mapping[Hashable, Mapping[str, Any]]) -> dict[Hashable, dict[str, np.ndarray]] | None:
        """A tick like the last one (see :class:`_SteadyTick`): the same ids in the same order, every input of
        the same shape and dtype; None when anything differs (or the call fails), nothing changed, and the
        general path takes the tick (and reports)."""
        ids = steady.ids
        n = len(ids)
        if len(requests) != n:
            return None
        if n == 1:
            feeds = requests.get(ids[0])  # one request, of the last tick's stream
            if type(feeds) is not dict or len(feeds) != len(steady.shapes):
                return None
            for name, shape, dtype in steady.shapes:
                a = feeds.get(name)
                if type(a) is not np.ndarray or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                    return None
            batch: dict[str, np.ndarray] = feeds
        else:
            if tuple(requests) != ids or self.max_batch is not None and n > self.max_batch:  # max_batch may have been lowered since
                return None
            stacked = self._stack_fast(list(requests.values()))
            if stacked is None or len(stacked) != len(steady.shapes):
                return None
            for name, shape, _ in steady.shapes:  # the dtypes are the model's: _stack_fast checked them
                a = stacked.get(name)
                if a is None or a.shape != shape:
                    return None
            batch = stacked
        tails: dict[str, np.ndarray] | None = None
        if self._contexts:
            batch, tails = self._with_context(None, batch)
        try:
            plain = steady.tick.call(batch)
        except Exception:  # noqa: BLE001 - the state went to the spare buffers: the general path reruns the tick and reports
            self._steady = None
            return None
        stats = self.stats
        stats.ort_calls += 1
        stats.rows += n
        stats.whole_calls += 1  # largest_batch: this tick's count was counted when the plan was made
        if tails:
            self._keep_tails(None, tails)
        wanted = steady.wanted
        if len(plain) != len(wanted):
            assert self._arenas is not None
            states = {out: self._arenas[inp].cur for inp, out in self._slot_names}
            plain = {name: plain[name] if name in plain else states[name].copy() for name in wanted}
        if n == 1:
            return {ids[0]: plain}
        return self._split(ids, plain, None, n)

    def run_one(self, sid: Hashable, feeds: Mapping[str, Any], outputs: Sequence[str] | None = None, *, open_missing: bool = False) -> dict[str, np.ndarray]:
        return self.run({sid: feeds}, outputs, open_missing=open_missing)[sid]

    def _streams_of(self, ids: tuple[Hashable, ...], open_missing: bool, now: float) -> tuple[list[_Stream], np.ndarray]:
        """The streams of a tick (joining the missing ones when asked) and their rows, the rows laid out.
        The same ids as the last tick, with no join or leave since, reuse its lists (the usual serving loop)."""
        cache = self._tick_cache
        if cache is not None and cache[1] == self._gen and cache[0] == ids:
            return cache[2], cache[3]
        get = self._streams.get
        streams: list[_Stream] = []
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

    def _split(self, sids: Sequence[Hashable], out: Mapping[str, np.ndarray], pick: np.ndarray | None, n: int) -> dict[Hashable, dict[str, np.ndarray]]:
        """Each stream's rows of the batched outputs (views, each with its batch axis of size 1)."""
        if n == 1:
            return {sids[0]: dict(out)}
        layout = self.layout
        assert layout is not None
        names = list(out)
        per_output: list[list[np.ndarray]] = []
        for name in names:
            value = out[name]
            axis = layout.outputs[name]
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

    def _stack_fast(self, feeds: list[Mapping[str, Any]]) -> dict[str, np.ndarray] | None:
        """The batch of a usual tick (every request one row of the same inputs, shapes, dtypes and shared
        values), stacked without a Python pass per request per check; None when anything differs (the
        general path then checks, converts, groups and reports)."""
        layout = self.layout
        n = len(feeds)
        # one request needs no output axes (nothing to split), so no probe either
        if layout is None or self.batching or not (self._probed or n == 1) or self._contexts and self._ctx_arenas is None:
            return None
        dtypes = self._plain_dtypes
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
            axis = layout.inputs.get(name)
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
            batch[name] = v if n == 1 else _stack_rows(arrays, shape, axis, dtype)
        return batch

    def _checked(self, sid: Hashable, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        m = self._model
        dtypes = self._plain_dtypes
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
            out[name] = feed_array(m.label, spec, value, self.cast_inputs)
        missing = [n for n in m.required_inputs if n not in out]
        if missing:
            raise FeedError(f"{m.label}: session {sid!r} is missing input(s) {missing}")
        return out

    def _groups(self, streams: list[_Stream], feeds: list[dict[str, np.ndarray]]) -> list[list[int]]:
        """Request indices that can share one call: equal shared inputs, equal row shapes."""
        if len(streams) == 1:
            return [[0]]
        axes = self.layout.inputs if self.layout is not None else {}
        if self._uniform(feeds, axes):
            return [list(range(len(feeds)))]
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, f in enumerate(feeds):
            key = tuple(
                (n, a.dtype.str, a.shape) if axes.get(n) is not None else (n, a.dtype.str, a.shape, a.tobytes())
                for n, a in f.items()
            )
            groups.setdefault(key, []).append(i)
        return list(groups.values())

    @staticmethod
    def _uniform(feeds: list[dict[str, np.ndarray]], axes: Mapping[str, int | None]) -> bool:
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

    def _with_context(self, rows: np.ndarray | None, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The feeds with each stream's kept context prepended (``rows`` None: every row, in row order),
        and the tails to keep once the call succeeded."""
        tails: dict[str, np.ndarray] = {}
        if not self._contexts or self._ctx_arenas is None:
            return feeds, tails
        feeds = dict(feeds)
        for c in self._contexts:
            if c.input not in feeds:
                continue
            arena = self._ctx_arenas[c.input]
            chunk = feeds[c.input]
            axis = c.axis if c.axis is not None else chunk.ndim - 1
            kept = arena.cur if rows is None else arena.gather(rows)
            combined = np.concatenate([kept, chunk], axis=axis)
            index = [slice(None)] * combined.ndim
            index[axis] = slice(combined.shape[axis] - c.size, None)
            tails[c.input] = combined[tuple(index)]
            feeds[c.input] = combined
        return feeds, tails

    def _run_group(
        self,
        streams: list[_Stream],
        feeds: list[dict[str, np.ndarray]],
        results: dict[Hashable, dict[str, np.ndarray]],
        outputs: Sequence[str] | None = None,
    ) -> None:
        assert self._arenas is not None
        rows = self._rows_of(streams)
        layout = self.layout
        n = len(streams)
        if n == 1:
            batch = dict(feeds[0])
        else:
            assert layout is not None
            batch = {}
            for name, arr in feeds[0].items():
                axis = layout.inputs.get(name)
                batch[name] = arr if axis is None else np.concatenate([f[name] for f in feeds], axis=axis)
        if n > 1 and not self._probed:
            self._probe(batch, rows)
        if n > 1 and self.batching:  # the probe found the model cannot batch: one stream per call from now on
            for k, stream in enumerate(streams):
                self._run_group([stream], [feeds[k]], results, outputs)
            return
        wanted = self._model.output_names if outputs is None else list(outputs)
        out, pick = self._dispatch(rows, batch, wanted)
        results.update(self._split([s.sid for s in streams], out, pick, n))

    def _dispatch(self, rows: np.ndarray, batch: dict[str, np.ndarray], wanted: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """One onnxruntime call for ``rows`` (``batch`` stacked in the order of ``rows``): the bound arenas
        when the tick holds every placed stream, else gathered and scattered rows.  Returns the ``wanted``
        outputs and, when they are in row order rather than request order, each request's row."""
        assert self._arenas is not None
        n = len(rows)
        whole = n == len(self._placed) and all(a.axis is not None for a in self._arenas.values()) and (n == 1 or self._probed and not self.batching)
        if not whole:
            out = self._execute(rows, batch)
            return {name: out[name] for name in wanted}, None
        batch, pick = self._into_rows(rows, batch)
        return self._execute_whole(batch, wanted), pick

    def _execute_whole(self, batch: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        """Every placed stream in row order: the arenas are bound whole, no row gathered or scattered."""
        assert self._arenas is not None
        batch, tails = self._with_context(None, batch)
        n = len(self._placed)
        layout = self.layout
        assert layout is not None
        # the feeds' shapes with the batch dim left out: the plain outputs' shapes learnt at one row count
        # hold at any other (their batch dim scaled), so a join or leave does not cost a plain call
        signature = (tuple((name, _one_row(a.shape, layout.inputs.get(name)), a.dtype) for name, a in batch.items()), tuple(wanted))
        key = (self._gen, n, signature)  # a new layout (rows moved, the model upgraded) binds new buffers
        tick = self._whole
        if tick is None or tick.key != key:
            per_row = self._whole_shapes.get(signature)
            if per_row is None or n > 1 and any(name not in layout.outputs for name in per_row):
                # the first tick of these shapes: run it plainly, learn the plain outputs' shapes for one row
                out = self._run_plain(None, batch, tails)
                if n == 1 or all(name in layout.outputs for name in wanted):
                    if len(self._whole_shapes) >= 8:  # a few output lists and chunk shapes at most, not one per call
                        self._whole_shapes.clear()
                    self._whole_shapes[signature] = ({
                        name: (_one_row(out[name].shape, layout.outputs.get(name) if n > 1 else None), out[name].dtype)
                        for name in wanted if name not in self._model.state_outputs
                    })
                return {name: out[name] for name in wanted}
            shapes = per_row if n == 1 else {name: (_rows_shape(shape, layout.outputs[name], n), dtype) for name, (shape, dtype) in per_row.items()}
            # new bindings: a steady plan over the old ones would run them out of their ping-pong parity
            self._steady = None
            tick = self._whole = _WholeTick(key, self._native, self._arenas, self._slot_names, shapes, batch)
        try:
            plain = tick.call(batch)
        except Exception:  # noqa: BLE001 - e.g. an output whose shape depends on the data: the plain call decides, and reports
            self._whole = self._steady = None
            self._whole_shapes.pop(signature, None)
            out = self._run_plain(None, batch, tails)
            return {name: out[name] for name in wanted}
        self._count(len(self._placed))
        self.stats.whole_calls += 1
        self._keep_tails(None, tails)
        if len(plain) == len(wanted):
            return plain
        states = {out: self._arenas[inp].cur for inp, out in self._slot_names}
        return {name: plain[name] if name in plain else states[name].copy() for name in wanted}

    def _execute(self, rows: np.ndarray, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One onnxruntime call for ``rows``: context prepended, state gathered, new state and context scattered."""
        batch, tails = self._with_context(rows, batch)
        return self._run_plain(rows, batch, tails)

    def _run_plain(self, rows: np.ndarray | None, batch: dict[str, np.ndarray], tails: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``InferenceSession.run`` with the rows' state (``rows`` None: every row), the new state put back."""
        assert self._arenas is not None
        for name, arena in self._arenas.items():
            batch[name] = arena.cur if rows is None else self._gather(arena, rows)
        values = self._ort.run(None, batch)
        self._count(len(self._placed) if rows is None else len(rows))
        out = dict(zip(self._model.output_names, values))
        for state_in, state_out in self._slot_names:
            new = np.asarray(out[state_out])
            if rows is None:
                self._arenas[state_in].cur[...] = new
            else:
                self._scatter(self._arenas[state_in], rows, new)
        self._keep_tails(rows, tails)
        return out

    def _keep_tails(self, rows: np.ndarray | None, tails: Mapping[str, np.ndarray]) -> None:
        if self._ctx_arenas is not None:
            for name, tail in tails.items():
                arena = self._ctx_arenas[name]
                if rows is None:
                    arena.cur[...] = tail
                else:
                    arena.scatter(rows, tail)

    def _count(self, n: int) -> None:
        self.stats.ort_calls += 1
        self.stats.rows += n
        self.stats.largest_batch = max(self.stats.largest_batch, n)

    def run_batch(
        self,
        ids: Sequence[Hashable],
        feeds: Mapping[str, Any],
        outputs: Sequence[str] | None = None,
        *,
        open_missing: bool = False,
    ) -> dict[str, np.ndarray]:
        """The stacked form of :meth:`run`, for a server that already holds a tick's inputs as arrays:
        ``feeds`` carry the rows of ``ids`` (in that order) along each input's batch axis; returns the
        outputs stacked the same way.  No per-stream Python work beyond finding each stream's row (none
        when the ids are the last tick's).  Falls back to :meth:`run` (split, then stacked again) before the
        first batched call, when the model cannot batch, or when ``max_batch`` is smaller than the tick."""
        ids = tuple(ids)
        # a tick like the last one (same ids, feed names, array shapes and dtypes, outputs; the usual serving
        # loop) was checked then: only the signature is compared
        signature = (ids, [(name, type(v), getattr(v, "shape", None), getattr(v, "dtype", None)) for name, v in feeds.items()],
                     None if outputs is None else tuple(outputs))
        if signature == self._batch_signature and self.layout is not None and self._probed and not self.batching:
            wanted = self._model.output_names if outputs is None else list(outputs)
            return self._run_batch_checked(ids, dict(feeds), wanted, open_missing, self.layout)
        if len(set(ids)) != len(ids):
            raise FeedError(f"{self.label}: run_batch got a session id twice in one tick")
        layout = self.layout
        usable = layout is not None and self._probed and not self.batching and (self.max_batch is None or len(ids) <= self.max_batch)
        if not usable or len(ids) < 2:
            return self._split_and_run(list(ids), feeds, outputs, open_missing)
        assert layout is not None
        m = self._model
        batch: dict[str, np.ndarray] = {}
        converted = False
        for name, value in feeds.items():
            spec = m.inputs.get(name)
            if spec is None or name in m.slot_by_input:
                raise FeedError(f"{m.label}: run_batch feeds {name!r}, which is not a plain input; inputs are {m.plain_inputs}")
            arr = feed_array(m.label, spec, value, self.cast_inputs)
            converted = converted or arr is not value
            axis = layout.inputs.get(name)
            if axis is not None and (arr.ndim <= axis or arr.shape[axis] != len(ids)):
                raise FeedError(f"{m.label}: input {name!r} has shape {arr.shape}; its batch axis {axis} must hold one row per id ({len(ids)})")
            batch[name] = arr
        missing = [n for n in m.required_inputs if n not in batch]
        if missing:
            raise FeedError(f"{m.label}: run_batch is missing input(s) {missing}")
        if outputs is not None and any(n not in m.output_specs for n in outputs):
            raise FeedError(f"{m.label}: the model has no output(s) {[n for n in outputs if n not in m.output_specs]}")
        wanted = m.output_names if outputs is None else list(outputs)
        out = self._run_batch_checked(ids, batch, wanted, open_missing, layout)
        # remembered only once the tick ran (its ids known) and when nothing had to be converted
        self._batch_signature = None if converted else signature
        return out

    def _run_batch_checked(self, ids: tuple[Hashable, ...], batch: dict[str, np.ndarray], wanted: list[str], open_missing: bool, layout: BatchLayout) -> dict[str, np.ndarray]:
        with self._lock:
            now = self.clock()
            if self.idle_timeout is not None:
                self._expire(now)
            streams, rows = self._streams_of(ids, open_missing, now)
            out, pick = self._dispatch(rows, batch, wanted)
            if pick is not None:  # back from row order to the order of ids
                out = {name: np.take(value, pick, axis=layout.outputs[name]) for name, value in out.items()}
            if self.idle_timeout is not None:
                self._last_used[rows] = now
        return out

    def _split_and_run(self, ids: list[Hashable], feeds: Mapping[str, Any], outputs: Sequence[str] | None, open_missing: bool) -> dict[str, np.ndarray]:
        layout = self.layout
        axes = dict(layout.inputs) if layout is not None else {}
        requests: dict[Hashable, dict[str, np.ndarray]] = {}
        for k, sid in enumerate(ids):
            row: dict[str, np.ndarray] = {}
            for name, value in feeds.items():
                arr = np.asarray(value)
                if layout is None:  # no batch layout: rows along the leading axis, anything else shared
                    axis = 0 if arr.ndim >= 1 and arr.shape[0] == len(ids) and len(ids) > 1 else None
                else:
                    axis = axes.get(name)
                if axis is None:
                    row[name] = arr
                    continue
                if arr.ndim <= axis or arr.shape[axis] != len(ids):
                    raise FeedError(f"{self.label}: input {name!r} has shape {arr.shape}; its batch axis {axis} must hold one row per id ({len(ids)})")
                row[name] = np.take(arr, [k], axis=axis)
            requests[sid] = row
        results = self.run(requests, outputs, open_missing=open_missing)
        out_axes = self.layout.outputs if self.layout is not None and self.layout.outputs else None
        names = list(results[ids[0]])
        stacked: dict[str, np.ndarray] = {}
        for name in names:
            axis = out_axes.get(name, 0) if out_axes else 0
            stacked[name] = np.concatenate([results[sid][name] for sid in ids], axis=axis) if len(ids) > 1 else results[ids[0]][name]
        return stacked

    # Where rows could cross between streams: one place each, so tests can check that a shifted row is caught.
    def _rows_of(self, streams: Sequence[_Stream]) -> np.ndarray:
        """Each stream's row, in the streams' order."""
        return np.fromiter((s.row for s in streams), dtype=np.intp, count=len(streams))

    def _into_rows(self, rows: np.ndarray, batch: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """A tick of every placed stream: its inputs moved from request order into row order (nothing to do
        when the requests come in row order, the usual loop), and each request's row (None: request i is row i)."""
        if rows is self._rows_in_order or np.array_equal(rows, np.arange(len(rows))):  # the first: a cached tick's rows
            return batch, None
        assert self.layout is not None
        order = np.argsort(rows)
        axes = self.layout.inputs
        return {name: (a if axes.get(name) is None else np.take(a, order, axis=axes[name])) for name, a in batch.items()}, rows

    def _row_map(self, rowmap: np.ndarray) -> np.ndarray:
        """The old row of each remaining stream, in its new row order (see _settle)."""
        return rowmap

    def _gather(self, arena: _Arena, rows: np.ndarray) -> np.ndarray:
        return arena.gather(rows)

    def _scatter(self, arena: _Arena, rows: np.ndarray, value: np.ndarray) -> None:
        arena.scatter(rows, value)

    # -- arenas and the probe ----------------------------------------------------------------
    def _build_arenas(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Row shapes from the first call's feeds (one row), then every placed stream's row."""
        initial = self._solo.initial_state(self._model_feeds(feeds))
        layout = self.layout
        rows = len(self._placed)
        arenas: dict[str, _Arena] = {}
        for name, value in initial.items():
            axis = None if layout is None or self.batching else layout.states[name]
            if axis is not None and value.shape[axis] != 1:
                raise StateError(f"{self.label}: the initial state {name!r} has {value.shape[axis]} rows along its batch axis {axis}; feed one row per stream")
            arenas[name] = _Arena(axis, np.ascontiguousarray(value), rows)
        if self._ctx_arenas is None and self._contexts:
            ctx: dict[str, _Arena] = {}
            for c in self._contexts:
                chunk = feeds.get(c.input)
                if chunk is None:
                    continue
                axis = None if layout is None or self.batching else layout.inputs.get(c.input)
                c_axis = c.axis if c.axis is not None else chunk.ndim - 1
                shape = list(chunk.shape)
                shape[c_axis] = c.size
                dtype = self._model.inputs[c.input].dtype or chunk.dtype
                ctx[c.input] = _Arena(axis, np.zeros(shape, dtype=dtype), rows)
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

    def _probe(self, batch: Mapping[str, np.ndarray], rows: np.ndarray) -> None:
        """Run three rows as one batch and one at a time: equal results, and each output's batch axis."""
        self._probed = True
        layout = self.layout
        assert layout is not None and self._arenas is not None
        one: list[dict[str, np.ndarray]] = []
        rng = np.random.default_rng(0)
        for k in range(_PROBE_ROWS):
            feed: dict[str, np.ndarray] = {}
            for name, arr in batch.items():
                axis = layout.inputs.get(name)
                if axis is None:
                    feed[name] = arr
                    continue
                row = np.take(arr, [min(k, arr.shape[axis] - 1)], axis=axis)
                if k >= arr.shape[axis] and np.issubdtype(row.dtype, np.floating):
                    row = (row * (1.0 - 0.5 * k) + 0.1 * rng.standard_normal(row.shape)).astype(row.dtype)
                feed[name] = row
            feed = self._model_feeds(feed)
            for name, arena in self._arenas.items():
                state = arena.initial
                if np.issubdtype(state.dtype, np.floating):
                    state = (state + 0.1 * rng.standard_normal(state.shape)).astype(state.dtype)  # distinct states per row
                feed[name] = state
            one.append(feed)
        try:
            solo = [dict(zip(self._model.output_names, self._ort.run(None, f))) for f in one]
            stacked = {
                name: (one[0][name] if (layout.inputs.get(name) is None and name not in layout.states)
                       else np.concatenate([f[name] for f in one], axis=layout.states.get(name, layout.inputs.get(name))))
                for name in one[0]
            }
            together = dict(zip(self._model.output_names, self._ort.run(None, stacked)))
        except Exception as exc:  # noqa: BLE001 - any failure means: do not batch this model
            self.batching = f"a batch of {_PROBE_ROWS} rows failed in onnxruntime ({type(exc).__name__}: {str(exc)[:160]})"
            return
        outputs: dict[str, int] = {}
        for name, ref in solo[0].items():
            got = together[name]
            axis = _grown_axis(np.shape(ref), np.shape(got), _PROBE_ROWS)
            if axis is None:
                self.batching = f"output {name!r} has shape {np.shape(ref)} for one row and {np.shape(got)} for {_PROBE_ROWS}: no batch axis to split"
                return
            for k in range(_PROBE_ROWS):
                piece = np.take(got, [k], axis=axis)
                want = solo[k][name]
                if piece.shape != np.shape(want) or not np.allclose(piece, want, rtol=0, atol=_PROBE_TOL, equal_nan=True):
                    diff = float(np.max(np.abs(piece.astype(np.float64) - np.asarray(want, dtype=np.float64)))) if piece.shape == np.shape(want) else float("inf")
                    self.batching = (
                        f"row {k} of a batch of {_PROBE_ROWS} differs from the same row run alone on output {name!r} "
                        f"(max |diff| {diff:.3g}): the model mixes batch rows"
                    )
                    return
            outputs[name] = axis
        for slot in self._model.slots:
            out_axis = outputs.get(slot.output or "")
            if out_axis != layout.states[slot.input]:
                self.batching = f"state output {slot.output!r} batches along axis {out_axis}, its input {slot.input!r} along {layout.states[slot.input]}"
                return
        self.layout = BatchLayout(layout.inputs, layout.states, outputs)

    # -- model upgrade -----------------------------------------------------------------------
    def upgrade(
        self,
        model: Any,
        pairs: Mapping[str, str | None] | None = None,
        *,
        policy: VersionPolicy | str = VersionPolicy.REFUSE,
        migrations: StateMigrations | None = None,
    ) -> dict[Hashable, VersionOutcome]:
        """Serve ``model`` from now on, carrying every open stream's state by :func:`rnnir.versioning.reconcile`:
        kept when the graphs are equal or declare the same state version, else per ``policy``.  Refused
        (:class:`~rnnir.StateError`) leaves the pool as it was.  Returns each stream's outcome."""
        solo = StatefulSession(model, pairs, context=self._context_arg, **self._options)
        with self._lock:
            old = StateOrigin(self.fingerprint, self.state_version, self.label)
            new = StateOrigin(solo.fingerprint, solo.state_version, solo.label)
            carried: dict[Hashable, dict[str, np.ndarray]] = {}
            outcomes: dict[Hashable, VersionOutcome] = {}
            for sid, stream in self._streams.items():
                if self._arenas is None or stream.row < 0:
                    state = self._pending.get(sid)
                    if state is None:  # never ran: the initial state, nothing to carry
                        outcomes[sid] = compatible(old, new) or VersionOutcome.RESET
                        continue
                else:
                    state = {name: arena.row(stream.row) for name, arena in self._arenas.items()}
                outcome, value = reconcile(old, new, state, VersionPolicy(policy), migrations, where=f"session {sid!r}")
                if value is not None:
                    _check_state(value, solo, f"session {sid!r} ({outcome.value})")
                    carried[sid] = value
                outcomes[sid] = outcome
            self._install(solo)
            self._pending = carried
            for sid, o in outcomes.items():
                if o is VersionOutcome.RESET:
                    self._put_context(self._streams[sid], None)
            return outcomes


def _session_key(sid: Hashable) -> str:
    """A session id as saved in a state file: its type and repr, so that ``1``, ``"1"`` and ``("1",)`` differ."""
    return f"{type(sid).__qualname__}:{sid!r}"


def _check_state(state: Mapping[str, np.ndarray], solo: StatefulSession, where: str) -> None:
    expected = {s.input: s for s in solo.slots}
    if set(state) != set(expected):
        raise StateError(f"{where}: state names {sorted(state)}, the new model's state inputs are {sorted(expected)}")
    for name, value in state.items():
        spec = expected[name]
        if value.dtype != spec.dtype:
            raise StateError(f"{where}: state {name!r} is {value.dtype}, the new model takes {spec.dtype}")
        if spec.shape is not None:
            if len(spec.shape) != value.ndim or any(isinstance(d, int) and d > 0 and d != v for d, v in zip(spec.shape, value.shape)):
                raise StateError(f"{where}: state {name!r} has shape {value.shape}, the new model declares {list(spec.shape)}")


def _stack_rows(arrays: list[np.ndarray], shape: tuple[int, ...], axis: int, dtype: np.dtype[Any]) -> np.ndarray:
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


def _one_row(shape: tuple[int, ...], axis: int | None) -> tuple[int, ...]:
    """``shape`` with its batch dim (if any) set to 1."""
    return shape if axis is None or axis >= len(shape) else shape[:axis] + (1,) + shape[axis + 1 :]


def _rows_shape(shape: tuple[int, ...], axis: int, rows: int) -> tuple[int, ...]:
    return shape[:axis] + (rows,) + shape[axis + 1 :]


def _row_of(value: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != shape:
        raise StateError(f"{where}: shape {arr.shape} is not one stream's state {shape}")
    return arr


def _grown_axis(one: tuple[int, ...], many: tuple[int, ...], rows: int) -> int | None:
    """The one axis along which ``many`` has ``rows`` where ``one`` has 1, every other dim equal."""
    if len(one) != len(many):
        return None
    found = [k for k, (a, b) in enumerate(zip(one, many)) if a != b]
    if len(found) == 1 and one[found[0]] == 1 and many[found[0]] == rows:
        return found[0]
    if not found:
        ones = [k for k, a in enumerate(one) if a == 1 and rows == 1]
        return ones[0] if ones else None
    return None


def _dynamic(shape: Sequence[int | str | None] | None) -> list[int]:
    return [] if shape is None else [k for k, d in enumerate(shape) if not (isinstance(d, int) and d > 0)]


def _static_layout(solo: StatefulSession, explicit: Mapping[str, int | None]) -> tuple[BatchLayout | None, str]:
    """The batch axes of the state and plain inputs, from the declared shapes (outputs come from the probe)."""
    m = solo._model
    unknown = set(explicit) - set(m.inputs)
    if unknown:
        raise StateError(f"{m.label}: batch_axes names {sorted(unknown)}, which are not inputs {sorted(m.inputs)}")
    states: dict[str, int] = {}
    symbols: set[str] = set()
    for slot in m.slots:
        if slot.input in explicit:
            axis = explicit[slot.input]
            if axis is None:
                return None, f"batch_axes says state input {slot.input!r} has no batch axis"
            states[slot.input] = int(axis)
            continue
        dyn = _dynamic(slot.shape)
        if slot.shape is None:
            return None, f"state input {slot.input!r} declares no shape: give batch_axes={{{slot.input!r}: AXIS}}"
        if not dyn:
            return None, f"state input {slot.input!r} has the static shape {list(slot.shape)}: its batch is fixed"
        if len(dyn) > 1:
            named = [k for k in dyn if isinstance(slot.shape[k], str)]
            shared = [k for k in named if any(slot.shape[k] in (m.inputs[n].shape or ()) for n in m.plain_inputs)]
            if len(shared) != 1:
                return None, f"state input {slot.input!r} has several dynamic dims {dyn}: give batch_axes={{{slot.input!r}: AXIS}}"
            dyn = shared
        states[slot.input] = dyn[0]
        if isinstance(slot.shape[dyn[0]], str):
            symbols.add(str(slot.shape[dyn[0]]))
    if not states:
        return None, "the model has no state: nothing to keep per stream"
    traced = {ri.input: ri.batch_axis for ri in m.recurrent_inputs}
    inputs: dict[str, int | None] = {}
    for name in m.plain_inputs:
        if name in explicit:
            inputs[name] = explicit[name]
            continue
        shape = m.inputs[name].shape
        by_symbol = [k for k, d in enumerate(shape or ()) if isinstance(d, str) and d in symbols]
        dyn = _dynamic(shape)
        if by_symbol:
            inputs[name] = by_symbol[0]
        elif name in traced:
            inputs[name] = traced[name]
        elif shape is None:
            return None, f"input {name!r} declares no shape: give batch_axes={{{name!r}: AXIS or None}}"
        elif dyn and dyn[0] == 0:
            inputs[name] = 0
        elif dyn:
            return None, f"input {name!r} {list(shape)} has no leading dynamic dim: give batch_axes={{{name!r}: AXIS or None}}"
        else:
            inputs[name] = None  # static: one value shared by the rows of a call (e.g. a sample rate)
    return BatchLayout(inputs, states), ""



class _Pending:
    __slots__ = ("sid", "feeds", "outputs", "done", "result", "error")

    def __init__(self, sid: Hashable, feeds: Mapping[str, Any], outputs: Sequence[str] | None) -> None:
        self.sid = sid
        self.feeds = feeds
        self.outputs = outputs
        self.done = threading.Event()
        self.result: dict[str, np.ndarray] | None = None
        self.error: BaseException | None = None


class Batcher:
    """Calls arriving from many threads, batched into pool ticks (Triton's dynamic batching, in-process).

        batcher = Batcher(pool, max_delay=0.002)
        out = batcher.call("alice", {"input": chunk, "sr": sr})   # from any thread; blocks until its tick ran
        batcher.close()

    A worker thread takes the first waiting call, waits up to ``max_delay`` seconds for more (or until
    ``max_batch`` streams wait), and runs them as one :meth:`SessionPool.run`.  A stream's calls stay in
    order: a second call of a stream already in the tick waits for the next tick.  Streams are opened on
    their first call.  When a tick is refused before it runs (a bad feed), each of its calls is retried
    alone, so the error reaches only the caller that caused it; an error while running reaches every
    caller of the tick (part of it may have run, so nothing is retried).
    """

    def __init__(self, pool: SessionPool, *, max_delay: float = 0.002, max_batch: int | None = None) -> None:
        if max_delay < 0:
            raise ValueError(f"max_delay must not be negative, got {max_delay}")
        self.pool = pool
        self.max_delay = max_delay
        self.max_batch = max_batch
        self._queue: list[_Pending] = []
        self._cond = threading.Condition()
        self._closed = False
        self.ticks = 0
        self._worker = threading.Thread(target=self._loop, name="rnnir-batcher", daemon=True)
        self._worker.start()

    def call(self, sid: Hashable, feeds: Mapping[str, Any], outputs: Sequence[str] | None = None, timeout: float | None = None) -> dict[str, np.ndarray]:
        item = _Pending(sid, feeds, outputs)
        with self._cond:
            if self._closed:
                raise StateError("the batcher is closed")
            self._queue.append(item)
            self._cond.notify()
        if not item.done.wait(timeout):
            raise TimeoutError(f"session {sid!r}: no result within {timeout} s")
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def close(self) -> None:
        """Finish the waiting calls, then stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._worker.join()

    def __enter__(self) -> Batcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> list[_Pending]:
        """The next tick: one call per stream, oldest first, after waiting up to max_delay for company."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return []
            deadline = time.monotonic() + self.max_delay
            limit = self.max_batch or 1 << 30
            while len({p.sid for p in self._queue}) < limit and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            tick: list[_Pending] = []
            seen: set[Hashable] = set()
            rest: list[_Pending] = []
            for item in self._queue:
                if item.sid in seen or len(tick) >= limit:
                    rest.append(item)  # its stream already has a call in this tick: the next one
                else:
                    seen.add(item.sid)
                    tick.append(item)
            self._queue = rest
            return tick

    def _refuse_unknown_outputs(self, tick: list[_Pending]) -> list[_Pending]:
        """The calls of ``tick`` that ask only for outputs the model has; the others are answered with a FeedError
        now, before the tick runs: picked out of a whole tick's results, one caller's unknown name was a KeyError
        for every caller, although their calls ran and their states advanced."""
        model = self.pool._model
        kept: list[_Pending] = []
        for p in tick:
            unknown = [n for n in p.outputs or () if n not in model.output_specs]
            if unknown:
                p.error = FeedError(f"{self.pool.label}: the model has no output(s) {unknown}; outputs are {model.output_names}")
                p.done.set()
            else:
                kept.append(p)
        return kept

    def _loop(self) -> None:
        while True:
            tick = self._take()
            if not tick:
                return
            self.ticks += 1
            tick = self._refuse_unknown_outputs(tick)
            if not tick:
                continue
            outputs = tick[0].outputs if all(p.outputs == tick[0].outputs for p in tick) else None
            try:
                results = self.pool.run({p.sid: p.feeds for p in tick}, outputs, open_missing=True)
                for p in tick:
                    p.result = results[p.sid] if p.outputs is None or outputs is not None else {k: results[p.sid][k] for k in p.outputs}
            except (FeedError, UnknownSessionError):  # raised before anything ran: isolate the failing call
                for p in tick:
                    try:
                        p.result = self.pool.run({p.sid: p.feeds}, p.outputs, open_missing=True)[p.sid]
                    except Exception as exc:  # noqa: BLE001 - handed to the caller that made the call
                        p.error = exc
            except Exception as exc:  # noqa: BLE001 - part of the tick may have run: every caller hears of it, none is retried
                for p in tick:
                    p.error = exc
            for p in tick:
                p.done.set()
