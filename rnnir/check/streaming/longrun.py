"""Slot trends over a run (a burst, or a stream repeated to many calls): norm trend, saturation, float16 headroom,
kept as a few floats per call so that a 100,000-call run does not keep its states."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np

from rnnir.check.multicall.health import norm_trend
from rnnir.check.multicall.stream import ProgressCallback, StreamError
from rnnir.check.streaming.report import Latency, LongRun, SlotTrend
from rnnir.runtime.session import StatefulSession

__all__ = ["SATURATED", "SlotTracker", "long_run", "slot_trends"]

#: |x| at or above this is pinned at a tanh/sigmoid limit
SATURATED = 0.999


def slot_trends(states: Sequence[Mapping[str, np.ndarray]]) -> dict[str, SlotTrend]:
    """Per slot trend over a run, from norms/peaks/saturation tracked call by call."""
    if not states:
        return {}
    tracker = SlotTracker(list(states[0]))
    for s in states:
        tracker.add(s)
    return tracker.result()


class SlotTracker:
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
            sat = float((mag >= SATURATED).mean()) if mag.size else 0.0
            self.sat[n] = sat
            self.peak_sat[n] = max(self.peak_sat[n], sat)

    def result(self) -> dict[str, SlotTrend]:
        out: dict[str, SlotTrend] = {}
        for n in self.names:
            norms = self.norms[n]
            trend, growth = norm_trend(norms)
            out[n] = SlotTrend(n, len(norms), trend, growth, norms[0], norms[-1], self.peak[n], self.sat[n], self.peak_sat[n])
        return out


def long_run(session: StatefulSession, chunks: Sequence[Mapping[str, np.ndarray]], calls: int, progress: ProgressCallback | None = None) -> LongRun:
    """``chunks`` repeated to ``calls`` calls on a fresh fork: every slot's trend, and the latency of each call."""
    if calls < 4:
        raise StreamError(f"a long run needs at least 4 calls, got {calls}")
    s = session.fork(reset=True)
    tracker = SlotTracker([slot.input for slot in s.slots])
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
