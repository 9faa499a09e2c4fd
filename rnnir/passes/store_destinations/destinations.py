"""Slice destinations: is each slice written back with the final state that belongs to it?

For every slice whose exit is a recurrent port, the live-in value of a slice or a
constant: SD002 (another slice's state), SD003 (not a final state, or the final
state of an op that never read the slice), SD006 (a reverse direction's final
state) and SD008 (Y's last step where sequence_lens can end a sequence early).
Exits computed through value-changing ops are :mod:`.derived`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rnnir.analysis.slicemaps import ExitKind, PortRef, SliceMap
from rnnir.analysis.slices import TracedPair
from rnnir.ir.nodes import Recurrent, Store
from rnnir.ir.recurrence import ENTRY_OF, STATE_H
from rnnir.passes.diagnostics import Diagnostic
from rnnir.passes.rules.sd002_wrong_slot import RULE as WRONG_SLOT
from rnnir.passes.rules.sd003_not_final_state import RULE as NOT_FINAL_STATE
from rnnir.passes.rules.sd006_reverse_state_persisted import RULE as REVERSE_STATE_PERSISTED
from rnnir.passes.rules.sd008_seq_lens_last_step import RULE as SEQ_LENS_LAST_STEP
from rnnir.passes.store_destinations.context import (
    Context,
    branch_text,
    expected_final,
    forward_dir,
    is_reset,
    ref_loc,
    refs_for,
)

__all__ = ["NOT_FINAL_STATE", "REVERSE_STATE_PERSISTED", "SEQ_LENS_LAST_STEP", "WRONG_SLOT", "exits"]


def exits(ctx: Context, pair: TracedPair, stores: list[Store], ignored: set[tuple[int, ...]], reverse_seen: set[str]) -> Iterator[Diagnostic]:
    """SD002/SD003/SD006/SD008 for every slice whose exit is a final state, a sequence, a live-in value or a constant.

    ``ignored`` holds the slices SD007 already reported; ``reverse_seen`` the ops SD006 already named.  A
    finding's words and locations are made when it is found: most slices of a large model have none.
    """
    name = pair.slot.name
    for sm in pair.slices:
        kinds = sm.exit_kind
        if kinds and all(k is ExitKind.CONSTANT for k in kinds.values()):
            here = ctx.slice_text(name, sm.index)
            yield NOT_FINAL_STATE.diagnostic("constant-slice", slot=name, locations=ctx.store_locs(stores), data={"slice": sm.label}, here=here, label=sm.label)
            continue
        for bp, kind in kinds.items():
            if kind is ExitKind.PASSTHROUGH:
                other = sm.exit_slot_refs.get(bp)
                if other is not None and other != (name, sm.index):
                    yield WRONG_SLOT.diagnostic(
                        "slice-from-other-slice",
                        slot=name,
                        locations=ctx.store_locs(stores),
                        data={"slice": sm.label, "branch": bp},
                        here=ctx.slice_text(name, sm.index),
                        other=ctx.slice_text(*other),
                        where=branch_text(bp),
                        expected=expected_final(ctx, sm),
                        label=sm.label,
                    )
                continue
            if kind in ("final", "sequence"):
                for r in refs_for(sm, bp):
                    yield from _check_final(ctx, pair, sm, bp, r, stores, ignored, reverse_seen)


def _about(ctx: Context, name: str, sm: SliceMap, bp: str, r: PortRef, stores: list[Store]) -> dict[str, Any]:
    """What every finding about exit ``r`` of slice ``sm`` of slot ``name`` says: its slot, where it points (the
    slot's stores, then the port), the slice, what was written back and on which If branch (made when found)."""
    return {
        "slot": name,
        "locations": [*ctx.store_locs(stores), ref_loc(r)],
        "here": ctx.slice_text(name, sm.index),
        "got": r.label,
        "where": branch_text(bp or r.branch),  # the branch path, else the port's own branch
    }


def _op_text(rec: Recurrent) -> str:
    return f"{rec.kind} {rec.describe()!r}"


def _check_final(
    ctx: Context,
    pair: TracedPair,
    sm: SliceMap,
    bp: str,
    r: PortRef,
    stores: list[Store],
    ignored: set[tuple[int, ...]],
    reverse_seen: set[str],
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    rec = ctx.ops.get(r.node_id)
    if rec is None:
        return
    if r.port == "Y":
        data = {"slice": sm.label}
        if rec.layout == 1:
            yield NOT_FINAL_STATE.diagnostic("y-of-layout-1", data=data, op=_op_text(rec), **_about(ctx, name, sm, bp, r, stores))
            return
        fwd = forward_dir(rec, r.direction)
        final_step = (fwd is True and r.step == "last") or (fwd is False and r.step == "first")
        if not final_step:
            direction = "forward" if fwd else "reverse" if fwd is False else "bidirectional"
            step: dict[str, Any] = {} if r.step == "all" else {"step": r.step}
            yield NOT_FINAL_STATE.diagnostic(
                "whole-sequence" if r.step == "all" else "inner-step",
                data=data,
                direction=direction,
                op=_op_text(rec),
                label=sm.label,
                **step,
                **_about(ctx, name, sm, bp, r, stores),
            )
            return
        if fwd and rec.port("sequence_lens") is not None:
            yield SEQ_LENS_LAST_STEP.diagnostic("last-step", data=data, op=_op_text(rec), label=sm.label, **_about(ctx, name, sm, bp, r, stores))
    yield from _owner_check(ctx, pair, sm, bp, r, stores, ignored)
    fwd = forward_dir(rec, r.direction)
    if fwd is not True and rec.id not in reverse_seen:
        reverse_seen.add(rec.id)
        which = "reverse" if rec.direction == "reverse" else f"bidirectional (direction {r.direction if r.direction is not None else '0 and 1'})"
        yield REVERSE_STATE_PERSISTED.diagnostic(
            "slice-reverse", data={"slice": sm.label}, which=which, op=_op_text(rec), **_about(ctx, name, sm, bp, r, stores)
        )


def _owner_check(
    ctx: Context, pair: TracedPair, sm: SliceMap, bp: str, r: PortRef, stores: list[Store], ignored: set[tuple[int, ...]]
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    owners = ctx.owners_of(r)
    if any(o.slot == name and o.index == sm.index for o in owners):
        return
    if owners:
        o = owners[0]
        whose = ctx.slice_text(o.slot, o.index)
        whose = whose if o.slot == name else f"slot {o.slot!r}, slice {whose}"
        data = {"slice": sm.label, "got": r.label, "belongs_to": ctx.labels.get((o.slot, o.index), o.slot)}
        yield WRONG_SLOT.diagnostic(
            "belongs-elsewhere", data=data, whose=whose, expected=expected_final(ctx, sm), label=sm.label, **_about(ctx, name, sm, bp, r, stores)
        )
        return
    reads_slice = {e.node_id for e in sm.entry if e.note != "derived"}
    if r.node_id in reads_slice:
        data = {"slice": sm.label, "got": r.label}
        yield WRONG_SLOT.diagnostic("other-port", data=data, expected=expected_final(ctx, sm), label=sm.label, **_about(ctx, name, sm, bp, r, stores))
        return
    if r.node_id in ctx.derived_readers.get(name, set()) or sm.index in ignored:
        return
    if is_reset(ctx, name, sm, bp, r):
        return
    rec = ctx.ops[r.node_id]
    yield NOT_FINAL_STATE.diagnostic(
        "unread-op",
        data={"slice": sm.label},
        unread="slice" if r.node_id in ctx.reads(name) else "slot",
        start=ctx.start_text(rec, ENTRY_OF.get(r.port, STATE_H.entry)),
        expected=expected_final(ctx, sm),
        label=sm.label,
        **_about(ctx, name, sm, bp, r, stores),
    )
