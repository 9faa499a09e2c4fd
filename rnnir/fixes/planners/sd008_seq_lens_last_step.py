"""SD008 seq-lens-last-step's fix: return Y_h, the final state of every batch entry, instead of Y at the last time
step (the edit of :mod:`rnnir.fixes.final_state`, as SD003's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.passes.rules.sd008_seq_lens_last_step import RULE

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(RULE.code, "safe", "returns Y_h (the final state of every batch entry) instead of Y at the last time step")


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    from rnnir.fixes.final_state import plan_final_state  # onnx: imported when a fix is planned, not when listed

    return plan_final_state(ctx, d, FIX)
