"""Write-back: is every slot written back once per call path, and with something other than itself?

SD001 (a slot no call path writes back, or hands straight back) and SD004 (a
slot written twice on one call path).
"""

from __future__ import annotations

from collections.abc import Iterator

from rnnir.analysis.slicemaps import ExitKind, SliceMap
from rnnir.analysis.slices import TracedPair
from rnnir.ir.nodes import LoadSlot, Output, Store
from rnnir.ir.pairs import PairSource
from rnnir.passes.diagnostics import Diagnostic, Location
from rnnir.passes.manager import ProgramFacts
from rnnir.passes.rules.sd001_slot_never_written import RULE as SLOT_NEVER_WRITTEN
from rnnir.passes.rules.sd004_slot_written_twice import RULE as SLOT_WRITTEN_TWICE
from rnnir.passes.store_destinations.context import Context, store_loc

__all__ = ["SLOT_NEVER_WRITTEN", "SLOT_WRITTEN_TWICE", "handed_back", "never_written", "written_twice"]


def never_written(ctx: Context, pair: TracedPair, loads: list[LoadSlot]) -> Diagnostic:
    """SD001 for a slot no store writes: no paired output, an output buffer nobody stores, or no store at all."""
    slot = pair.slot
    readers = sorted({ctx.ops[n].describe() for n in ctx.reads(slot.name) if n in ctx.ops})
    feeds = f", which feeds {', '.join(repr(r) for r in readers)}," if readers else ""
    locations = [Location(node=ld.id, value=slot.name) for ld in loads]
    if pair.output is None and pair.source is not PairSource.BUILDER:
        return SLOT_NEVER_WRITTEN.diagnostic("no-output", slot=slot.name, locations=locations, feeds=feeds)
    if isinstance(slot.alias_of, Output):
        return SLOT_NEVER_WRITTEN.diagnostic("output-not-stored", slot=slot.name, locations=locations, feeds=feeds, output=slot.alias_of.name)
    paired = f" (paired output {pair.output!r} is not stored into the slot)" if pair.output else ""
    return SLOT_NEVER_WRITTEN.diagnostic("no-store", slot=slot.name, locations=locations, feeds=feeds, paired=paired)


def handed_back(ctx: Context, pair: TracedPair, stores: list[Store]) -> Iterator[Diagnostic]:
    """SD001 for slices written back with their own live-in value on every call path."""
    slot = pair.slot
    same: list[SliceMap] = []
    for sm in pair.slices:
        if not sm.exit_kind:
            continue
        if all(k is ExitKind.PASSTHROUGH and sm.exit_slot_refs.get(bp) == (slot.name, sm.index) for bp, k in sm.exit_kind.items()):
            same.append(sm)
    if not same:
        return
    locs = ctx.store_locs(stores)
    if len(same) == len(pair.slices):
        yield SLOT_NEVER_WRITTEN.diagnostic("handed-back", slot=slot.name, locations=locs)
        return
    for sm in same:
        yield SLOT_NEVER_WRITTEN.diagnostic(
            "slice-handed-back",
            slot=slot.name,
            locations=locs,
            data={"slice": sm.label},
            here=ctx.slice_text(slot.name, sm.index),
            label=sm.label,
        )


def _exclusive(p: tuple[str, ...], q: tuple[str, ...]) -> bool:
    """Two If-branch paths that can never run in the same call (the two alternatives of one If)."""
    for a, b in zip(p, q):
        if a == b:
            continue
        # "<If node>.then_branch" vs "<If node>.else_branch" (a Builder's If has no name: "then_branch")
        if_a, _, side_a = a.rpartition(".")
        if_b, _, side_b = b.rpartition(".")
        return if_a == if_b and {side_a, side_b} == {"then_branch", "else_branch"}
    return False


def written_twice(facts: ProgramFacts) -> Iterator[Diagnostic]:
    """SD004: two stores into one slot that can run in the same call."""
    by_slot: dict[int, list[Store]] = {}
    for st in facts.stores:
        by_slot.setdefault(id(st.dest), []).append(st)
    for slot in facts.program.slots:
        stores = by_slot.get(id(slot), [])
        if len(stores) < 2:
            continue
        clash: list[Store] = []
        for i, a in enumerate(stores):
            for b in stores[i + 1 :]:
                if not _exclusive(a.provenance.branch, b.provenance.branch):
                    for s in (a, b):
                        if s not in clash:
                            clash.append(s)
        if not clash:
            continue
        values = ", ".join(f"%{s.value.name}" if s.value else "?" for s in clash)
        paths = {s.provenance.branch_path for s in clash if s.provenance.branch}
        where = f" on branch path {sorted(paths)[0]}" if len(paths) == 1 else ""
        yield SLOT_WRITTEN_TWICE.diagnostic(
            "written-twice",
            slot=slot.name,
            locations=[store_loc(s) for s in clash],
            count=len(clash),
            where=where,
            values=values,
        )
