"""SD004 slot-written-twice's fix: keep one of the slot's stores when they all write the same value, in the store
structure recorded as IR text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.fixes.store_structure import StructureChange, plan_structure_edit
from rnnir.passes.rules.sd004_slot_written_twice import RULE

if TYPE_CHECKING:
    from rnnir.ir.structure import StoreStructure
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(RULE.code, "safe", "keeps one of the slot's stores when they all write the same value (the rnnir.ir IR text)")

#: what the fixed model does, the message of the edit
FIXED = "one store per call"


def _keep_one_store(spec: StoreStructure, d: Diagnostic) -> StructureChange | str:
    mine = spec.stores_into(f"slot:{d.slot}")
    if len({(st.reads, st.reads_store) for st in mine}) != 1:
        return "the stores write different values: which one is the state is not certain"
    extra = {st.id for st in mine[1:]}
    change = StructureChange(f"stores into slot {d.slot!r}", ", ".join(st.id for st in mine), mine[0].id)
    spec.stores = [st for st in spec.stores if st.id not in extra]
    spec.waits = [w for w in spec.waits if w not in extra]
    spec.order = [pair for pair in spec.order if not extra & set(pair)]
    return change


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    return plan_structure_edit(ctx, d, FIX, FIXED, _keep_one_store)
