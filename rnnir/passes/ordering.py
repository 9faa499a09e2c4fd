"""Ordering: are slot writes ordered against the reads that must precede or follow them?

One pass, :class:`Ordering`, decides on the happens-before graph of two
unrolled calls (:attr:`ProgramFacts.two_calls`: call k and call k+1 joined by
the sequencing the Return's layer promises) with reachability (BFS over :mod:`rnnir.digraph`), never
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

from rnnir import digraph
from rnnir.ir import Compute, LoadKind, LoadSlot, Node, OrderingLayer, Store

from .aliasing import VIEW_OPS
from .diagnostics import Diagnostic, Location, Message, Severity, rule
from .manager import AnalysisPass, ProgramFacts

__all__ = ["RETURN_BEFORE_STORE", "WRITE_BEFORE_LAST_READ", "Ordering"]


RETURN_BEFORE_STORE = rule("OR001", "return-before-store", Severity.ERROR, "the call's Return does not wait for a slot store: the next call may read stale state", """
    What it finds
        A store into a slot that the call's Return does not wait for, directly
        or through happens-before edges, so nothing orders it before the next
        call's load of the same slot (a read-after-write across calls that is
        not guaranteed).  Also every slot store of a program whose Return is
        ordered by nobody (layer ``none``).

    Why it matters
        The next call may start while the write is still in flight (an async
        device copy, a store scheduled after the outputs are handed back) and
        read the previous state, or a half-written one.  It shows only under
        load, on some devices, and never in a one-call test.

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
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by device>(%o)                              // does not wait for the slot store
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
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by device>(%s, %o)                          // the next call starts after the slot store
        }
    """, messages={
    "calls-unordered": Message(
        "store of %{value} into slot {slot!r} may complete after the call returns: nothing orders call k+1 after call k "
        "(the Return is ordered by {layer}); the next call may read stale state (read-after-write across calls not guaranteed)",
        hint="order the calls: give the Return a layer (runtime, device event or caller) and make it wait for the slot store",
    ),
    "return-does-not-wait": Message(
        "store of %{value} into slot {slot!r} may complete after the call returns: the Return (ordered by {layer}) does not "
        "wait for it, directly or through happens-before edges, so call k+1's load_slot(@{slot}) is not ordered after it; "
        "the next call may read stale state (read-after-write across calls not guaranteed)",
        hint="make the Return wait for the store into {slot!r} (add its result to the Return's waits)",
    ),
})


WRITE_BEFORE_LAST_READ = rule("OR002", "write-before-last-read", Severity.ERROR, "a slot store may run before the last reader of the slot's current value (write-after-read on an in-place slot)", """
    What it finds
        A slot loaded as a VIEW (read in place) and a store into the same slot
        that is not ordered after every reader of the loaded value: a
        write-after-read hazard, the store may clobber the live-in state while
        it is still being read.  COPY loads never trigger it.

    Why it matters
        A reader that runs after the store sees the *new* state where it
        expected the old one: e.g. an output that echoes the incoming state,
        or a second op reading the same live-in, silently computes with the
        wrong value when the scheduler reorders them.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          output norm : float32[]

          %h = load_slot<@h, view>()                         // loaded in place
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %n = ReduceL2<keepdims=0>(%h)                      // a second reader of the slot's current value
          %s = store<@h, token>(%hn)                         // may overwrite it before ReduceL2 reads it
          %o = store<out:hn, value>(%hn)
          %on = store<out:norm, value>(%n)
          return<by runtime>(%s, %o, %on)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          output norm : float32[]

          %h = load_slot<@h, view>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %n = ReduceL2<keepdims=0>(%h)
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          %on = store<out:norm, value>(%n)
          return<by runtime>(%s, %o, %on)
          order %on -> %s                                    // the reader's store runs before the slot store
        }
    """, messages={
    "view-race": Message(
        "slot {slot!r} is loaded as a VIEW and the store of %{value} into it is not ordered after {count} reader(s) of the "
        "loaded value ({readers}): write-after-read hazard, the store may clobber the live-in state while it is still read; "
        "{layer} orders whole calls only, so inside the call the program itself must order them",
        hint="load {slot!r} as a copy, or order the store after every reader of the loaded value",
    ),
})


def _loc(n: Node) -> Location:
    return Location.at(n, n.outputs[0].name if n.outputs and n.outputs[0] else None)


@dataclass(frozen=True)
class Ordering(AnalysisPass):
    """OR001–OR002: happens-before of slot stores against the loads of this call and the next."""

    name: ClassVar[str] = "ordering"
    rules: ClassVar = (RETURN_BEFORE_STORE, WRITE_BEFORE_LAST_READ)

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
        ordered_loads = all((1, ld.id) in facts.after_previous_call for ld in loads)
        late = [st for st in stores if not ordered_loads or (0, st.id) not in facts.before_next_call]
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
    h = facts.two_calls
    for slot in facts.program.slots:
        views = [ld for ld in facts.loads_of(slot) if ld.kind is LoadKind.VIEW]
        if not views:
            continue
        stores = facts.stores_to_storage(slot)
        readers = [r for ld in views for r in _view_readers(ld)]
        for st in stores:
            before_store = digraph.ancestors(h, (0, st.id))  # one traversal per slot store
            racing = [r for r in readers if r is not st and (0, r.id) not in before_store]
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
