"""A perturbed run against the intact one: run the chunks, compare call by call, and how many calls until every
output is back within the tolerance for good (the recovery length)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rnnir.check.multicall.compare import max_abs_diff
from rnnir.check.multicall.stream import ProgressCallback, StreamError
from rnnir.check.streaming.report import Recovery
from rnnir.runtime.session import StatefulSession

__all__ = ["check_index", "compare_runs", "recovery_length", "replace_streamed", "run_outputs"]


def run_outputs(
    session: StatefulSession, chunks: Sequence[Mapping[str, np.ndarray]], progress: ProgressCallback | None = None, what: str = ""
) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    outs, states = [], []
    for feed in chunks:
        outs.append(session.run_dict(feed))
        states.append(session.state)
        if progress is not None:
            progress(what, len(outs), len(chunks))
    return outs, states


def recovery_length(diffs: Sequence[float], tol: float) -> int | None:
    """Smallest r such that every diff from r on is within tol; None when the last one is not."""
    r = len(diffs)
    for k in range(len(diffs) - 1, -1, -1):
        if not diffs[k] <= tol:  # NaN counts as out of tolerance
            break
        r = k
    return None if r == len(diffs) else r


def compare_runs(
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
        diffs = [max_abs_diff(g[name], r[name]) for g, r in zip(got, ref)]
        result.departure[name] = max(diffs, default=0.0)
        result.per_output[name] = recovery_length(diffs, tol)
        per_call = [max(a, b) if not (math.isnan(a) or math.isnan(b)) else math.inf for a, b in zip(per_call, diffs)]
    result.recovery = recovery_length(per_call, tol) if got else None
    state_diffs = [max((max_abs_diff(g[k], r[k]) for k in r), default=0.0) for g, r in zip(got_states, ref_states)]
    result.state_recovery = recovery_length(state_diffs, tol) if got_states else None
    if not got:
        result.note = "no calls after the perturbation: nothing to compare (make the stream longer)"
    return result


def check_index(name: str, at: int, calls: int, length: int = 1) -> None:
    if at < 0 or at + length >= calls:
        raise StreamError(f"{name} at call {at} (length {length}) leaves no call after it in a stream of {calls} calls")


def replace_streamed(chunk: Mapping[str, np.ndarray], streamed: set[str], make: Any) -> dict[str, np.ndarray]:
    return {n: (make(a) if n in streamed else a) for n, a in chunk.items()}
