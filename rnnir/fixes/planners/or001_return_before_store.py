"""OR001 return-before-store's fix: make the Return wait for the slot's stores, in the store structure recorded
as IR text."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.fixes.store_structure import StructureChange, plan_structure_edit
from rnnir.passes.rules.or001_return_before_store import RULE

if TYPE_CHECKING:
    from rnnir.ir.structure import StoreStructure
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(RULE.code, "safe", "makes the Return wait for the slot's stores (the rnnir.ir IR text)")

#: what the fixed model does, the message of the edit
FIXED = "the call's Return waits for the slot store"


def _wait_for_stores(spec: StoreStructure, d: Diagnostic) -> StructureChange | str:
    missing = [st.id for st in spec.stores_into(f"slot:{d.slot}") if st.id not in spec.waits]
    if not missing:
        return "the Return already waits for the slot's stores"
    before = json.dumps(spec.waits)
    spec.waits = [*spec.waits, *missing]
    return StructureChange("return waits", before, json.dumps(spec.waits))


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    return plan_structure_edit(ctx, d, FIX, FIXED, _wait_for_stores)
