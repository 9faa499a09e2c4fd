"""The caller's state ignored: SD007, a state input that never reaches the op whose final state is written back."""

from __future__ import annotations

from collections.abc import Generator

from rnnir.analysis.slicemaps import PortRef, SliceMap
from rnnir.analysis.slices import TracedPair
from rnnir.ir.nodes import Store
from rnnir.ir.recurrence import ENTRY_OF
from rnnir.passes.diagnostics import Diagnostic
from rnnir.passes.rules.sd007_state_ignored import RULE as STATE_IGNORED
from rnnir.passes.store_destinations.context import Context, ref_loc

__all__ = ["STATE_IGNORED", "ignored"]


def _final_refs(sm: SliceMap) -> list[PortRef]:
    return [r for r in sm.exit if r.note != "derived" and r.port in ENTRY_OF]


def ignored(ctx: Context, pair: TracedPair, stores: list[Store], plain: bool) -> Generator[Diagnostic, None, set[tuple[int, ...]]]:
    """SD007; returns the slice indices it covered (so SD003 does not report them again)."""
    slot = pair.slot
    covered: set[tuple[int, ...]] = set()
    if plain:
        return covered
    any_entry = any(sm.entry for sm in pair.slices)
    targets = [sm for sm in pair.slices if not sm.entry] if any_entry else list(pair.slices[:1])
    for sm in targets:
        exits = _final_refs(sm) if any_entry else [r for s in pair.slices for r in s.exit]
        refs = list({(r.node_id, r.port, r.direction): r for r in exits if r.node_id in ctx.ops}.values())
        if not refs:
            continue
        starts: list[str] = []
        for r in refs:
            rec = ctx.ops[r.node_id]
            init = ENTRY_OF.get(r.port)
            if init in rec.state_ports:
                t = f"{rec.kind} {rec.describe()!r}.{init} starts from {ctx.start_text(rec, init)}"
                if t not in starts:
                    starts.append(t)
        finals = ", ".join(dict.fromkeys(r.label for r in refs))
        covered.add(sm.index)
        start = "; ".join(starts) if starts else "the op does not read it"
        locations = [ref_loc(r) for r in refs]
        if any_entry:
            here = ctx.slice_text(slot.name, sm.index)
            yield STATE_IGNORED.diagnostic("slice-ignored", slot=slot.name, locations=locations, data={"slice": sm.label}, here=here, finals=finals, starts=start)
            continue
        yield STATE_IGNORED.diagnostic("input-ignored", slot=slot.name, locations=locations, finals=finals, starts=start)
        covered.update(s.index for s in pair.slices)
        break
    return covered
