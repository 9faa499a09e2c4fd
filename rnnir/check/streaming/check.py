"""The streaming checks themselves: the stream cut into calls as the multi-call check cuts it, run intact and
perturbed (a lost chunk, a restart, a burst), timed, repeated to a long run and served by a pool."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rnnir.check.multicall.stream import (
    DEFAULT_MAX_ELEMENTS,
    InputHints,
    ProgressCallback,
    StreamError,
    prepare_stream,
    time_axes,
)
from rnnir.check.streaming.isolation import isolation, session_options
from rnnir.check.streaming.longrun import long_run, slot_trends
from rnnir.check.streaming.recovery import check_index, compare_runs, replace_streamed, run_outputs
from rnnir.check.streaming.report import ColdStart, Latency, StreamingReport
from rnnir.runtime.session import StatefulSession

__all__ = ["DEFAULT_TOL", "check_streaming", "make_chunks"]

DEFAULT_TOL = 1e-3
_BURST_GAIN = 4.0  # a noise burst: this many times the stream's standard deviation


def make_chunks(
    session: StatefulSession,
    stream: Mapping[str, Any] | np.ndarray | None = None,
    *,
    calls: int | None = None,
    chunk: int = 16,
    seed: int = 0,
    time_axis: int | Mapping[str, int | None] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, float] | None = None,
    notes: list[str] | None = None,
) -> tuple[list[dict[str, np.ndarray]], set[str]]:
    """The stream cut into calls exactly as :func:`rnnir.testing.check_multicall` cuts it, and the names of
    the inputs that carry the stream (the ones a lost chunk or a burst replaces)."""
    notes = notes if notes is not None else []
    axes = time_axes(session, time_axis)
    sizes = [int(chunk)]
    prepared = prepare_stream(
        session, stream, axes, chunk_sizes=sizes, calls=calls, length=None, seed=seed, batch=1, max_elements=DEFAULT_MAX_ELEMENTS,
        notes=notes, hints=InputHints(dict(input_shapes or {}), dict(input_values or {})),
    )
    chunks = prepared.chunks(prepared.usable_chunks(sizes, notes)[0])
    candidates = {n for n in prepared.feeds if n not in prepared.const and n not in prepared.lengths}
    return chunks, _changing(chunks, candidates)


def _changing(chunks: Sequence[Mapping[str, np.ndarray]], names: set[str]) -> set[str]:
    """The inputs whose value changes from call to call (a sample rate fed every call does not)."""
    first = chunks[0]
    return {n for n in names if n in first and any(not np.array_equal(first[n], c[n]) for c in chunks[1:])}


# -- running -----------------------------------------------------------------------------------


def _latency(session: StatefulSession, chunks: Sequence[Mapping[str, np.ndarray]], progress: ProgressCallback | None = None) -> Latency:
    s = session.fork(reset=True)
    s.run(chunks[0])  # the first call probes shapes: not steady-state latency
    s.reset()
    times: list[float] = []
    clock = time.perf_counter
    for feed in chunks:
        t = clock()
        s.run(feed)
        times.append(clock() - t)
        if progress is not None:  # outside the timed part
            progress("latency", len(times), len(chunks))
    return Latency.of(times)


def _cold_start(session: StatefulSession, first: Mapping[str, np.ndarray], rebuild: Any) -> ColdStart:
    t = time.perf_counter()
    fresh = rebuild()
    fresh.run(first)
    new_session = time.perf_counter() - t
    t = time.perf_counter()
    session.fork(reset=True).run(first)
    return ColdStart(new_session, time.perf_counter() - t)


def check_streaming(
    model: Any,
    stream: Mapping[str, Any] | np.ndarray | Sequence[Mapping[str, Any]] | None = None,
    *,
    drop: int | None = None,
    drop_mode: str = "skip",
    reconnect: int | None = None,
    burst: tuple[int, int] | None = None,
    burst_kind: str = "noise",
    long: int | None = None,
    tol: float = DEFAULT_TOL,
    calls: int | None = None,
    chunk: int = 16,
    seed: int = 0,
    pairs: Mapping[str, str | None] | None = None,
    context: Mapping[str, Any] | None = None,
    time_axis: int | Mapping[str, int | None] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, float] | None = None,
    streamed: Sequence[str] | None = None,
    cold_start: bool | None = None,
    streams: int | None = None,
    progress: ProgressCallback | None = None,
) -> StreamingReport:
    """Run the requested deployment checks on ``stream`` (see the module docstring).

    ``model``: a path, bytes, ``onnx.ModelProto``, Program or a StatefulSession (its forks are used).
    ``stream``: as for :func:`~rnnir.testing.check_multicall` (generated when omitted, ``calls`` calls
    of ``chunk`` steps), or a list of per-call feeds.  ``streamed`` names the inputs a drop or burst
    replaces (default: the ones that change from call to call).  ``cold_start`` (default: when
    ``reconnect`` is asked) times a new session and a new stream.  ``streams`` serves that many
    streams from one :class:`~rnnir.pool.SessionPool` (batched when the model allows) and compares
    each with its solo run: a leak between rows fails.  ``progress(what, done, total)`` is called after every call.
    """
    if drop_mode not in ("skip", "zero"):
        raise StreamError(f"drop_mode must be 'skip' or 'zero', got {drop_mode!r}")
    if burst_kind not in ("noise", "silence"):
        raise StreamError(f"burst_kind must be 'noise' or 'silence', got {burst_kind!r}")
    if tol < 0 or math.isnan(tol):
        raise StreamError(f"tol must be a non-negative number, got {tol}")
    if isinstance(model, StatefulSession):
        session = model
        if context:
            raise StreamError("context= applies to a new session; declare it on the StatefulSession passed in")

        def rebuild() -> StatefulSession:
            return StatefulSession(
                session.program, cast_state=session.cast_state, context={c.input: c for c in session.context}, session_options=session_options(session)
            )
    else:
        session = StatefulSession(model, pairs=pairs, cast_state=True, context=context)

        def rebuild() -> StatefulSession:
            return StatefulSession(model, pairs=pairs, cast_state=True, context=context)

    notes: list[str] = []
    if isinstance(stream, Sequence) and not isinstance(stream, np.ndarray) and stream and isinstance(stream[0], Mapping):
        chunks = [{k: np.asarray(v) for k, v in c.items()} for c in stream]
        names = _named(streamed, chunks) if streamed is not None else _changing(chunks, set(chunks[0]))
    else:
        chunks, names = make_chunks(
            session, stream, calls=calls, chunk=chunk, seed=seed, time_axis=time_axis,  # type: ignore[arg-type]
            input_shapes=input_shapes, input_values=input_values, notes=notes,
        )
        if streamed is not None:
            names = _named(streamed, chunks)
    n = len(chunks)
    if n < 2:
        raise StreamError(f"the stream has {n} call(s); the streaming checks need at least 2")
    state_outputs = {s.output for s in session.slots if s.output is not None}

    report = StreamingReport(session.label, n, tol, _latency(session, chunks, progress), 0, notes=notes)
    probe = session.fork(reset=True)
    probe.run(chunks[0])
    report.state_bytes = probe.state_bytes

    need_ref = drop is not None or reconnect is not None or burst is not None
    ref_out, ref_states = run_outputs(session.fork(reset=True), chunks, progress, "intact stream") if need_ref else ([], [])

    if drop is not None:
        check_index("drop", drop, n)
        if drop_mode == "skip":
            perturbed = chunks[:drop] + chunks[drop + 1 :]
            out, states = run_outputs(session.fork(reset=True), perturbed, progress, f"chunk {drop} dropped")
            got, got_s = out[drop:], states[drop:]  # each ran chunk j+1 of the intact stream
        else:
            perturbed = chunks[:drop] + [replace_streamed(chunks[drop], names, np.zeros_like)] + chunks[drop + 1 :]
            out, states = run_outputs(session.fork(reset=True), perturbed, progress, f"chunk {drop} dropped")
            got, got_s = out[drop + 1 :], states[drop + 1 :]
        report.checks.append(compare_runs("drop", drop, 1, drop_mode, tol, got, ref_out[drop + 1 :], got_s, ref_states[drop + 1 :], state_outputs))

    if reconnect is not None:
        check_index("reconnect", reconnect, n, 0)
        out, states = run_outputs(session.fork(reset=True), chunks[reconnect:], progress, f"restart at call {reconnect}")
        report.checks.append(compare_runs("reconnect", reconnect, 0, "restart", tol, out, ref_out[reconnect:], states, ref_states[reconnect:], state_outputs))
    if cold_start or (cold_start is None and reconnect is not None):
        report.cold_start = _cold_start(session, chunks[0], rebuild)

    if burst is not None:
        at, length = int(burst[0]), int(burst[1])
        if length < 1:
            raise StreamError(f"a burst needs at least one call, got {length}")
        check_index("burst", at, n, length)
        rng = np.random.default_rng(seed + 1)
        scale = {name: float(np.std(np.concatenate([np.ravel(c[name]) for c in chunks]).astype(np.float64))) or 1.0
                 for name in names if np.issubdtype(chunks[0][name].dtype, np.floating)}

        def loud(a: np.ndarray, name: str) -> np.ndarray:
            if burst_kind == "silence" or name not in scale:
                return np.zeros_like(a)
            return (_BURST_GAIN * scale[name] * rng.standard_normal(a.shape)).astype(a.dtype)

        perturbed = list(chunks[:at]) + [
            {k: (loud(v, k) if k in names else v) for k, v in c.items()} for c in chunks[at : at + length]
        ] + list(chunks[at + length :])
        out, states = run_outputs(session.fork(reset=True), perturbed, progress, f"burst at call {at}")
        end = at + length
        report.checks.append(compare_runs("burst", at, length, burst_kind, tol, out[end:], ref_out[end:], states[end:], ref_states[end:], state_outputs))
        report.burst_health = slot_trends(states)

    if long is not None:
        report.long = long_run(session, chunks, int(long), progress)
    if streams is not None:
        report.isolation = isolation(session, chunks, int(streams), progress)
    return report


def _named(streamed: Sequence[str], chunks: Sequence[Mapping[str, np.ndarray]]) -> set[str]:
    """The inputs ``streamed=`` names, each one an input of the stream: a misspelt name would leave a drop or a burst
    nothing to replace, and every check would pass on an unperturbed stream."""
    names = set(streamed)
    unknown = sorted(names - set(chunks[0])) if chunks else []
    if unknown:
        raise StreamError(f"streamed= names {unknown}, which the stream does not feed (its inputs: {sorted(chunks[0])})")
    return names
