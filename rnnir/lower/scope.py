"""A scope-aware def-use index over ONNX protobufs.

Names resolve exactly as ONNX scoping does: a subgraph (If/Loop/Scan body)
sees its own inputs, initializers and node outputs first, then its enclosing
graphs'; a graph input with an initializer of the same name is an input with a
default; an empty input name is an absent optional input.  Building the index
also validates what lowering relies on (every name defined, no cycles, known
ops, no negative dims) and raises ModelError otherwise.
"""

from __future__ import annotations

import bisect
import functools
import operator
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING, Any

from rnnir.errors import ModelError
from rnnir.ir.attributes import TensorType
from rnnir.ir.recurrence import kind_for_op
from rnnir.lower.tensors import tensor_type
from rnnir.onnxio.proto import ATTR, messages
from rnnir.onnxio.proto import attribute_value as _proto_attribute_value
from rnnir.onnxio.source import NodeTable
from rnnir.util.fastinit import fast_init

if TYPE_CHECKING:
    import onnx

_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_FIRST = operator.itemgetter(0)
_DEFAULT_DOMAINS = ("", "ai.onnx")
_RECURRENT_DIRECTIONS = ("forward", "reverse", "bidirectional")
_RECURRENT_ATTR_TYPES = {
    "hidden_size": ATTR.INT,
    "direction": ATTR.STRING,
    "layout": ATTR.INT,
    "activations": ATTR.STRINGS,
    "activation_alpha": ATTR.FLOATS,
    "activation_beta": ATTR.FLOATS,
    "clip": ATTR.FLOAT,
    "linear_before_reset": ATTR.INT,
    "input_forget": ATTR.INT,
}
# Python's protobuf cannot parse more than 100 nested messages, about 31 levels of If, so no model read
# from a file comes near this; a deeper one built in memory would exhaust Python's recursion limit.
MAX_SUBGRAPH_DEPTH = 64


@dataclass(frozen=True)
class _OpRules:
    """What the schema of one standard op demands of a node: attribute types, required attributes and inputs."""

    attr_types: dict[str, int]
    required_attrs: tuple[str, ...]
    required_inputs: tuple[int, ...]  # positions that must be present and non-empty
    max_inputs: int
    max_outputs: int


def _later_outputs(outs_all: list[tuple[str, ...]], n_outs: list[int]) -> Iterator[tuple[int, int, str]]:
    """(node position, port, name) of every output after its node's first, of nodes whose outputs are ``outs_all``
    (``n_outs`` their counts): few nodes have more than one, so the others are skipped by C-level iterators."""
    if not n_outs or max(n_outs) <= 1:
        return
    for pos in compress(range(len(n_outs)), map(operator.gt, n_outs, repeat(1))):
        outs = outs_all[pos]
        for port in range(1, len(outs)):
            yield pos, port, outs[port]


@fast_init
@dataclass(frozen=True)
class Definition:
    """Where a name is defined: ``kind`` is node, input, initializer or missing."""

    kind: str
    scope: Scope
    name: str
    node: onnx.NodeProto | None = None
    index: int = 0
    tensor: onnx.TensorProto | None = None
    info: onnx.ValueInfoProto | None = None


@dataclass(eq=False)
class Scope:
    """One graph (the main graph or a subgraph) and the names it defines."""

    graph: onnx.GraphProto
    path: tuple[str, ...]
    parent: Scope | None = None
    owner: onnx.NodeProto | None = None
    producers: dict[str, tuple[onnx.NodeProto, int]] = field(default_factory=dict)
    inputs: dict[str, onnx.ValueInfoProto] = field(default_factory=dict)
    initializers: dict[str, onnx.TensorProto] = field(default_factory=dict)
    infos: dict[str, onnx.ValueInfoProto] = field(default_factory=dict)
    children: dict[tuple[int, str], Scope] = field(default_factory=dict)
    nodes: list[onnx.NodeProto] = field(default_factory=list, repr=False)  # graph.node, read once
    node_inputs: list[tuple[str, ...]] = field(default_factory=list, repr=False)  # each node's inputs, read once
    node_ops: list[tuple[str, str]] = field(default_factory=list, repr=False)  # each node's (op_type, domain)
    node_outputs: list[tuple[str, ...]] = field(default_factory=list, repr=False)  # each node's outputs, read once
    in_order: bool = False  # every node reads only names defined before it (no outer names): set by the index's checks
    # what each name resolved to, once every scope of the model is indexed (None until then: a name could still be
    # defined by a scope not indexed yet); lowering resolves the same few thousand names tens of thousands of times
    resolved: dict[str, Definition] | None = field(default=None, repr=False)
    _positions: dict[str, int] | None = field(default=None, repr=False)

    @property
    def positions(self) -> dict[str, int]:
        """Each node output's position in :attr:`nodes`, made when first asked: the index's own checks need it only
        for a graph whose nodes are out of order (100k entries: a few hundredths of a second not spent on the rest)."""
        made = self._positions
        if made is None:
            outs = self.node_outputs
            n_outs = list(map(len, outs))
            made = self._positions = dict(zip(map(_FIRST, compress(outs, n_outs)), compress(range(len(outs)), n_outs)))
            for pos, _, out in _later_outputs(outs, n_outs):
                made[out] = pos
            made.pop("", None)  # an absent optional output: no value
        return made

    def resolve(self, name: str) -> Definition:
        cache = self.resolved
        if cache is None:
            return self._resolve(name)
        hit = cache.get(name)
        if hit is None:
            hit = cache[name] = self._resolve(name)
        return hit

    def _resolve(self, name: str) -> Definition:
        scope: Scope | None = self
        while scope is not None:
            hit = scope.producers.get(name)
            if hit is not None:
                return Definition("node", scope, name, node=hit[0], index=hit[1], info=scope.infos.get(name))
            if name in scope.inputs:
                return Definition("input", scope, name, tensor=scope.initializers.get(name), info=scope.inputs[name])
            if name in scope.initializers:
                return Definition("initializer", scope, name, tensor=scope.initializers[name], info=scope.infos.get(name))
            scope = scope.parent
        return Definition("missing", self, name)

    def info(self, name: str) -> onnx.ValueInfoProto | None:
        scope: Scope | None = self
        while scope is not None:
            vi = scope.infos.get(name) or scope.inputs.get(name)
            if vi is not None:
                return vi
            if name in scope.producers or name in scope.initializers:
                return None
            scope = scope.parent
        return None

    def child(self, node: onnx.NodeProto, attr: str) -> Scope:
        return self.children[(id(node), attr)]

    @property
    def branch_path(self) -> str:
        return "/".join(self.path)


class ModelIndex:
    """Every scope of a model, its recurrent ops, and validation of the whole graph tree."""

    def __init__(self, model: onnx.ModelProto, label: str, main_nodes: NodeTable | None = None) -> None:
        """``main_nodes``: the main graph's nodes as :func:`rnnir.onnxio.source.read_model` read them (not read again)."""
        self.model = model
        self.label = label
        self._main_nodes = main_nodes if main_nodes is not None and len(main_nodes.nodes) == len(model.graph.node) else None
        self.opsets = {op.domain or "": op.version for op in model.opset_import}
        self.opsets.setdefault("ai.onnx", self.opsets.get("", 0))
        self.recurrent: list[tuple[Scope, onnx.NodeProto]] = []
        self._schema_ok: set[tuple[str, str]] = set()
        self._elem_types = frozenset(messages().TensorProto.DataType.values())
        self._recurrent_ops: dict[tuple[str, str], bool] = {}
        # per (op_type, domain), once checked: its schema rules (None: none), whether its nodes may hold
        # subgraphs, whether it is a recurrent op -- one dictionary lookup per node instead of four
        self._profiles: dict[tuple[str, str], tuple[_OpRules | None, bool, bool]] = {}
        # per node (by id): its (op_type, domain) and outputs, made from the scopes' lists when first asked
        self._node_op: dict[int, tuple[str, str]] | None = None
        self._node_outputs: dict[int, tuple[str, ...]] | None = None
        self._rules: dict[tuple[str, str], _OpRules] = {}
        self._outer: dict[int, frozenset[str]] = {}
        # forward links, by name: who reads a value, and which owner output a subgraph output becomes
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        self.subgraph_outputs: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        # value info (by id, kept with it: the scopes hold every one alive) -> its tensor type, see tensor_type
        self._tensor_types: dict[int, tuple[onnx.ValueInfoProto, TensorType]] = {}
        self.root = self._build(model.graph, (), None, None)

    def tensor_type(self, vi: onnx.ValueInfoProto | None) -> TensorType:
        """:func:`rnnir.lower.tensors.tensor_type` of ``vi``, read from protobuf once per value info: a graph output's
        type is asked for by the state's declaration and again by the value written into it."""
        if vi is None:
            return tensor_type(None)
        hit = self._tensor_types.get(id(vi))
        if hit is None or hit[0] is not vi:
            hit = self._tensor_types[id(vi)] = (vi, tensor_type(vi))
        return hit[1]

    def node_name(self, node: onnx.NodeProto) -> str:
        """A node's name for messages: its own, or op type and first output when it has none."""
        if node.name:
            return node.name
        out = next((o for o in node.output if o), "")
        return f"{node.op_type}({out})"

    def outer_names(self, graph: onnx.GraphProto) -> frozenset[str]:
        """Names ``graph`` borrows from enclosing scopes (memoised: nested Ifs are walked once)."""
        hit = self._outer.get(id(graph))
        if hit is None:
            hit = frozenset(outer_names(graph, self.outer_names))
            self._outer[id(graph)] = hit
        return hit

    # -- construction ------------------------------------------------------------------
    def _build(self, graph: onnx.GraphProto, path: tuple[str, ...], parent: Scope | None, owner: onnx.NodeProto | None) -> Scope:
        scope = Scope(graph=graph, path=path, parent=parent, owner=owner)
        work = [scope]
        while work:
            sc = work.pop()
            g = sc.graph
            if len(sc.path) > MAX_SUBGRAPH_DEPTH:
                raise ModelError(
                    f"subgraphs nested {len(sc.path)} deep; rnnir analyses at most {MAX_SUBGRAPH_DEPTH} levels of If/Loop/Scan",
                    model=self.label,
                    where=sc.path[0],
                )
            if type(g.name) is not str:
                self._not_text("graph name", None, sc, g.name)
            for t in g.initializer:
                self._check_tensor(t, sc)
                sc.initializers[t.name] = t
            for st in g.sparse_initializer:
                self._check_tensor(st.values, sc)
                sc.initializers[st.values.name] = st.values
            for vi in g.input:
                self._check_dims(vi, sc)
                sc.inputs[vi.name] = vi
            for vi in (*g.value_info, *g.output):
                self._check_dims(vi, sc)
                sc.infos.setdefault(vi.name, vi)
            if sc.owner is not None:
                for k, vi in enumerate(g.output):
                    self.subgraph_outputs.setdefault(vi.name, []).append((sc.owner, k))
            if not self._index_nodes_at_once(sc, work):
                self._index_nodes(sc, work)
        for sc in self._all(scope):
            sc.resolved = {}
        self._check_names(scope)
        self._check_defs(scope)
        return scope

    def _index_nodes_at_once(self, sc: Scope, work: list[Scope]) -> bool:
        """Index ``sc``'s nodes field by field, for a graph that passes every check (False: something fails or looks
        odd, and nothing was recorded; :meth:`_index_nodes` then goes node by node and raises the first error).

        Each field of each node is read from protobuf once, by list comprehensions, and the checks run per op
        type where they can: on 100k nodes that is about half the time of the node-by-node walk."""
        table = self._main_nodes if sc.parent is None else None
        nodes = list(sc.graph.node) if table is None else table.nodes
        if not nodes:
            return True
        if {type(n.name) for n in nodes} != {str}:
            return False
        keys = [(n.op_type, n.domain) for n in nodes] if table is None else table.keys
        kinds = dict.fromkeys(keys) if table is None else table.kinds
        profiles = self._profiles
        first = 0
        for key in kinds:
            if key in profiles:
                continue
            # the op's first node: after the first of each op before it in ``kinds`` (so at most one scan of keys)
            first = keys.index(key, first)
            try:
                if key not in self._schema_ok:
                    self._check_op(nodes[first], sc)
            except ModelError:
                return False
            profiles[key] = (self._rules.get(key), key[1] not in _DEFAULT_DOMAINS or key[0] in _SUBGRAPH_OPS, self.is_recurrent(*key))
        # a slice of a repeated field is made in C (a list, then the tuple of it): a third faster than iterating
        # the field's container one name at a time, which is what tuple(n.input) does
        ins_all = [tuple(n.input[:]) for n in nodes]
        outs_all = [tuple(n.output[:]) for n in nodes]
        n_attrs = [len(n.attribute) for n in nodes]
        # per op: (max inputs, max outputs, last required input or -1, whether every node is looked at: a recurrent
        # op, required attributes); an op without rules (a custom one) allows any number of ports.  A node holds
        # subgraphs only as attributes, so one with any attribute is looked at anyway
        limits: dict[tuple[str, str], tuple[int, int, int, bool]] = {}
        for key, (rules, _, recurrent) in ((k, profiles[k]) for k in kinds):
            if rules is None:
                limits[key] = (sys.maxsize, sys.maxsize, -1, recurrent)
            else:
                last_required = rules.required_inputs[-1] if rules.required_inputs else -1
                limits[key] = (rules.max_inputs, rules.max_outputs, last_required, recurrent or bool(rules.required_attrs))
        odd: list[int] = []  # nodes that need a closer look: attributes, subgraphs, a recurrent op, a missing input
        mark = odd.append
        # one tuple per op unpacked per node: the fewest Python steps (mapping each condition over the nodes in C
        # instead is slower: nine passes over 100k nodes, each as dear as this loop's step)
        for pos, key, ins, outs, n_attr in zip(range(len(keys)), keys, ins_all, outs_all, n_attrs):
            max_in, max_out, last_required, looked_at = limits[key]
            if len(ins) > max_in or len(outs) > max_out:
                return False
            if n_attr or looked_at or len(ins) <= last_required or (last_required >= 0 and "" in ins):
                mark(pos)
        try:
            for pos in odd:
                node = nodes[pos]
                rules, special, recurrent = profiles[keys[pos]]
                if rules is not None:
                    if rules.required_inputs and (len(ins_all[pos]) <= rules.required_inputs[-1] or "" in ins_all[pos]):
                        self._check_required_inputs(node, sc, rules)
                    if rules.required_attrs or n_attrs[pos]:
                        self._check_attributes(node, sc, rules)
                elif n_attrs[pos]:
                    self._check_attribute_text(node, sc)
                if special and keys[pos][1] in _DEFAULT_DOMAINS:
                    for attr in node.attribute:
                        if attr.type == ATTR.GRAPH:
                            self._check_body_arity(node, attr.name, attr.g, sc)
                        elif attr.type == ATTR.GRAPHS and len(attr.graphs) == 1:
                            self._check_body_arity(node, attr.name, attr.graphs[0], sc)
                if recurrent:
                    self._check_recurrent(node, sc)
        except ModelError:
            return False
        # each node's first output with (node, 0), by C-level iterators; the few later ones (Split's, LSTM's) after
        n_outs = list(map(len, outs_all))
        producers = dict(zip(map(_FIRST, compress(outs_all, n_outs)), zip(compress(nodes, n_outs), repeat(0))))
        for pos, port, out in _later_outputs(outs_all, n_outs):
            producers[out] = (nodes[pos], port)
        producers.pop("", None)  # an absent optional output: not a value
        flat_outs = list(chain.from_iterable(outs_all))
        n_values = len(flat_outs) - flat_outs.count("")
        if len(producers) != n_values or not producers.keys().isdisjoint(sc.inputs) or not producers.keys().isdisjoint(sc.initializers):
            return False  # a value produced twice, or a graph input or initializer produced again
        # every check passed: record (a scope is indexed once: its tables are still empty, so taken, not copied)
        sc.producers = producers
        sc.nodes = nodes
        sc.node_inputs = ins_all
        sc.node_ops = keys
        sc.node_outputs = outs_all
        self._add_readers(nodes, ins_all)
        if not any(profiles[key][1] for key in kinds):  # no subgraph or custom op: each node reads only its inputs
            sc.in_order = self._reads_in_order(sc)
        for pos in odd:
            node = nodes[pos]
            _, special, recurrent = profiles[keys[pos]]
            if special:
                self._add_subgraph_scopes(node, sc, work)
            if recurrent:
                self.recurrent.append((sc, node))
        return True

    def _index_nodes(self, sc: Scope, work: list[Scope]) -> None:
        """Index ``sc``'s nodes one by one, checking each as it comes: the first bad node raises its error."""
        g = sc.graph
        producers = sc.producers
        profiles = self._profiles
        node_list = sc.nodes
        node_inputs = sc.node_inputs
        node_ops = sc.node_ops
        # one pass over the protobuf per node: each field read from a upb message builds a new Python object,
        # so inputs and outputs are read once (and kept for _check_defs), the rest only when a rule needs them
        for node in g.node:
            if type(node.name) is not str:
                self._not_text("node name", node, sc)
            ins = tuple(node.input[:])  # see _index_nodes_at_once
            node_list.append(node)
            node_inputs.append(ins)
            self._add_readers((node,), (ins,))
            op = node.op_type
            dom = node.domain
            key = (op, dom)
            profile = profiles.get(key)
            if profile is None:  # the first node of this op: check the op, then keep what its nodes need
                if key not in self._schema_ok:
                    self._check_op(node, sc)
                profile = profiles[key] = (self._rules.get(key), dom not in _DEFAULT_DOMAINS or op in _SUBGRAPH_OPS, self.is_recurrent(op, dom))
            rules, special, recurrent = profile
            outs = tuple(node.output[:])
            node_ops.append(key)
            sc.node_outputs.append(outs)
            if rules is not None:
                if len(ins) > rules.max_inputs or len(outs) > rules.max_outputs:
                    self._too_many_ports(node, sc, rules)
                if rules.required_inputs and (len(ins) <= rules.required_inputs[-1] or "" in ins):
                    self._check_required_inputs(node, sc, rules)
                if rules.required_attrs or len(node.attribute):
                    self._check_attributes(node, sc, rules)
            elif len(node.attribute):
                self._check_attribute_text(node, sc)
            for i, out in enumerate(outs):
                if not out:
                    continue
                if out in producers:
                    raise ModelError(
                        f"value {out!r} is produced twice (by {self.node_name(producers[out][0])!r} and {self.node_name(node)!r}); ONNX values are SSA",
                        model=self.label,
                        where=sc.branch_path or "main graph",
                    )
                if out in sc.inputs or out in sc.initializers:
                    # onnxruntime refuses it too ("Duplicate definition"); read on, a state input redefined by a
                    # node would be lowered with no load of its slot at all
                    what = "a graph input" if out in sc.inputs else "an initializer"
                    raise ModelError(
                        f"value {out!r} is {what} and is produced again by {self.node_name(node)!r}; ONNX values are SSA",
                        model=self.label,
                        where=sc.branch_path or "main graph",
                    )
                producers[out] = (node, i)
            if special:
                self._add_subgraph_scopes(node, sc, work)
            if recurrent:
                self._check_recurrent(node, sc)
                self.recurrent.append((sc, node))

    def _add_readers(self, nodes: Iterable[onnx.NodeProto], inputs: Iterable[tuple[str, ...]]) -> None:
        """Record each node as a consumer of each value it reads (in node order, as every walk expects)."""
        consumers = self.consumers
        get = consumers.get
        inputs = list(inputs)
        # one (name, reader) pair per input, flattened by C-level iterators: one Python step per input, not two loops
        for i, node in zip(chain.from_iterable(inputs), chain.from_iterable(map(repeat, nodes, map(len, inputs)))):
            if i:
                lst = get(i)
                if lst is None:
                    consumers[i] = [node]
                else:
                    lst.append(node)

    def _add_subgraph_scopes(self, node: onnx.NodeProto, sc: Scope, work: list[Scope]) -> None:
        """A child scope, to be indexed, for each subgraph of ``node`` (If/Loop/Scan bodies, or any graph attribute of
        a custom op); a standard op's body must first have the inputs and outputs its signature implies."""
        dom = node.domain
        for attr in node.attribute:
            subs: list[onnx.GraphProto] = []
            if attr.type == ATTR.GRAPH:
                subs = [attr.g]
            elif attr.type == ATTR.GRAPHS:
                subs = list(attr.graphs)
            if dom in _DEFAULT_DOMAINS and len(subs) == 1:
                self._check_body_arity(node, attr.name, subs[0], sc)
            for k, sub in enumerate(subs):
                tag = attr.name if len(subs) == 1 else f"{attr.name}[{k}]"
                child = Scope(graph=sub, path=sc.path + (f"{self.node_name(node)}.{tag}",), parent=sc, owner=node)
                sc.children[(id(node), tag)] = child  # by tag: each of a GRAPHS attribute's subgraphs is a scope
                work.append(child)

    def is_recurrent(self, op_type: str, domain: str) -> bool:
        """``kind_for_op(op_type, domain) is not None``, memoised."""
        key = (op_type, domain)
        hit = self._recurrent_ops.get(key)
        if hit is None:
            hit = self._recurrent_ops[key] = kind_for_op(op_type, domain) is not None
        return hit

    @property
    def node_op(self) -> dict[int, tuple[str, str]]:
        """Each node's (op_type, domain) as read while indexing, by id: for walks over most of a graph, which would
        otherwise read them from protobuf again (a microsecond a field in Python).  Made with :attr:`node_outputs`
        when first asked (100k nodes: two hundredths of a second a lint that walks little of its graph never pays)."""
        if self._node_op is None:
            self._make_node_tables()
        assert self._node_op is not None
        return self._node_op

    @property
    def node_outputs(self) -> dict[int, tuple[str, ...]]:
        """Each node's outputs as read while indexing, by id (see :attr:`node_op`)."""
        if self._node_outputs is None:
            self._make_node_tables()
        assert self._node_outputs is not None
        return self._node_outputs

    @property
    def node_tables_made(self) -> bool:
        """:attr:`node_op` and :attr:`node_outputs` are made already: reading them costs a lookup, no more."""
        return self._node_op is not None

    def _make_node_tables(self) -> None:
        node_op: dict[int, tuple[str, str]] = {}
        node_outputs: dict[int, tuple[str, ...]] = {}
        for sc in self.scopes():
            ids = list(map(id, sc.nodes))
            node_op.update(zip(ids, sc.node_ops))
            node_outputs.update(zip(ids, sc.node_outputs))
        self._node_op, self._node_outputs = node_op, node_outputs

    def scopes(self) -> Iterator[Scope]:
        stack = [self.root]
        while stack:
            sc = stack.pop()
            yield sc
            stack.extend(sc.children.values())

    def _where(self, sc: Scope, node: onnx.NodeProto | None = None) -> str:
        graph = sc.branch_path or "main graph"
        if node is None:
            return graph
        return f"node {self.node_name(node)!r}" + (f" in {sc.branch_path}" if sc.path else "")

    def _not_text(self, what: str, node: onnx.NodeProto | None, sc: Scope, value: object = None) -> None:
        """Protobuf hands back ``bytes`` for a string field that is not valid UTF-8: refuse the model, naming where."""
        shown = f" {value!r}" if value is not None else ""
        raise ModelError(f"{what}{shown} is not valid UTF-8 text, as ONNX requires", model=self.label, where=self._where(sc, node))

    def _check_tensor(self, t: onnx.TensorProto, sc: Scope) -> None:
        if type(t.name) is not str:
            self._not_text("initializer name", None, sc, t.name)
        if t.data_type not in self._elem_types:
            raise ModelError(f"initializer {t.name!r} has unknown data type {t.data_type}", model=self.label, where=self._where(sc))

    def _check_dims(self, vi: onnx.ValueInfoProto, sc: Scope) -> None:
        if type(vi.name) is not str:
            self._not_text("value name", None, sc, vi.name)
        if not vi.type.HasField("tensor_type"):
            return
        elem = vi.type.tensor_type.elem_type
        if elem not in self._elem_types:
            raise ModelError(f"value {vi.name!r} has unknown element type {elem}", model=self.label, where=self._where(sc))
        for d in vi.type.tensor_type.shape.dim:
            if type(d.dim_param) is not str:
                self._not_text(f"a dim of value {vi.name!r}", None, sc, d.dim_param)
            if d.HasField("dim_value") and d.dim_value < 0:
                raise ModelError(
                    f"value {vi.name!r} has a negative dimension ({d.dim_value})",
                    model=self.label,
                    where=sc.branch_path or "main graph",
                )

    def _check_op(self, node: onnx.NodeProto, sc: Scope) -> None:
        if type(node.op_type) is not str or type(node.domain) is not str:
            self._not_text("op type or domain", node, sc, node.op_type if type(node.op_type) is not str else node.domain)
        domain = node.domain or ""
        if domain not in _DEFAULT_DOMAINS:
            self._schema_ok.add((node.op_type, node.domain))
            return  # custom ops are opaque to rnnir; their dataflow is still followed
        key = (node.op_type, node.domain)
        if key in self._schema_ok:
            return
        version = self.opsets.get(domain, self.opsets.get("", 0))
        rules = op_rules(node.op_type, version)
        if rules is None:
            raise ModelError(
                f"unknown op {node.op_type!r} in the standard ONNX domain at opset {version}",
                model=self.label,
                where=f"node {self.node_name(node)!r}" + (f" in {sc.branch_path}" if sc.path else ""),
            ) from None
        self._schema_ok.add(key)
        self._rules[key] = rules

    def _check_required_inputs(self, node: onnx.NodeProto, sc: Scope, rules: _OpRules) -> None:
        names = list(node.input)
        for k in rules.required_inputs:
            if k >= len(names) or not names[k]:
                raise ModelError(
                    f"{node.op_type} node lacks its required input #{k} (it has {len(names)} input(s))",
                    model=self.label,
                    where=self._where(sc, node),
                )

    def _check_body_arity(self, node: onnx.NodeProto, attr: str, body: onnx.GraphProto, sc: Scope) -> None:
        """A branch or body has the inputs and outputs its owner's signature implies (the ONNX spec's rules)."""
        op = node.op_type
        want_in: int | None = None
        want_out: int | None = None
        if op == "If" and attr in ("then_branch", "else_branch"):
            want_in, want_out = 0, len(node.output)
        elif op == "Loop" and attr == "body":
            want_in, want_out = len(node.input), 1 + len(node.output)  # (iteration, cond, carried...) -> (cond, carried..., scans...)
        elif op == "Scan" and attr == "body":  # inputs differ between opset 8 (sequence_lens) and 9+
            want_out = len(node.output)
        elif op == "SequenceMap" and attr == "body":  # one body input per node input, one output per node output
            want_in, want_out = len(node.input), len(node.output)
        if want_out is not None and len(body.output) != want_out or want_in is not None and len(body.input) != want_in:
            raise ModelError(
                f"{op} {attr} has {len(body.input)} input(s) and {len(body.output)} output(s); the node's "
                f"{len(node.input)} input(s) and {len(node.output)} output(s) need {want_in} and {want_out}",
                model=self.label,
                where=self._where(sc, node),
            )

    def _too_many_ports(self, node: onnx.NodeProto, sc: Scope, rules: _OpRules) -> None:
        raise ModelError(
            f"{node.op_type} node has {len(node.input)} input(s) and {len(node.output)} output(s); "
            f"its schema allows at most {rules.max_inputs} and {rules.max_outputs}",
            model=self.label,
            where=self._where(sc, node),
        )

    def _check_attributes(self, node: onnx.NodeProto, sc: Scope, rules: _OpRules) -> None:
        """Each attribute the schema knows has the schema's type; required ones are present; text is UTF-8."""
        seen: set[str] = set()
        for attr in node.attribute:
            if type(attr.name) is not str:
                self._not_text("attribute name", node, sc, attr.name)
            expected = rules.attr_types.get(attr.name)
            if expected is None:
                raise ModelError(
                    f"attribute {attr.name!r} is not an attribute of {node.op_type} (as onnx.checker and onnxruntime also refuse)",
                    model=self.label,
                    where=self._where(sc, node),
                )
            if attr.type != expected:
                raise ModelError(
                    f"attribute {attr.name!r} is {_attr_type_name(attr.type)}, the {node.op_type} schema wants {_attr_type_name(expected)}",
                    model=self.label,
                    where=self._where(sc, node),
                )
            if attr.name in seen:
                raise ModelError(f"attribute {attr.name!r} is given twice", model=self.label, where=self._where(sc, node))
            seen.add(attr.name)
            self._check_text_value(attr, node, sc)
        missing = [a for a in rules.required_attrs if a not in seen]
        if missing:
            raise ModelError(
                f"{node.op_type} node lacks required attribute(s) {', '.join(map(repr, missing))}",
                model=self.label,
                where=self._where(sc, node),
            )

    def _check_attribute_text(self, node: onnx.NodeProto, sc: Scope) -> None:
        for attr in node.attribute:
            if type(attr.name) is not str:
                self._not_text("attribute name", node, sc, attr.name)
            self._check_text_value(attr, node, sc)

    def _check_text_value(self, attr: onnx.AttributeProto, node: onnx.NodeProto, sc: Scope) -> None:
        if attr.type == ATTR.STRING:
            values: Iterable[bytes] = (attr.s,)
        elif attr.type == ATTR.STRINGS:
            values = attr.strings
        else:
            return
        for v in values:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                self._not_text(f"attribute {attr.name!r} value", node, sc, v)

    def _check_recurrent(self, node: onnx.NodeProto, sc: Scope) -> None:
        """The attributes lowering relies on, for every recurrent kind (custom-domain ones included, which
        no schema checks): their types, a positive hidden size, a known direction and layout."""
        attrs = {a.name: a for a in node.attribute}
        where = self._where(sc, node)
        for name, expected in _RECURRENT_ATTR_TYPES.items():
            if name in attrs and attrs[name].type != expected:
                raise ModelError(
                    f"attribute {name!r} is {_attr_type_name(attrs[name].type)}, a {node.op_type} wants {_attr_type_name(expected)}",
                    model=self.label,
                    where=where,
                )
            if name in attrs:
                self._check_text_value(attrs[name], node, sc)
        if "hidden_size" in attrs and attrs["hidden_size"].i <= 0:
            raise ModelError(f"hidden_size {attrs['hidden_size'].i} is not positive", model=self.label, where=where)
        if "direction" in attrs and attrs["direction"].s.decode() not in _RECURRENT_DIRECTIONS:
            raise ModelError(
                f"direction {attrs['direction'].s.decode()!r} is not one of {', '.join(_RECURRENT_DIRECTIONS)}", model=self.label, where=where
            )
        if "layout" in attrs and attrs["layout"].i not in (0, 1):
            raise ModelError(f"layout {attrs['layout'].i} is not 0 or 1", model=self.label, where=where)

    def _check_names(self, root: Scope) -> None:
        """Every value name is text (protobuf gives ``bytes`` for invalid UTF-8); the main graph's outputs are
        defined, each once.  Checked on the dictionaries built anyway, so a clean model pays one pass over types."""
        for sc in self._all(root):
            # node outputs: the first bad one in node order (the fast path fills producers first outputs first)
            for table, names, what in ((sc.producers, chain.from_iterable(sc.node_outputs), "node output"), (sc.inputs, sc.inputs, "graph input"),
                                       (sc.initializers, sc.initializers, "initializer"), (sc.infos, sc.infos, "value")):
                if len(set(map(type, table))) > 1 or (table and type(next(iter(table))) is not str):
                    bad = next(k for k in names if type(k) is not str)
                    self._not_text(f"{what} name", None, sc, bad)
        if not set(map(type, self.consumers)) <= {str}:  # one C-level pass over 100k names; the loop only for the error
            bad = next(k for k in self.consumers if type(k) is not str)
            self._not_text("input name", self.consumers[bad][0], root, bad)
        seen: set[str] = set()
        for vi in root.graph.output:
            if vi.name in seen:
                raise ModelError(f"graph output {vi.name!r} is listed twice", model=self.label, where="main graph")
            seen.add(vi.name)
        for sc in self._all(root):
            for vi in sc.graph.output:
                if not vi.name:  # onnx.checker and onnxruntime refuse it too; no caller could read such an output
                    raise ModelError("a graph output has an empty name", model=self.label, where=self._where(sc))
                if sc.resolve(vi.name).kind == "missing":
                    raise ModelError(
                        f"graph output {vi.name!r} is not defined by any node, graph input or initializer",
                        model=self.label,
                        where=self._where(sc),
                    )

    def _check_defs(self, root: Scope) -> None:
        """Every input name resolves; within a graph, nodes form no cycle."""
        for sc in self._all(root):
            if sc.in_order:  # found so while indexing
                continue
            local = sc.inputs.keys() | sc.initializers.keys()
            if self._defs_in_order(sc):
                sc.in_order = True
                continue
            positions = sc.positions
            late = False
            for p, (node, ins, (op, dom)) in enumerate(zip(sc.nodes, sc.node_inputs, sc.node_ops)):
                names: Iterable[str] = ins
                if dom not in _DEFAULT_DOMAINS or op in _SUBGRAPH_OPS:
                    names = list(_reads(node, self.outer_names))
                for name in names:
                    if not name:
                        continue
                    q = positions.get(name)
                    if q is not None:
                        if q >= p:
                            late = True
                        continue
                    if name in local:
                        continue
                    if sc.resolve(name).kind == "missing":
                        raise ModelError(
                            f"node {self.node_name(node)!r} reads {name!r}, which no node, graph input or initializer defines",
                            model=self.label,
                            where=sc.branch_path or "main graph",
                        )
            if late:
                self._check_cycle(sc)

    def _defs_in_order(self, sc: Scope) -> bool:
        """True when every node of ``sc`` reads only names defined earlier in ``sc`` (or its inputs, initializers,
        absent ones): the common case, checked by C-level iterators.  False: :meth:`_check_defs` looks node by node
        (an outer-scope name, a subgraph or custom op whose reads include its bodies', an error or a cycle)."""
        if any(dom not in _DEFAULT_DOMAINS or op in _SUBGRAPH_OPS for op, dom in set(sc.node_ops)):
            return False
        return self._reads_in_order(sc)

    def _reads_in_order(self, sc: Scope) -> bool:
        """:meth:`_defs_in_order` once ``sc`` holds no subgraph or custom op."""
        defined = set(sc.inputs)
        defined.update(sc.initializers)
        defined.add("")
        # node by node: the names the node before defined are added (set.update, yielding None, pulled by zip first),
        # then the node's own inputs are looked up; a set needs no position per name
        earlier_outputs = chain(((),), sc.node_outputs)
        return all(map(defined.issuperset, map(operator.itemgetter(1), zip(map(defined.update, earlier_outputs), sc.node_inputs))))

    def _all(self, root: Scope) -> Iterator[Scope]:
        stack = [root]
        while stack:
            sc = stack.pop()
            yield sc
            stack.extend(sc.children.values())

    def _check_cycle(self, sc: Scope) -> None:
        nodes = list(sc.graph.node)
        deps: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
        index = {id(n): i for i, n in enumerate(nodes)}
        indeg = [0] * len(nodes)
        for i, node in enumerate(nodes):
            for name in _reads(node, self.outer_names):
                hit = sc.producers.get(name)
                if hit is not None:
                    j = index[id(hit[0])]
                    deps[j].append(i)
                    indeg[i] += 1
        ready = [i for i in range(len(nodes)) if indeg[i] == 0]
        done = 0
        while ready:
            j = ready.pop()
            done += 1
            for i in deps[j]:
                indeg[i] -= 1
                if indeg[i] == 0:
                    ready.append(i)
        if done < len(nodes):
            stuck = [self.node_name(nodes[i]) for i in range(len(nodes)) if indeg[i] > 0]
            shown = ", ".join(repr(s) for s in stuck[:6]) + (" …" if len(stuck) > 6 else "")
            raise ModelError(
                f"the graph has a cycle through nodes {shown}; ONNX graphs must be acyclic",
                model=self.label,
                where=sc.branch_path or "main graph",
            )


def _attr_type_name(code: int) -> str:
    try:
        return str(messages().AttributeProto.AttributeType.Name(code))
    except ValueError:
        return f"attribute type {code}"


def op_rules(op_type: str, version: int) -> _OpRules | None:
    """What the schema of standard-domain ``op_type`` at opset ``version`` demands (None: no such op).

    From rnnir's copy of onnx's schemas when it was made from the installed onnx release (no
    ``import onnx``: see tools/gen_opschemas.py), else from ``onnx.defs`` itself.
    """
    if _table_matches_onnx():
        from rnnir.lower._opschemas import SCHEMAS

        versions = SCHEMAS.get(op_type)
        if not versions:
            return None
        k = bisect.bisect_right([v[0] for v in versions], version) - 1
        if k < 0:
            return None
        _since, attr_types, required_attrs, required_inputs, max_inputs, max_outputs = versions[k]
        return _OpRules(attr_types, required_attrs, required_inputs, max_inputs, max_outputs)
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(op_type, version, "")
    except onnx.defs.SchemaError:
        return None
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    required: list[int] = []
    for k, formal in enumerate(schema.inputs):
        if formal.option != single:
            break  # an optional or variadic input: the rest may be absent
        required.append(k)
    return _OpRules(
        attr_types={name: int(a.type) for name, a in schema.attributes.items()},  # type: ignore[call-overload]  # AttrType is an int enum the stub does not say is SupportsInt
        required_attrs=tuple(name for name, a in schema.attributes.items() if a.required),
        required_inputs=tuple(required),
        max_inputs=schema.max_input,
        max_outputs=schema.max_output,
    )


@functools.lru_cache(maxsize=1)
def _table_matches_onnx() -> bool:
    """The schema table was generated from the onnx release installed here (read from its dist-info folder's
    name, next to the package: cheaper than importing onnx or importlib.metadata).  A process-wide fact."""
    import importlib.util

    from rnnir.lower._opschemas import ONNX_VERSION

    onnx_loaded = sys.modules.get("onnx")
    if onnx_loaded is not None and getattr(onnx_loaded, "__version__", None):
        return bool(onnx_loaded.__version__ == ONNX_VERSION)
    try:
        spec = importlib.util.find_spec("onnx")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        site = os.path.dirname(os.path.abspath(folder))
        try:
            names = os.listdir(site)
        except OSError:
            continue
        found = [n[len("onnx-") : -len(".dist-info")] for n in names if n.startswith("onnx-") and n.endswith(".dist-info")]
        if len(found) == 1:
            return found[0] == ONNX_VERSION
    return False


def _reads(node: onnx.NodeProto, outer: Callable[[onnx.GraphProto], Iterable[str]] | None = None) -> Iterator[str]:
    """Names a node reads, including outer-scope names its subgraphs borrow."""
    for name in node.input:
        if name:
            yield name
    for attr in node.attribute:
        subs = [attr.g] if attr.type == ATTR.GRAPH else list(attr.graphs) if attr.type == ATTR.GRAPHS else []
        for sub in subs:
            yield from (outer(sub) if outer is not None else outer_names(sub))


def outer_names(graph: onnx.GraphProto, outer: Callable[[onnx.GraphProto], Iterable[str]] | None = None) -> set[str]:
    """Names a subgraph (and its own subgraphs) read from enclosing scopes."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    defined |= {st.values.name for st in graph.sparse_initializer}
    defined |= {o for n in graph.node for o in n.output if o}
    free: set[str] = set()
    for node in graph.node:
        for name in _reads(node, outer):
            if name not in defined:
                free.add(name)
    for vi in graph.output:
        if vi.name not in defined:
            free.add(vi.name)
    return free


def attribute_value(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    """The value of ``node``'s attribute ``name`` (strings decoded), or ``default`` when it has none."""
    for a in node.attribute:
        if a.name == name:
            return _decoded(a)
    return default


def attribute_values(node: onnx.NodeProto) -> dict[str, Any]:
    """Every attribute of ``node`` by name, each as :func:`attribute_value` reads it (the first of a name given twice),
    for a reader of many: one pass over the attributes instead of one per name."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.name not in out:
            out[a.name] = _decoded(a)
    return out


def _decoded(a: onnx.AttributeProto) -> Any:
    v = _proto_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode() for x in v]
    return v
