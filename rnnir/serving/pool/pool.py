"""Many streams of one model, keyed by session id, batched into one onnxruntime call.

    from rnnir.pool import SessionPool          # or rnnir.serving.pool
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
buffer, an *arena*, with one row per open stream along the model's batch axis
(:mod:`~rnnir.serving.pool.streams`, :mod:`~rnnir.serving.pool.arena`).

A tick in which every open stream calls (the usual serving loop) binds the
arenas whole with ``IOBinding``: the state input reads buffer A and the state
output is written into buffer B, the next tick the reverse (ping-pong, as
``StatefulSession`` does for one stream, with the same
:class:`~rnnir.runtime.binding.PingPong`; :mod:`~rnnir.serving.pool.tick`), so no
state row passes through numpy.
The requests' inputs are stacked in row order (moved there in one ``np.take``
when they arrive in another order), and each stream gets views of its rows of
the outputs: onnxruntime writes them into buffers of the tick's own, which are
written again only once no view of them is alive (an output handed out never
changes; nothing is copied per tick when the caller drops the last tick's).
A kept input context is copied in front of the tick's chunks in the bound input
buffer and its tail kept after the run.  A tick of some of the streams gathers their rows along the batch
axis (one fancy-index per state), runs, and scatters the new rows back.  Inputs
without a batch axis (silero's ``sr``) are shared by the rows of one call:
requests that differ in them, or in any input's shape, run as separate calls.

The batch axes come from the model: for each state input its one dynamic dim
(or a symbol shared with an input); for each plain input the dim sharing that
symbol, the batch axis of a recurrent op's ``X`` it feeds, or its leading
dynamic dim; inputs without dynamic dims are shared.  ``batch_axes=`` overrides
any of them (:mod:`~rnnir.serving.pool.layout`).  Before the first batched call the pool **probes** the model: three
different rows run as one batch must equal the same rows run one at a time
(1e-5), which also finds each output's batch axis.  A model whose batch is
fixed (``state[2, 1, 128]``) or that fails the probe runs one stream per call
(``pool.batching`` says why): the pool stays correct, only slower.

Streams join (:meth:`open`, or ``run(..., open_missing=True)``) and leave
(:meth:`close`) at any call; :meth:`reset` puts one stream back to its initial
state; streams idle for more than ``idle_timeout`` seconds (per ``clock``, which
tests replace) are closed by :meth:`expire`, which every ``run`` calls first.
:meth:`upgrade` swaps the model under running streams, carrying their state
by the rules of :mod:`rnnir.runtime.versioning`.  :class:`~rnnir.serving.pool.Batcher` batches calls that
arrive from many threads within a short window into ticks (:mod:`~rnnir.serving.pool.batcher`); a stream's
state on disk is :mod:`~rnnir.serving.pool.persist`, a tick's requests stacked and split
:mod:`~rnnir.serving.pool.feeds`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from rnnir.errors import StateError
from rnnir.runtime.context import ContextSpec, InputContext
from rnnir.runtime.feeds import FeedError, feed_array
from rnnir.runtime.session import OnnxRuntimeError, StatefulSession
from rnnir.runtime.versioning import StateMigrations, StateOrigin, VersionOutcome, VersionPolicy, compatible, reconcile
from rnnir.serving.pool.arena import Arena
from rnnir.serving.pool.feeds import checked_feeds, groups, split_rows, stack_requests
from rnnir.serving.pool.layout import BatchLayout, one_row, probe, rows_shape, static_layout
from rnnir.serving.pool.persist import PoolStateFiles, check_state
from rnnir.serving.pool.streams import PoolStats, Stream
from rnnir.serving.pool.tick import JOIN_BYTES, SteadyTick, TickContext, WholeTick

__all__ = ["SessionPool"]


class SessionPool(PoolStateFiles):
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
        self._streams: dict[Hashable, Stream] = {}  # in order of joining
        self._placed: list[Stream] = []  # row r belongs to _placed[r] (closed ones until the next _settle)
        self._last_used = np.zeros(0)  # per row: when its stream last ran (per stream while it has no row)
        self._dirty = False  # streams joined or left since the rows were laid out
        self._gen = 0  # changes whenever rows may have moved: cached row lists and bindings are stale
        self._tick_cache: tuple[tuple[Hashable, ...], int, list[Stream], np.ndarray] | None = None
        self._rows_in_order: np.ndarray | None = None  # the cached tick's rows when they are 0, 1, 2, ...
        self._ctx_arenas: dict[str, Arena] | None = None
        self._pending_ctx: dict[Hashable, dict[str, np.ndarray]] = {}  # kept contexts to install when rows exist
        self.stats = PoolStats()
        self._install(StatefulSession(model, pairs, context=context, **self._options))

    def _install(self, solo: StatefulSession) -> None:
        """Use ``solo``'s model from now on (construction and upgrade)."""
        m = solo.spec
        for slot in m.slots:
            if slot.output is None:
                raise StateError(f"{m.label}: state input {slot.input!r} has no paired output: the pool has nothing to carry")
            if slot.output_dtype is not None and slot.output_dtype != slot.dtype:
                raise StateError(f"{m.label}: state output {slot.output!r} is {slot.output_dtype}, its input {slot.dtype} (SD005)")
        self._solo = solo
        self._model = m
        self._plain_dtypes: dict[str, np.dtype[Any]] = {n: d for n in m.plain_inputs if (d := m.inputs[n].dtype) is not None}
        self._ort = m.ort
        self._native = True  # onnxruntime's pybind layer when it has one (rnnir.runtime.ort); False: the documented API
        self._slot_names = [(slot.input, cast(str, slot.output)) for slot in m.slots]
        self._contexts: tuple[InputContext, ...] = solo.context
        for c in self._contexts:
            if self._batch_axes_arg.get(c.input, -1) == c.axis:
                raise StateError(f"{m.label}: the context of {c.input!r} runs along its batch axis {c.axis}")
        layout, why = static_layout(m, self._batch_axes_arg)
        for c in self._contexts:
            if layout is not None and layout.inputs.get(c.input) == c.axis:
                layout, why = None, f"the context of {c.input!r} runs along what looks like its batch axis {c.axis}"
        self.layout: BatchLayout | None = layout
        self.batching = why  # "" while batching is possible; why not otherwise
        self._probed = False
        self._arenas: dict[str, Arena] | None = None
        self._pending: dict[Hashable, dict[str, np.ndarray]] = {}  # states to install when arenas and rows exist
        self._whole: WholeTick | None = None
        self._steady: SteadyTick | None = None  # the last tick's plan, while it holds (see run)
        self._batch_signature: tuple[Any, ...] | None = None  # the last run_batch tick that passed every check
        self._whole_shapes: dict[tuple[Any, ...], dict[str, tuple[tuple[int, ...], np.dtype[Any]]]] = {}
        self._gen += 1

    @property
    def output_names(self) -> list[str]:
        """The model's outputs, in graph order (what a call returns by default)."""
        return list(self._model.output_names)

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
        lock = self._lock
        lock.acquire()  # not ``with``: ~115 ns against ~60 for the two calls, 0.5% of a one-stream call
        try:
            idle = self.idle_timeout is not None
            now = self.clock() if idle else 0.0  # without a timeout only a joining stream needs the time
            if idle:
                self._expire(now)
            if not requests:  # a tick nobody called in (a serving loop's quiet moment): nothing to run, expiry done above
                return {}
            steady = self._steady
            if steady is not None and steady.gen == self._gen and (
                steady.outputs is None if outputs is None else steady.outputs == tuple(outputs)
            ):
                if steady.lean and (self.max_batch is None or len(steady.ids) <= self.max_batch):  # max_batch may have been lowered
                    try:
                        fast = steady.call(requests)
                    except Exception:  # noqa: BLE001 - the state went to the spare buffers: the general path reruns the tick and reports
                        self._steady = fast = None
                else:
                    fast = self._run_steady(steady, requests)
                if fast is not None:
                    if idle:
                        self._last_used[:] = now  # a whole tick: every placed row ran
                    return fast
            return self._run_ticked(requests, outputs, open_missing, now if idle else self.clock())
        finally:
            lock.release()

    def _run_ticked(
        self, requests: Mapping[Hashable, Mapping[str, Any]], outputs: Sequence[str] | None, open_missing: bool, now: float
    ) -> dict[Hashable, dict[str, np.ndarray]]:
        """:meth:`run` past its steady plan (the lock held, idle streams expired): checks the requests, joins
        missing streams, runs the tick and makes the steady plan for the next one."""
        feeds_in = list(requests.values())
        stacked = self._stack_fast(feeds_in)
        # checked before anyone joins; the fast path's checks are the stacking itself
        feeds: list[dict[str, np.ndarray]] = (
            cast("list[dict[str, np.ndarray]]", feeds_in) if stacked is not None
            else [checked_feeds(self._model, self._plain_dtypes, sid, f, self.cast_inputs) for sid, f in requests.items()]
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
                self._steady = SteadyTick(self._gen, ids, None if outputs is None else tuple(outputs), wanted, self._whole, stacked,
                                          self.layout, self.stats, self._tick_contexts(stacked))
        else:
            results = {}
            parts = [group[start : start + limit] for group in groups(feeds, self.layout.inputs if self.layout is not None else {})
                     for start in range(0, len(group), limit)]
            # a tick of several calls moves its streams on only if every call runs: when a later call fails (a
            # request onnxruntime refuses), the streams of the earlier ones get their state and context back, as a
            # solo session's failed call leaves its own, and the caller, who gets no outputs, loses no chunk.  One
            # part is several calls too before the probe: a model it finds cannot batch runs its streams one at a time
            saved = self._rows_before(streams) if len(parts) > 1 or not self._probed else None
            try:
                for part in parts:
                    self._run_group([streams[i] for i in part], [feeds[i] for i in part], results, outputs)
            except BaseException:
                if saved is not None:
                    for arena, row, value in saved:
                        arena.put(row, value)
                raise
            if list(results) != list(requests):
                results = {sid: results[sid] for sid in requests}
        if self.idle_timeout is not None:
            self._last_used[rows] = now
        return results

    def _rows_before(self, streams: Sequence[Stream]) -> list[tuple[Arena, int, np.ndarray]]:
        """A copy of each stream's row of every state and kept context, to put back if the tick fails part-way."""
        assert self._arenas is not None  # built before a tick's first call
        arenas = [*self._arenas.values(), *(self._ctx_arenas or {}).values()]
        return [(arena, s.row, arena.row(s.row)) for s in streams for arena in arenas]

    def _run_steady(self, steady: SteadyTick, requests: Mapping[Hashable, Mapping[str, Any]]) -> dict[Hashable, dict[str, np.ndarray]] | None:
        """A tick like the last one (see :class:`SteadyTick`; ``run`` itself serves the lean ones): the same ids in the same order, every input of
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
            if list(requests) != ids or self.max_batch is not None and n > self.max_batch:  # max_batch may have been lowered since
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
        self.stats.steady_tick(n)
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

    def _stack_fast(self, feeds: list[Mapping[str, Any]]) -> dict[str, np.ndarray] | None:
        """The batch of a usual tick (:func:`~rnnir.serving.pool.feeds.stack_requests`), or None when the pool
        cannot stack it yet (no layout, no probe, no context arenas) or anything differs."""
        layout = self.layout
        # one request needs no output axes (nothing to split), so no probe either
        if layout is None or self.batching or not (self._probed or len(feeds) == 1) or self._contexts and self._ctx_arenas is None:
            return None
        return stack_requests(feeds, self._plain_dtypes, layout.inputs)

    def _split(self, sids: Sequence[Hashable], out: Mapping[str, np.ndarray], pick: np.ndarray | None, n: int) -> dict[Hashable, dict[str, np.ndarray]]:
        """Each stream's rows of the batched outputs (views, each with its batch axis of size 1)."""
        return split_rows(sids, out, pick, n, {} if self.layout is None else self.layout.outputs)

    def _tick_contexts(self, batch: Mapping[str, np.ndarray]) -> dict[str, TickContext]:
        """Each fed input with a kept context: its axis, size and arena (what the lean steady tick needs)."""
        arenas = self._ctx_arenas or {}
        # the axis as _with_context reads it (None: the last), counted from the front: the plan slices along it;
        # a fed input's arena exists (the tick the plan repeats read it in _with_context)
        return {c.input: ((-1 if c.axis is None else c.axis) % batch[c.input].ndim, c.size, arenas[c.input])
                for c in self._contexts if c.input in batch}

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
            shape = list(chunk.shape)
            if len(shape) == kept.ndim:
                shape[axis] = kept.shape[axis]  # the context axis may differ, nothing else
            if shape != list(kept.shape):
                # as a solo session refuses it (numpy's concatenate would say only that dimensions differ)
                raise StateError(f"{self.label}: input {c.input!r} has shape {chunk.shape} (the tick's rows stacked), but the kept context is "
                                 f"{kept.shape}: a chunk may change only along the context axis within a stream; reset() first")
            combined = np.concatenate([kept, chunk], axis=axis)
            index = [slice(None)] * combined.ndim
            index[axis] = slice(combined.shape[axis] - c.size, None)
            tails[c.input] = combined[tuple(index)]
            feeds[c.input] = combined
        return feeds, tails

    def _run_group(
        self,
        streams: list[Stream],
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
            self._probe(batch)
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
        signature = (tuple((name, one_row(a.shape, layout.inputs.get(name)), a.dtype) for name, a in batch.items()), tuple(wanted))
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
                        name: (one_row(out[name].shape, layout.outputs.get(name) if n > 1 else None), out[name].dtype)
                        for name in wanted if name not in self._model.state_outputs
                    })
                return {name: out[name] for name in wanted}
            shapes = per_row if n == 1 else {name: (rows_shape(shape, layout.outputs[name], n), dtype) for name, (shape, dtype) in per_row.items()}
            # new bindings: a steady plan over the old ones would run them out of their ping-pong parity
            self._steady = None
            tick = self._whole = WholeTick(key, self._ort, self._native, self._arenas, self._slot_names, shapes, batch, JOIN_BYTES)
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
        try:
            values = self._ort.run(None, batch)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types; a stream's solo session wraps them the same way
            raise OnnxRuntimeError.refusing(self.label, {n: a for n, a in batch.items() if n not in self._arenas}, exc) from exc
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
        if not ids:  # no row to stack, and no run to learn the outputs' shapes from: ``run({})`` is the empty tick
            raise FeedError(f"{self.label}: run_batch got no session ids; a tick needs at least one stream (run({{}}) is the empty tick)")
        # a tick like the last one (same ids, feed names, array shapes and dtypes, outputs; the usual serving
        # loop) was checked then: only the signature is compared
        signature = (ids, [(name, type(v), getattr(v, "shape", None), getattr(v, "dtype", None)) for name, v in feeds.items()],
                     None if outputs is None else tuple(outputs))
        if signature == self._batch_signature and self.layout is not None and self._probed and not self.batching and (self.max_batch is None or len(ids) <= self.max_batch):
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

    def _into_rows(self, rows: np.ndarray, batch: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """A tick of every placed stream: its inputs moved from request order into row order (nothing to do
        when the requests come in row order, the usual loop), and each request's row (None: request i is row i)."""
        if rows is self._rows_in_order or np.array_equal(rows, np.arange(len(rows))):  # the first: a cached tick's rows
            return batch, None
        assert self.layout is not None
        order = np.argsort(rows)
        axes = self.layout.inputs
        return {name: (a if axes.get(name) is None else np.take(a, order, axis=axes[name])) for name, a in batch.items()}, rows

    def _probe(self, batch: Mapping[str, np.ndarray]) -> None:
        """Run three rows as one batch and one at a time (:func:`~rnnir.serving.pool.layout.probe`)."""
        self._probed = True
        assert self.layout is not None and self._arenas is not None
        initial = {name: arena.initial for name, arena in self._arenas.items()}
        self.layout, self.batching = probe(self._ort, self._model, self.layout, batch, initial, self._model_feeds)

    # -- model upgrade -----------------------------------------------------------------------
    def upgrade(
        self,
        model: Any,
        pairs: Mapping[str, str | None] | None = None,
        *,
        policy: VersionPolicy | str = VersionPolicy.REFUSE,
        migrations: StateMigrations | None = None,
    ) -> dict[Hashable, VersionOutcome]:
        """Serve ``model`` from now on, carrying every open stream's state by :func:`rnnir.runtime.versioning.reconcile`:
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
                    check_state(value, solo, f"session {sid!r} ({outcome.value})")
                    carried[sid] = value
                outcomes[sid] = outcome
            self._install(solo)
            self._pending = carried
            for sid, o in outcomes.items():
                if o is VersionOutcome.RESET:
                    self._put_context(self._streams[sid], None)
            return outcomes
