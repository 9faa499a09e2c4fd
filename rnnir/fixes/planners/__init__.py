"""The fix table: one planner module per rule that has an automatic fix, one registration line per fix.

A planner lives in ``rnnir/fixes/planners/<code>_<slug>.py``, named like its rule's file under
:mod:`rnnir.passes.rules`, and holds everything the fix knows:

- ``FIX``: its :class:`~rnnir.fixes.edits.FixInfo` (whether it is safe, what it does: ``rnnir explain`` prints it);
- ``plan(ctx, d)``: the repair of finding ``d`` on the model of ``ctx`` (a :class:`~rnnir.fixes.edits.FixContext`),
  planned from the diagnostic's structured fields (its slot, locations and ``data``, never its message text): a
  :class:`~rnnir.fixes.edits.Plan` whose ``apply`` makes the edit, or an :class:`~rnnir.fixes.edits.Edit` that says
  why there is no certain one (``FIX.refuse(d, reason)``).

A planner module imports neither onnx nor numpy when it is imported (``rnnir explain`` reads the table); the
edit machinery it uses is imported inside ``plan``.  Adding a fix is its planner file and one line of
:data:`FIX_TABLE` (``python tools/add_fix.py CODE`` writes both); ``rnnir.fix``, ``rnnir lint --fix``, the fix
catalogue and ``rnnir explain`` take the fix from here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rnnir.fixes.edits import FixInfo
from rnnir.passes.rules import CATALOGUE

if TYPE_CHECKING:
    from rnnir.fixes.edits import Edit, FixContext, Plan
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX_TABLE", "PLANNERS", "Planner", "RegisteredFix"]

#: the fix table: the planner modules under rnnir/fixes/planners/, one line a fix; the order is the order
#: ``rnnir fix`` names the fixable codes in
FIX_TABLE: tuple[str, ...] = (
    "sd002_wrong_slot",
    "sd003_not_final_state",
    "sd001_slot_never_written",
    "sd007_state_ignored",
    "sd004_slot_written_twice",
    "sd008_seq_lens_last_step",
    "sd010_state_not_exposed",
    "al001_chained_output_store",
    "al002_output_aliases_slot",
    "al003_shared_slot_storage",
    "or001_return_before_store",
    "or002_write_before_last_read",
)

#: a planner's ``plan``: the repair of one finding, or why there is none
Planner = Callable[["FixContext", "Diagnostic"], "Plan | Edit"]


@dataclass(frozen=True)
class RegisteredFix:
    """A line of the fix table, loaded: the fix's declaration, its planner and the module that holds both."""

    info: FixInfo
    plan: Planner
    module: str


def _load(module: str) -> RegisteredFix:
    """The ``FIX`` and ``plan`` of ``rnnir.fixes.planners.<module>``, checked against the rule of the same file name."""
    loaded = importlib.import_module(f"{__name__}.{module}")
    info, plan = getattr(loaded, "FIX", None), getattr(loaded, "plan", None)
    if not isinstance(info, FixInfo) or not callable(plan):
        raise TypeError(f"rnnir/fixes/planners/{module}.py declares no FIX = FixInfo(...) and plan(ctx, d)")
    rule = next((r for r in CATALOGUE if r.module == module), None)
    if rule is None:
        raise ValueError(f"rnnir/fixes/planners/{module}.py: no rule has the file rnnir/passes/rules/{module}.py")
    if info.code != rule.rule.code:
        raise ValueError(f"rnnir/fixes/planners/{module}.py declares the fix of {info.code}, but {module} is {rule.rule.code}")
    return RegisteredFix(info, plan, module)


#: rule code -> its registered fix, in fix-table order; a code not listed has no automatic fix
PLANNERS: dict[str, RegisteredFix] = {fix.info.code: fix for fix in map(_load, FIX_TABLE)}
