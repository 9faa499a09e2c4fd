"""Aliasing: does a slot share storage with something whose lifetime differs?

One pass, :class:`Aliasing`, reads the store structure: which value each
store reads (def-use, one lookup per store), what a store returns (an effect
token, an alias of its destination, or a copy) and the slots' storage
identities.  A slot outlives the call; a graph output belongs to the caller
once the call returns; the two must never be the same memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from rnnir.ir import Compute, LoadKind, LoadSlot, Output, Slot, Store, StoreResult, Value
from rnnir.optraits import OpTrait, ops_with

from .diagnostics import Diagnostic, Location, Message, Severity, rule
from .manager import AnalysisPass, ProgramFacts

__all__ = ["CHAINED_OUTPUT_STORE", "OUTPUT_ALIASES_SLOT", "SHARED_SLOT_STORAGE", "Aliasing", "VIEW_OPS"]


CHAINED_OUTPUT_STORE = rule("AL001", "chained-output-store", Severity.ERROR, "the output store reads the result of a slot store (chain), not the final state", """
    What it finds
        A store to a graph output whose value is the *result* of a store to a
        slot: ``final_state -> Store(slot) -> Store(output)``, the chain,
        instead of the fan-out where both stores read the final state.

    Why it matters
        What a slot store returns is not the final state.  A TOKEN result is
        an effect, not a tensor: the caller gets garbage.  An ALIAS result is
        a view of the slot's memory: the caller's output changes when the
        next call writes the slot (a may-alias across calls).  Even a VALUE
        result costs an extra out-of-place copy and serialises the output
        behind the slot write.

    Fixed (IR: fan-out)
        %s = store<@h, token>(%hn)
        %o = store<out:hn, value>(%hn)         # both stores read the final state

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
          %s = store<@h, alias>(%hn)                         // returns a view of the slot's memory
          %o = store<out:hn, value>(%s)                      // chained: the output reads that view
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
          %s = store<@h, alias>(%hn)
          %o = store<out:hn, value>(%hn)                     // fan-out: both stores read the final state
          return<by runtime>(%s, %o)
        }
    """, messages={
    "token-chain": Message(
        "output {output!r} is stored from the result of the store into slot {slot!r} (a chain %{final} -> @{slot} -> out:{output}), "
        "not from the final state %{final}; that result is an effect token, not a tensor: the caller receives no state",
        hint="fan out: store %{final} into slot {slot!r} and into output {output!r} directly",
    ),
    "alias-chain": Message(
        "output {output!r} is stored from the result of the store into slot {slot!r} (a chain %{final} -> @{slot} -> out:{output}), "
        "not from the final state %{final}; that result is a view of the memory of slot {slot!r}: the caller's value changes "
        "when the next call writes the slot",
        hint="fan out: store %{final} into slot {slot!r} and into output {output!r} directly",
    ),
    "copy-chain": Message(
        "output {output!r} is stored from the result of the store into slot {slot!r} (a chain %{final} -> @{slot} -> out:{output}), "
        "not from the final state %{final}; that result is a copy made by the slot store: an extra out-of-place copy, "
        "and the output waits for the slot write",
        hint="fan out: store %{final} into slot {slot!r} and into output {output!r} directly",
    ),
})


OUTPUT_ALIASES_SLOT = rule("AL002", "output-aliases-slot", Severity.ERROR, "a graph output shares storage with a slot: the caller's value changes at the next call", """
    What it finds
        A graph output that is the same memory as a slot: the slot is declared
        an alias of the output (the lowering that reuses the output store as
        the slot store), or an output store of ALIAS kind whose value is a
        VIEW load of a slot or an ALIAS result of a slot store.

    Why it matters
        The caller owns an output after the call returns; the slot is written
        again by the next call.  With one buffer for both, the value the
        caller holds changes under it at the next call (must-alias across
        calls), and a caller that writes into its output corrupts the state.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros aliases out:hn
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %o = store<out:hn, value>(%hn)                     // the slot lives in this output's buffer
          return<by runtime>(%o)
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
          %s = store<@h, token>(%hn)                         // the slot has its own storage and store
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "lives-in-output": Message(
        "slot {slot!r} lives in graph output {output!r}'s buffer (must-alias): the single store into {output!r} doubles as "
        "the slot store, so the value the caller holds is overwritten by the next call, and a caller writing into it corrupts the state",
        hint="give slot {slot!r} its own storage: store the final state into the slot and into {output!r} separately",
    ),
    "view-load-output": Message(
        "output {output!r} is stored as an alias of a VIEW load of slot {slot!r} (may-alias across calls): the caller's value "
        "changes when the next call writes slot {slot!r}",
        hint="store a copy (result=value) into {output!r}, or load {slot!r} as a copy",
    ),
    "alias-result-output": Message(
        "output {output!r} is stored as an alias of the ALIAS result of the store into slot {slot!r} (may-alias across calls): "
        "the caller's value changes when the next call writes slot {slot!r}",
        hint="store a copy (result=value) into {output!r}, or load {slot!r} as a copy",
    ),
})


SHARED_SLOT_STORAGE = rule("AL003", "shared-slot-storage", Severity.ERROR, "two state instances share one slot's storage", """
    What it finds
        Two slots with the same storage: the same address, or one declared an
        alias of the other.

    Why it matters
        Two state instances (two layers, h and c, two streams) then read and
        write one buffer: whichever store lands last wins, and both recurrences
        continue from it at the next call.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros address "mem:0"
          slot @c : float32[1,1,4] init=zeros address "mem:0"   // h and c at one address
          output hn : float32[1,1,4]
          output cn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,16,3]
          value %R : float32[1,16,4]
          pair h -> hn declared "the caller feeds hn back as h"
          pair c -> cn declared "the caller feeds cn back as c"

          %h = load_slot<@h, copy>()
          %c = load_slot<@c, copy>()
          %y, %hn, %cn = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h, %c, _)
          %sh = store<@h, token>(%hn)
          %sc = store<@c, token>(%cn)
          %oh = store<out:hn, value>(%hn)
          %oc = store<out:cn, value>(%cn)
          return<by runtime>(%sh, %sc, %oh, %oc)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          slot @c : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          output cn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,16,3]
          value %R : float32[1,16,4]
          pair h -> hn declared "the caller feeds hn back as h"
          pair c -> cn declared "the caller feeds cn back as c"

          %h = load_slot<@h, copy>()
          %c = load_slot<@c, copy>()
          %y, %hn, %cn = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h, %c, _)
          %sh = store<@h, token>(%hn)
          %sc = store<@c, token>(%cn)
          %oh = store<out:hn, value>(%hn)
          %oc = store<out:cn, value>(%cn)
          return<by runtime>(%sh, %sc, %oh, %oc)
        }
    """, messages={
    "shared": Message(
        "slots {names} share one storage ({why}): two state instances clobber each other, and every call continues all of "
        "them from whichever store landed last",
        hint="give every state instance its own slot storage (distinct address, no alias between slots)",
    ),
})

#: what the output of a chained store receives, by the slot store's result kind
_CHAIN_MESSAGE = {StoreResult.TOKEN: "token-chain", StoreResult.ALIAS: "alias-chain", StoreResult.VALUE: "copy-chain"}


#: ops a runtime may implement as a view of their first input (no copy)
VIEW_OPS = ops_with(OpTrait.VIEW)


def _through_views(v: Value | None) -> Value | None:
    """Follow ``v`` back through view-like ops to the value whose memory it may share."""
    seen: set[int] = set()
    while v is not None and id(v) not in seen:
        seen.add(id(v))
        p = v.producer
        if isinstance(p, Compute) and p.op in VIEW_OPS and p.inputs and p.inputs[0] is not None:
            v = p.inputs[0]
            continue
        return v
    return v


def _loc(st: Store) -> Location:
    return Location.at(st, st.value.name if st.value else None)


@dataclass(frozen=True)
class Aliasing(AnalysisPass):
    """AL001–AL003: chains of stores and storage shared between a slot and anything else."""

    name: ClassVar[str] = "aliasing"
    rules: ClassVar = (CHAINED_OUTPUT_STORE, OUTPUT_ALIASES_SLOT, SHARED_SLOT_STORAGE)

    def analyse(self, facts: ProgramFacts) -> Iterable[Diagnostic]:
        return [*_chains(facts), *_output_aliases(facts), *_shared(facts)]


def _chains(facts: ProgramFacts) -> Iterator[Diagnostic]:
    for st in facts.stores:
        if not isinstance(st.dest, Output):
            continue
        src = _through_views(st.value)
        inner = src.producer if src is not None else None
        if not (isinstance(inner, Store) and isinstance(inner.dest, Slot)):
            continue
        slot = inner.dest
        final = inner.value.name if inner.value is not None else "?"
        yield CHAINED_OUTPUT_STORE.diagnostic(
            _CHAIN_MESSAGE[inner.result],
            slot=slot.name,
            locations=[_loc(st), _loc(inner)],
            data={"result": inner.result.value},
            output=st.dest.name,
            final=final,
        )


def _output_aliases(facts: ProgramFacts) -> Iterator[Diagnostic]:
    stores_into: dict[int, list[Store]] = {}
    for st in facts.stores:
        if st.dest is not None:
            stores_into.setdefault(id(st.dest), []).append(st)
    for slot in facts.program.slots:
        if isinstance(slot.alias_of, Output):
            out = slot.alias_of
            stores = stores_into.get(id(out), [])
            yield OUTPUT_ALIASES_SLOT.diagnostic(
                "lives-in-output", slot=slot.name, locations=[_loc(st) for st in stores] or [Location(value=out.name)], output=out.name
            )
    for st in facts.stores:
        if not isinstance(st.dest, Output) or st.result is not StoreResult.ALIAS:
            continue
        src = _through_views(st.value)
        p = src.producer if src is not None else None
        if isinstance(p, LoadSlot) and p.kind is LoadKind.VIEW and p.slot is not None:
            slot, message = p.slot, "view-load-output"
        elif isinstance(p, Store) and isinstance(p.dest, Slot) and p.result is StoreResult.ALIAS:
            slot, message = p.dest, "alias-result-output"
        else:
            continue
        yield OUTPUT_ALIASES_SLOT.diagnostic(message, slot=slot.name, locations=[_loc(st)], output=st.dest.name)


def _shared(facts: ProgramFacts) -> Iterator[Diagnostic]:
    slots = facts.program.slots
    parent = {id(s): s for s in slots}
    root: dict[int, int] = {id(s): id(s) for s in slots}

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    def union(a: Slot, b: Slot) -> None:
        ra, rb = find(id(a)), find(id(b))
        if ra != rb:
            root[rb] = ra

    by_address: dict[str, Slot] = {}
    reasons: list[tuple[Slot, str]] = []  # a slot the reason names, and the reason
    for s in slots:
        other = by_address.setdefault(s.address, s)
        if other is not s:
            union(other, s)
            reasons.append((s, f"{other.name!r} and {s.name!r} have the same address {s.address!r}"))
        if isinstance(s.alias_of, Slot) and id(s.alias_of) in parent:
            union(s.alias_of, s)
            reasons.append((s, f"{s.name!r} is declared an alias of {s.alias_of.name!r}"))
    groups: dict[int, list[Slot]] = {}
    for s in slots:
        groups.setdefault(find(id(s)), []).append(s)
    # each reason goes to its group by the slot it names: matching every reason's text against every member's
    # name took 35 s for a ring of 20,000 aliases
    why_of: dict[int, list[str]] = {}
    for s, text in reasons:
        why_of.setdefault(find(id(s)), []).append(text)
    for group, members in groups.items():
        if len(members) < 2:
            continue
        names = [m.name for m in members]
        why = why_of.get(group, [])
        yield SHARED_SLOT_STORAGE.diagnostic(
            "shared",
            slot=names[0],
            locations=[Location(value=n) for n in names],
            data={"slots": names},
            names=", ".join(repr(n) for n in names),
            why="; ".join(why),
        )
