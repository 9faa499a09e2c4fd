"""Ordering: are slot writes ordered against the reads that must precede or follow them?

One pass, :class:`Ordering`, decides on the happens-before graph of two
unrolled calls (:attr:`ProgramFacts.two_calls`: call k and call k+1 joined by
the sequencing the Return's layer promises) with reachability (BFS over :mod:`rnnir.ir.digraph`), never
per node pair:

- OR001: ``Store_k(slot)`` must reach ``LoadSlot_{k+1}(slot)`` (read-after-write
  across calls).  Every path from call k into call k+1 crosses the boundary
  node, so one ancestors/descendants traversal of the boundary answers it for
  every slot at once;
- OR002: on a VIEW load, every reader of ``LoadSlot_k(slot)`` must reach
  ``Store_k(slot)`` (write-after-read inside a call): one ancestors traversal
  per store of a view-loaded slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from rnnir.ir import digraph
from rnnir.ir.attributes import LoadKind, OrderingLayer
from rnnir.ir.nodes import Compute, LoadSlot, Node, Store
from rnnir.passes.aliasing import VIEW_OPS
from rnnir.passes.diagnostics import Diagnostic, Location
from rnnir.passes.manager import AnalysisPass, ProgramFacts
from rnnir.passes.rules import Family, rules_of
from rnnir.passes.rules.or001_return_before_store import RULE as RETURN_BEFORE_STORE
from rnnir.passes.rules.or002_write_before_last_read import RULE as WRITE_BEFORE_LAST_READ

__all__ = ["RETURN_BEFORE_STORE", "WRITE_BEFORE_LAST_READ", "Ordering"]


def _loc(n: Node) -> Location:
    return Location.at(n, n.outputs[0].name if n.outputs and n.outputs[0] else None)


@dataclass(frozen=True)
class Ordering(AnalysisPass):
    """OR001–OR002: happens-before of slot stores against the loads of this call and the next."""

    name: ClassVar[str] = "ordering"
    rules: ClassVar = rules_of(Family.ORDERING)

    def analyse(self, facts: ProgramFacts) -> Iterable[Diagnostic]:
        return [*_return_before_store(facts), *_write_before_last_read(facts)]


def _node_text(n: Node) -> str:
    if isinstance(n, Store) and n.dest is not None:
        return f"the store into {'slot' if n.to_slot else 'output'} {n.dest.name!r}"
    return f"{n.opname} {n.describe()!r}"


def _layer_text(facts: ProgramFacts) -> str:
    rets = facts.returns
    if not rets:
        return "nobody (the program has no Return)"
    return "; ".join(dict.fromkeys(r.layer.describe() for r in rets))


def _return_before_store(facts: ProgramFacts) -> Iterator[Diagnostic]:
    layer = _layer_text(facts)
    unordered = not facts.returns or all(r.layer is OrderingLayer.NONE for r in facts.returns)
    for slot in facts.program.slots:
        loads = facts.loads_of(slot)
        stores = facts.stores_to_storage(slot)
        if not loads or not stores:
            continue
        # Store_k(slot) must reach LoadSlot_{k+1}(slot); every path between the calls crosses the boundary
        ordered_loads = all(facts.runs_after_previous_call(ld.id) for ld in loads)
        late = [st for st in stores if not ordered_loads or not facts.runs_before_next_call(st.id)]
        for st in late:
            yield RETURN_BEFORE_STORE.diagnostic(
                "calls-unordered" if unordered else "return-does-not-wait",
                slot=slot.name,
                locations=[_loc(st), *(_loc(r) for r in facts.returns)],
                data={"layer": layer},
                value=st.value.name if st.value else "?",
                layer=layer,
            )


def _view_readers(ld: LoadSlot) -> list[Node]:
    """Every node that reads the loaded memory: users of the load, and of views of it."""
    readers: list[Node] = []
    stack = [v for v in ld.results()]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        for user in v.users:
            if user not in readers:
                readers.append(user)
            if isinstance(user, Compute) and user.op in VIEW_OPS and user.inputs and user.inputs[0] is v:
                stack.extend(user.results())
    return readers


def _write_before_last_read(facts: ProgramFacts) -> Iterator[Diagnostic]:
    g = facts.program.graph  # call k's part of facts.two_calls: nothing from call k+1 reaches call k
    for slot in facts.program.slots:
        views = [ld for ld in facts.loads_of(slot) if ld.kind is LoadKind.VIEW]
        if not views:
            continue
        stores = facts.stores_to_storage(slot)
        readers = [r for ld in views for r in _view_readers(ld)]
        for st in stores:
            before_store = digraph.ancestors(g, st.id)  # one traversal per slot store
            racing = [r for r in readers if r is not st and r.id not in before_store]
            if not racing:
                continue
            names = ", ".join(_node_text(r) for r in racing[:4]) + (" …" if len(racing) > 4 else "")
            yield WRITE_BEFORE_LAST_READ.diagnostic(
                "view-race",
                slot=slot.name,
                locations=[_loc(st), *(_loc(r) for r in racing)],
                value=st.value.name if st.value else "?",
                count=len(racing),
                readers=names,
                layer=_layer_text(facts),
            )
