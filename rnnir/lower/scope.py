"""A scope-aware def-use index over ONNX protobufs.

Names resolve exactly as ONNX scoping does: a subgraph (If/Loop/Scan body)
sees its own inputs, initializers and node outputs first, then its enclosing
graphs'; a graph input with an initializer of the same name is an input with a
default; an empty input name is an absent optional input.  Building the index
also validates what lowering relies on (every name defined, no cycles, known
ops, no negative dims) and raises ModelError otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import onnx

from ..errors import ModelError
from ..recurrence import kind_for_op

_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_DEFAULT_DOMAINS = ("", "ai.onnx")


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
    positions: dict[str, int] = field(default_factory=dict)

    def resolve(self, name: str) -> Definition:
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

    def __init__(self, model: onnx.ModelProto, label: str) -> None:
        self.model = model
        self.label = label
        self.opsets = {op.domain or "": op.version for op in model.opset_import}
        self.opsets.setdefault("ai.onnx", self.opsets.get("", 0))
        self.recurrent: list[tuple[Scope, onnx.NodeProto]] = []
        self._schema_ok: set[tuple[str, str]] = set()
        self._outer: dict[int, frozenset[str]] = {}
        # forward links, by name: who reads a value, and which owner output a subgraph output becomes
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        self.subgraph_outputs: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        self.root = self._build(model.graph, (), None, None)

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
            for t in g.initializer:
                sc.initializers[t.name] = t
            for st in g.sparse_initializer:
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
            consumers = self.consumers
            producers = sc.producers
            positions = sc.positions
            checked = self._schema_ok
            for pos, node in enumerate(g.node):
                for i in node.input:
                    if i:
                        lst = consumers.get(i)
                        if lst is None:
                            consumers[i] = [node]
                        else:
                            lst.append(node)
                op = node.op_type
                dom = node.domain
                if (op, dom) not in checked:
                    self._check_op(node, sc)
                for i, out in enumerate(node.output):
                    if not out:
                        continue
                    if out in producers:
                        raise ModelError(
                            f"value {out!r} is produced twice (by {self.node_name(producers[out][0])!r} and {self.node_name(node)!r}); ONNX values are SSA",
                            model=self.label,
                            where=sc.branch_path or "main graph",
                        )
                    producers[out] = (node, i)
                    positions[out] = pos
                if dom not in _DEFAULT_DOMAINS or op in _SUBGRAPH_OPS:
                    for attr in node.attribute:
                        subs: list[onnx.GraphProto] = []
                        if attr.type == onnx.AttributeProto.GRAPH:
                            subs = [attr.g]
                        elif attr.type == onnx.AttributeProto.GRAPHS:
                            subs = list(attr.graphs)
                        for k, sub in enumerate(subs):
                            tag = attr.name if len(subs) == 1 else f"{attr.name}[{k}]"
                            child = Scope(graph=sub, path=sc.path + (f"{self.node_name(node)}.{tag}",), parent=sc, owner=node)
                            sc.children[(id(node), attr.name)] = child
                            work.append(child)
                if kind_for_op(op, dom) is not None:
                    self.recurrent.append((sc, node))
        self._check_defs(scope)
        return scope

    def scopes(self) -> Iterator[Scope]:
        stack = [self.root]
        while stack:
            sc = stack.pop()
            yield sc
            stack.extend(sc.children.values())

    def _check_dims(self, vi: onnx.ValueInfoProto, sc: Scope) -> None:
        if not vi.type.HasField("tensor_type"):
            return
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value < 0:
                raise ModelError(
                    f"value {vi.name!r} has a negative dimension ({d.dim_value})",
                    model=self.label,
                    where=sc.branch_path or "main graph",
                )

    def _check_op(self, node: onnx.NodeProto, sc: Scope) -> None:
        domain = node.domain or ""
        if domain not in _DEFAULT_DOMAINS:
            self._schema_ok.add((node.op_type, node.domain))
            return  # custom ops are opaque to rnnir; their dataflow is still followed
        key = (node.op_type, node.domain)
        if key in self._schema_ok:
            return
        version = self.opsets.get(domain, self.opsets.get("", 0))
        try:
            onnx.defs.get_schema(node.op_type, version, domain)
        except onnx.defs.SchemaError:
            raise ModelError(
                f"unknown op {node.op_type!r} in the standard ONNX domain at opset {version}",
                model=self.label,
                where=f"node {self.node_name(node)!r}" + (f" in {sc.branch_path}" if sc.path else ""),
            ) from None
        self._schema_ok.add(key)

    def _check_defs(self, root: Scope) -> None:
        """Every input name resolves; within a graph, nodes form no cycle."""
        for sc in self._all(root):
            positions = sc.positions
            local = sc.inputs.keys() | sc.initializers.keys()
            late = False
            for p, node in enumerate(sc.graph.node):
                names = list(node.input)
                if node.domain not in _DEFAULT_DOMAINS or node.op_type in _SUBGRAPH_OPS:
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


def _reads(node: onnx.NodeProto, outer: Callable[[onnx.GraphProto], Iterable[str]] | None = None) -> Iterator[str]:
    """Names a node reads, including outer-scope names its subgraphs borrow."""
    for name in node.input:
        if name:
            yield name
    for attr in node.attribute:
        subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []
        for sub in subs:
            yield from (outer(sub) if outer is not None else outer_names(sub))


def outer_names(graph: onnx.GraphProto, outer: Callable[[onnx.GraphProto], Iterable[str]] | None = None) -> set[str]:
    """Names a subgraph (and its own subgraphs) read from enclosing scopes."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
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
