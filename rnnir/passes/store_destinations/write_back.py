"""Write-back: is every slot written back once per call path, and with something other than itself?

SD001 (a slot no call path writes back, or hands straight back) and SD004 (a
slot written twice on one call path).
"""

from __future__ import annotations

from collections.abc import Iterator

from rnnir.ir import LoadSlot, Output, Store
from rnnir.pairs import ExitKind, PairSource, SliceMap, StatePair

from ..diagnostics import Diagnostic, Location, Message, Severity, rule
from ..manager import ProgramFacts
from .context import Context, store_loc

__all__ = ["SLOT_NEVER_WRITTEN", "SLOT_WRITTEN_TWICE", "handed_back", "never_written", "written_twice"]


SLOT_NEVER_WRITTEN = rule("SD001", "slot-never-written", Severity.ERROR, "a slot is read but no call path writes it back: every call restarts", """
    What it finds
        A slot (a state input) that the call reads but that no call path writes
        back: no graph output returns it, no store writes the slot, or what is
        written back is the slot's own incoming value, the same slice, in every
        If branch (the state is handed straight back).

    Why it matters
        The recurrence never advances across calls: every call restarts from
        the initial state (or from whatever the caller keeps passing), so a
        streaming model behaves like a stateless one and only the first chunk
        is right.  Nothing fails; the output is just wrong from call 2 on.

    Not this rule
        An If branch that deliberately restarts from zeros (silero-vad's
        ``decoder/If_1`` else branch runs its LSTM from ConstantOfShape) while
        another branch writes the slot.  A slot that lives in a graph output
        buffer (``alias_of`` an output that is stored) is AL002's case.

    Bad (ONNX sketch)
        inputs: x, h0            outputs: y            # nothing returns the state
        Y, Y_h = GRU(x, W, R, initial_h=h0)

        or, the state returned unchanged:
        stateN = Identity(state)

    Fixed
        inputs: x, h0            outputs: y, hn
        Y, hn = GRU(x, W, R, initial_h=h0)             # the final state is returned

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%h)                          // the state handed straight back
          %o = store<out:hn, value>(%h)
          return<by runtime>(%s, %o)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // the final state fans out
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "no-output": Message(
        "state input {slot!r}{feeds} is live-in but no graph output returns its final state: every call restarts from the initial state",
        hint="add a graph output with the final state of {slot!r} and pair it (e.g. {slot}_out)",
    ),
    "output-not-stored": Message(
        "slot {slot!r}{feeds} lives in output {output!r}, which nothing stores: every call restarts from the initial state",
        hint="store the final state into {slot!r} (and into {output!r} separately)",
    ),
    "no-store": Message(
        "slot {slot!r}{feeds} is loaded but no store writes it back{paired}: every call restarts from the initial state",
        hint="store the final state into slot {slot!r} on every call path",
    ),
    "handed-back": Message(
        "slot {slot!r} is written back with its own live-in value on every call path (the state is handed straight back): "
        "the recurrence never advances across calls",
        hint="write the recurrent op's final state into {slot!r}, not the loaded value",
    ),
    "slice-handed-back": Message(
        "slice {here} is written back with its own live-in value on every call path",
        consequence="that part of the state never advances across calls",
        hint="write the final state that belongs to {label} into it",
    ),
})


SLOT_WRITTEN_TWICE = rule("SD004", "slot-written-twice", Severity.ERROR, "a slot is written more than once in one call", """
    What it finds
        Two stores to the same slot on one call path (stores in the two
        alternatives of one If are fine).

    Why it matters
        Which value survives depends on store order, which the dataflow may
        not fix (a write-after-write race); even when ordered, one of the
        writes is dead and usually a sign that two state instances were
        merged into one slot.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s0 = store<@h, token>(%hn)
          %s1 = store<@h, token>(%hn)                        // a second store into the same slot
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s0, %s1, %o)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // one store per call
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "written-twice": Message(
        "slot {slot!r} is written {count} times in one call{where} ({values}): a write-after-write on persistent state; "
        "which value the next call sees depends on store order",
        hint="keep exactly one store of the final state into {slot!r} per call path",
    ),
})


def never_written(ctx: Context, pair: StatePair, loads: list[LoadSlot]) -> Diagnostic:
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


def handed_back(ctx: Context, pair: StatePair, stores: list[Store]) -> Iterator[Diagnostic]:
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
    locs = [store_loc(st) for st in stores]
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
