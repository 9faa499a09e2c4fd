"""OR002 write-before-last-read's fix: load the slot as a private copy, so its store cannot clobber a reader, in
the store structure recorded as IR text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.fixes.store_structure import StructureChange, plan_structure_edit
from rnnir.passes.rules.or002_write_before_last_read import RULE

if TYPE_CHECKING:
    from rnnir.ir.structure import StoreStructure
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(RULE.code, "safe", "loads the slot as a private copy, so its store cannot clobber a reader (the rnnir.ir IR text)")

#: what the fixed model does, the message of the edit
FIXED = "the slot is loaded as a copy"


def _load_a_copy(spec: StoreStructure, d: Diagnostic) -> StructureChange | str:
    facts = spec.slots.get(d.slot or "")
    if facts is None or not facts.view_load:
        return "the slot is not loaded as a view"
    facts.view_load = False
    return StructureChange(f"slot {d.slot!r} load", '"view"', '"copy" (a private copy: the store cannot clobber a reader)')


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    return plan_structure_edit(ctx, d, FIX, FIXED, _load_a_copy)
