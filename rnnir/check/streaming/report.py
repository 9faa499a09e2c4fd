"""What :func:`~rnnir.check.streaming.check_streaming` measured: one :class:`Recovery` per perturbation, latency,
cold start, slot trends over a burst or a long run, pool isolation; each with ``to_json``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rnnir.check.multicall.health import fp16_headroom, trend_summary
from rnnir.check.multicall.text import format_number, json_number

__all__ = ["ColdStart", "Isolation", "Latency", "LongRun", "Recovery", "SlotTrend", "StreamingReport"]


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
        return f"{what}: {verdict}{state} (largest departure {format_number(worst[1])} on {worst[0]!r})"

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
            "departure": {k: json_number(v) for k, v in self.departure.items()},
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
        return {"calls": self.calls, "p50_us": json_number(self.p50_us), "p99_us": json_number(self.p99_us), "mean_us": json_number(self.mean_us), "max_us": json_number(self.max_us)}


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
        return fp16_headroom(self.peak_abs)

    @property
    def ok(self) -> bool:
        """Bounded over a long run: neither growing nor non-finite."""
        return self.trend not in ("growing", "non-finite")

    @property
    def finite(self) -> bool:
        return self.trend != "non-finite"

    def summary(self, judge_growth: bool = True) -> str:
        flag = "" if (self.ok if judge_growth else self.finite) else "FAIL: "
        saturation = f", saturated {self.saturated:.1%} (peak {self.peak_saturated:.1%})"
        return flag + trend_summary(
            self.slot, self.trend, self.calls, self.first_norm, self.last_norm, self.growth, self.peak_abs, saturation=saturation
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot, "calls": self.calls, "trend": self.trend, "ok": self.ok, "growth": json_number(self.growth),
            "first_norm": json_number(self.first_norm), "last_norm": json_number(self.last_norm), "peak_abs": json_number(self.peak_abs),
            "saturated": self.saturated, "peak_saturated": self.peak_saturated, "fp16_headroom": json_number(self.fp16_headroom),
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
            f"every stream equals its solo run (max |diff| {format_number(self.max_abs_diff)})"
            if self.ok
            else f"FAIL: stream {self.worst_stream} differs from its solo run by {format_number(self.max_abs_diff)} (> {self.tol:g}): rows leak into each other"
        )
        return f"pool of {self.streams} streams x {self.calls} calls, {how}, {self.ort_calls} onnxruntime calls: {verdict}"

    def to_json(self) -> dict[str, Any]:
        return {"streams": self.streams, "calls": self.calls, "batching": self.batching, "ort_calls": self.ort_calls,
                "max_abs_diff": json_number(self.max_abs_diff), "worst_stream": self.worst_stream, "tol": self.tol, "ok": self.ok}


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
