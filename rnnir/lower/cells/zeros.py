"""Zero initial states: the zeros a cell starts from when the model keeps no state, found near the graph outputs
and decided from the protobuf where possible (numpy costs more to import than linting most models)."""

from __future__ import annotations

import array
import struct
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rnnir.lower.cells.net import Net
from rnnir.lower.cells.ops import OUTPUT_DEPTH, OUTPUT_VALUES, STATE_READS, VIEW_OPS, ZERO_MAKERS, Key
from rnnir.lower.scope import Definition
from rnnir.onnxio.proto import ATTR, EXTERNAL, surely_converts, tensor_ints

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np

#: float element types the standard library can read (array / struct codes), for :func:`_surely_not_zero_state`
_STDLIB_FLOATS = {1: ("f", "float_data"), 11: ("d", "double_data"), 10: ("e", "")}

#: float element types (float32, float16, float64) numpy reports as floating
_FLOAT_TYPES = frozenset({1, 10, 11})


def output_region(net: Net) -> set[Key]:
    """Values at most ``OUTPUT_DEPTH`` ops back from the main graph's outputs (at most ``OUTPUT_VALUES``).

    A cell whose new state is returned (SD010) or written back (SD007) lies a few ops before an output; looking
    only here keeps the search for constant initial states bounded, whatever the model's size.
    """
    root = net.index.root
    frontier = [net.key(root, o.name) for o in root.graph.output if o.name]
    seen = set(frontier)
    for _ in range(OUTPUT_DEPTH):
        nxt: list[Key] = []
        for k in frontier:
            d = net.d(k)
            if d.kind != "node" or d.node is None:
                continue
            ins = net.inputs(k)
            if d.node.op_type == "If":  # what the branches yield in this output's place (silero's cells are in one)
                for attr in ("then_branch", "else_branch"):
                    branch = d.scope.children.get((id(d.node), attr))
                    if branch is not None and d.index < len(branch.graph.output):
                        ins.append(net.key(branch, branch.graph.output[d.index].name))
            for i in ins:
                if i is None or i in seen:
                    continue
                if len(seen) >= OUTPUT_VALUES:
                    return seen
                seen.add(i)
                nxt.append(i)
        frontier = nxt
    return seen


def constant_states(net: Net, region: set[Key], sources: Mapping[Key, str]) -> list[Key]:
    """Float constants of zeros, at least [batch, hidden], that reach a product or a concatenation through
    layout-only ops: the initial state a cell is given when the model keeps no state (or ignores the caller's).

    Only zeros: a constant that is not zero is a weight or a bias, never a state the model forgot. The topmost
    values made by ``ConstantOfShape``/``Constant``/``Expand``/``Tile`` or held in an initializer count: a zero
    computed from them (``R @ 0``, ``Unsqueeze(0)``) is a view or a part of the cell, not another state.
    """
    found: list[Key] = []
    for k in sorted(region):
        if k in sources:
            continue
        d = net.d(k)
        if d.kind == "node":
            if d.node is None or d.node.op_type not in ZERO_MAKERS or d.node.domain not in ("", "ai.onnx"):
                continue  # computed from zeros (R @ 0 is zeros too): the zeros it is computed from are the state
        elif d.kind != "initializer":
            continue
        # the cheap structural test first: a weight read by a matmul is never read as state, and is never copied
        if not _read_as_state(net, k):
            continue
        if _surely_not_zero_state(d):
            continue
        c = net.const(k)
        if c is not None and np.issubdtype(c.dtype, np.floating) and c.ndim >= 2 and c.size and not np.any(c):
            found.append(k)
    return found


def _read_as_state(net: Net, k: Key) -> bool:
    """``k`` meets run-time data in a product, a matmul's data operand or a concatenation, maybe through views."""
    frontier = [k]
    for _ in range(4):
        nxt: list[Key] = []
        for v in frontier:
            name = net.name(v)
            d = net.d(v)
            node_op = net.index.node_op
            for node in net.index.consumers.get(name, ()):
                # the op first (from the index, no protobuf read): a weight shared by 50,000 nodes is read by
                # few that matter here, and finding a reader's scope is the expensive part
                op, dom = node_op[id(node)]
                if dom not in ("", "ai.onnx"):
                    continue
                reads = op in STATE_READS
                views = op in VIEW_OPS
                if not (reads or views):
                    continue
                first = node.input[0] if node.input else ""
                if op in ("MatMul", "Gemm") and first != name:
                    continue  # v is the weight operand, not the data
                if not reads and first != name:
                    continue
                sc = net.scope_of(node, d.scope)
                if sc is None or net.key(sc, name) != v:
                    continue  # a reader of another value of the same name (a subgraph's own)
                if reads:
                    return True
                nxt.extend(o for o in net.outputs_of(node, sc) if o is not None)
        frontier = nxt
    return False


def _constant_of_shape_not_zero_state(d: Definition) -> bool:
    """:func:`_surely_not_zero_state` for a ``ConstantOfShape``: its fill value is no float (an int64 0 pads a
    signal), or its shape input, a constant, has rank below 2 or no elements."""
    node = d.node
    assert node is not None
    value = next((a for a in node.attribute if a.name == "value"), None)
    if value is not None:
        if value.type != ATTR.TENSOR or not surely_converts(value.t):
            return False
        if value.t.data_type not in _FLOAT_TYPES:
            return True  # evaluate.py keeps an integer fill's dtype: never a float zero state
    if not node.input or not node.input[0]:
        return False
    shape = d.scope.resolve(node.input[0])
    t = shape.tensor if shape.kind == "initializer" else _attr_tensor_of_constant(shape)
    dims = tensor_ints(t) if t is not None else None
    if dims is None:
        return False
    return len(dims) < 2 or any(x == 0 for x in dims)


def _attr_tensor_of_constant(d: Definition) -> onnx.TensorProto | None:
    if d.kind != "node" or d.node is None or d.node.op_type != "Constant" or d.node.domain not in ("", "ai.onnx"):
        return None
    attrs = list(d.node.attribute)
    if len(attrs) == 1 and attrs[0].name == "value" and attrs[0].type == ATTR.TENSOR:
        tensor: onnx.TensorProto = attrs[0].t
        return tensor
    return None


def _surely_not_zero_state(d: Definition) -> bool:
    """The tensor of initializer or ``Constant`` ``d`` is certainly no float zeros of rank >= 2, decided from the
    protobuf alone (numpy costs more to import than linting most models; weights are the usual suspects here).

    False means "evaluate it": rank, size and values are checked exactly as numpy would (``-0.0`` is zero too).
    """
    t = d.tensor if d.kind == "initializer" else None
    if d.kind == "node" and d.node is not None and d.node.op_type == "ConstantOfShape":
        return _constant_of_shape_not_zero_state(d)
    if d.kind == "node" and d.node is not None and d.node.op_type == "Constant":
        attrs = list(d.node.attribute)
        if len(attrs) != 1:
            return False
        if attrs[0].name in ("value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings"):
            return True  # a scalar or a vector: rank below 2
        if attrs[0].name != "value" or attrs[0].type != ATTR.TENSOR:
            return False
        t = attrs[0].t
    if t is None or t.data_location == EXTERNAL or t.HasField("segment") or sys.byteorder != "little":
        return False
    if len(t.dims) < 2:
        return True
    kind = _STDLIB_FLOATS.get(t.data_type)
    if kind is None:
        return False
    code, field_name = kind
    if t.HasField("raw_data"):
        raw = t.raw_data
        width = struct.calcsize(code)
        if len(raw) % width:
            return False
        return any(x[0] for x in struct.iter_unpack("<" + code, raw)) if code == "e" else any(array.array(code, raw))
    return bool(field_name) and any(getattr(t, field_name))
