"""AL002 output-aliases-slot's fix: give the slot its own storage and a store of the value the output gets, in the
store structure recorded as IR text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.fixes.store_structure import StructureChange, plan_structure_edit
from rnnir.ir.structure import StoreFact
from rnnir.passes.rules.al002_output_aliases_slot import RULE

if TYPE_CHECKING:
    from rnnir.ir.structure import StoreStructure
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(RULE.code, "safe", "gives the slot its own storage and a store of the value the output gets (the rnnir.ir IR text)")

#: what the fixed model does, the message of the edit
FIXED = "the slot has its own storage"


def _own_storage(spec: StoreStructure, d: Diagnostic) -> StructureChange | str:
    slot = d.slot
    facts = spec.slots.get(slot or "")
    alias = facts.alias_of if facts is not None else None
    out_store = next((st for st in spec.stores if st.dest == alias), None)
    if facts is None or alias is None or not alias.startswith("out:") or out_store is None:
        return "the slot is not an alias of a stored output"
    sid = f"fix_st_{slot}"
    change = StructureChange(f"slot {slot!r}", f"alias_of {alias!r}", f"own storage, store {sid!r} reads {out_store.source()!r}")
    facts.alias_of = None
    spec.stores.append(StoreFact(sid, f"slot:{slot}", out_store.reads, out_store.reads_store))
    spec.waits.append(sid)
    return change


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    return plan_structure_edit(ctx, d, FIX, FIXED, _own_storage)
