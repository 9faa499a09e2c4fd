"""Comparing runs: a variant call by call against ``persistent``, and ``persistent`` against one call over the
whole stream (each whole-stream output cut into the pieces the chunked calls return)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rnnir.check.multicall.report import Divergence, VariantResult

__all__ = ["compare_calls", "compare_whole", "max_abs_diff"]


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| in float64; inf when the sizes differ or NaN stands on one side only (NaN on both is equal)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        if a.size != b.size:
            return math.inf
        b = b.reshape(a.shape)
    if a.size == 0:
        return 0.0
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    if (nan_a != nan_b).any():
        return math.inf
    diff = np.abs(np.where(nan_a, 0.0, a64) - np.where(nan_b, 0.0, b64))
    return float(np.nan_to_num(diff, nan=math.inf).max())


def compare_calls(
    name: str, outs: list[dict[str, np.ndarray]], ref: list[dict[str, np.ndarray]], c: int, tol: float, trace: list[float]
) -> VariantResult:
    """Variant ``name`` at chunk size ``c`` against the persistent run ``ref``, call by call, on every output."""
    first: Divergence | None = None
    per: dict[str, float] = {}
    per_call: list[float] = []
    for k, (a, b) in enumerate(zip(outs, ref)):
        worst = 0.0
        for out_name in b:
            d = max_abs_diff(a[out_name], b[out_name])
            per[out_name] = max(per.get(out_name, 0.0), d)
            worst = max(worst, d)
            if first is None and d > tol:
                first = Divergence(k, out_name, d, c)
        per_call.append(worst)
    return VariantResult(name, c, len(outs), "persistent", first, max(per.values(), default=0.0), per, per_call=per_call, trace=trace)


def compare_whole(
    outs: list[dict[str, np.ndarray]],
    whole: Mapping[str, np.ndarray] | None,
    c: int,
    *,
    tol: float,
    mode: str,
    length: int,
    state_outputs: set[str],
    trace: list[float],
) -> VariantResult:
    """The persistent run at chunk size ``c`` against one call over the whole stream (``whole``; None: no
    oracle, not compared).  A state output is compared on the last call only (the final state)."""
    if whole is None:
        return VariantResult("persistent", c, len(outs), "none", None, 0.0, trace=trace)
    per: dict[str, float] = {}
    first: Divergence | None = None
    notes: list[str] = []
    last = len(outs) - 1
    for name, ref in whole.items():
        if not outs or name not in outs[0]:
            notes.append(f"oracle output {name!r} is not a model output: ignored")
            continue
        got = [o[name] for o in outs]
        per_call = None if name in state_outputs else _split_like(ref, got, mode, length)
        if per_call is None:
            if name not in state_outputs:  # a per-call summary (of the chunk, or of the incoming state)
                notes.append(f"output {name!r} has no time axis the chunks split: it cannot equal the whole call's, not compared")
                continue
            d = max_abs_diff(got[-1], ref)  # the final state: the last call's against the whole call's
            per[name] = d
            if d > tol and (first is None or last < first.call):
                first = Divergence(last, name, d, c)
            continue
        for k, (g, r) in enumerate(zip(got, per_call)):
            d = max_abs_diff(g, r)
            per[name] = max(per.get(name, 0.0), d)
            if d > tol and (first is None or k < first.call):
                first = Divergence(k, name, d, c)
    return VariantResult("persistent", c, len(outs), "whole", first, max(per.values(), default=0.0), per, "; ".join(notes), trace=trace)


def _split_like(ref: np.ndarray, got: list[np.ndarray], mode: str, length: int) -> list[np.ndarray] | None:
    """The whole-stream output cut into the per-call pieces, or None when it has no call/time axis."""
    if mode == "calls":
        total = sum(g.size for g in got)
        if ref.size != total:
            return None
        flat = ref.reshape(-1)
        pieces, pos = [], 0
        for g in got:
            pieces.append(flat[pos : pos + g.size].reshape(g.shape))
            pos += g.size
        return pieces
    lengths = [g.shape for g in got]
    for axis in range(ref.ndim):
        if ref.shape[axis] != length or any(len(s) != ref.ndim for s in lengths):
            continue
        if sum(s[axis] for s in lengths) != length:
            continue
        if any(s[:axis] + s[axis + 1 :] != ref.shape[:axis] + ref.shape[axis + 1 :] for s in lengths):
            continue
        pieces, pos = [], 0
        for s in lengths:
            index = [slice(None)] * ref.ndim
            index[axis] = slice(pos, pos + s[axis])
            pieces.append(ref[tuple(index)])
            pos += s[axis]
        return pieces
    return None
