"""AL003 shared-slot-storage's fix: give every slot of the group its own storage, in the store structure recorded
as IR text.  The group is the finding's ``slots`` (``d.data``), as the rule records it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.fixes.store_structure import StructureChange, plan_structure_edit
from rnnir.passes.rules.al003_shared_slot_storage import RULE

if TYPE_CHECKING:
    from rnnir.ir.structure import StoreStructure
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(RULE.code, "safe", "gives every slot of the group its own storage (the rnnir.ir IR text)")

#: what the fixed model does, the message of the edit
FIXED = "every state instance has its own storage"


def _storage_each(spec: StoreStructure, d: Diagnostic) -> StructureChange | str:
    group = [n for n in d.data.get("slots", [d.slot]) if isinstance(n, str)]
    shared = [spec.slots[n] for n in group if n in spec.slots and (spec.slots[n].address or str(spec.slots[n].alias_of).startswith("slot:"))]
    if not shared:
        return "the shared storage is not recorded"
    for f in shared:
        f.address = None
        if str(f.alias_of).startswith("slot:"):
            f.alias_of = None
    return StructureChange(f"slots {', '.join(map(repr, group))}", "one storage", "one storage each")


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    return plan_structure_edit(ctx, d, FIX, FIXED, _storage_each)
