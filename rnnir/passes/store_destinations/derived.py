"""Derived exits: a slot written back with a value computed from state through value-changing ops.

rnnir cannot prove such a value lines up slice by slice.  When it depends on the
right final states only, the slice stays unverified (SD009 says so); when it
depends on no state, or on anything but those final states, SD003 reports it, and
SD006 when a reverse direction's final state goes into it.
"""

from __future__ import annotations

from collections.abc import Iterator

from rnnir.analysis.slicemaps import ExitKind, PortRef, SliceMap
from rnnir.analysis.slices import TracedPair
from rnnir.ir.nodes import Compute, Store, Value
from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.ir.recurrence import FINAL_STATE_PORTS
from rnnir.passes.diagnostics import Diagnostic, Location
from rnnir.passes.store_destinations.context import (
    Context,
    branch_text,
    forward_dir,
    live_elsewhere,
    ref_loc,
    refs_for,
    reset_op,
)
from rnnir.passes.store_destinations.destinations import NOT_FINAL_STATE, REVERSE_STATE_PERSISTED

__all__ = ["derived_exits"]


def derived_exits(ctx: Context, pair: TracedPair, stores: list[Store], reverse_seen: set[str]) -> Iterator[Diagnostic]:
    """SD003/SD006 for each If-branch path on which some slice's exit is derived, once per path."""
    by_branch: dict[str, tuple[SliceMap, list[PortRef]]] = {}
    for sm in pair.slices:
        for bp, kind in sm.exit_kind.items():
            if kind is ExitKind.DERIVED:
                refs = by_branch.setdefault(bp, (sm, []))[1]
                refs.extend(r for r in refs_for(sm, bp) if r not in refs)
    for bp, (sm, refs) in by_branch.items():
        yield from _derived(ctx, pair, sm, bp, refs, ctx.store_locs(stores), stores, reverse_seen)


def _derived(
    ctx: Context,
    pair: TracedPair,
    sm: SliceMap,
    bp: str,
    refs: list[PortRef],
    locs: list[Location],
    stores: list[Store],
    reverse_seen: set[str],
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    reads = ctx.reads(name)
    ports = [r for r in refs if r.node_id in ctx.ops]
    good = [r for r in ports if r.port in FINAL_STATE_PORTS and (r.node_id in reads or reset_op(ctx, name, bp, r))]
    others = [r.label for r in refs if r not in good]
    others += [f"the live-in value of slot {s!r}" for s in _slot_origins(ctx, stores, bp)]
    through = _value_ops(stores)
    via = f" through {', '.join(through)}" if through else ""
    where = branch_text(bp)
    finals = ", ".join(dict.fromkeys(r.label for r in ports)) or "no recurrent op"
    if not ports and not others:
        yield NOT_FINAL_STATE.diagnostic("stateless-value", slot=name, locations=locs, stored=_stored_name(stores), where=where, via=via or " directly")
    elif good and not others and (any(r.node_id in reads for r in good) or live_elsewhere(ctx, name, sm, bp)):
        pass  # computed from the right final states but not provably slice by slice: unverified (SD009), not violated
    else:
        bad = ", ".join(dict.fromkeys(others)) or "values that are not final states"
        yield NOT_FINAL_STATE.diagnostic("computed-value", slot=name, locations=locs, via=via, finals=finals, where=where, others=bad)
    for r in ports:
        rec = ctx.ops[r.node_id]
        if r.port in FINAL_STATE_PORTS and forward_dir(rec, r.direction) is not True and rec.id not in reverse_seen:
            reverse_seen.add(rec.id)
            yield REVERSE_STATE_PERSISTED.diagnostic(
                "computed-from-reverse",
                slot=name,
                locations=[*locs, ref_loc(r)],
                got=r.label,
                direction=rec.direction,
                op=f"{rec.kind} {rec.describe()!r}",
            )


def _stored_name(stores: list[Store]) -> str:
    return next((st.value.name for st in stores if st.value is not None), "?")


def _slot_origins(ctx: Context, stores: list[Store], bp: str) -> list[str]:
    """Slots whose live-in value the written-back value (on branch path ``bp``) depends on."""
    value = next((st.value for st in stores if st.value is not None), None)
    if value is None:
        return []
    alts = ctx.facts.tracer.trace(value).branches()
    found: list[str] = []
    for path, alt in alts:
        if len(alts) == 1 or "/".join(path) == bp:
            found.extend(o[1] for o in alt.all_origins() if o[0] == "slot" and o[1] not in found)
    return sorted(found)


_LAYOUT = ops_with(OpTrait.LAYOUT) | {"If"}  # an If only chooses between its branches' values


def _value_ops(stores: list[Store], limit: int = 3) -> list[str]:
    """The value-changing ops between the final states and the stored value (nearest first)."""
    found: list[str] = []
    seen: set[int] = set()
    stack: list[Value] = [st.value for st in stores if st.value is not None][:1]
    while stack and len(found) < limit:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        p = v.producer
        if not isinstance(p, Compute):
            continue
        if p.op not in _LAYOUT:
            t = f"{p.op} {p.describe()!r}"
            if t not in found:
                found.append(t)
        operands = p.inputs[1:] if p.op == "If" else p.inputs  # an If's condition is not on the value's path
        stack.extend(u for u in reversed(operands) if u is not None and u.producer is not None)
    return found
