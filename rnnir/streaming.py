"""Deployment checks for streaming models: lost chunks, reconnection, bursts, very long streams, latency.

    from rnnir.streaming import check_streaming, streaming_to_text
    report = check_streaming("model.onnx", {"x": x}, drop=40, reconnect=100, burst=(60, 10), long=100_000)
    report.ok; print(streaming_to_text(report)); report.to_json()

Every check runs the same stream of chunks twice, intact and perturbed, on
forks of one :class:`~rnnir.runtime.StatefulSession`, and compares them call
by call on the same input chunks:

``drop``
    chunk k is lost: skipped (``drop_mode="skip"``, the stream goes on with
    chunk k+1) or replaced by zeros (``"zero"``).  Reported: how far each
    output departs from the intact stream afterwards, and the **recovery
    length**: the calls after the lost chunk until every output is back within
    ``tol`` of the intact stream and stays there to the end of the run; or
    "never within N calls".
``reconnect``
    a client that lost its session restarts from the initial state at call k.
    Reported: calls until the restarted stream agrees with the continuous one,
    and the **cold start**: creating a session (loading the model) to its first
    output, and opening a stream on a loaded model to its first output.
``burst``
    chunks k .. k+n-1 replaced by loud noise (``burst_kind="noise"``, 4x the
    stream's standard deviation) or silence (``"silence"``): state health over
    the run (a non-finite state fails; growth is only reported, since a short
    run cannot tell a rise from a trend) and the recovery length after the burst.
``long``
    the stream repeated to N calls (``rnnir run --long 100000``; minutes, not
    for CI): per slot the norm trend, the share of saturated elements
    (|x| >= 0.999, pinned at a tanh/sigmoid limit) and the headroom to
    float16's largest value; fails when the state is non-finite or grows
    without bound.

``latency`` (p50/p99 of one call, on a fork with nothing else measured) and
``state_bytes`` (every slot plus any kept input context: the memory one more
concurrent stream costs) are always reported.

A check fails (``ok`` False) when the stream never recovers within the run,
or when the state's health is non-finite or growing.  The tolerance is looser
than the multi-call check's equality (default 1e-3 on every output): after a
perturbation a decaying state only comes back asymptotically.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .runtime import StatefulSession
from .testing import _FP16_MAX, ProgressCallback, StreamError, _fmt, _InputHints, _max_diff, _num, _prepare_stream, _Runner, _time_axes, _trend, _usable_chunks

__all__ = [
    "ColdStart",
    "Isolation",
    "Latency",
    "LongRun",
    "Recovery",
    "SlotTrend",
    "StreamingReport",
    "check_streaming",
    "make_chunks",
    "streaming_to_text",
]

DEFAULT_TOL = 1e-3
_SATURATED = 0.999
_BURST_GAIN = 4.0


@dataclass
class Recovery:
    """One perturbation against the intact stream: departures and how long until the outputs agree again."""

    check: str  # drop / reconnect / burst
    at: int  # call index of the perturbation (0-based)
    length: int  # calls perturbed (drop: 1; reconnect: 0; burst: n)
    mode: str  # skip / zero / restart / noise / silence
    compared: int  # calls compared after the perturbation
    tol: float
    departure: dict[str, float] = field(default_factory=dict)  # output -> max |diff| over the compared calls
    per_output: dict[str, int | None] = field(default_factory=dict)  # output -> recovery length (None: never)
    recovery: int | None = None  # calls until every output is back within tol for good
    state_recovery: int | None = None  # the same for the state itself
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.recovery is not None

    def summary(self) -> str:
        what = {
            "drop": f"chunk {self.at} dropped ({self.mode})",
            "reconnect": f"restart from the initial state at call {self.at}",
            "burst": f"{self.mode} burst over calls {self.at}..{self.at + self.length - 1}",
        }[self.check]
        worst = max(self.departure.items(), key=lambda kv: kv[1], default=("-", 0.0))
        if self.recovery is None:
            verdict = f"FAIL: never back within {self.tol:g} in {self.compared} calls"
        else:
            verdict = f"back within {self.tol:g} after {self.recovery} call(s)"
        state = "" if self.state_recovery is None else f"; state agrees after {self.state_recovery}"
        if self.state_recovery is None and self.per_output:
            state = "; state never agrees"
        return f"{what}: {verdict}{state} (largest departure {_fmt(worst[1])} on {worst[0]!r})"

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "at": self.at,
            "length": self.length,
            "mode": self.mode,
            "compared": self.compared,
            "tol": self.tol,
            "ok": self.ok,
            "recovery": self.recovery,
            "state_recovery": self.state_recovery,
            "departure": {k: _num(v) for k, v in self.departure.items()},
            "per_output": dict(self.per_output),
            "note": self.note,
        }


@dataclass
class ColdStart:
    """Seconds from creating a session (loading the model) to its first output; from opening a stream on a
    loaded model (``fork(reset=True)``) to its first output."""

    new_session_s: float
    new_stream_s: float

    def to_json(self) -> dict[str, Any]:
        return {"new_session_s": self.new_session_s, "new_stream_s": self.new_stream_s}


@dataclass
class Latency:
    """Wall time of one call (``StatefulSession.run``) over a run of the stream, in microseconds."""

    calls: int
    p50_us: float
    p99_us: float
    mean_us: float
    max_us: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        us = np.asarray(seconds, dtype=np.float64) * 1e6
        if us.size == 0:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        return cls(int(us.size), float(np.percentile(us, 50)), float(np.percentile(us, 99)), float(us.mean()), float(us.max()))

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "p50_us": _num(self.p50_us), "p99_us": _num(self.p99_us), "mean_us": _num(self.mean_us), "max_us": _num(self.max_us)}


@dataclass
class SlotTrend:
    """One slot over a long run (sampled per call): norm trend, saturation, float16 headroom."""

    slot: str
    calls: int
    trend: str  # bounded / growing / decaying / non-finite / constant
    growth: float
    first_norm: float
    last_norm: float
    peak_abs: float
    saturated: float  # share of elements with |x| >= 0.999 at the end of the run
    peak_saturated: float  # the largest such share over the run

    @property
    def fp16_headroom(self) -> float:
        return math.inf if self.peak_abs == 0 else _FP16_MAX / self.peak_abs

    @property
    def ok(self) -> bool:
        """Bounded over a long run: neither growing nor non-finite."""
        return self.trend not in ("growing", "non-finite")

    @property
    def finite(self) -> bool:
        return self.trend != "non-finite"

    def summary(self, judge_growth: bool = True) -> str:
        head = "inf" if math.isinf(self.fp16_headroom) else f"{self.fp16_headroom:.3g}x"
        flag = "" if (self.ok if judge_growth else self.finite) else "FAIL: "
        return (
            f"{flag}{self.slot}: {self.trend} over {self.calls} calls (norm {_fmt(self.first_norm)} -> {_fmt(self.last_norm)}, "
            f"growth x{_fmt(self.growth)}, |max| {_fmt(self.peak_abs)}, saturated {self.saturated:.1%} "
            f"(peak {self.peak_saturated:.1%}), float16 headroom {head})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot, "calls": self.calls, "trend": self.trend, "ok": self.ok, "growth": _num(self.growth),
            "first_norm": _num(self.first_norm), "last_norm": _num(self.last_norm), "peak_abs": _num(self.peak_abs),
            "saturated": self.saturated, "peak_saturated": self.peak_saturated, "fp16_headroom": _num(self.fp16_headroom),
        }


@dataclass
class LongRun:
    """A stream far longer than usual: every slot's trend, and the per-call latency over it."""

    calls: int
    slots: dict[str, SlotTrend]
    latency: Latency
    seconds: float

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.slots.values())

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "ok": self.ok, "seconds": self.seconds, "latency": self.latency.to_json(),
                "slots": {k: v.to_json() for k, v in self.slots.items()}}


@dataclass
class Isolation:
    """N streams served by one :class:`~rnnir.pool.SessionPool` against each stream run alone."""

    streams: int
    calls: int
    batching: str  # "batched", or why the pool runs one stream per call
    ort_calls: int
    max_abs_diff: float
    worst_stream: int | None
    tol: float = 1e-5

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tol

    def summary(self) -> str:
        how = "batched" if self.batching == "batched" else f"one stream per call ({self.batching})"
        verdict = (
            f"every stream equals its solo run (max |diff| {_fmt(self.max_abs_diff)})"
            if self.ok
            else f"FAIL: stream {self.worst_stream} differs from its solo run by {_fmt(self.max_abs_diff)} (> {self.tol:g}): rows leak into each other"
        )
        return f"pool of {self.streams} streams x {self.calls} calls, {how}, {self.ort_calls} onnxruntime calls: {verdict}"

    def to_json(self) -> dict[str, Any]:
        return {"streams": self.streams, "calls": self.calls, "batching": self.batching, "ort_calls": self.ort_calls,
                "max_abs_diff": _num(self.max_abs_diff), "worst_stream": self.worst_stream, "tol": self.tol, "ok": self.ok}


@dataclass
class StreamingReport:
    """Everything :func:`check_streaming` measured; render with :func:`streaming_to_text` or :meth:`to_json`."""

    model: str
    calls: int
    tol: float
    latency: Latency
    state_bytes: int
    checks: list[Recovery] = field(default_factory=list)
    burst_health: dict[str, SlotTrend] = field(default_factory=dict)
    cold_start: ColdStart | None = None
    long: LongRun | None = None
    isolation: Isolation | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            all(c.ok for c in self.checks)
            and all(h.finite for h in self.burst_health.values())  # growth is judged over a long run, not a burst
            and (self.long is None or self.long.ok)
            and (self.isolation is None or self.isolation.ok)
        )

    @property
    def status(self) -> str:
        return "pass" if self.ok else "fail"

    @property
    def checked(self) -> bool:
        """Whether a streaming check ran (a drop, restart, burst, long run or pool of streams): without one, the
        report holds measurements only (latency, state bytes) and has no verdict to print."""
        return bool(self.checks or self.burst_health) or self.long is not None or self.isolation is not None

    def check(self, name: str) -> Recovery:
        for c in self.checks:
            if c.check == name:
                return c
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "status": self.status,
            "ok": self.ok,
            "calls": self.calls,
            "tol": self.tol,
            "latency": self.latency.to_json(),
            "state_bytes": self.state_bytes,
            "checks": [c.to_json() for c in self.checks],
            "burst_health": {k: v.to_json() for k, v in self.burst_health.items()},
            "cold_start": None if self.cold_start is None else self.cold_start.to_json(),
            "long": None if self.long is None else self.long.to_json(),
            "isolation": None if self.isolation is None else self.isolation.to_json(),
            "notes": list(self.notes),
        }


# -- the stream as chunks ----------------------------------------------------------------------


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
    axes = _time_axes(session, time_axis)
    mode = "time" if any(a is not None for a in axes.values()) else "calls"
    sizes = [int(chunk)]
    feeds, length, const, lengths = _prepare_stream(
        session, stream, axes, mode, sizes, calls, None, seed, 1, 50_000_000, notes,
        _InputHints(dict(input_shapes or {}), dict(input_values or {})),
    )
    if mode == "calls":
        sizes = [1]
    else:
        sizes = _usable_chunks(session, axes, sizes, length, notes)
    runner = _Runner(session, feeds, axes, const, lengths, mode, length, 0.0)
    chunks = runner.chunks(sizes[0])
    candidates = {n for n in feeds if n not in const and n not in lengths}
    return chunks, _changing(chunks, candidates)


def _changing(chunks: Sequence[Mapping[str, np.ndarray]], names: set[str]) -> set[str]:
    """The inputs whose value changes from call to call (a sample rate fed every call does not)."""
    first = chunks[0]
    return {n for n in names if n in first and any(not np.array_equal(first[n], c[n]) for c in chunks[1:])}


# -- running -----------------------------------------------------------------------------------


def _outputs(
    session: StatefulSession, chunks: Sequence[Mapping[str, np.ndarray]], progress: ProgressCallback | None = None, what: str = ""
) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    outs, states = [], []
    for feed in chunks:
        outs.append(session.run_dict(feed))
        states.append(session.state)
        if progress is not None:
            progress(what, len(outs), len(chunks))
    return outs, states


def _recovery_length(diffs: Sequence[float], tol: float) -> int | None:
    """Smallest r such that every diff from r on is within tol; None when the last one is not."""
    r = len(diffs)
    for k in range(len(diffs) - 1, -1, -1):
        if not diffs[k] <= tol:  # NaN counts as out of tolerance
            break
        r = k
    return None if r == len(diffs) else r


def _compare(
    check: str, at: int, length: int, mode: str, tol: float,
    got: Sequence[Mapping[str, np.ndarray]], ref: Sequence[Mapping[str, np.ndarray]],
    got_states: Sequence[Mapping[str, np.ndarray]], ref_states: Sequence[Mapping[str, np.ndarray]],
    state_outputs: set[str],
) -> Recovery:
    """``got[j]`` and ``ref[j]`` ran the same input chunk; compare them call by call."""
    result = Recovery(check, at, length, mode, len(got), tol)
    names = [n for n in (ref[0] if ref else {}) if n not in state_outputs] or list(ref[0] if ref else {})
    per_call: list[float] = [0.0] * len(got)
    for name in names:
        diffs = [_max_diff(g[name], r[name]) for g, r in zip(got, ref)]
        result.departure[name] = max(diffs, default=0.0)
        result.per_output[name] = _recovery_length(diffs, tol)
        per_call = [max(a, b) if not (math.isnan(a) or math.isnan(b)) else math.inf for a, b in zip(per_call, diffs)]
    result.recovery = _recovery_length(per_call, tol) if got else None
    state_diffs = [max((_max_diff(g[k], r[k]) for k in r), default=0.0) for g, r in zip(got_states, ref_states)]
    result.state_recovery = _recovery_length(state_diffs, tol) if got_states else None
    if not got:
        result.note = "no calls after the perturbation: nothing to compare (make the stream longer)"
    return result


def _check_index(name: str, at: int, calls: int, length: int = 1) -> None:
    if at < 0 or at + length >= calls:
        raise StreamError(f"{name} at call {at} (length {length}) leaves no call after it in a stream of {calls} calls")


def _replace(chunk: Mapping[str, np.ndarray], streamed: set[str], make: Any) -> dict[str, np.ndarray]:
    return {n: (make(a) if n in streamed else a) for n, a in chunk.items()}


def _health(states: Sequence[Mapping[str, np.ndarray]]) -> dict[str, SlotTrend]:
    """Per slot trend over a run, from norms/peaks/saturation tracked call by call."""
    if not states:
        return {}
    tracker = _Tracker(list(states[0]))
    for s in states:
        tracker.add(s)
    return tracker.result()


class _Tracker:
    """Streaming statistics of the slots (a 100,000-call run keeps a few floats per call, not the states)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.norms: dict[str, list[float]] = {n: [] for n in names}
        self.peak: dict[str, float] = dict.fromkeys(names, 0.0)
        self.sat: dict[str, float] = dict.fromkeys(names, 0.0)
        self.peak_sat: dict[str, float] = dict.fromkeys(names, 0.0)

    def add(self, state: Mapping[str, np.ndarray]) -> None:
        for n in self.names:
            a = np.asarray(state[n], dtype=np.float64)
            mag = np.abs(a)
            self.norms[n].append(float(np.linalg.norm(a.ravel())))
            peak = float(mag.max()) if mag.size else 0.0
            self.peak[n] = max(self.peak[n], peak) if not math.isnan(peak) else math.nan
            sat = float((mag >= _SATURATED).mean()) if mag.size else 0.0
            self.sat[n] = sat
            self.peak_sat[n] = max(self.peak_sat[n], sat)

    def result(self) -> dict[str, SlotTrend]:
        out: dict[str, SlotTrend] = {}
        for n in self.names:
            norms = self.norms[n]
            trend, growth = _trend(norms)
            out[n] = SlotTrend(n, len(norms), trend, growth, norms[0], norms[-1], self.peak[n], self.sat[n], self.peak_sat[n])
        return out


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
                session.program, cast_state=session.cast_state, context={c.input: c for c in session.context}, session_options=_options(session)
            )
    else:
        session = StatefulSession(model, pairs=pairs, cast_state=True, context=context)

        def rebuild() -> StatefulSession:
            return StatefulSession(model, pairs=pairs, cast_state=True, context=context)

    notes: list[str] = []
    if isinstance(stream, Sequence) and not isinstance(stream, np.ndarray) and stream and isinstance(stream[0], Mapping):
        chunks = [{k: np.asarray(v) for k, v in c.items()} for c in stream]
        names = set(streamed) if streamed is not None else _changing(chunks, set(chunks[0]))
    else:
        chunks, names = make_chunks(
            session, stream, calls=calls, chunk=chunk, seed=seed, time_axis=time_axis,  # type: ignore[arg-type]
            input_shapes=input_shapes, input_values=input_values, notes=notes,
        )
        if streamed is not None:
            names = set(streamed)
    n = len(chunks)
    if n < 2:
        raise StreamError(f"the stream has {n} call(s); the streaming checks need at least 2")
    state_outputs = {s.output for s in session.slots if s.output is not None}

    report = StreamingReport(session.label, n, tol, _latency(session, chunks, progress), 0, notes=notes)
    probe = session.fork(reset=True)
    probe.run(chunks[0])
    report.state_bytes = probe.state_bytes

    need_ref = drop is not None or reconnect is not None or burst is not None
    ref_out, ref_states = _outputs(session.fork(reset=True), chunks, progress, "intact stream") if need_ref else ([], [])

    if drop is not None:
        _check_index("drop", drop, n)
        if drop_mode == "skip":
            perturbed = chunks[:drop] + chunks[drop + 1 :]
            out, states = _outputs(session.fork(reset=True), perturbed, progress, f"chunk {drop} dropped")
            got, got_s = out[drop:], states[drop:]  # each ran chunk j+1 of the intact stream
        else:
            perturbed = chunks[:drop] + [_replace(chunks[drop], names, np.zeros_like)] + chunks[drop + 1 :]
            out, states = _outputs(session.fork(reset=True), perturbed, progress, f"chunk {drop} dropped")
            got, got_s = out[drop + 1 :], states[drop + 1 :]
        report.checks.append(_compare("drop", drop, 1, drop_mode, tol, got, ref_out[drop + 1 :], got_s, ref_states[drop + 1 :], state_outputs))

    if reconnect is not None:
        _check_index("reconnect", reconnect, n, 0)
        out, states = _outputs(session.fork(reset=True), chunks[reconnect:], progress, f"restart at call {reconnect}")
        report.checks.append(_compare("reconnect", reconnect, 0, "restart", tol, out, ref_out[reconnect:], states, ref_states[reconnect:], state_outputs))
    if cold_start or (cold_start is None and reconnect is not None):
        report.cold_start = _cold_start(session, chunks[0], rebuild)

    if burst is not None:
        at, length = int(burst[0]), int(burst[1])
        if length < 1:
            raise StreamError(f"a burst needs at least one call, got {length}")
        _check_index("burst", at, n, length)
        rng = np.random.default_rng(seed + 1)
        scale = {name: float(np.std(np.concatenate([np.ravel(c[name]) for c in chunks]).astype(np.float64))) or 1.0
                 for name in names if name in chunks[0] and np.issubdtype(chunks[0][name].dtype, np.floating)}

        def loud(a: np.ndarray, name: str) -> np.ndarray:
            if burst_kind == "silence" or name not in scale:
                return np.zeros_like(a)
            return (_BURST_GAIN * scale[name] * rng.standard_normal(a.shape)).astype(a.dtype)

        perturbed = list(chunks[:at]) + [
            {k: (loud(v, k) if k in names else v) for k, v in c.items()} for c in chunks[at : at + length]
        ] + list(chunks[at + length :])
        out, states = _outputs(session.fork(reset=True), perturbed, progress, f"burst at call {at}")
        end = at + length
        report.checks.append(_compare("burst", at, length, burst_kind, tol, out[end:], ref_out[end:], states[end:], ref_states[end:], state_outputs))
        report.burst_health = _health(states)

    if long is not None:
        report.long = _long_run(session, chunks, int(long), progress)
    if streams is not None:
        report.isolation = _isolation(session, chunks, int(streams), progress)
    return report


def _isolation(session: StatefulSession, chunks: Sequence[Mapping[str, np.ndarray]], streams: int, progress: ProgressCallback | None = None) -> Isolation:
    """``streams`` streams through one pool, stream i fed the chunks from offset 7i (so rows differ), every
    call compared with the same stream on its own fork."""
    from .pool import SessionPool  # imported only when asked

    if streams < 2:
        raise StreamError(f"an isolation check needs at least 2 streams, got {streams}")
    # the caller's onnxruntime options (rnnir run: its log quiet) also for the pool, whose batch probe may fail in onnxruntime
    pool = SessionPool(session.program, context={c.input: c for c in session.context}, session_options=_options(session))
    solo = [session.fork(reset=True) for _ in range(streams)]
    n = len(chunks)
    worst, who = 0.0, None
    for t in range(n):
        feeds = [chunks[(t + 7 * i) % n] for i in range(streams)]
        requests: dict[Hashable, Mapping[str, Any]] = dict(enumerate(feeds))
        got = pool.run(requests, open_missing=True)
        for i, feed in enumerate(feeds):
            want = solo[i].run_dict(feed)
            d = max((_max_diff(got[i][k], v) for k, v in want.items()), default=0.0)
            if not d <= worst:
                worst, who = d, i
        if progress is not None:
            progress(f"{streams} streams", t + 1, n)
    return Isolation(streams, n, pool.batching or "batched", pool.stats.ort_calls, worst, who)


def _options(session: StatefulSession) -> Any:
    """The onnxruntime SessionOptions ``session`` was made with, for the sessions a check makes beside it."""
    return session.inference_session.get_session_options()


def _long_run(session: StatefulSession, chunks: Sequence[Mapping[str, np.ndarray]], calls: int, progress: ProgressCallback | None = None) -> LongRun:
    if calls < 4:
        raise StreamError(f"a long run needs at least 4 calls, got {calls}")
    s = session.fork(reset=True)
    tracker = _Tracker([slot.input for slot in s.slots])
    times: list[float] = []
    clock = time.perf_counter
    started = clock()
    n = len(chunks)
    for k in range(calls):
        feed = chunks[k % n]
        t = clock()
        s.run(feed)
        times.append(clock() - t)
        tracker.add(s.state)
        if progress is not None:
            progress("long run", k + 1, calls)
    return LongRun(calls, tracker.result(), Latency.of(times), clock() - started)


# -- text --------------------------------------------------------------------------------------


def streaming_to_text(report: StreamingReport, *, persistence: str = "pass") -> str:
    """The report as text.  ``persistence`` is the status of the multi-call check printed above it (as in
    ``rnnir run``): after a ``fail`` (or ``no-state``, ``inconclusive``) streaming checks that found nothing
    say so without the word PASS, which would read as the run's verdict.  No check asked: no verdict at all."""
    where = f"over {report.calls} calls (tolerance {report.tol:g})"
    if not report.checked:
        head = f"{report.model}: measured over {report.calls} calls"
    elif report.ok and persistence != "pass":
        head = f"{report.model}: streaming checks found no failure of their own {where}; the verdict above ({persistence.upper()}) stands"
    else:
        head = f"{report.model}: streaming checks {report.status.upper()} {where}"
    lines = [head]
    lat = report.latency
    lines.append(f"  latency per call: p50 {lat.p50_us:.1f} µs, p99 {lat.p99_us:.1f} µs (mean {lat.mean_us:.1f}, max {lat.max_us:.1f}; {lat.calls} calls)")
    lines.append(f"  state per session: {report.state_bytes} bytes")
    if report.cold_start is not None:
        cs = report.cold_start
        lines.append(f"  cold start: new session to first output {cs.new_session_s * 1e3:.1f} ms; new stream on a loaded model {cs.new_stream_s * 1e3:.2f} ms")
    for c in report.checks:
        lines.append("  " + c.summary())
        for name, r in c.per_output.items():
            back = "never" if r is None else f"after {r}"
            lines.append(f"    {name}: departs by up to {_fmt(c.departure[name])}, back {back}")
        if c.note:
            lines.append(f"    note: {c.note}")
    if report.burst_health:
        lines.append("  state health through the burst:")
        for h in report.burst_health.values():
            lines.append("    " + h.summary(judge_growth=False))
    if report.isolation is not None:
        lines.append("  " + report.isolation.summary())
    if report.long is not None:
        lr = report.long
        lines.append(
            f"  long run: {lr.calls} calls in {lr.seconds:.1f} s; latency p50 {lr.latency.p50_us:.1f} µs, p99 {lr.latency.p99_us:.1f} µs"
        )
        for h in lr.slots.values():
            lines.append("    " + h.summary())
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"

