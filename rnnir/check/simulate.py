"""A numpy simulator of the IR: run a Program call after call, with injectable faults.

    from rnnir.simulate import Simulator, Faults
    sim = Simulator(program, Faults(late=True))     # slot stores complete as late as the ordering allows
    out = sim.run({"x": x})                          # one call; the slots persist inside the simulator
    sim.events                                       # what went wrong, call by call

It runs what the IR *says*, independent of onnxruntime: ``Recurrent`` nodes
through :mod:`rnnir.semantics.reference`, ``Compute`` nodes through a small numpy table or
``onnx.reference`` for one node (values a lowered program leaves outside the
state path are computed by ``onnx.reference`` over the source model), and the
state machinery with these semantics:

* **Slot memory** is one array per storage identity, written in place.  A slot
  whose ``alias_of`` is an :class:`~rnnir.Output` (the ``reuse-single-store``
  lowering) *is* that output's buffer.
* ``LoadSlot`` runs first in every call.  ``VIEW`` hands out the slot memory
  itself (a later store in the same call changes what its readers see);
  ``COPY`` hands out a copy.
* ``Compute`` and ``Recurrent`` nodes produce new arrays (no op is run as a
  view); only ``LoadSlot(VIEW)`` and ``ALIAS`` store results share slot memory.
* ``Store`` to a slot writes in place.  Its result is a token (``TOKEN``), the
  slot memory itself (``ALIAS``: usable at once, before the write lands) or a
  copy (``VALUE``).
* ``Store`` to an output hands the stored value over **without copying** (as
  IOBinding does): the caller gets the value's own storage, so an output built
  from a view of slot memory changes when the slot is written again, and an
  output fed by a token is no tensor at all (:data:`NO_TENSOR`).
* ``Return`` waits for the stores it lists (when its ordering layer is one the
  simulation honours).  A store nobody waits for may complete late.

Faults (:class:`Faults`): ``late`` makes slot stores complete as late as the
program's ordering allows -- before the first node that needs their result
(a token or value, or an explicit order edge), before the ``Return`` that waits
for them, or else after the *next* call's loads, which then read the old
value; ``drop`` loses a slot's stores; ``schedule`` picks the order of
independent nodes (``stores-first`` runs every store as early as its inputs
allow, exposing write-after-read races on ``VIEW`` loads).

A correct fan-out program survives every fault but ``drop``: its stores read
the final state directly and its ``Return`` waits for them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnir.errors import RnnirError
from rnnir.ir import digraph
from rnnir.ir.attributes import LoadKind, OrderingLayer, StoreResult
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, LoadSlot, Output, Recurrent, Return, Slot, Store, Value

__all__ = ["NO_TENSOR", "Event", "Faults", "SimulationError", "Simulator", "Token", "run_calls"]


class SimulationError(RnnirError):
    """The program cannot be simulated: a missing feed, an unsupported op, a poisoned value used."""


class Token:
    """The result of a ``TOKEN`` store: an effect, not a tensor."""

    __slots__ = ("store",)

    def __init__(self, store: str) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"<token of {self.store}>"


class _NoTensor:
    """What a caller receives from an output whose store read a token: no tensor at all."""

    _instance: _NoTensor | None = None

    def __new__(cls) -> _NoTensor:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_TENSOR"


NO_TENSOR = _NoTensor()


class _Poison:
    """The value of a node in an If branch that failed (the branch not taken, usually)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass(frozen=True)
class Faults:
    """Injected faults: ``late`` (True or slot names), ``drop`` (slot names), ``schedule``."""

    late: bool | frozenset[str] = False
    drop: frozenset[str] = frozenset()
    schedule: str = "program"  # "program" (insertion order), "stores-first" or "stores-last"
    honour: frozenset[OrderingLayer] = frozenset({OrderingLayer.RUNTIME, OrderingLayer.DEVICE, OrderingLayer.CALLER})

    def __post_init__(self) -> None:
        if self.schedule not in ("program", "stores-first", "stores-last"):
            raise ValueError(f"schedule must be 'program', 'stores-first' or 'stores-last', not {self.schedule!r}")
        if not isinstance(self.late, bool):
            object.__setattr__(self, "late", frozenset(self.late))
        object.__setattr__(self, "drop", frozenset(self.drop))

    def is_late(self, slot: Slot) -> bool:
        return self.late is True or (not isinstance(self.late, bool) and slot.name in self.late)


@dataclass(frozen=True)
class Event:
    """Something the simulation saw go wrong (or be deferred): call index, kind, IR node, detail."""

    call: int
    kind: str  # late-store, landed-next-call, dropped-store, no-tensor, ...
    node: str
    detail: str = ""


@dataclass
class _Pending:
    store: Store
    key: str
    value: np.ndarray
    call: int


class Simulator:
    """Runs a :class:`~rnnir.Program` call after call; slots persist between calls."""

    def __init__(self, program: Program, faults: Faults | None = None, *, opset: int = 21) -> None:
        self.program = program
        self.faults = faults or Faults()
        self.opset = opset
        self.events: list[Event] = []
        self.calls = 0
        self._memory: dict[str, np.ndarray] = {}
        self._pending: list[_Pending] = []
        self._evaluators: dict[str, Any] = {}
        unknown = {s for s in (self.faults.drop | (self.faults.late if not isinstance(self.faults.late, bool) else frozenset()))} - {
            s.name for s in program.slots
        }
        if unknown:
            raise SimulationError(f"faults name slots {sorted(unknown)} that program {program.name!r} does not have")
        from rnnir.semantics import reference

        for rec in program.recurrents:
            if not reference.supports(rec.kind):
                why = reference.UNSUPPORTED_KINDS.get(rec.kind, "rnnir.semantics.reference has no implementation of it")
                raise SimulationError(f"{rec.describe()} is a {rec.kind}, which the simulator cannot run: {why}")
        self._order = self._schedule()
        self._off_path_names = self._find_off_path()
        self._off_path_evaluator: Any = None
        self._output_slot = {id(s.alias_of): s for s in program.slots if isinstance(s.alias_of, Output)}

    # -- public --------------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One call: returns every output's buffer by name (an array, or :data:`NO_TENSOR`)."""
        feeds = {k: np.asarray(v) for k, v in (feeds or {}).items()}
        call = self.calls
        values: dict[int, Any] = {}
        outputs: dict[str, Any] = {}
        loads = [n for n in self._order if isinstance(n, LoadSlot)]
        rest = [n for n in self._order if not isinstance(n, LoadSlot)]
        for node in loads:
            self._load(node, values, feeds)
        feeds = {**self._off_path(feeds, values), **feeds}
        for p in self._pending:  # last call's late stores land now, after this call has read its state
            self._write(p.key, p.value)
            dest = p.store.dest.name if p.store.dest is not None else p.key
            self.events.append(Event(call, "landed-next-call", p.store.id, f"store to {dest!r} from call {p.call}"))
        self._pending = []
        for node in rest:
            self._complete_needed_by(node)
            if isinstance(node, Store):
                self._store(node, values, outputs, call, feeds)
            elif isinstance(node, Return):
                continue
            else:
                self._compute(node, values, feeds)
        self.calls += 1
        return outputs

    def reset(self) -> None:
        """Every slot back to its initial value; pending stores are discarded."""
        self._memory.clear()
        self._pending = []

    @property
    def state(self) -> dict[str, np.ndarray]:
        """A copy of every slot's memory as it stands now (pending late stores not applied)."""
        return {s.name: np.array(self._memory[self._key(s)], copy=True) for s in self.program.slots if self._key(s) in self._memory}

    def memory(self, slot: str) -> np.ndarray:
        """The slot's storage itself (for tests that look at aliasing)."""
        return self._memory[self._key(self.program.slot(slot))]

    def events_of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    # -- values the lowering left outside the program ---------------------------------------------
    def _find_off_path(self) -> list[str]:
        """Externals a lowered program reads that are neither constants nor graph inputs: values the ONNX
        graph computes off the state path (``Equal(sr, 16000)``, ``MatMul(x, W)``, ...)."""
        src = self.program.source
        if src is None:
            return []
        graph_inputs = {vi.name for vi in src.model.graph.input}
        main = {o for n in src.model.graph.node for o in n.output}
        return [
            v.name for v in self.program.externals.values()
            if v.const is None and v.uses and v.name not in graph_inputs and v.name in main
        ]

    def _off_path(self, feeds: Mapping[str, np.ndarray], values: Mapping[int, Any]) -> dict[str, np.ndarray]:
        """This call's off-path values, computed by ``onnx.reference`` over the source model (never onnxruntime)."""
        if not self._off_path_names:
            return {}
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        src = self.program.source
        if src is None:  # off-path names come from the ONNX graph: a program with none has none
            return {}
        if self._off_path_evaluator is None:
            model = type(src.model)()
            model.CopyFrom(src.with_external_data())
            _keep_only_producers_of(model.graph, self._off_path_names)  # a contrib recurrence elsewhere need not run
            del model.graph.output[:]
            for name in self._off_path_names:
                model.graph.output.append(helper.make_empty_tensor_value_info(name))
            try:
                self._off_path_evaluator = ReferenceEvaluator(model)
            except Exception as exc:  # noqa: BLE001 - onnx.reference raises many kinds (NotImplementedError for contrib ops)
                raise SimulationError(f"cannot compute the off-path values {self._off_path_names} with onnx.reference: {exc}") from exc
        state = {ld.slot.name: values[id(ld.outputs[0])] for ld in self.program.loads if ld.outputs and ld.slot is not None}
        graph_feeds: dict[str, Any] = {}
        for vi in src.model.graph.input:
            value = feeds.get(vi.name, state.get(vi.name))
            if value is not None:
                graph_feeds[vi.name] = value
        try:
            got = self._off_path_evaluator.run(self._off_path_names, graph_feeds)
        except Exception as exc:  # noqa: BLE001 - onnx.reference raises many kinds
            raise SimulationError(f"cannot compute the off-path values {self._off_path_names} with onnx.reference: {exc}") from exc
        return dict(zip(self._off_path_names, got))

    # -- schedule ------------------------------------------------------------------------------
    def _schedule(self) -> list[Any]:
        g = self.program.graph
        position = {n: i for i, n in enumerate(g.nodes)}
        mode = self.faults.schedule
        slot_stores = {n for n in g.nodes if isinstance(g.nodes[n]["node"], Store) and isinstance(g.nodes[n]["node"].dest, Slot)}
        early: set[Hashable] = set()
        if mode == "stores-first":  # slot stores and everything they need, before anything else
            for n in slot_stores:
                early |= digraph.ancestors(g, n) | {n}

        def key(node_id: str) -> tuple[int, int]:
            if mode == "stores-first":
                return (0 if node_id in early else 1, position[node_id])
            if mode == "stores-last":
                return (1 if node_id in slot_stores else 0, position[node_id])
            return (0, position[node_id])

        import networkx as nx  # only the simulator needs a keyed topological order

        return [g.nodes[n]["node"] for n in nx.lexicographical_topological_sort(g.to_networkx(), key=key)]

    # -- slot memory ---------------------------------------------------------------------------
    def _key(self, slot: Slot) -> str:
        """The storage identity of a slot: its own, another slot's, or an output buffer's."""
        seen = set()
        target: Slot | Output = slot
        while isinstance(target, Slot) and target.alias_of is not None and id(target) not in seen:
            seen.add(id(target))
            target = target.alias_of
        return f"out:{target.name}" if isinstance(target, Output) else target.address

    def _initial(self, slot: Slot, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        if slot.name in feeds:
            return np.array(feeds[slot.name], copy=True)
        if slot.init.kind == "constant" and slot.init.value is not None:
            return np.array(slot.init.value, dtype=slot.type.dtype or None, copy=True)
        if slot.init.kind == "caller":
            raise SimulationError(f"slot {slot.name!r} is initialised by the caller: feed {slot.name!r} at the first call")
        shape = slot.type.shape
        dims = [d for d in shape if isinstance(d, int)] if shape is not None else []
        if shape is None or len(dims) != len(shape):
            raise SimulationError(f"slot {slot.name!r} has shape {slot.type}; feed its initial value as {slot.name!r}")
        return np.zeros(dims, dtype=slot.type.dtype or "float32")

    def _write(self, key: str, value: np.ndarray) -> None:
        mem = self._memory.get(key)
        if mem is not None and mem.shape == np.shape(value):
            np.copyto(mem, value)  # in place: views of the slot see it
        else:
            self._memory[key] = np.array(value, copy=True)

    # -- nodes ---------------------------------------------------------------------------------
    def _load(self, node: LoadSlot, values: dict[int, Any], feeds: Mapping[str, np.ndarray]) -> None:
        slot = node.slot
        assert slot is not None
        key = self._key(slot)
        if key not in self._memory:
            self._memory[key] = self._initial(slot, feeds)
        mem = self._memory[key]
        out = node.outputs[0] if node.outputs else None
        if out is not None:
            values[id(out)] = mem if node.kind is LoadKind.VIEW else np.array(mem, copy=True)

    def _operand(self, v: Value | None, values: Mapping[int, Any], feeds: Mapping[str, np.ndarray]) -> Any:
        if v is None:
            return None
        if id(v) in values:
            return values[id(v)]
        if v.producer is None:
            if v.const is not None:
                return v.const
            if v.name in feeds:
                return feeds[v.name]
            if self.program.source is not None:
                raise SimulationError(
                    f"value %{v.name} is computed off the state path inside an If branch; the simulator computes "
                    "off-path values of the main graph only (feed it as feeds[{v.name!r}] to run anyway)"
                )
            raise SimulationError(f"value %{v.name} comes from outside the program: feed it (feeds[{v.name!r}])")
        raise SimulationError(f"%{v.name} is read before {v.producer.id} produced it")

    def _compute(self, node: Any, values: dict[int, Any], feeds: Mapping[str, np.ndarray]) -> None:
        ins = [self._operand(v, values, feeds) for v in node.inputs]
        branch = bool(node.provenance.branch)
        if isinstance(node, Compute) and node.op == "If":
            self._if(node, ins, values)
            return
        poisoned = [x for x in ins if isinstance(x, _Poison)]
        if poisoned:
            if branch:
                self._set(node, values, [poisoned[0]] * len(node.outputs))
                return
            raise SimulationError(f"{node.describe()} reads a value of an If branch that failed: {poisoned[0].reason}")
        for x, v in zip(ins, node.inputs):
            if isinstance(x, (Token, _NoTensor)):
                raise SimulationError(f"{node.describe()} reads %{v.name}, which is a store's token, not a tensor")
        outs: list[Any]
        try:
            if isinstance(node, Recurrent):
                from rnnir.semantics import reference

                outs = reference.run_node(node.kind, ins, node.attributes())
            else:
                outs = self._compute_op(node, ins)
        except SimulationError:
            raise
        except Exception as exc:  # noqa: BLE001 - a node in a branch not taken may fail on its inputs
            if not branch:
                raise SimulationError(f"{node.describe()} ({node.opname}) failed: {exc}") from exc
            outs = [_Poison(f"{node.describe()}: {exc}")] * len(node.outputs)
        self._set(node, values, list(outs))

    def _set(self, node: Any, values: dict[int, Any], outs: list[Any]) -> None:
        for v, x in zip(node.outputs, outs):
            if v is not None:
                values[id(v)] = x

    def _if(self, node: Compute, ins: list[Any], values: dict[int, Any]) -> None:
        n = len(node.outputs)
        cond = ins[0]
        if isinstance(cond, _Poison):
            raise SimulationError(f"{node.describe()}: its condition failed: {cond.reason}")
        picked = ins[1 : 1 + n] if bool(np.asarray(cond).reshape(-1)[0]) else ins[1 + n :]
        self._set(node, values, picked)

    def _compute_op(self, node: Compute, ins: list[Any]) -> list[Any]:
        fn = _NUMPY_OPS.get(node.op) if not node.domain else None
        if fn is not None:
            out = fn(node.attributes, *ins)
            return list(out) if isinstance(out, tuple) else [out]
        return self._onnx_reference(node, ins)

    def _onnx_reference(self, node: Compute, ins: list[Any]) -> list[Any]:
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        cached = self._evaluators.get(node.id)
        if cached is None:
            proto = node.onnx_node
            if proto is None:
                names_in = [f"in{i}" if v is not None else "" for i, v in enumerate(node.inputs)]
                names_out = [f"out{i}" for i in range(len(node.outputs))]
                proto = helper.make_node(node.op, names_in, names_out, domain=node.domain or None, **node.attributes)
            try:
                cached = (ReferenceEvaluator(proto, opsets={node.domain or "": self.opset}), proto)
            except Exception as exc:  # noqa: BLE001 - onnx.reference raises many kinds
                raise SimulationError(f"{node.describe()}: onnx.reference cannot run {node.opname}: {exc}") from exc
            self._evaluators[node.id] = cached
        ev, proto = cached
        feeds = {name: x for name, x in zip(proto.input, ins) if name}
        return list(ev.run(None, feeds))

    def _store(self, node: Store, values: dict[int, Any], outputs: dict[str, Any], call: int, feeds: Mapping[str, np.ndarray]) -> None:
        value_v = node.value
        x = values.get(id(value_v)) if value_v is not None else None
        if value_v is not None and id(value_v) not in values:
            x = self._operand(value_v, values, feeds)  # a graph input stored as it is
        dest = node.dest
        result: Any
        if isinstance(dest, Slot):
            key = self._key(dest)
            if isinstance(x, (Token, _NoTensor)) or x is None:
                self.events.append(Event(call, "no-tensor", node.id, f"store to slot {dest.name!r} reads a token, not a tensor"))
            elif dest.name in self.faults.drop:
                self.events.append(Event(call, "dropped-store", node.id, f"store to slot {dest.name!r} never lands"))
            elif self.faults.is_late(dest):
                self._pending.append(_Pending(node, key, np.array(x, copy=True), call))
                self.events.append(Event(call, "late-store", node.id, f"store to slot {dest.name!r} deferred"))
            else:
                self._write(key, np.asarray(x))
            if key not in self._memory and not isinstance(x, (Token, _NoTensor)) and x is not None:
                self._memory[key] = np.zeros_like(np.asarray(x))  # storage exists even before the write lands
            mem = self._memory.get(key)
            result = self._result(node, mem, x)
        else:
            assert isinstance(dest, Output)
            slot = self._output_slot.get(id(dest))
            if isinstance(x, (Token, _NoTensor)) or x is None:
                buffer: Any = NO_TENSOR
                self.events.append(Event(call, "no-tensor", node.id, f"output {dest.name!r} receives a token, not a tensor"))
            elif slot is not None:
                key = self._key(slot)
                if slot.name in self.faults.drop:
                    self.events.append(Event(call, "dropped-store", node.id, f"store to {dest.name!r} (slot {slot.name!r}'s storage) never lands"))
                else:
                    self._write(key, np.asarray(x))
                buffer = self._memory.setdefault(key, np.array(x, copy=True))
            else:
                buffer = x  # handed over without a copy: a view of slot memory stays one
            outputs[dest.name] = buffer
            result = self._result(node, buffer, x)
        out = node.outputs[0] if node.outputs else None
        if out is not None:
            values[id(out)] = result

    def _result(self, node: Store, storage: Any, x: Any) -> Any:
        if node.result is StoreResult.TOKEN:
            return Token(node.id)
        if node.result is StoreResult.ALIAS:
            return storage if storage is not None else NO_TENSOR
        if isinstance(x, (Token, _NoTensor)) or x is None:
            return NO_TENSOR
        return np.array(x, copy=True)

    def _complete_needed_by(self, node: Any) -> None:
        """Land every pending store ``node`` must wait for: it reads its token/value, an order edge, or a Return wait."""
        if not self._pending:
            return
        g = self.program.graph
        keep: list[_Pending] = []
        for p in self._pending:
            if self._waits_for(node, p.store, g):
                self._write(p.key, p.value)
            else:
                keep.append(p)
        self._pending = keep

    def _waits_for(self, node: Any, store: Store, g: digraph.DiGraph) -> bool:
        result = store.outputs[0] if store.outputs else None
        if isinstance(node, Return):
            return node.layer in self.faults.honour and result is not None and any(v is result for v in node.inputs)
        if g.has_edge(store.id, node.id) and g.edges[store.id, node.id].get("kind") == "order":
            return True
        if result is None or store.result is StoreResult.ALIAS:
            return False  # a view is usable before the write lands
        return any(v is result for v in node.inputs)


# -- a small numpy table for the common ops ------------------------------------------------------


def _names_read(node: Any) -> set[str]:
    """Every name ``node`` reads, with the outer-scope names its subgraphs read (an over-approximation)."""
    from onnx import AttributeProto

    names = {n for n in node.input if n}
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []
        for g in graphs:
            for inner in g.node:
                names |= _names_read(inner)
    return names


def _keep_only_producers_of(graph: Any, names: Iterable[str]) -> None:
    """Drop from ``graph`` every node that none of ``names`` depends on."""
    needed = set(names)
    kept = []
    for node in reversed(graph.node):
        if needed.intersection(node.output):
            kept.append(node)
            needed |= _names_read(node)
    kept.reverse()
    del graph.node[:]
    graph.node.extend(kept)


def _axes(attrs: Mapping[str, Any], axes_in: Any) -> list[int]:
    if axes_in is not None:
        return [int(a) for a in np.asarray(axes_in).ravel()]
    return [int(a) for a in attrs.get("axes", [])]


def _gather(attrs: Mapping[str, Any], data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.take(data, np.asarray(idx).astype(np.int64), axis=int(attrs.get("axis", 0)))


def _squeeze(attrs: Mapping[str, Any], data: np.ndarray, axes: Any = None) -> np.ndarray:
    ax = _axes(attrs, axes)
    return np.squeeze(data, axis=tuple(ax)) if ax else np.squeeze(data)


def _unsqueeze(attrs: Mapping[str, Any], data: np.ndarray, axes: Any = None) -> np.ndarray:
    out = np.asarray(data)
    rank = out.ndim + len(_axes(attrs, axes))
    for a in sorted(a % rank for a in _axes(attrs, axes)):
        out = np.expand_dims(out, a)
    return out


_NUMPY_OPS: dict[str, Any] = {
    "Identity": lambda a, x: np.array(x, copy=True),
    "Add": lambda a, x, y: np.add(x, y),
    "Sub": lambda a, x, y: np.subtract(x, y),
    "Mul": lambda a, x, y: np.multiply(x, y),
    "Div": lambda a, x, y: np.divide(x, y),
    "Neg": lambda a, x: np.negative(x),
    "Tanh": lambda a, x: np.tanh(x),
    "Sigmoid": lambda a, x: 1.0 / (1.0 + np.exp(-x)),
    "Relu": lambda a, x: np.maximum(x, 0),
    "MatMul": lambda a, x, y: np.matmul(x, y),
    "Concat": lambda a, *xs: np.concatenate([x for x in xs if x is not None], axis=int(a.get("axis", 0))),
    "Gather": _gather,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
}


def run_calls(program: Program, feeds: Iterable[Mapping[str, Any]], faults: Faults | None = None) -> list[dict[str, Any]]:
    """Convenience: a fresh :class:`Simulator` over ``feeds``, one call each; outputs copied as they were at return."""
    sim = Simulator(program, faults)
    return [{k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in sim.run(f).items()} for f in feeds]
