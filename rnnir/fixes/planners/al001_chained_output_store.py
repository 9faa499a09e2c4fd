"""AL001 chained-output-store's fix: re-point the chained output store at the final state the slot store reads
(fan-out), in the store structure recorded as IR text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.fixes.store_structure import StructureChange, plan_structure_edit
from rnnir.ir.structure import StoreFact
from rnnir.passes.rules.al001_chained_output_store import RULE

if TYPE_CHECKING:
    from rnnir.ir.structure import StoreStructure
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(
    RULE.code,
    "safe",
    "re-points the chained output store at the final state the slot store reads (fan-out), in the rnnir.ir IR text",
)

#: what the fixed model does, the message of the edit
FIXED = "the output store reads the final state (fan-out), not the slot store's result"


def _repoint(spec: StoreStructure, d: Diagnostic) -> StructureChange | str:
    slot = d.slot
    changes: list[tuple[StoreFact, str]] = []
    for st in spec.stores:
        inner = spec.store(st.reads) if st.dest.startswith("out:") and st.reads_store else None
        if inner is None or inner.dest != f"slot:{slot}":
            continue
        root, hops = inner, 0
        while root.reads_store and hops < len(spec.stores):
            root = spec.store(root.reads) or root
            hops += 1
        changes.append((st, root.reads))
    if not changes:
        return "no recorded output store reads the slot store's result"
    first, final = changes[0]
    change = StructureChange(f"store {first.id!r}", f"reads {first.source()!r}", f"reads {'value:' + final!r}")
    for st, final in changes:
        st.reads, st.reads_store = final, False
    return change


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    return plan_structure_edit(ctx, d, FIX, FIXED, _repoint)
