"""SD003 not-final-state's fix: return the final state (Y_h / Y_c) of the op that reads the slot instead of the value
written back (:mod:`rnnir.fixes.final_state`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.passes.rules.sd003_not_final_state import RULE

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(
    RULE.code,
    "safe or unsafe",
    "returns the final state (Y_h / Y_c) of the op that reads the slot instead of the value written back; safe when "
    "the written value is a step of that same op's Y, unsafe when it comes from another op or is a constant "
    "(the other repair, feeding the slot to that op, may have been meant)",
)


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    from rnnir.fixes.final_state import plan_final_state  # onnx: imported when a fix is planned, not when listed

    return plan_final_state(ctx, d, FIX)
