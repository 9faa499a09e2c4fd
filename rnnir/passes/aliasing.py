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

from rnnir.ir.attributes import LoadKind, StoreResult
from rnnir.ir.nodes import Compute, LoadSlot, Output, Slot, Store, Value
from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.passes.diagnostics import Diagnostic, Location
from rnnir.passes.manager import AnalysisPass, ProgramFacts
from rnnir.passes.rules import Family, rules_of
from rnnir.passes.rules.al001_chained_output_store import RULE as CHAINED_OUTPUT_STORE
from rnnir.passes.rules.al002_output_aliases_slot import RULE as OUTPUT_ALIASES_SLOT
from rnnir.passes.rules.al003_shared_slot_storage import RULE as SHARED_SLOT_STORAGE

__all__ = ["CHAINED_OUTPUT_STORE", "OUTPUT_ALIASES_SLOT", "SHARED_SLOT_STORAGE", "Aliasing", "VIEW_OPS"]


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
    rules: ClassVar = rules_of(Family.ALIASING)

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
