"""State health over a run: every slot's min, max and L2 norm call by call, the trend they show, and the
headroom to float16's largest value.

The multi-call check reports it for its longest persistent run (:class:`SlotHealth`); the streaming checks
classify their burst and long runs with the same :func:`norm_trend` and :func:`fp16_headroom`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnir.check.multicall.text import format_number, json_number

__all__ = ["FP16_MAX", "SlotHealth", "fp16_headroom", "norm_trend", "slot_health", "trend_summary"]

#: float16's largest finite value: a state that reaches it cannot be served in half precision
FP16_MAX = 65504.0


def fp16_headroom(peak_abs: float) -> float:
    """How many times ``peak_abs`` fits under float16's largest finite value (inf for a state that stays 0)."""
    return math.inf if peak_abs == 0 else FP16_MAX / peak_abs


def trend_summary(
    slot: str, trend: str, calls: int, first_norm: float, last_norm: float, growth: float, peak_abs: float, *, saturation: str = ""
) -> str:
    """One slot over a run as a sentence; the multi-call and the streaming reports write it alike (``saturation``:
    what the streaming checks add after the peak)."""
    headroom = fp16_headroom(peak_abs)
    head = "inf" if math.isinf(headroom) else f"{headroom:.3g}x"
    return (
        f"{slot}: {trend} over {calls} calls (norm {format_number(first_norm)} -> {format_number(last_norm)}, "
        f"growth x{format_number(growth)}, |max| {format_number(peak_abs)}{saturation}, float16 headroom {head})"
    )


@dataclass
class SlotHealth:
    """A slot's magnitude over a long run: per call min, max and L2 norm, and the trend they show."""

    slot: str
    min: list[float]
    max: list[float]
    norm: list[float]
    trend: str  # bounded / growing / decaying / non-finite / constant
    growth: float  # mean norm over the last quarter / over the first quarter
    peak_abs: float

    @property
    def fp16_headroom(self) -> float:
        """How many times the peak magnitude fits under float16's largest finite value."""
        return fp16_headroom(self.peak_abs)

    def summary(self) -> str:
        return trend_summary(self.slot, self.trend, len(self.norm), self.norm[0], self.norm[-1], self.growth, self.peak_abs)

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "trend": self.trend,
            "growth": json_number(self.growth),
            "peak_abs": json_number(self.peak_abs),
            "fp16_headroom": json_number(self.fp16_headroom),
            "min": [json_number(v) for v in self.min],
            "max": [json_number(v) for v in self.max],
            "norm": [json_number(v) for v in self.norm],
        }


def slot_health(states: Sequence[Mapping[str, np.ndarray]]) -> dict[str, SlotHealth]:
    """Per slot, its health over ``states`` (the state after each call of one run)."""
    if not states:
        return {}
    out: dict[str, SlotHealth] = {}
    for name in states[0]:
        arrs = [np.asarray(s[name], dtype=np.float64) for s in states]
        mins = [float(a.min()) if a.size else 0.0 for a in arrs]
        maxs = [float(a.max()) if a.size else 0.0 for a in arrs]
        norms = [float(np.linalg.norm(a.ravel())) for a in arrs]
        peak = max((abs(v) for v in mins + maxs), default=0.0)
        out[name] = SlotHealth(name, mins, maxs, norms, *norm_trend(norms), peak)
    return out


def norm_trend(norms: Sequence[float]) -> tuple[str, float]:
    """Classify a norm series: non-finite, constant, growing (last quarter > 2x first and still rising), decaying,
    bounded; and the growth (mean of the last quarter over the mean of the first)."""
    arr = np.asarray(norms, dtype=np.float64)
    if not np.isfinite(arr).all():
        return "non-finite", math.inf
    q = max(1, len(arr) // 4)
    first, last = float(arr[:q].mean()), float(arr[-q:].mean())
    growth = last / first if first > 0 else (math.inf if last > 0 else 1.0)
    if arr.max() - arr.min() <= 1e-12 * max(1.0, float(np.abs(arr).max())):
        return "constant", growth
    half = arr[len(arr) // 2 :]
    rising = len(half) > 1 and float(np.polyfit(np.arange(len(half)), half, 1)[0]) > 0
    if growth > 2.0 and rising:
        return "growing", growth
    if growth < 0.5:
        return "decaying", growth
    return "bounded", growth
