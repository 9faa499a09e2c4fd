"""Describe where a model's state goes: shared by the data generators (no torch needed).

``describe(path, pairs)`` returns a JSON-ready dict with the model's inputs,
outputs, op counts (ops inside subgraphs counted as ``Loop/Gemm``, ``If/Mul``,
...) and, for every state input and output, the chain of ops that carries it
through layout-only ops (Gather, Slice, Squeeze, Unsqueeze, Concat, Identity,
...) up to the op that really uses or produces it, into and out of
Loop/Scan/If bodies. The chains are written for people (README) and for the
tests (manifest.json), e.g.::

    state -> Gather(0, axis=0) 'n0' -> Gemm 'n3' (input 0)
    stateN <- Concat(axis=0, input 1) 'n9' <- Unsqueeze([0]) 'n8' <- Add 'n7'
"""

from __future__ import annotations

import collections
import pathlib
from typing import Any

import onnx
from onnx import numpy_helper

#: ops that only move, select or re-shape values: the state is traced through them
LAYOUT_OPS = frozenset({"Identity", "Gather", "Slice", "Squeeze", "Unsqueeze", "Reshape",
                        "Concat", "Transpose", "Flatten", "Cast", "Expand", "Split"})
CONTROL_FLOW = frozenset({"Loop", "Scan", "If"})


def _dims(vi: onnx.ValueInfoProto) -> list[Any]:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def op_counts(graph: onnx.GraphProto, prefix: str = "") -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()

    def walk(g: onnx.GraphProto, pre: str) -> None:
        for n in g.node:
            op = (n.domain + ":" if n.domain not in ("", "ai.onnx") else "") + n.op_type
            counts[pre + op] += 1
            for a in n.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    walk(sub, pre + op + "/")

    walk(graph, prefix)
    return dict(counts)


class _Scope:
    """One graph's def-use index, with the constants visible in it."""

    def __init__(self, graph: onnx.GraphProto, consts: dict[str, Any]):
        self.graph = graph
        self.producer = {o: n for n in graph.node for o in n.output if o}
        self.consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = collections.defaultdict(list)
        for n in graph.node:
            for k, i in enumerate(n.input):
                if i:
                    self.consumers[i].append((n, k))
            # implicit captures of subgraphs (If branches, Loop bodies) read outer names too
            captured: set[str] = set()
            for a in n.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    captured |= _captures(sub)
            for name in sorted(captured - set(n.input)):
                self.consumers[name].append((n, -1))
        self.consts = dict(consts)
        for init in graph.initializer:
            if not init.external_data and _numel(init) <= 8:
                self.consts[init.name] = numpy_helper.to_array(init)
        for n in graph.node:
            if n.op_type == "Constant":
                for a in n.attribute:
                    if a.name == "value":
                        self.consts[n.output[0]] = numpy_helper.to_array(a.t)
        self.outputs = [o.name for o in graph.output]
        self.inputs = [i.name for i in graph.input]

    def label(self, n: onnx.NodeProto, pos: int | None = None) -> str:
        args: list[str] = []
        if n.op_type in LAYOUT_OPS - {"Concat", "Split"}:
            args += [str(self.consts[i].tolist()) for i in n.input[1:] if i in self.consts and self.consts[i].size <= 8]
        for a in n.attribute:
            if a.name in ("axis", "axes", "perm", "to"):
                args.append(f"{a.name}={onnx.helper.get_attribute_value(a)}")
        if pos is not None:
            args.append(f"input {pos}" if pos >= 0 else "captured")
        inner = f"({', '.join(args)})" if args else ""
        return f"{n.op_type}{inner} '{n.name}'"


def _numel(t: onnx.TensorProto) -> int:
    size = 1
    for d in t.dims:
        size *= d
    return size


def _captures(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph (and its nested subgraphs) reads from outer scopes."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    defined |= {o for n in graph.node for o in n.output}
    used: set[str] = set()
    for n in graph.node:
        used.update(i for i in n.input if i)
        for a in n.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                used |= _captures(sub)
    used.update(o.name for o in graph.output)
    return used - defined


def _subgraphs(n: onnx.NodeProto) -> list[tuple[str, onnx.GraphProto]]:
    out = []
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append((a.name, a.g))
    return out


def forward_chains(scope: _Scope, name: str, prefix: str = "", depth: int = 0) -> list[str]:
    """Every path from ``name`` through layout ops to the ops that use it."""
    chains: list[str] = []
    if depth > 12:
        return [prefix + " -> ..."]
    if name in scope.outputs and depth > 0:
        chains.append(prefix + f" -> graph output '{name}'")
    for node, pos in scope.consumers.get(name, []):
        step = prefix + " -> " + scope.label(node, pos)
        if node.op_type in LAYOUT_OPS:
            for k, out in enumerate(node.output):
                which = f" output {k}" if len(node.output) > 1 else ""
                chains += forward_chains(scope, out, step + which, depth + 1)
        elif node.op_type in ("Loop", "Scan") and pos >= 0:
            attr, body = _subgraphs(node)[0]
            bind = _body_input_for(node, pos, body)
            sub = _Scope(body, scope.consts)
            if bind is None:
                chains.append(step)
            else:
                chains += forward_chains(sub, bind, f"{step} => {attr} input '{bind}'", depth + 1)
        elif node.op_type in CONTROL_FLOW:  # captured by If branches (or Loop bodies)
            for attr, body in _subgraphs(node):
                sub = _Scope(body, scope.consts)
                chains += forward_chains(sub, name, f"{step} => {attr}", depth + 1)
        else:
            chains.append(step)
    return chains or ([prefix + " -> (unused)"] if depth == 0 else [])


def _body_input_for(node: onnx.NodeProto, pos: int, body: onnx.GraphProto) -> str | None:
    """The body input a Loop/Scan input binds to (Loop: M, cond, carried...)."""
    if node.op_type == "Loop":
        return body.input[pos].name if pos >= 2 and pos < len(body.input) else None
    # Scan (opset >= 9): inputs = carried..., scanned...; body inputs in the same order
    return body.input[pos].name if pos < len(body.input) else None


def backward_chains(scope: _Scope, name: str, suffix: str = "", depth: int = 0) -> list[str]:
    """Every path from the op that produces ``name`` through layout ops to it."""
    if depth > 12:
        return ["... <- " + suffix]
    node = scope.producer.get(name)
    if node is None:
        where = "graph input" if name in scope.inputs else ("constant" if name in scope.consts else "outer value")
        return [f"{where} '{name}'{suffix}"]
    pos = list(node.output).index(name)
    if node.op_type in LAYOUT_OPS:
        chains = []
        data_inputs = node.input if node.op_type == "Concat" else node.input[:1]
        for k, inp in enumerate(data_inputs):
            lab = scope.label(node, k if node.op_type == "Concat" else None)
            if len(node.output) > 1:
                lab += f" output {pos}"
            chains += backward_chains(scope, inp, f" -> {lab}{suffix}", depth + 1)
        return chains
    lab = scope.label(node) + (f" output {pos}" if len(node.output) > 1 else "")
    if node.op_type in ("Loop", "Scan"):
        attr, body = _subgraphs(node)[0]
        inner = body.output[pos + 1].name if node.op_type == "Loop" else body.output[pos].name
        sub = _Scope(body, scope.consts)
        return backward_chains(sub, inner, f" => {lab}{suffix}", depth + 1)
    if node.op_type == "If":
        chains = []
        for attr, body in _subgraphs(node):
            sub = _Scope(body, scope.consts)
            chains += backward_chains(sub, body.output[pos].name, f" => {lab}.{attr}{suffix}", depth + 1)
        return chains
    return [lab + suffix]


def describe(path: pathlib.Path | str, pairs: dict[str, str]) -> dict[str, Any]:
    """Inputs, outputs, ops and state dataflow of one ONNX file."""
    model = onnx.load(str(path), load_external_data=False)
    g = model.graph
    inits = {i.name for i in g.initializer}
    scope = _Scope(g, {})
    state_in = {i: forward_chains(scope, i, f"'{i}'") for i in pairs}
    state_out = {o: backward_chains(scope, o) for o in pairs.values()}
    ext = sorted({e.value for i in g.initializer for e in i.external_data if e.key == "location"})
    elem = {i.name: onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type).name
            for i in list(g.input) + list(g.output) if i.type.HasField("tensor_type")}
    return {
        "file": pathlib.Path(path).name,
        "opset": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "inputs": [[i.name, _dims(i), elem.get(i.name, "?")] for i in g.input if i.name not in inits],
        "outputs": [[o.name, _dims(o), elem.get(o.name, "?")] for o in g.output],
        "ops": op_counts(g),
        "external_data": ext,
        "state_in": state_in,
        "state_out": state_out,
        "bytes": pathlib.Path(path).stat().st_size,
    }


def readme_lines(entry: dict[str, Any]) -> list[str]:
    """The README block of one described file."""
    ext = f" + `{', '.join(entry['external_data'])}`" if entry["external_data"] else ""
    lines = [f"- `{entry['file']}`{ext} ({entry['bytes']} bytes; opset "
             + ", ".join(f"{d} {v}" for d, v in entry["opset"].items()) + ")",
             "  - inputs: " + ", ".join(f"`{n}` {d} {t}" for n, d, t in entry["inputs"]),
             "  - outputs: " + ", ".join(f"`{n}` {d} {t}" for n, d, t in entry["outputs"]),
             "  - ops: " + ", ".join(f"{k}x{c}" for k, c in entry["ops"].items())]
    for chains in entry["state_in"].values():
        for c in chains:
            lines.append(f"  - in: {c}")
    for name, chains in entry["state_out"].items():
        for c in chains:
            lines.append(f"  - out: {c} -> `{name}`")
    return lines
