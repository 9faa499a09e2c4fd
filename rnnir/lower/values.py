"""Lowering's building stage: the IR nodes for the planned definitions, recurrent ops and recognised recurrences.

:class:`ValueBuilder` owns the value registry (definition key -> IR value) and the names given out, so
every value is built once and every IR name is unique. What a planned definition reads but the plan
left out becomes an external value (with its constant when it is small).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.errors import ModelError
from rnnir.ir.attributes import LoadKind, Provenance, TensorType
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, LoadSlot, PendingConst, Recurrent, Region, Value
from rnnir.ir.recurrence import kind_for_op, kind_named
from rnnir.lower.identities import proven_zero
from rnnir.lower.plan import BuildPlan
from rnnir.lower.recognise import Key, Recognised, RecurrenceSite
from rnnir.lower.scope import Definition, ModelIndex, Scope, attribute_values
from rnnir.lower.state import DeclaredState, key_of
from rnnir.lower.tensors import constant_tensor, plain_attrs, small_const, tensor_type_of
from rnnir.onnxio.proto import ATTR

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np


class ValueBuilder:
    """Builds IR values into ``program``: each ONNX definition once, under a name no other value has."""

    def __init__(self, program: Program, index: ModelIndex, state: DeclaredState, recognised: Recognised, load: LoadKind) -> None:
        self.program = program
        self.index = index
        self.state = state
        self.recognised = recognised
        self.load = load
        self.values: dict[Key, Value] = {}
        self.names_used: set[str] = set()
        self.recurrent_ops: dict[int, Recurrent] = {}  # by id of the ONNX node
        self.site_ops: dict[int, Recurrent] = {}  # by id of the recognised site

    # -- names and values ----------------------------------------------------------------
    def fresh_name(self, name: str, scope: Scope) -> str:
        """``name``, or (when taken) ``name@branch`` numbered until unique."""
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
        key = key_of(d)
        v = self.values.get(key)
        if v is not None:
            return v
        const: np.ndarray | PendingConst | None = None
        ttype: TensorType | None = None  # the value info's, unless a constant says better
        if d.kind == "initializer" and d.tensor is not None:
            const = small_const(d.tensor)
            ttype = tensor_type_of(d.tensor)
        elif d.kind == "node" and d.node is not None and d.node.op_type == "Constant":
            t = constant_tensor(d.node)
            if t is not None:
                const = small_const(t)
                ttype = tensor_type_of(t)
        elif d.kind == "node" and d.node is not None and d.node.op_type in ("Cast", "Mul"):
            zero = proven_zero(d)  # an exporter's zero term (Cast(sr * 0)): a constant, so x + 0 stays x
            if zero is not None:
                const = zero.const()
                ttype = TensorType(zero.dtype, zero.shape)
        if ttype is None:
            ttype = self.index.tensor_type(d.info)
        name = self.fresh_name(d.name, d.scope)
        v = self.program.external(name, ttype, const)
        self.values[key] = v
        return v

    def operand(self, scope: Scope, name: str) -> Value | None:
        """The value ``name`` reads in ``scope``: built already, or external (None for an absent input)."""
        if not name:
            return None
        d = scope.resolve(name)
        key = key_of(d)
        if key in self.values:
            return self.values[key]
        return self.external_value(d)

    def _external_ints(self, name: str, scope: Scope, ints: list[int] | int) -> Value:
        """An int64 constant the lowering adds (axes, step indices): a scalar for an int, else a vector."""
        arr = np.array(ints, dtype=np.int64)
        return self.program.external(self.fresh_name(name, scope), TensorType("int64", tuple(arr.shape)), arr)

    # -- planned definitions -------------------------------------------------------------
    def build_value(self, d: Definition) -> None:
        key = key_of(d)
        if key in self.values:
            return
        slot = self.state.loaded_slot(d)
        if slot is not None:
            v = Value(name=self.fresh_name(d.name, d.scope), type=slot.type)
            self.program.add(LoadSlot(outputs=[v], slot=slot, kind=self.load, provenance=Provenance(value=d.name)))
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
            if key in site.carried:  # never built by build_site: its role is none
                self.build_carried(site, key)
            elif key not in self.values:  # an output of a replaced Loop that carries none of its state
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
            v = Value(name=self.fresh_name(name, scope), type=self.index.tensor_type(scope.infos.get(name)))
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
            attributes=plain_attrs(node),
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
        if id(node) in self.recurrent_ops:
            return
        kind = kind_for_op(node.op_type, node.domain)
        assert kind is not None  # only registered ops reach here
        n_in = len(kind.inputs)
        names = list(node.input) + [""] * (n_in - len(node.input))
        ins = [self.operand(scope, n) for n in names[:n_in]]
        attrs = attribute_values(node)  # eight to look up: the attributes read once
        acts = attrs.get("activations")
        alpha = attrs.get("activation_alpha")
        beta = attrs.get("activation_beta")
        hidden = attrs.get("hidden_size")
        if hidden is None:
            raise ModelError(f"{node.op_type} node has no hidden_size attribute", model=self.index.label, where=self.index.node_name(node))
        n_out = len(kind.outputs)
        outs = self._outputs_for(scope, node)[:n_out]
        outs += [None] * (n_out - len(outs))
        r = Recurrent(
            kind=kind.name,
            direction=attrs.get("direction", "forward"),
            hidden_size=int(hidden),
            layout=int(attrs.get("layout", 0)),
            activations=None if acts is None else tuple(acts),
            activation_alpha=None if alpha is None else tuple(float(x) for x in alpha),
            activation_beta=None if beta is None else tuple(float(x) for x in beta),
            clip=attrs.get("clip"),
            linear_before_reset=int(attrs.get("linear_before_reset", 0)),
            input_forget=int(attrs.get("input_forget", 0)),
            inputs=ins,
            outputs=outs,
            onnx_node=node,
            provenance=self._prov(scope, node),
        )
        self.program.add(r)
        self.recurrent_ops[id(node)] = r

    def inside_replaced(self, scope: Scope) -> bool:
        """In the body of a Loop/Scan that a recognised recurrence stands for (its own recurrent op is that recurrence)."""
        sc: Scope | None = scope
        while sc is not None:
            if sc.owner is not None and id(sc.owner) in self.recognised.replaced:
                return True
            sc = sc.parent
        return False

    # -- recurrences written as plain ops -----------------------------------------------
    def _site_operand(self, scope: Scope, name: str) -> Value | None:
        """An input of a recognised recurrence: the output of another one (a stacked layer) is built first."""
        d = scope.resolve(name)
        other = self.recognised.by_key.get(key_of(d))
        if other is not None and key_of(d) not in self.values:
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
                x = Value(name=self.fresh_name(f"{site.anchor}.x", site.scope))
                self.program.add(Compute(op="Concat", attributes={"axis": 1}, inputs=list(parts), outputs=[x], provenance=prov))
            assert x is not None
            axes = self._external_ints(f"{site.anchor}.axes0", site.scope, [0])
            step = Value(name=self.fresh_name(f"{site.anchor}.X", site.scope))
            self.program.add(Compute(op="Unsqueeze", inputs=[x, axes], outputs=[step], provenance=prov))
            steps.append(step)
        if len(steps) == 1:
            return steps[0]
        seq = Value(name=self.fresh_name(f"{site.anchor}.X", site.scope))
        self.program.add(Compute(op="Concat", attributes={"axis": 0}, inputs=list(steps), outputs=[seq], provenance=prov))
        return seq

    def build_site(self, site: RecurrenceSite) -> None:
        """A recognised recurrence as one Recurrent: entries from the state views, exits for its new state."""
        if id(site) in self.site_ops:
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
            put(port, self.program.external(self.fresh_name(f"{site.anchor}.{port}", site.scope), TensorType("float32", tuple(a.shape)), a))
        prov = Provenance(node=site.anchor, branch=site.scope.path)
        axes0 = self._external_ints(f"{site.anchor}.axes0", site.scope, [0])
        for port, (scope, name) in site.entries.items():
            # a cell's state is [batch, hidden]; the op's port is [directions=1, batch, hidden]
            state = self.operand(scope, name)
            wrapped = Value(name=self.fresh_name(f"{site.anchor}.{port}", site.scope))
            self.program.add(Compute(op="Unsqueeze", inputs=[state, axes0], outputs=[wrapped], provenance=prov))
            put(port, wrapped)
        outs: list[Value | None] = [None] * len(kind.outputs)
        has_inner_steps = any("@" in role for role in site.exits.values())
        unwrap: list[tuple[Value, Value]] = []
        for key, role in site.exits.items():
            if role == "none" or "@" in role:  # inner steps are built when something reads them (build_step)
                continue
            scope, name = site.exit_names[key]
            v = Value(name=self.fresh_name(name, scope), type=self.index.tensor_type(scope.infos.get(name)))
            self.values[key] = v
            i = kind.output_index(role)
            if i is not None:
                port_value = Value(name=self.fresh_name(f"{site.anchor}.{role}", site.scope))
                outs[i] = port_value
                unwrap.append((port_value, v))
        y_index = kind.output_index(kind.sequence_output)
        if has_inner_steps and y_index is not None and outs[y_index] is None:
            outs[y_index] = Value(name=self.fresh_name(f"{site.anchor}.Y", site.scope))
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
        self.site_ops[id(site)] = r
        for port_value, v in unwrap:
            # Y_h/Y_c are [directions, batch, hidden]; Y is [steps, directions, batch, hidden]: drop the directions axis
            axes = axes0
            if y_index is not None and port_value is outs[y_index]:
                axes = self._external_ints(f"{site.anchor}.axes1", site.scope, [1])
            self.program.add(Compute(op="Squeeze", inputs=[port_value, axes], outputs=[v], provenance=Provenance(node=site.anchor, value=v.name, branch=site.scope.path)))

    def build_carried(self, site: RecurrenceSite, key: Key) -> None:
        """A replaced Loop's output for a carried state its cell does not explain, made from the state carried in."""
        scope, name = site.exit_names[key]
        carried = site.carried[key]
        v = Value(name=self.fresh_name(name, scope), type=self.index.tensor_type(scope.infos.get(name)))
        self.values[key] = v
        prov = Provenance(node=site.anchor, value=v.name, branch=site.scope.path)
        self.program.add(Compute(op=carried.op, inputs=[self.operand(*carried.source)], outputs=[v], provenance=prov))

    def build_step(self, site: RecurrenceSite, key: Key) -> None:
        """A state after an inner step of an unrolled loop, read outside the chain of steps."""
        self.build_site(site)
        r = self.site_ops[id(site)]
        y = r.port(r.spec.sequence_output)
        if y is None or key in self.values:
            return
        role = site.exits[key]
        scope, name = site.exit_names[key]
        v = Value(name=self.fresh_name(name, scope), type=self.index.tensor_type(scope.infos.get(name)))
        self.values[key] = v
        axes0 = self._external_ints(f"{site.anchor}.axes0", site.scope, [0])
        which, t = role.split("@")
        prov = Provenance(node=site.anchor, value=v.name, branch=site.scope.path)
        if which == "h":
            # h after inner step t of the unrolled loop is Y[t] (one direction: squeeze it away)
            at = self._external_ints(f"{site.anchor}.step{t}", site.scope, int(t))
            mid = Value(name=self.fresh_name(f"{v.name}.Y", site.scope))
            self.program.add(Compute(op="Gather", attributes={"axis": 0}, inputs=[y, at], outputs=[mid], provenance=prov))
            self.program.add(Compute(op="Squeeze", inputs=[mid, axes0], outputs=[v], provenance=prov))
        else:
            # c after an inner step has no ONNX port: a value derived from the recurrence
            self.program.add(Compute(op="CellState", domain="rnnir", attributes={"step": int(t)}, inputs=[y], outputs=[v], provenance=prov))


def build_values(program: Program, index: ModelIndex, state: DeclaredState, recognised: Recognised, plan: BuildPlan, load: LoadKind) -> ValueBuilder:
    """Build the planned definitions, every recurrent op and recognised recurrence, and a load per slot."""
    builder = ValueBuilder(program, index, state, recognised, load)
    for d in plan.order:
        builder.build_value(d)
    for scope, node in index.recurrent:
        if not builder.inside_replaced(scope):
            builder.build_recurrent(scope, node)
    for site in recognised.sites:
        builder.build_site(site)
    for p in state.pairs:  # a slot nobody reads is still loaded: SD007 reports it
        builder.build_value(index.root.resolve(p.input))
    return builder
