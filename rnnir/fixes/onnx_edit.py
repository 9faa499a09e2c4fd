"""Editing ONNX graphs for fixes: fresh names, the graphs of a model and their If owners, who produces a value,
dead-node pruning, value types, and recording the state pairs in the model's metadata as rnnir.export does."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import onnx
from onnx import helper

from rnnir.exporter import _slot_meta
from rnnir.fixes.edits import FixError
from rnnir.lower import Policy, lower
from rnnir.onnxio.metadata import META_FINGERPRINT as _META_FINGERPRINT
from rnnir.onnxio.metadata import META_PAIRS
from rnnir.onnxio.metadata import META_SLOTS as _META_SLOTS
from rnnir.onnxio.metadata import write as _set_meta
from rnnir.onnxio.source import graph_fingerprint, iter_graphs, read_model

__all__ = [
    "GraphRef",
    "Names",
    "check_model",
    "dims_of",
    "graph_of",
    "graph_refs",
    "initializer",
    "name_stem",
    "node_label",
    "producer",
    "prune",
    "record_pairs",
    "type_text",
    "value_types",
]


def check_error(model: onnx.ModelProto) -> str | None:
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        return str(exc)
    return None


def check_model(model: onnx.ModelProto, original: onnx.ModelProto, label: str) -> None:
    """The edited model passes onnx.checker's full check, unless the original already did not (not ours to judge)."""
    problem = check_error(model)
    if problem is not None and check_error(original) is None:
        raise FixError(f"{label}: the edited model does not pass onnx.checker ({problem}); this is a bug in rnnir fix")


class Names:
    """Every name used anywhere in the model, and fresh ones that collide with none."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.used: set[str] = set()
        for g in iter_graphs(model.graph):
            self.used.update(vi.name for vi in (*g.input, *g.output, *g.value_info))
            self.used.update(t.name for t in g.initializer)
            for n in g.node:
                self.used.update(n.input)
                self.used.update(n.output)
                if n.name:
                    self.used.add(n.name)

    def fresh(self, stem: str) -> str:
        name, k = stem, 1
        while name in self.used:
            name = f"{stem}_{k}"
            k += 1
        self.used.add(name)
        return name

    def free(self, name: str) -> bool:
        return name not in self.used


@dataclass


class GraphRef:
    """A graph of the model and how to reach it: the If nodes and branch names from the main graph."""

    graph: onnx.GraphProto
    owners: tuple[tuple[onnx.NodeProto, str], ...] = ()  # (If node, "then_branch"/"else_branch"), outermost first
    parent: GraphRef | None = None


def graph_refs(model: onnx.ModelProto) -> list[GraphRef]:
    """Every graph of the model with its owner chain, the main graph first."""
    root = GraphRef(model.graph)
    refs = [root]
    stack = [root]
    while stack:
        ref = stack.pop()
        for node in ref.graph.node:
            for a in node.attribute:
                subs = [(a.name, a.g)] if a.type == onnx.AttributeProto.GRAPH else [(f"{a.name}[{k}]", g) for k, g in enumerate(a.graphs)]
                for tag, g in subs:
                    child = GraphRef(g, ref.owners + ((node, tag),), ref)
                    refs.append(child)
                    stack.append(child)
    return refs


def node_label(node: onnx.NodeProto) -> str:
    return node.name or f"{node.op_type}({next((o for o in node.output if o), '')})"


def producer(ref: GraphRef, name: str) -> tuple[onnx.NodeProto | None, GraphRef | None, str]:
    """Who defines ``name`` seen from ``ref``: (node, its graph, kind) with kind node/input/initializer/missing."""
    r: GraphRef | None = ref
    while r is not None:
        for n in r.graph.node:
            if name in n.output:
                return n, r, "node"
        if any(vi.name == name for vi in r.graph.input):
            return None, r, "input"
        if any(t.name == name for t in r.graph.initializer):
            return None, r, "initializer"
        r = r.parent
    return None, None, "missing"


def initializer(ref: GraphRef, name: str) -> onnx.TensorProto | None:
    r: GraphRef | None = ref
    while r is not None:
        for t in r.graph.initializer:
            if t.name == name:
                return cast(onnx.TensorProto, t)  # protobuf messages are untyped here
        r = r.parent
    return None


def use_counts(model: onnx.ModelProto) -> dict[str, int]:
    """How many node inputs and graph outputs name each value, over every graph of the model."""
    uses: dict[str, int] = {}
    for g in iter_graphs(model.graph):
        for n in g.node:
            for i in n.input:
                if i:
                    uses[i] = uses.get(i, 0) + 1
        for vi in g.output:
            uses[vi.name] = uses.get(vi.name, 0) + 1
    return uses


def has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def prune(model: onnx.ModelProto, candidates: set[str]) -> list[str]:
    """Remove nodes (and initializers) among ``candidates``' producers that nothing reads any more.

    One backwards sweep per graph with use counts, so a dead chain goes in one pass however long it is
    (a rescan per removed node would be quadratic on big models); repeated only when a removal in a
    subgraph frees a value of an enclosing graph.
    """
    removed: list[str] = []
    uses = use_counts(model)
    changed = True
    while changed:
        changed = False
        for g in iter_graphs(model.graph):
            drop: set[int] = set()
            for k in range(len(g.node) - 1, -1, -1):
                n = g.node[k]
                outs = [o for o in n.output if o]
                if not outs or has_subgraph(n) or not any(o in candidates for o in outs) or any(uses.get(o, 0) for o in outs):
                    continue
                drop.add(k)
                for i in n.input:
                    if i:
                        uses[i] -= 1
                        candidates.add(i)
            if drop:
                removed.extend(node_label(g.node[k]) for k in sorted(drop))  # in graph order, for the edit's text
                for k in sorted(drop, reverse=True):
                    del g.node[k]
                changed = True
    produced = {o for g in iter_graphs(model.graph) for n in g.node for o in n.output}
    for g in iter_graphs(model.graph):
        inputs = {vi.name for vi in g.input}
        for k in range(len(g.initializer) - 1, -1, -1):
            t = g.initializer[k]
            if t.name in candidates and not uses.get(t.name, 0) and t.name not in inputs:
                del g.initializer[k]
        if removed:
            for k in range(len(g.value_info) - 1, -1, -1):
                if g.value_info[k].name not in produced:
                    del g.value_info[k]
    return removed


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Types of every value shape inference can tell, across all graphs (empty when inference fails)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference is a help for naming dims, never required
        inferred = model
    out: dict[str, onnx.TypeProto] = {}
    for g in iter_graphs(inferred.graph):
        for vi in (*g.input, *g.value_info, *g.output):
            if vi.type.HasField("tensor_type"):
                out.setdefault(vi.name, vi.type)
    return out


def dims_of(t: onnx.TypeProto | None) -> list[int | str | None] | None:
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]


def name_stem(text: str) -> str:
    s = re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_")
    return s or "rec"


def type_text(dtype: int, shape: Sequence[int | str | None]) -> str:
    try:
        dt = str(np.dtype(helper.tensor_dtype_to_np_dtype(dtype)))
    except (KeyError, TypeError, ValueError):
        dt = onnx.TensorProto.DataType.Name(dtype).lower()
    return f"{dt}[{','.join('?' if d is None else str(d) for d in shape)}]"


def record_pairs(model: onnx.ModelProto, pairs: dict[str, str | None], label: str) -> None:
    """Write the complete pairing into ``rnnir.pairs`` / ``rnnir.slots`` / ``rnnir.fingerprint`` as rnnir.export does.

    A model that records its stores as IR text (``rnnir.ir``) keeps the text: lowering gives a slot the text
    does not know (the state exposed here) the default fan-out stores."""
    _set_meta(model, META_PAIRS, json.dumps(pairs, sort_keys=True))
    program = lower(read_model(model, label=label), pairs, Policy())
    _set_meta(model, _META_SLOTS, json.dumps(_slot_meta(program, pairs), sort_keys=True))
    _set_meta(model, _META_FINGERPRINT, graph_fingerprint(model))  # refreshed by fix() after any later edit


def graph_of(model: onnx.ModelProto, node: onnx.NodeProto) -> GraphRef | None:
    for ref in graph_refs(model):
        if any(n is node for n in ref.graph.node):
            return ref
    return None
