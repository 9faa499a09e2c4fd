"""The cut: from a cell's gate pre-activations back through affine and layout-only ops to its inputs and state
views, and the state views grouped into the cell's state inputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.cells.execute import flat
from rnnir.lower.cells.ops import LINEAR_OPS, MAX_AFFINE, MAX_STATE_INPUTS, PARAM_OPS, Key
from rnnir.lower.cells.results import CellWeights, NotACell, Retry
from rnnir.lower.cells.states import StateClass
from rnnir.semantics.evaluate import EvalError

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np


@dataclass
class Walk:
    """The affine part of a cell: nodes walked, leaves reached, and whether state meets a matmul."""

    nodes: list[onnx.NodeProto] = field(default_factory=list)
    x_leaves: list[Key] = field(default_factory=list)
    state_leaves: list[Key] = field(default_factory=list)
    matmul_on_state: bool = False


def outer_step(rec: Recogniser, k: Key) -> bool:
    """``k`` is ``Gather(seq, t)`` in a Loop body: step ``t`` (the iteration number) of a sequence computed outside
    the Loop. That is the cell's input for this step, whatever ``seq`` depends on (Keras layers that tf2onnx
    writes as one ``while`` Loop each read the layer below's whole output this way)."""
    d = rec.net.d(k)
    node, body = d.node, d.scope
    if node is None or node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
        return False
    if body.owner is None or body.owner.op_type != "Loop" or not body.graph.input:
        return False
    if any(a.name == "axis" and a.i != 0 for a in node.attribute) or not rec.step_number(body, node.input[1]):
        return False
    return body.resolve(node.input[0]).scope is not body


def affine_walk(rec: Recogniser, starts: list[Key], overrides: frozenset[Key], anchor: str) -> Walk:
    net = rec.net
    walk = Walk()
    stack: list[tuple[Key, bool]] = [(s, False) for s in starts]
    seen: set[Key] = set()
    while stack:
        k, via_matmul = stack.pop()
        if k in seen:
            if via_matmul and rec.view_source(k) is not None:
                walk.matmul_on_state = True
            continue
        seen.add(k)
        if len(seen) > MAX_AFFINE:
            raise NotACell(f"cell-like structure at node {anchor!r}: its gates are affine over more than {MAX_AFFINE} values, not a cell's matmuls")
        if k in overrides:
            continue
        if rec.view_source(k) is not None:
            walk.state_leaves.append(k)
            walk.matmul_on_state |= via_matmul
            continue
        if net.is_const(k):
            continue
        node = net.node(k)
        if k not in rec.cone or outer_step(rec, k):
            if node is not None and extends(rec, k):
                walk.nodes.append(node)
                stack.extend((i, False) for i in net.inputs(k) if i is not None and not net.is_const(i))
            else:
                walk.x_leaves.append(k)
            continue
        if node is None:
            raise NotACell(f"cell-like structure at node {anchor!r} reads {k[1]!r}, which is not a state input")
        op = node.op_type
        ins = net.inputs(k)
        where = f"{op} {net.node_name(node)!r}"
        if op in ("Gemm", "MatMul"):
            data = [i for i in ins[:2] if i is not None and not net.is_const(i)]
            if len(data) == 2:
                raise NotACell(f"cell-like structure at node {anchor!r}: the weights of {where} are not constants ({data[1][1]!r} is a run-time value)")
            stack.extend((i, True) for i in data)
            if len(ins) > 2 and ins[2] is not None:
                stack.append((ins[2], False))
        elif op in ("Mul", "Div"):
            live = [i for i in ins if i is not None and not net.is_const(i) and i not in overrides]
            if len(live) != 1 or (op == "Div" and ins[1] in live):
                raise NotACell(f"cell-like structure at node {anchor!r}: the state reaches {where}, which multiplies two values that change at run time")
            stack.append((live[0], via_matmul))
        elif op in LINEAR_OPS or op == "Sum":
            stack.extend((i, via_matmul) for i in ins if i is not None)
        elif op in PARAM_OPS:
            if any(i is not None and not net.is_const(i) for i in ins[1:]):
                raise NotACell(f"cell-like structure at node {anchor!r}: {where} has a parameter computed at run time")
            if ins[0] is not None:
                stack.append((ins[0], via_matmul))
        else:
            # retryable: in an unrolled or stacked model this may be a cell confirmed in a later pass
            raise Retry(f"cell-like structure at node {anchor!r}: the state reaches {where}, which is not affine")
        walk.nodes.append(node)
    return walk


def extends(rec: Recogniser, k: Key) -> bool:
    """A state-free value that is a constant-weight projection: walk through it so W is the model's input weight."""
    net = rec.net
    node = net.node(k)
    if node is None or node.domain not in ("", "ai.onnx"):
        return False
    ins = net.inputs(k)
    if node.op_type in ("Gemm", "MatMul"):
        return len(ins) >= 2 and ins[1] is not None and net.is_const(ins[1]) and (len(ins) < 3 or ins[2] is None or net.is_const(ins[2]))
    if node.op_type in ("Add", "Sub") and len(ins) == 2:
        live = [i for i in ins if i is not None and not net.is_const(i)]
        return len(live) == 1 and extends(rec, live[0])
    if node.op_type in ("Split", "Slice", "Gather") and ins and ins[0] is not None:
        # the gates of a stacked input projection: walk back to the projection when it is one
        return all(i is None or net.is_const(i) for i in ins[1:]) and extends(rec, ins[0])
    return False


def state_classes(rec: Recogniser, leaves: list[Key], anchor: str) -> list[StateClass]:
    """Group state views into state inputs: same source and same elements (run on random data)."""
    net = rec.net
    by_source: dict[Key, list[Key]] = {}
    for leaf in leaves:
        src = rec.view_source(leaf)
        if src is None:
            raise Retry(f"cell-like structure at node {anchor!r}: {leaf[1]!r} is not a state input")
        lst = by_source.setdefault(src, [])
        if leaf not in lst:
            lst.append(leaf)
    out: list[StateClass] = []
    for src, group in by_source.items():
        src_shape = net.shape(src)
        arrays: dict[Key, np.ndarray] = {}
        if src_shape is not None:
            data = rec.rng.standard_normal(src_shape)
            try:
                arrays = dict(zip(group, rec.runner.run({src: data}, group)))
            except EvalError:
                arrays = {}
        classes: list[StateClass] = []
        for leaf in group:
            shape = tuple(arrays[leaf].shape) if leaf in arrays else net.shape(leaf)
            if shape is None:
                raise NotACell(f"cell-like structure at node {anchor!r}: the shape of state view {leaf[1]!r} is unknown")
            hit = None
            for c in classes:
                first = c.leaves[0]
                if leaf in arrays and first in arrays and arrays[leaf].size == arrays[first].size and np.array_equal(flat(arrays[leaf]), flat(arrays[first])):
                    hit = c
                    break
            if hit is None:
                classes.append(StateClass(src, [leaf], {leaf: shape}, int(np.prod(shape))))
            else:
                hit.leaves.append(leaf)
                hit.shapes[leaf] = shape
        out.extend(classes)
    if len(out) > MAX_STATE_INPUTS:
        raise NotACell(f"cell-like structure at node {anchor!r} reads {len(out)} different state inputs, more than a cell's h and c (and an input)")
    return out


def h_order(rec: Recogniser, classes: list[StateClass], c_class: StateClass | None) -> list[StateClass]:
    """Which state input to try as h first: a graph/loop state input, then the cell that produced c, then other cells."""
    c_cell = rec.cell_of_source.get(c_class.source) if c_class is not None else None

    def rank(c: StateClass) -> int:
        if rec.sources.get(c.source) in ("input", "constant"):
            return 0
        cell = rec.cell_of_source.get(c.source)
        if c_cell is not None and cell is c_cell:
            return 1
        return 2

    return sorted(classes, key=rank)


def threads(rec: Recogniser, h_class: StateClass, kind: str, w: CellWeights) -> bool:
    """A cell output read as state must come from the same cell one step earlier (same kind and weights)."""
    cell = rec.cell_of_source.get(h_class.source)
    if cell is None:
        return True
    a, b = cell.weights, w
    return cell.kind == kind and a.W.shape == b.W.shape and a.R.shape == b.R.shape and bool(np.allclose(a.W, b.W, atol=1e-6) and np.allclose(a.R, b.R, atol=1e-6) and np.allclose(a.B, b.B, atol=1e-6))
