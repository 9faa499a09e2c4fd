"""The rnnir IR: one inference call of one model, with its persistent state made explicit.

A :class:`Program` is a DAG of nodes held in a directed graph with networkx's interface
(:mod:`rnnir.ir.digraph`; ``program.graph.to_networkx()`` gives a real ``networkx.DiGraph``).  Values are
SSA: each has one producer (or none, for values that come from outside the
analysed region) and knows its uses, so "does this store read the final state
directly?" is one lookup.  The nodes, values, slots and outputs are in :mod:`rnnir.ir.nodes`, what they are
annotated with in :mod:`rnnir.ir.attributes`; the program is the only way to edit them
(:mod:`rnnir.ir.ownership`), and every edit moves its version, which keys every cached analysis.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from rnnir.errors import IRError
from rnnir.ir import digraph
from rnnir.ir.attributes import (
    TensorType,
)
from rnnir.ir.nodes import (
    Compute,
    LoadSlot,
    Node,
    Output,
    PendingConst,
    Recurrent,
    Return,
    Slot,
    Store,
    Value,
)
from rnnir.ir.ownership import FrozenProgramError, IRTuple, write_kept

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import onnx

    from rnnir.ir.pairs import StatePair

N = TypeVar("N", bound=Node)

__all__ = ["ModelOrigin", "Program", "check_acyclic"]


class ModelOrigin(Protocol):
    """The ONNX model a program is one call of, as the program's users need it (:attr:`Program.source`).

    :class:`rnnir.onnxio.source.ModelSource` is the one implementation; the IR names only what it promises, so
    that it depends on nothing above it (reading and lowering models are layers above the IR).
    """

    @property
    def model(self) -> onnx.ModelProto: ...

    @property
    def path(self) -> Path | None: ...

    @property
    def label(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def with_external_data(self) -> onnx.ModelProto: ...


class Program:
    """One inference call of one model.

    Nodes live in ``graph`` (a :class:`rnnir.ir.digraph.DiGraph`, networkx's interface, keyed by node id, with the
    node object under attribute ``node``); data edges carry ``kind="data"``,
    explicit ordering edges ``kind="order"``.
    """

    def __init__(self, name: str = "program") -> None:
        self.name = name
        self.graph: digraph.DiGraph = digraph.DiGraph()
        # the slots and outputs as IRTuples, made from the by-name tables when first read after an add (None until
        # then): adding a thousand slots one by one would otherwise copy the tuple a thousand times
        self._slots: IRTuple | None = IRTuple()
        self._outputs: IRTuple | None = IRTuple()
        self._externals: dict[str, Value] = {}
        self._state_pairs: IRTuple = IRTuple()
        self._suggested_pairs: IRTuple = IRTuple()  # suggestions IR text writes down (rnnir.analysis.suggest derives a lowered program's)
        self._recurrence_candidates: IRTuple = IRTuple()  # rnnir.lower.cells.CellCandidate: looked like a recurrence, not confirmed
        # the ONNX model this program is one call of (None when built or parsed from IR text): export writes it back
        # with the pairing, StatefulSession and the simulator run it
        self.source: ModelOrigin | None = None
        self._ids: dict[str, int] = {}
        self._order: list[Node] | None = None  # topological order, dropped whenever the graph changes
        self._kinds: dict[tuple[type, ...], list[Node]] = {}
        self._slot_names: dict[str, Slot] = {}
        self._output_names: dict[str, Output] = {}
        self._by_dest: dict[int, list[Node]] | None = None  # stores and loads by their slot/output, per graph change
        # bumped by every change: through this class's methods, or a write to an owned slot, output, node or value;
        # the containers are IRTuples and the state pairs frozen, so there is no other way to change the program
        self._version = 0
        self._frozen = 0  # > 0 while analyses run: owned objects refuse writes
        # what layers above the IR derive from this program (rnnir.analysis.facts keeps its AnalysisManager here),
        # as onnx-ir's Model.meta: never printed, compared or versioned, and no part of the program's meaning
        self.meta: dict[str, object] = {}

    # -- containers (immutable: replaced whole, which bumps the version) ---------------------
    @property
    def slots(self) -> Sequence[Slot]:
        if self._slots is None:
            self._slots = IRTuple(self._slot_names.values())
        return cast("Sequence[Slot]", self._slots)

    @property
    def outputs(self) -> Sequence[Output]:
        if self._outputs is None:
            self._outputs = IRTuple(self._output_names.values())
        return cast("Sequence[Output]", self._outputs)

    @property
    def externals(self) -> Mapping[str, Value]:
        """Values defined outside the analysed region, by name (read-only: add one with :meth:`external`)."""
        return MappingProxyType(self._externals)

    @property
    def state_pairs(self) -> Sequence[StatePair]:
        """The state pairs; assign a new sequence to change them (the version moves)."""
        return cast("Sequence[StatePair]", self._state_pairs)

    @state_pairs.setter
    def state_pairs(self, pairs: Iterable[StatePair]) -> None:
        self._changed()
        self._state_pairs = IRTuple(pairs)

    @property
    def suggested_pairs(self) -> Sequence[StatePair]:
        return cast("Sequence[StatePair]", self._suggested_pairs)

    @suggested_pairs.setter
    def suggested_pairs(self, pairs: Iterable[StatePair]) -> None:
        self._changed()
        self._suggested_pairs = IRTuple(pairs)

    @property
    def recurrence_candidates(self) -> Sequence[Any]:
        return cast("Sequence[Any]", self._recurrence_candidates)

    @recurrence_candidates.setter
    def recurrence_candidates(self, candidates: Iterable[Any]) -> None:
        self._changed()
        self._recurrence_candidates = IRTuple(candidates)

    # -- construction -------------------------------------------------------------------
    def fresh_id(self, stem: str) -> str:
        n = self._ids.get(stem, 0)
        self._ids[stem] = n + 1
        return f"{stem}{n}"

    def add_slot(self, slot: Slot) -> Slot:
        if slot.name in self._slot_names:
            raise IRError(f"program {self.name!r} already has a slot named {slot.name!r}")
        self._changed()
        slot._adopt(self)
        self._slots = None
        self._slot_names[slot.name] = slot
        return slot

    def add_output(self, output: Output) -> Output:
        if output.name in self._output_names:
            raise IRError(f"program {self.name!r} already has an output named {output.name!r}")
        self._changed()
        output._adopt(self)
        self._outputs = None
        self._output_names[output.name] = output
        return output

    def external(self, name: str, type: TensorType | None = None, const: np.ndarray | PendingConst | None = None) -> Value:
        """A value defined outside the analysed region (graph input, weight, off-path value)."""
        v = self._externals.get(name)
        if v is None:
            v = Value(name=name, type=type or TensorType(), const=const)  # type: ignore[arg-type]  # a PendingConst is stored as such (see Value.const)
            self._changed()
            v._adopt(self)
            self._externals[name] = v
        return v

    def add(self, node: Node) -> Node:
        """Insert ``node``: its id must be unique, its operands must already belong to the program."""
        fields = node.__dict__
        if fields.get("_program") is not None:
            raise IRError(f"{node!r} already belongs to program {fields['_program'].name!r}")
        nid = node.id
        if not nid:  # written as Node.__setattr__ does for a node no program owns yet
            nid = fields["id"] = self.fresh_id(node.opname.split(".")[-1].lower() if isinstance(node, Compute) else type(node).__name__.lower())
        graph = self.graph
        if nid in graph:
            raise IRError(f"duplicate node id {nid!r}")
        inputs, outputs = node.inputs, node.outputs
        # _check_operand's tests, inline: lowering adds thousands of nodes, most with several operands (a Return
        # with one per store); it runs only to raise with its message
        attrs_of, externals = graph.attrs_of, self._externals
        for v in inputs:
            if v is not None:
                producer = v.producer
                if producer is not None:
                    attrs = attrs_of(producer.id)
                    if attrs is None or attrs["node"] is not producer:
                        self._check_operand(node, v)
                elif externals.get(v.name) is not v:
                    self._check_operand(node, v)
        for v in outputs:
            if v is not None and v.producer is not None and v.producer is not node:
                raise IRError(f"%{v.name} already has producer {v.producer.id}")
        graph.add_node(nid, node=node)
        self._changed()
        fields["_program"] = self  # node._adopt(self)
        # the use-def links, written as write_kept does (a Python call per field is most of a node's cost on a
        # model with thousands of state pairs)
        for i, operand in enumerate(inputs):
            if operand is None:
                continue
            value_fields = operand.__dict__
            producer = value_fields["producer"]
            if producer is not None:
                graph.add_edge(producer.id, nid, kind="data")
            value_fields["uses"] = IRTuple((*value_fields["uses"], (node, i)))
        for i, result in enumerate(outputs):
            if result is None:
                continue
            value_fields = result.__dict__
            value_fields["producer"] = node
            value_fields["index"] = i
            value_fields["_program"] = self
        return node

    def _check_operand(self, node: Node, v: Value) -> None:
        producer = v.producer
        if producer is not None:
            attrs = self.graph.attrs_of(producer.id)
            if attrs is None or attrs["node"] is not producer:
                raise IRError(f"{node.id} reads %{v.name}, produced by a node outside this program")
        elif self._externals.get(v.name) is not v:
            raise IRError(f"{node.id} reads %{v.name}, which is neither produced here nor an external value")

    def _owns(self, node: Node) -> None:
        if node.__dict__.get("_program") is not self:
            raise IRError(f"{node!r} is not a node of program {self.name!r}")

    def set_input(self, node: Node, index: int, value: Value | None) -> None:
        """Make ``node`` read ``value`` at operand ``index`` (MLIR's ``setOperand``): use lists and data edges follow,
        and the version moves, so every cached analysis is recomputed.  Refused when it would close a cycle."""
        self._owns(node)
        if not 0 <= index < len(node.inputs):
            raise IRError(f"{node.id} has no operand {index} (it has {len(node.inputs)})")
        old = node.inputs[index]
        if value is old:
            return
        if value is not None:
            self._check_operand(node, value)
            p = value.producer
            if p is not None and (p is node or digraph.has_path(self.graph, node.id, p.id)):
                raise IRError(f"{node.id} cannot read %{value.name}: its producer {p.id} runs after it (a cycle)")
        self._changed()
        inputs = list(node.inputs)
        inputs[index] = value
        write_kept(node, "inputs", IRTuple(inputs))
        if old is not None:
            write_kept(old, "uses", IRTuple(u for u in old.uses if not (u[0] is node and u[1] == index)))
            p = old.producer
            if p is not None and not any(v is not None and v.producer is p for v in node.inputs):
                if self.graph.edges[p.id, node.id].get("kind") == "data":
                    self.graph.remove_edge(p.id, node.id)
        if value is not None:
            write_kept(value, "uses", IRTuple((*value.uses, (node, index))))
            if value.producer is not None and not self.graph.has_edge(value.producer.id, node.id):
                self.graph.add_edge(value.producer.id, node.id, kind="data")

    def replace_all_uses_with(self, old: Value, new: Value | None) -> None:
        """Every operand that reads ``old`` reads ``new`` instead (onnx-ir's and MLIR's ``replace_all_uses_with``)."""
        for node, index in list(old.uses):
            self.set_input(node, index, new)

    def set_output(self, node: Node, index: int, value: Value | None) -> None:
        """Make ``node`` produce ``value`` (or nothing) at result ``index``; the value it replaces must be unused."""
        self._owns(node)
        if not 0 <= index < len(node.outputs):
            raise IRError(f"{node.id} has no result {index} (it has {len(node.outputs)})")
        old = node.outputs[index]
        if value is old:
            return
        if old is not None and old.uses:
            raise IRError(f"%{old.name} is still read by {', '.join(sorted({n.id for n, _ in old.uses}))}: replace its uses first")
        if value is not None and (value.producer is not None or value.__dict__.get("_program") is not None):
            raise IRError(f"%{value.name} already belongs to the program; a result must be a new value")
        self._changed()
        outputs = list(node.outputs)
        outputs[index] = value
        write_kept(node, "outputs", IRTuple(outputs))
        if old is not None:
            write_kept(old, "producer", None)
        if value is not None:
            write_kept(value, "producer", node)
            write_kept(value, "index", index)
            value._adopt(self)

    def add_order(self, before: Node, after: Node) -> None:
        """An explicit ordering edge: ``before`` completes before ``after`` starts."""
        if self.graph.has_edge(before.id, after.id):
            return
        self.graph.add_edge(before.id, after.id, kind="order")
        self._changed()

    @property
    def version(self) -> int:
        """Moves with every change of the program (the key of every cached analysis)."""
        return self._version + self.graph.changes

    def _changed(self) -> None:
        if self._frozen:
            raise FrozenProgramError(f"program {self.name!r} changed while frozen for analysis")
        self._version += 1
        self._order = None

    @property
    def is_frozen(self) -> bool:
        return self._frozen > 0

    @contextmanager
    def frozen(self) -> Iterator[Program]:
        """While inside, nothing owned by the program may change (onnx-ir's FunctionalPass promise, enforced)."""
        self._frozen += 1
        try:
            yield self
        finally:
            self._frozen -= 1

    # -- queries --------------------------------------------------------------------------
    def node(self, node_id: str) -> Node:
        node: Node = self.graph.nodes[node_id]["node"]
        return node

    @property
    def nodes(self) -> list[Node]:
        """Every node in a topological order (computed once per change of the graph)."""
        if self._order is None or len(self._order) != self.graph.number_of_nodes():
            self._order = [self.graph.nodes[n]["node"] for n in digraph.topological_sort(self.graph)]
            self._kinds = {}
            self._by_dest = None
        return list(self._order)

    def nodes_of(self, *types: type[N]) -> list[N]:
        """Nodes of the given types, in topological order (one scan per type and graph change)."""
        order = self._order
        if order is None or len(order) != self.graph.number_of_nodes():
            order = self.nodes  # refreshes the order and drops the per-type lists
        key = types
        hit = self._kinds.get(key)
        if hit is None:
            hit = [n for n in order if isinstance(n, types)]
            self._kinds[key] = hit
        return cast("list[N]", list(hit))  # every node in the list is an instance of one of ``types``

    @property
    def loads(self) -> list[LoadSlot]:
        return self.nodes_of(LoadSlot)

    @property
    def stores(self) -> list[Store]:
        return self.nodes_of(Store)

    @property
    def recurrents(self) -> list[Recurrent]:
        return self.nodes_of(Recurrent)

    @property
    def returns(self) -> list[Return]:
        return self.nodes_of(Return)

    def slot(self, name: str) -> Slot:
        hit = self._slot_names.get(name)
        if hit is None:
            raise KeyError(name)
        return hit

    def output(self, name: str) -> Output:
        hit = self._output_names.get(name)
        if hit is None:
            raise KeyError(name)
        return hit

    def _touching(self, target: Slot | Output) -> list[Node]:
        if self._by_dest is None or self._order is None or len(self._order) != self.graph.number_of_nodes():
            index: dict[int, list[Node]] = {}
            for n in self.nodes_of(LoadSlot, Store):
                key = n.slot if isinstance(n, LoadSlot) else n.dest if isinstance(n, Store) else None
                index.setdefault(id(key), []).append(n)
            self._by_dest = index
        return self._by_dest.get(id(target), [])

    def loads_of(self, slot: Slot) -> list[LoadSlot]:
        return [n for n in self._touching(slot) if isinstance(n, LoadSlot)]

    def stores_to(self, dest: Slot | Output) -> list[Store]:
        return [n for n in self._touching(dest) if isinstance(n, Store)]

    def pair(self, input_name: str) -> StatePair:
        for p in self.state_pairs:
            if p.input == input_name:
                return p
        raise KeyError(input_name)

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    # -- printing ------------------------------------------------------------------------
    def __str__(self) -> str:
        from rnnir.ir.printer import print_program  # the printer reads programs: imported here, not at the top

        return print_program(self)

    def __repr__(self) -> str:
        return f"<Program {self.name!r}: {len(self)} nodes, {len(self.slots)} slots>"


def check_acyclic(program: Program) -> None:
    """Raise IRError naming one cycle when the program's graph is not a DAG."""
    try:
        cycle = digraph.find_cycle(program.graph)
    except digraph.NoCycle:
        return
    raise IRError("program graph has a cycle: " + " -> ".join(str(u) for u, _ in cycle))
