"""ONNX → IR: build the part of the graph that state flows through.

Only values that depend on a state input or on a recurrent op's results become
IR nodes; everything else a state-path node reads becomes an external value
(with its constant when it is a small constant, which the slice analysis
needs for Gather indices, Slice bounds and the like).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from ..ir import (
    Compute,
    LoadKind,
    LoadSlot,
    OrderingLayer,
    Output,
    PendingConst,
    Program,
    Provenance,
    Recurrent,
    Region,
    Return,
    Slot,
    SlotInit,
    Store,
    StoreResult,
    TensorType,
    Value,
)
from ..metadata import META_IR, META_PROGRAM_V0
from ..metadata import read as metadata
from ..onnxproto import ATTR, EXTERNAL, attribute_value, dtype_name, element_count, messages, surely_converts, tensor_ints, tensor_to_array
from ..optraits import OpTrait, ops_with
from ..pairs import PairSource, StatePair
from ..recurrence import RecurrenceKind, kind_for_op, kind_named
from ..structure import StoreStructure, read_structure
from .cells import CellCandidate
from .pairing import find_pairs, looks_like_state
from .recognise import Recognised, RecurrenceSite, recognise
from .scope import Definition, ModelIndex, Scope
from .scope import attribute_value as _attr
from .source import ModelSource

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from ..lazymod import numpy as np

_SMALL_CONST = 4096  # elements: enough for indices, shapes and small initial states

LAYOUT_OPS = ops_with(OpTrait.LAYOUT)


class EntryPolicy(str, enum.Enum):
    """Where a slot's state comes from: graph inputs only, or also constants a recurrent op starts from."""

    DYNAMIC = "dynamic"
    CONSTANT = "constant"


class ExitPolicy(str, enum.Enum):
    """How the final state reaches its slot and the caller (the last two exist to show the passes catch them)."""

    FANOUT = "fanout"  # correct: the slot store and the output store both read the final state
    CHAIN = "chain"  # the output store reads the slot store's result
    REUSE_SINGLE_STORE = "reuse-single-store"  # no slot store: the slot lives in the output buffer


@dataclass(frozen=True)
class Policy:
    """Lowering policies.

    ``entry``: ``dynamic`` (state comes from graph inputs) or ``constant`` (a
    recurrent op whose initial state is a constant and whose final state is a
    graph output gets a slot initialised with that constant).
    ``exit``: ``fanout`` (correct: both stores read the final state), ``chain``
    (the output store reads the slot store's result) or ``reuse-single-store``
    (no slot store when the final state already has a store user: the slot
    then lives in the output buffer).  :meth:`named` takes them by name.
    """

    entry: EntryPolicy = EntryPolicy.DYNAMIC
    exit: ExitPolicy = ExitPolicy.FANOUT
    chain_result: StoreResult = StoreResult.ALIAS
    load: LoadKind = LoadKind.COPY

    def __post_init__(self) -> None:  # Policy(exit="chain") works too: a name becomes its member, or ValueError
        object.__setattr__(self, "entry", EntryPolicy(self.entry))
        object.__setattr__(self, "exit", ExitPolicy(self.exit))

    @classmethod
    def named(cls, entry: str = "dynamic", exit: str = "fanout") -> Policy:
        """The policies given by their names (``rnnir.load``'s and the command line's spelling)."""
        try:
            entry_policy = EntryPolicy(entry)
        except ValueError:
            raise ValueError(f"entry policy must be 'dynamic' or 'constant', not {entry!r}") from None
        try:
            exit_policy = ExitPolicy(exit)
        except ValueError:
            raise ValueError(f"exit policy must be 'fanout', 'chain' or 'reuse-single-store', not {exit!r}") from None
        return cls(entry_policy, exit_policy)


def tensor_type(vi: onnx.ValueInfoProto | None) -> TensorType:
    if vi is None or not vi.type.HasField("tensor_type"):
        return TensorType()
    tt = vi.type.tensor_type
    dtype = None
    if tt.elem_type:
        try:
            dtype = dtype_name(tt.elem_type)
        except (KeyError, TypeError, ValueError):
            dtype = messages().TensorProto.DataType.Name(tt.elem_type).lower()
    if not tt.HasField("shape"):
        return TensorType(dtype=dtype)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return TensorType(dtype=dtype, shape=dims)


def _tensor_type_of(t: onnx.TensorProto) -> TensorType:
    try:
        dtype = dtype_name(t.data_type)
    except (KeyError, TypeError, ValueError):
        dtype = None
    return TensorType(dtype=dtype, shape=tuple(t.dims))


def _small_array(t: onnx.TensorProto) -> np.ndarray | None:
    if t.data_location == EXTERNAL:
        return None
    n = 1
    for d in t.dims:
        n *= d
    if n > _SMALL_CONST:
        return None
    try:
        return tensor_to_array(t)
    except Exception:  # noqa: BLE001 - a malformed constant is simply not used as a constant
        return None


def _small_const(t: onnx.TensorProto) -> np.ndarray | PendingConst | None:
    """:func:`_small_array`, made when first read when it surely converts (most lints never read it: no numpy)."""
    if t.data_location != EXTERNAL and surely_converts(t) and (element_count(t) or 0) <= _SMALL_CONST:
        return PendingConst(tuple(int(d) for d in t.dims), lambda: tensor_to_array(t), lambda: tensor_ints(t))
    return _small_array(t)


def _plain_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (ATTR.GRAPH, ATTR.GRAPHS):
            continue
        if a.type == ATTR.TENSOR:
            arr = _small_array(a.t)
            if arr is not None:
                out[a.name] = arr
            continue
        v = attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[a.name] = v
    return out


class _Lowering:
    def __init__(self, src: ModelSource, pairs: Mapping[str, str | None] | None, policy: Policy) -> None:
        self.src = src
        self.label = src.label
        self.policy = policy
        self.index = ModelIndex(src.model, src.label)
        self.program = Program(src.model.graph.name or (src.path.stem if src.path else "model"))
        self.program.source = src
        self.declared = pairs
        self.values: dict[tuple[int, str], Value] = {}
        self.taint: dict[tuple[int, str], bool] = {}
        self.defs: dict[tuple[int, str], Definition] = {}
        self.slot_inputs: dict[str, Slot] = {}
        self.names_used: set[str] = set()
        self.rec_nodes: dict[int, Recurrent] = {}
        self.recognised = Recognised()  # recurrences written as plain ops (cells, unrolled loops, Loops)
        self.site_nodes: dict[int, Recurrent] = {}
        self.const_slots: dict[tuple[int, str], Slot] = {}  # constants the entry=constant policy made slots
        self.reachable: set[str] = set()  # what the walk may build: set per stage of run() (_forward_taint)
        self.structure_override: StoreStructure | None = None  # rnnir fix's edited stores, instead of the recorded ones

    # -- names and values ----------------------------------------------------------------
    def _key(self, d: Definition) -> tuple[int, str]:
        return (id(d.scope), d.name)

    def _fresh_name(self, name: str, scope: Scope) -> str:
        if name not in self.names_used:
            self.names_used.add(name)
            return name
        alt = f"{name}@{scope.branch_path}"
        k = 1
        while alt in self.names_used:
            alt = f"{name}@{scope.branch_path}#{k}"
            k += 1
        self.names_used.add(alt)
        return alt

    def external_value(self, d: Definition) -> Value:
        key = self._key(d)
        v = self.values.get(key)
        if v is not None:
            return v
        const: np.ndarray | PendingConst | None = None
        ttype = tensor_type(d.info)
        if d.kind == "initializer" and d.tensor is not None:
            const = _small_const(d.tensor)
            ttype = _tensor_type_of(d.tensor)
        elif d.kind == "node" and d.node is not None and d.node.op_type == "Constant":
            t = _attr_tensor(d.node)
            if t is not None:
                const = _small_const(t)
                ttype = _tensor_type_of(t)
        name = self._fresh_name(d.name, d.scope)
        v = self.program.external(name, ttype, const)
        self.values[key] = v
        return v

    def operand(self, scope: Scope, name: str) -> Value | None:
        if not name:
            return None
        d = scope.resolve(name)
        key = self._key(d)
        if key in self.values:
            return self.values[key]
        return self.external_value(d)

    # -- taint walk ----------------------------------------------------------------------
    def _deps(self, d: Definition) -> list[tuple[Scope, str]]:
        """What a defined value depends on, for the taint walk (recurrent outputs depend on nothing)."""
        if d.kind != "node" or d.node is None:
            return []
        site = self.recognised.by_key.get(self._key(d))
        if site is not None:  # a recognised recurrence: like a recurrent op, only its state entries count,
            # and an input that is another recognised recurrence's output (a stacked layer), so it is built first
            return site.deps + [(sc, nm) for sc, nm in site.inputs if self._key(sc.resolve(nm)) in self.recognised.by_key]
        if id(d.node) in self.recognised.replaced:
            return []  # an output of a Loop that a recognised recurrence stands for, carrying no state of it
        node = d.node
        if node.op_type == "If":
            # every output's yields: the If node is built once, for all its outputs
            out = [(d.scope, node.input[0])] if node.input and node.input[0] else []
            for attr in ("then_branch", "else_branch"):
                sub = d.scope.child(node, attr)
                out.extend((sub, o.name) for o in sub.graph.output)
            return out
        kind = kind_for_op(node.op_type, node.domain)
        if kind is not None:
            # only the state-carrying inputs (sequence_lens, initial_h, initial_c): X, W, R, B and P
            # are external to the state analysis, however large the graph that computes them
            return [(d.scope, node.input[i]) for i in kind.state_inputs if i < len(node.input) and node.input[i]]
        deps = [(d.scope, i) for i in node.input if i]
        for a in node.attribute:
            if a.type == ATTR.GRAPH:
                deps.extend((d.scope, nm) for nm in sorted(self.index.outer_names(a.g)))
        return deps

    def is_source(self, d: Definition) -> bool:
        if d.kind == "input" and d.scope is self.index.root and d.name in self.slot_inputs:
            return True
        if self._key(d) in self.const_slots:
            return True
        if self._key(d) in self.recognised.by_key:
            return self.recognised.by_key[self._key(d)].exits[self._key(d)] != "none"
        return d.kind == "node" and d.node is not None and kind_for_op(d.node.op_type, d.node.domain) is not None

    def _const_pairs(self, pairs: list[StatePair]) -> list[StatePair]:
        return [p for p in pairs if p.source is PairSource.CONSTANT and p.output is not None]

    def _forward_taint(self, through_recurrent_results: bool) -> set[str]:
        """Names that may depend on state: the walk never leaves this set, so its cost follows the
        state-carrying part of the graph, not the whole model.

        Live-in state (slot loads) spreads through every op except into recurrent results.  Recurrent
        results spread through every op when ``through_recurrent_results``, else through layout-only ops.
        """
        index = self.index
        seen: set[str] = set()
        queue: list[tuple[str, bool]] = []  # (name, reached through layout-only ops from a recurrent result)

        def add(name: str, layout_only: bool) -> None:
            if name and name not in seen:
                seen.add(name)
                queue.append((name, layout_only))

        for name in self.slot_inputs:
            add(name, False)
        for _, name in self.const_slots:
            add(name, False)
        for _, node in index.recurrent:
            for o in node.output:
                add(o, not through_recurrent_results)
        for site in self.recognised.sites:
            for _scope, name in site.exit_names.values():
                add(name, not through_recurrent_results)
        node_op, node_outputs, is_recurrent = index.node_op, index.node_outputs, index.is_recurrent
        while queue:
            name, layout_only = queue.pop()
            for node in index.consumers.get(name, ()):
                op_type, domain = node_op[id(node)]
                if is_recurrent(op_type, domain):
                    continue  # its results are seeds already; the state it reads does not flow through it
                if layout_only and op_type not in LAYOUT_OPS and op_type != "If":
                    continue
                for o in node_outputs[id(node)]:
                    add(o, layout_only)
            for owner, k in index.subgraph_outputs.get(name, ()):
                if owner.op_type == "If":
                    if k < len(owner.output):
                        add(owner.output[k], layout_only)
                elif not layout_only:  # Loop/Scan: any body output may feed any owner output
                    for o in owner.output:
                        add(o, layout_only)
        return seen

    def walk(self, demands: list[tuple[Scope, str]]) -> list[Definition]:
        """Post-order over the backward cone of ``demands``; fills ``self.taint``; returns tainted defs in order."""
        order: list[Definition] = []
        for scope, name in demands:
            d0 = scope.resolve(name)
            if self._key(d0) in self.taint:
                continue
            stack: list[tuple[Definition, bool]] = [(d0, False)]
            while stack:
                d, expanded = stack.pop()
                key = self._key(d)
                if key in self.taint and not expanded:
                    continue
                if expanded:
                    deps = [sc.resolve(nm) for sc, nm in self._deps(d) if nm in self.reachable]
                    t = self.is_source(d) or any(self.taint.get(self._key(x), False) for x in deps)
                    self.taint[key] = t
                    self.defs[key] = d
                    if t:
                        order.append(d)
                    continue
                self.taint[key] = False  # provisional: marks "in progress" and breaks accidental loops
                stack.append((d, True))
                reachable = self.reachable
                for sc, nm in self._deps(d):
                    if nm not in reachable:
                        continue  # cannot depend on state: an external value at build time
                    dd = sc.resolve(nm)
                    if self._key(dd) not in self.taint:
                        stack.append((dd, False))
        return order

    # -- IR construction -----------------------------------------------------------------
    def build_value(self, d: Definition) -> None:
        key = self._key(d)
        if key in self.values:
            return
        if (d.kind == "input" and d.name in self.slot_inputs) or key in self.const_slots:
            slot = self.const_slots.get(key) or self.slot_inputs[d.name]
            v = Value(name=self._fresh_name(d.name, d.scope), type=slot.type)
            load = LoadSlot(outputs=[v], slot=slot, kind=self.policy.load, provenance=Provenance(value=d.name))
            self.program.add(load)
            self.values[key] = v
            return
        node = d.node
        if node is None:
            self.external_value(d)
            return
        site = self.recognised.by_key.get(key)
        if site is not None:
            if "@" in site.exits[key]:
                self.build_step(site, key)
                return
            self.build_site(site)
            if key not in self.values:  # an output of a replaced Loop that carries none of its state
                self.external_value(d)
            return
        if id(node) in self.recognised.replaced:
            self.external_value(d)
            return
        if kind_for_op(node.op_type, node.domain) is not None:
            self.build_recurrent(d.scope, node)
            return
        if node.op_type == "If":
            self.build_if(d.scope, node)
            return
        self.build_compute(d.scope, node)

    def _outputs_for(self, scope: Scope, node: onnx.NodeProto) -> list[Value | None]:
        outs: list[Value | None] = []
        for name in node.output:
            if not name:
                outs.append(None)
                continue
            v = Value(name=self._fresh_name(name, scope), type=tensor_type(scope.infos.get(name)))
            self.values[(id(scope), name)] = v
            outs.append(v)
        return outs

    def _prov(self, scope: Scope, node: onnx.NodeProto) -> Provenance:
        return Provenance(node=self.index.node_name(node), value=node.output[0] if node.output else None, branch=scope.path)

    def build_compute(self, scope: Scope, node: onnx.NodeProto) -> None:
        ins = [self.operand(scope, n) for n in node.input]
        extra: list[Value | None] = []
        for a in node.attribute:
            if a.type == ATTR.GRAPH:
                extra.extend(self.operand(scope, nm) for nm in sorted(self.index.outer_names(a.g)))
        c = Compute(
            op=node.op_type,
            domain=node.domain,
            attributes=_plain_attrs(node),
            inputs=ins + extra,
            outputs=self._outputs_for(scope, node),
            onnx_node=node,
            provenance=self._prov(scope, node),
        )
        self.program.add(c)

    def build_if(self, scope: Scope, node: onnx.NodeProto) -> None:
        cond = self.operand(scope, node.input[0])
        yields: dict[str, list[Value | None]] = {}
        for attr in ("then_branch", "else_branch"):
            sub = scope.child(node, attr)
            yields[attr] = [self.operand(sub, o.name) for o in sub.graph.output]
        outs = self._outputs_for(scope, node)
        c = Compute(
            op="If",
            inputs=[cond, *yields["then_branch"], *yields["else_branch"]],
            outputs=outs,
            regions={a: Region(a, scope.child(node, a).path, yields=yields[a]) for a in yields},
            onnx_node=node,
            provenance=self._prov(scope, node),
        )
        self.program.add(c)

    def build_recurrent(self, scope: Scope, node: onnx.NodeProto) -> None:
        if id(node) in self.rec_nodes:
            return
        kind = kind_for_op(node.op_type, node.domain)
        assert kind is not None  # only registered ops reach here
        n_in = len(kind.inputs)
        names = list(node.input) + [""] * (n_in - len(node.input))
        ins = [self.operand(scope, n) for n in names[:n_in]]
        acts = _attr(node, "activations")
        alpha = _attr(node, "activation_alpha")
        beta = _attr(node, "activation_beta")
        hidden = _attr(node, "hidden_size")
        if hidden is None:
            raise ModelError(f"{node.op_type} node has no hidden_size attribute", model=self.label, where=self.index.node_name(node))
        n_out = len(kind.outputs)
        outs = self._outputs_for(scope, node)[:n_out]
        outs += [None] * (n_out - len(outs))
        r = Recurrent(
            kind=kind.name,
            direction=_attr(node, "direction", "forward"),
            hidden_size=int(hidden),
            layout=int(_attr(node, "layout", 0)),
            activations=None if acts is None else tuple(acts),
            activation_alpha=None if alpha is None else tuple(float(x) for x in alpha),
            activation_beta=None if beta is None else tuple(float(x) for x in beta),
            clip=_attr(node, "clip"),
            linear_before_reset=int(_attr(node, "linear_before_reset", 0)),
            input_forget=int(_attr(node, "input_forget", 0)),
            inputs=ins,
            outputs=outs,
            onnx_node=node,
            provenance=self._prov(scope, node),
        )
        self.program.add(r)
        self.rec_nodes[id(node)] = r

    # -- recurrences written as plain ops -----------------------------------------------
    def _recognise(self, pairs: list[StatePair]) -> None:
        """Cells, unrolled loops and Loops in the cone of the state inputs (rnnir.lower.recognise)."""
        root = self.index.root
        # no paired state input is no reason to stop: a cell starting from zeros is still a recurrence (SD010)
        sources = [(root, p.input) for p in pairs if p.input in root.inputs]
        try:
            self.recognised = recognise(self.index, sources, {p.output for p in pairs if p.output is not None})
        except (ValueError, IndexError, TypeError, KeyError, ArithmeticError) as exc:
            # recognition is an addition to lowering: a model it cannot cope with is lowered as before, and says so
            self.recognised = Recognised(candidates=[CellCandidate("recurrence", "model", f"recognising recurrences written as plain ops failed: {exc}")])
        self.program.recurrence_candidates = list(self.recognised.candidates)

    def _inside_replaced(self, scope: Scope) -> bool:
        """In the body of a Loop/Scan that a recognised recurrence stands for (its own recurrent op is that recurrence)."""
        sc: Scope | None = scope
        while sc is not None:
            if sc.owner is not None and id(sc.owner) in self.recognised.replaced:
                return True
            sc = sc.parent
        return False

    def _site_operand(self, scope: Scope, name: str) -> Value | None:
        """An input of a recognised recurrence: the output of another one (a stacked layer) is built first."""
        d = scope.resolve(name)
        other = self.recognised.by_key.get(self._key(d))
        if other is not None and self._key(d) not in self.values:
            self.build_site(other)
        return self.operand(scope, name)

    def _site_input(self, site: RecurrenceSite) -> Value | None:
        """X as the op takes it, [steps, batch, input]: each step's cell inputs ([batch, i] each) side by side, steps stacked.

        A cell whose inputs are not [batch, i] matrices keeps X absent: its state is still checked, only the
        simulator cannot run it.
        """
        if site.x is not None:  # a Loop: the sequence its body slices
            return self._site_operand(*site.x)
        prov = Provenance(node=site.anchor, branch=site.scope.path)
        steps: list[Value] = []
        for m in site.cells:
            if not m.x or any(len(shape) != 2 for shape in m.x_shapes):
                return None
            assert m.scope is not None
            parts = [self._site_operand(m.scope, name) for name in m.x]
            if any(p is None for p in parts):
                return None
            x = parts[0]
            if len(parts) > 1:
                x = Value(name=self._fresh_name(f"{site.anchor}.x", site.scope))
                self.program.add(Compute(op="Concat", attributes={"axis": 1}, inputs=list(parts), outputs=[x], provenance=prov))
            assert x is not None
            axes = self.program.external(self._fresh_name(f"{site.anchor}.axes0", site.scope), TensorType("int64", (1,)), np.array([0], dtype=np.int64))
            step = Value(name=self._fresh_name(f"{site.anchor}.X", site.scope))
            self.program.add(Compute(op="Unsqueeze", inputs=[x, axes], outputs=[step], provenance=prov))
            steps.append(step)
        if len(steps) == 1:
            return steps[0]
        seq = Value(name=self._fresh_name(f"{site.anchor}.X", site.scope))
        self.program.add(Compute(op="Concat", attributes={"axis": 0}, inputs=list(steps), outputs=[seq], provenance=prov))
        return seq

    def build_site(self, site: RecurrenceSite) -> None:
        """A recognised recurrence as one Recurrent: entries from the state views, exits for its new state."""
        if id(site) in self.site_nodes:
            return
        kind = kind_named(site.kind)
        ins: list[Value | None] = [None] * len(kind.inputs)

        def put(port: str, v: Value | None) -> None:
            i = kind.input_index(port)
            if i is not None:
                ins[i] = v

        put("X", self._site_input(site))
        w = site.weights
        for port, arr in (("W", w.W), ("R", w.R), ("B", w.B)):
            a = arr.astype(np.float32)
            put(port, self.program.external(self._fresh_name(f"{site.anchor}.{port}", site.scope), TensorType("float32", tuple(a.shape)), a))
        prov = Provenance(node=site.anchor, branch=site.scope.path)
        axes0 = self.program.external(self._fresh_name(f"{site.anchor}.axes0", site.scope), TensorType("int64", (1,)), np.array([0], dtype=np.int64))
        for port, (scope, name) in site.entries.items():
            # a cell's state is [batch, hidden]; the op's port is [directions=1, batch, hidden]
            state = self.operand(scope, name)
            wrapped = Value(name=self._fresh_name(f"{site.anchor}.{port}", site.scope))
            self.program.add(Compute(op="Unsqueeze", inputs=[state, axes0], outputs=[wrapped], provenance=prov))
            put(port, wrapped)
        outs: list[Value | None] = [None] * len(kind.outputs)
        has_inner_steps = any("@" in role for role in site.exits.values())
        unwrap: list[tuple[Value, Value]] = []
        for key, role in site.exits.items():
            if role == "none" or "@" in role:  # inner steps are built when something reads them (build_step)
                continue
            scope, name = site.exit_names[key]
            v = Value(name=self._fresh_name(name, scope), type=tensor_type(scope.infos.get(name)))
            self.values[key] = v
            i = kind.output_index(role)
            if i is not None:
                port_value = Value(name=self._fresh_name(f"{site.anchor}.{role}", site.scope))
                outs[i] = port_value
                unwrap.append((port_value, v))
        y_index = kind.output_index(kind.sequence_output)
        if has_inner_steps and y_index is not None and outs[y_index] is None:
            outs[y_index] = Value(name=self._fresh_name(f"{site.anchor}.Y", site.scope))
        r = Recurrent(
            kind=kind.name,
            direction="forward",
            hidden_size=site.hidden_size,
            activations=w.activations,
            activation_alpha=w.activation_alpha,
            activation_beta=w.activation_beta,
            linear_before_reset=w.linear_before_reset,
            inputs=ins,
            outputs=outs,
            recognition=site.recognition,
            recognised_from=site.recognised_from,
            provenance=Provenance(node=site.anchor, branch=site.scope.path),
        )
        self.program.add(r)
        self.site_nodes[id(site)] = r
        for port_value, v in unwrap:
            # Y_h/Y_c are [directions, batch, hidden]; Y is [steps, directions, batch, hidden]: drop the directions axis
            axes = axes0
            if y_index is not None and port_value is outs[y_index]:
                axes = self.program.external(self._fresh_name(f"{site.anchor}.axes1", site.scope), TensorType("int64", (1,)), np.array([1], dtype=np.int64))
            self.program.add(Compute(op="Squeeze", inputs=[port_value, axes], outputs=[v], provenance=Provenance(node=site.anchor, value=v.name, branch=site.scope.path)))

    def build_step(self, site: RecurrenceSite, key: tuple[int, str]) -> None:
        """A state after an inner step of an unrolled loop, read outside the chain of steps."""
        self.build_site(site)
        r = self.site_nodes[id(site)]
        y = r.port(r.spec.sequence_output)
        if y is None or key in self.values:
            return
        role = site.exits[key]
        scope, name = site.exit_names[key]
        v = Value(name=self._fresh_name(name, scope), type=tensor_type(scope.infos.get(name)))
        self.values[key] = v
        axes0 = self.program.external(self._fresh_name(f"{site.anchor}.axes0", site.scope), TensorType("int64", (1,)), np.array([0], dtype=np.int64))
        which, t = role.split("@")
        if which == "h":
            # h after inner step t of the unrolled loop is Y[t] (one direction: squeeze it away)
            at = self.program.external(self._fresh_name(f"{site.anchor}.step{t}", site.scope), TensorType("int64", ()), np.array(int(t), dtype=np.int64))
            axes = axes0
            mid = Value(name=self._fresh_name(f"{v.name}.Y", site.scope))
            self.program.add(Compute(op="Gather", attributes={"axis": 0}, inputs=[y, at], outputs=[mid], provenance=Provenance(node=site.anchor, value=v.name, branch=site.scope.path)))
            self.program.add(Compute(op="Squeeze", inputs=[mid, axes], outputs=[v], provenance=Provenance(node=site.anchor, value=v.name, branch=site.scope.path)))
        else:
            # c after an inner step has no ONNX port: a value derived from the recurrence
            self.program.add(
                Compute(op="CellState", domain="rnnir", attributes={"step": int(t)}, inputs=[y], outputs=[v], provenance=Provenance(node=site.anchor, value=v.name, branch=site.scope.path))
            )

    # -- the whole lowering --------------------------------------------------------------
    def run(self) -> Program:
        model = self.src.model
        root = self.index.root
        pairs = find_pairs(model, label=self.label, declared=self.declared, model_path=self.src.path)
        if not self.declared:  # a declaration is the caller's whole contract
            pairs += self._unreturned_state_inputs(pairs)
        prog = self.program
        for vi in model.graph.output:
            prog.add_output(Output(vi.name, tensor_type(vi)))
        for p in pairs:
            d = root.resolve(p.input)
            init = SlotInit("zeros")
            if d.tensor is not None:
                arr = _small_array(d.tensor)
                if arr is not None:
                    init = SlotInit("constant", arr)
            slot = Slot(name=p.input, type=tensor_type(root.inputs.get(p.input)), init=init, provenance=Provenance(value=p.input))
            prog.add_slot(slot)
            p.slot = slot
            self.slot_inputs[p.input] = slot
        const_entries = self._constant_entries(pairs) if self.policy.entry is EntryPolicy.CONSTANT else []
        prog.state_pairs = pairs
        self._recognise(pairs)

        # 1. the state's own journey: paired outputs and recurrent state inputs, through any op
        paired_out = {p.output for p in pairs if p.output is not None} | {p.output for p in self._const_pairs(pairs)}
        demands: list[tuple[Scope, str]] = [(root, vi.name) for vi in model.graph.output if vi.name in paired_out]
        for scope, node in self.index.recurrent:
            for i in _kind(node).state_inputs:
                if i < len(node.input) and node.input[i]:
                    demands.append((scope, node.input[i]))
        for site in self.recognised.sites:
            demands.extend(site.deps)
        for p in pairs:
            demands.append((root, p.input))
        self.reachable = self._forward_taint(through_recurrent_results=True)
        order = self.walk(demands)
        # 2. other outputs only where they read a slot or rearrange a final state (a fan-out output
        # like hn, a reader of the live-in state): not everything downstream of a recurrent op
        self.reachable = self._forward_taint(through_recurrent_results=False)
        order += self.walk([(root, vi.name) for vi in model.graph.output if vi.name not in paired_out])
        for d in order:
            self.build_value(d)
        for scope, node in self.index.recurrent:
            if not self._inside_replaced(scope):
                self.build_recurrent(scope, node)
        for site in self.recognised.sites:
            self.build_site(site)
        for p in pairs:  # a slot nobody reads is still loaded: SD007 reports it
            self.build_value(root.resolve(p.input))
        self._stores(pairs, const_entries)
        from ..slices import analyse_state

        analyse_state(prog)
        self._suggest(pairs)
        return prog

    def _unreturned_state_inputs(self, pairs: list[StatePair]) -> list[StatePair]:
        """State-named graph inputs that feed a recurrent op's initial state but no output returns."""
        paired = {p.input for p in pairs}
        out: list[StatePair] = []
        for name in self._state_fed_inputs:
            if name not in paired and looks_like_state(name):
                out.append(StatePair(name, None, PairSource.NAME, f"{name!r} is named like state and feeds a recurrent initial state, but no output matches it"))
                paired.add(name)
        return out

    @cached_property
    def _state_fed_inputs(self) -> list[str]:
        """Main-graph inputs that reach a recurrent op's initial state through layout-only ops (computed once)."""
        return self._inputs_reaching_initial_state()

    def _inputs_reaching_initial_state(self) -> list[str]:
        root = self.index.root
        found: list[str] = []
        for scope, node in self.index.recurrent:
            for port in (i for i in (_kind(node).input_index(p) for p in _kind(node).entries) if i is not None):
                if port < len(node.input) and node.input[port]:
                    for name in self._layout_sources(scope, node.input[port]):
                        if name not in found:
                            found.append(name)
        return [n for n in found if n in root.inputs]

    def _layout_sources(self, scope: Scope, name: str) -> list[str]:
        """Main-graph inputs reachable backwards from ``name`` through layout-only ops (and If joins)."""
        out: list[str] = []
        stack = [(scope, name)]
        seen: set[tuple[int, str]] = set()
        while stack:
            sc, nm = stack.pop()
            d = sc.resolve(nm)
            key = self._key(d)
            if key in seen:
                continue
            seen.add(key)
            if d.kind == "input" and d.scope is self.index.root:
                out.append(d.name)
            elif d.kind == "node" and d.node is not None:
                if d.node.op_type in LAYOUT_OPS:
                    if d.node.input and d.node.input[0]:
                        stack.append((d.scope, d.node.input[0]))
                    if d.node.op_type == "Concat":
                        stack.extend((d.scope, i) for i in d.node.input[1:] if i)
                elif d.node.op_type == "If":
                    stack.extend(self._deps(d))
        return out

    def _constant_entries(self, pairs: list[StatePair]) -> list[tuple[Slot, Definition]]:
        """Constant-entry policy: slots for recurrent ops that start from a constant and return their final state."""
        out_names = {vi.name for vi in self.src.model.graph.output}
        made: list[tuple[Slot, Definition]] = []
        paired_out = {p.output for p in pairs}
        for scope, node in self.index.recurrent:
            kind = _kind(node)
            for state in kind.states:
                port, final = kind.input_index(state.entry), kind.output_index(state.exit)
                if port is None or final is None:
                    continue
                if port >= len(node.input) or not node.input[port] or final >= len(node.output):
                    continue
                d = scope.resolve(node.input[port])
                if d.kind not in ("initializer",) and not (d.kind == "node" and d.node is not None and d.node.op_type == "Constant"):
                    continue
                ret = node.output[final]
                if ret not in out_names or ret in paired_out:
                    continue
                t = d.tensor if d.tensor is not None else _attr_tensor(d.node) if d.node is not None else None
                if t is None:
                    continue
                arr = tensor_to_array(t) if t.data_location != EXTERNAL else None
                if arr is None:
                    continue
                slot = Slot(name=d.name, type=_tensor_type_of(t), init=SlotInit("constant", arr), provenance=Provenance(value=d.name))
                self.program.add_slot(slot)
                p = StatePair(d.name, ret, PairSource.CONSTANT, f"constant initial state of {self.index.node_name(node)!r} made a slot (entry=constant)")
                p.slot = slot
                pairs.append(p)
                self.const_slots[self._key(d)] = slot
                made.append((slot, d))
        return made

    def _stores(self, pairs: list[StatePair], const_entries: list[tuple[Slot, Definition]]) -> None:
        prog = self.program
        root = self.index.root
        structure = self._recorded_structure()
        results: list[Value | None] = []
        known_slots: set[str] = set()
        known_outputs: set[str] = set()
        if structure is not None:
            results = self._stores_from_structure(structure)
            known_slots, known_outputs = set(structure.slots), set(structure.outputs)
        out_by_name = {o.name: o for o in prog.outputs}
        pair_out = {p.output: p for p in pairs if p.output is not None}
        for vi in self.src.model.graph.output:
            value = self.operand(root, vi.name)
            if value is None:
                continue
            pair = pair_out.get(vi.name)
            out = out_by_name[vi.name]
            if pair is None:
                if value.producer is not None and vi.name not in known_outputs:
                    results.append(self._store(value, out, StoreResult.VALUE))
                continue
            slot = pair.slot
            if slot is not None and slot.name in known_slots:  # the recorded IR text says how this slot is written
                continue
            if self.policy.exit is ExitPolicy.FANOUT or structure is not None:  # a slot exposed after the export: the default
                results.append(self._store(value, slot, StoreResult.TOKEN))
                if vi.name not in known_outputs:
                    results.append(self._store(value, out, StoreResult.VALUE))
            elif self.policy.exit is ExitPolicy.CHAIN:
                r = self._store(value, slot, self.policy.chain_result)
                results.append(r)
                results.append(self._store(r, out, StoreResult.VALUE))
            else:  # reuse-single-store: the output store is taken for the slot's store
                results.append(self._store(value, out, StoreResult.VALUE))
                slot.alias_of = out
        layer = structure.layer if structure is not None else OrderingLayer.RUNTIME
        prov = Provenance(node="return") if structure is not None else Provenance(node="onnxruntime call")
        prog.add(Return(inputs=results, layer=layer, provenance=prov))

    def _store(self, value: Value, dest: Slot | Output, result: StoreResult) -> Value:
        out = Value(name=self._fresh_name(f"store.{dest.name}", self.index.root), type=dest.type, kind=result.value)
        self.program.add(Store(inputs=[value], outputs=[out], dest=dest, result=result, provenance=Provenance(value=dest.name)))
        return out

    def _recorded_structure(self) -> StoreStructure | None:
        """The store structure an rnnir export recorded as IR text (``rnnir.ir``), if the model has one."""
        if self.structure_override is not None:
            return self.structure_override
        meta = metadata(self.src.model)
        if META_PROGRAM_V0 in meta:
            raise ModelError(
                f"metadata {META_PROGRAM_V0!r} (the JSON store structure rnnir 0.1 wrote) is no longer read; export the "
                f"program again with rnnir.export, which records it as IR text in {META_IR!r}",
                model=self.label,
            )
        text = meta.get(META_IR)
        return None if text is None else read_structure(text, self.label, META_IR)

    def _stores_from_structure(self, spec: StoreStructure) -> list[Value | None]:
        """Rebuild the recorded stores (chain, aliasing, ordering); returns the values the Return waits for."""
        prog = self.program
        root = self.index.root
        by_id: dict[str, Value] = {}
        dests: dict[str, Slot | Output] = {f"slot:{s.name}": s for s in prog.slots}
        dests.update({f"out:{o.name}": o for o in prog.outputs})
        try:
            for name, facts in spec.slots.items():
                slot = self.slot_inputs.get(name)
                if slot is None:
                    raise KeyError(f"slot {name!r}")
                if facts.alias_of:
                    slot.alias_of = dests[facts.alias_of]
                if facts.address:
                    slot.address = facts.address
                if facts.view_load:
                    for ld in prog.loads_of(slot):
                        ld.kind = LoadKind.VIEW
            for st in spec.stores:
                value = by_id[st.reads] if st.reads_store else self.operand(root, st.reads)
                if value is None:
                    raise KeyError(f"value {st.reads!r}")
                by_id[st.id] = self._store(value, dests[st.dest], st.result)
            waits: list[Value | None] = [by_id[w] for w in spec.waits]
            for a, b in spec.order:
                before, after = by_id[a].producer, by_id[b].producer
                assert before is not None and after is not None  # a store's result has its store as producer
                prog.add_order(before, after)
        except KeyError as exc:
            raise ModelError(f"metadata {META_IR!r} names {exc.args[0]}, which the graph does not have", model=self.label) from None
        return waits

    def _suggest(self, pairs: list[StatePair]) -> None:
        """Dataflow-only pairs: an unpaired input reaches a recurrent initial state whose final state an unpaired output returns."""
        from ..slices import OriginKind, trace_value

        prog = self.program
        paired_in = {p.input for p in pairs}
        paired_out = {p.output for p in pairs}
        inputs = [n for n in self._state_fed_inputs if n not in paired_in]
        if not inputs:
            return
        for o in prog.outputs:
            if o.name in paired_out:
                continue
            v = self.operand(self.index.root, o.name)
            if v is None or v.producer is None:
                continue
            ops = {ref.origin.owner for ref in trace_value(prog, v).refs() if ref.origin.kind is OriginKind.PORT}
            for name in inputs:
                for rec in prog.recurrents:
                    if rec.id in ops and any(
                        self._layout_sources_ir(rec.port(p), name) for p in rec.state_ports if rec.port(p) is not None
                    ):
                        prog.suggested_pairs.append(
                            StatePair(name, o.name, PairSource.DATAFLOW, f"{name!r} reaches {rec.describe()!r}, whose final state {o.name!r} returns")
                        )
                        break

    def _layout_sources_ir(self, value: Value | None, name: str) -> bool:
        v = value
        while v is not None:
            if v.name == name:
                return True
            p = v.producer
            if isinstance(p, Compute) and p.op in LAYOUT_OPS and p.inputs:
                v = p.inputs[0]
            else:
                return False
        return False


def _kind(node: onnx.NodeProto) -> RecurrenceKind:
    """The registered kind of a node the model index listed as recurrent."""
    kind = kind_for_op(node.op_type, node.domain)
    if kind is None:
        raise AssertionError(f"{node.op_type} is not a recurrent op")
    return kind


def _attr_tensor(node: onnx.NodeProto | None) -> onnx.TensorProto | None:
    if node is None:
        return None
    for a in node.attribute:
        if a.name == "value" and a.type == ATTR.TENSOR:
            tensor: onnx.TensorProto = a.t
            return tensor
    return None


def lower(
    src: ModelSource, pairs: Mapping[str, str | None] | None = None, policy: Policy | None = None, *, structure: StoreStructure | None = None
) -> Program:
    """``src`` as a Program; ``structure`` (``rnnir fix``'s edited stores) replaces the IR text the model records."""
    lowering = _Lowering(src, pairs, policy or Policy())
    lowering.structure_override = structure
    return lowering.run()
