"""The store structure of a program: what plain ONNX cannot say about where the state is written.

ONNX has no stores: a graph output is "the value returned", and onnxruntime writes it once.  An IR program
says more -- a slot store chained into an output store, a slot aliased to an output or sharing another
slot's storage, a load that is a view of the slot, a ``Return`` that does not wait for a store, an order
between stores.  :func:`rnnir.export` keeps these in the exported model as the program's IR text
(``metadata_props["rnnir.ir"]``, :mod:`rnnir.irtext`'s format); lowering lowers the ONNX graph as usual and
takes the stores from that text (:func:`read_structure`), so the ONNX graph stays the one source of
computation and the IR text the one source of stores.

:class:`StoreStructure` is the text's store facts keyed by ONNX names, the form lowering applies to the
lowered graph and ``rnnir fix`` edits.  Slots and outputs the text does not know (a state exposed after the
export) get lowering's default fan-out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rnnir.errors import IRError, ModelError
from rnnir.ir.attributes import LoadKind, OrderingLayer, StoreResult
from rnnir.ir.core import Program
from rnnir.ir.nodes import Slot, Store, Value

__all__ = ["StoreFact", "StoreStructure", "read_structure", "structure_of"]


@dataclass
class StoreFact:
    """One store: ``dest`` is ``slot:NAME`` or ``out:NAME``; it reads the ONNX value ``reads`` or, when
    ``reads_store`` is set, the result of that earlier store (a chain)."""

    id: str
    dest: str
    reads: str
    reads_store: bool = False
    result: StoreResult = StoreResult.TOKEN

    def source(self) -> str:
        """How edits and messages name what the store reads: ``store:ID`` or ``value:NAME``."""
        return ("store:" if self.reads_store else "value:") + self.reads


@dataclass
class SlotFacts:
    """What a slot's storage is: loaded in place (``view_load``), an alias (``slot:``/``out:`` NAME), an address."""

    view_load: bool = False
    alias_of: str | None = None
    address: str | None = None


@dataclass
class StoreStructure:
    """Every store of one call, in program order, with the slots' storage facts, the Return and the order edges."""

    slots: dict[str, SlotFacts] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    stores: list[StoreFact] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)
    layer: OrderingLayer = OrderingLayer.RUNTIME
    order: list[tuple[str, str]] = field(default_factory=list)

    def stores_into(self, dest: str) -> list[StoreFact]:
        return [st for st in self.stores if st.dest == dest]

    def store(self, store_id: str) -> StoreFact | None:
        return next((st for st in self.stores if st.id == store_id), None)


def onnx_name(v: Value | None) -> str:
    """The ONNX tensor a value lowers from (inner-graph values carry ``@scope``)."""
    if v is None:
        raise IRError("a store reads no value")
    return v.name.split("@", 1)[0]


def structure_of(program: Program, value_name: Callable[[Value | None], str] = onnx_name) -> StoreStructure:
    """The store structure of ``program``; stores are named by their node ids."""
    out = StoreStructure(outputs=[o.name for o in program.outputs])
    for s in program.slots:
        facts = SlotFacts(view_load=any(ld.kind is LoadKind.VIEW for ld in program.loads_of(s)))
        if s.alias_of is not None:
            facts.alias_of = ("slot:" if isinstance(s.alias_of, Slot) else "out:") + s.alias_of.name
        if s.address != f"slot:{s.name}":
            facts.address = s.address
        out.slots[s.name] = facts
    for st in program.stores:
        v = st.value
        if v is not None and isinstance(v.producer, Store):
            out.stores.append(StoreFact(_store_name(st), _dest(st), _store_name(v.producer), True, st.result))
        else:
            out.stores.append(StoreFact(_store_name(st), _dest(st), value_name(v), False, st.result))
    if program.returns:
        ret = program.returns[0]
        out.waits = [_store_name(w.producer) for w in ret.waits if isinstance(w.producer, Store)]
        out.layer = ret.layer
    for u, v_, data in program.graph.edges(data=True):
        if data.get("kind") == "order":
            a, b = program.node(u), program.node(v_)
            if isinstance(a, Store) and isinstance(b, Store):
                out.order.append((_store_name(a), _store_name(b)))
    return out


def _store_name(st: Store) -> str:
    """A store is named by its result as the IR text writes it (``store.hn``): what a reader of the text sees."""
    result = st.outputs[0] if st.outputs else None
    return result.name if result is not None else st.id


def _dest(st: Store) -> str:
    return ("slot:" if isinstance(st.dest, Slot) else "out:") + (st.dest.name if st.dest else "?")


def read_structure(ir_text: str, label: str, key: str) -> StoreStructure:
    """The store structure of the IR text an export recorded under metadata ``key``."""
    from rnnir.ir.text import parse_program

    try:
        program = parse_program(ir_text, trace=False)  # only the stores are read: no slice tracing
    except IRError as exc:
        raise ModelError(f"metadata {key!r} is not IR text rnnir can read: {exc}", model=label) from None
    return structure_of(program)
