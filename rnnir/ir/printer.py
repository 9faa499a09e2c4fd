"""The IR's text format, written: :func:`print_program` (``str(program)``); :mod:`rnnir.ir.text` reads it back.

The format is described in :mod:`rnnir.ir.text`.  What this module writes is what the reader accepts: names
that are not :data:`PLAIN_NAME` are JSON strings, a recurrence's fields are :data:`RECURRENT_FIELDS`, float
constants over :data:`ELIDED_FLOATS` elements print as their type only and constants over
:data:`MAX_PRINTED_ELEMENTS` not at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rnnir.ir.attributes import SlotInit, TensorType
from rnnir.ir.nodes import Compute, LoadSlot, Node, Output, Recurrent, Return, Slot, Store, Value
from rnnir.ir.recurrence import Recognition

if TYPE_CHECKING:
    from rnnir.ir.digraph import DiGraph
    from rnnir.ir.pairs import StatePair

__all__ = ["ELIDED_FLOATS", "MAX_PRINTED_ELEMENTS", "PLAIN_NAME", "RECURRENT_FIELDS", "PrintedProgram", "print_program"]

MAX_PRINTED_ELEMENTS = 4096  # the lowering keeps constants up to this size (indices, shapes, initial states)
ELIDED_FLOATS = 16  # float constants larger than this print as ``dense<float32[4,8] ...>`` and parse as zeros
#: a name written as is; any other is written (and read) as a JSON string
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
#: the fields of a recurrent node the format writes, in this order
RECURRENT_FIELDS = ("direction", "hidden_size", "layout", "activations", "activation_alpha", "activation_beta", "clip",
                    "linear_before_reset", "input_forget")


class PrintedProgram(Protocol):
    """What the printer reads of a program: :class:`rnnir.ir.core.Program` is one.  The printer names only
    these, not the class, because the program prints itself with this module."""

    @property
    def name(self) -> str: ...

    @property
    def slots(self) -> Sequence[Slot]: ...

    @property
    def outputs(self) -> Sequence[Output]: ...

    @property
    def externals(self) -> Mapping[str, Value]: ...

    @property
    def state_pairs(self) -> Sequence[StatePair]: ...

    @property
    def suggested_pairs(self) -> Sequence[StatePair]: ...

    @property
    def nodes(self) -> list[Node]: ...

    @property
    def graph(self) -> DiGraph: ...

    def node(self, node_id: str) -> Node: ...


def _name(text: str) -> str:
    return text if PLAIN_NAME.match(text) else json.dumps(text)


def _dim(d: int | str | None) -> str:
    if d is None:
        return "?"
    if isinstance(d, int):
        return str(d)
    return d if PLAIN_NAME.match(d) else json.dumps(d)


def _type(t: TensorType) -> str:
    text = (t.dtype or "?") + ("[*]" if t.shape is None else "[" + ",".join(_dim(d) for d in t.shape) + "]")
    if t.layout:
        text += f" layout={json.dumps(t.layout)}"
    if t.quant is not None:
        text += f" q(scale={list(t.quant.scale)!r}, zero={list(t.quant.zero_point)!r}, axis={t.quant.axis!r})"
    return text


def _dense(arr: np.ndarray) -> str:
    a = np.asarray(arr)
    shape = ",".join(str(d) for d in a.shape)
    if a.dtype.kind in "fc" and a.size > ELIDED_FLOATS:
        return f"dense<{a.dtype}[{shape}] ...>"  # weights: the analyses read indices and shapes, never weights
    values = [x.item() if hasattr(x, "item") else x for x in a.ravel()]
    return f"dense<{a.dtype}[{shape}] {values!r}>"


def _literal(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return _dense(v)
    if isinstance(v, np.generic):
        return repr(v.item())
    if isinstance(v, tuple):
        return repr(tuple(_plain(x) for x in v))
    if isinstance(v, list):
        return repr([_plain(x) for x in v])
    return repr(v)


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _init(init: SlotInit) -> str:
    if init.kind == "constant" and init.value is not None:
        return "constant " + _dense(np.asarray(init.value))
    return init.kind


def _operand(v: Value | None) -> str:
    return "_" if v is None else "%" + _name(v.name)


def _loc(node: Node) -> str:
    p = node.provenance
    loc: dict[str, Any] = {"id": node.id}
    if p.node:
        loc["node"] = p.node
    first = next(node.results(), None)
    if p.value and (first is None or p.value != first.name):
        loc["value"] = p.value
    if p.branch:
        loc["branch"] = tuple(p.branch)
    return f" loc{loc!r}"


def _attrs(node: Node) -> str:
    if isinstance(node, LoadSlot):
        return f"<@{_name(node.slot.name if node.slot else '?')}, {node.kind.value}>"
    if isinstance(node, Store):
        dest = "?" if node.dest is None else (f"@{_name(node.dest.name)}" if isinstance(node.dest, Slot) else f"out:{_name(node.dest.name)}")
        return f"<{dest}, {node.result.value}>"
    if isinstance(node, Return):
        return f"<by {node.layer.value}>"
    items: list[str] = []
    if isinstance(node, Recurrent):
        for f in RECURRENT_FIELDS:
            v = getattr(node, f)
            if v is not None and (v != 0 or f == "hidden_size"):
                items.append(f"{f}={_literal(v)}")
        if node.recognition is not Recognition.OP:
            items.append(f"recognition={node.recognition.value!r}")
        if node.recognised_from:
            items.append(f"recognised_from={_literal(tuple(node.recognised_from))}")
    elif isinstance(node, Compute):
        for k, v in sorted(node.attributes.items()):
            if isinstance(v, bytes):
                continue
            if isinstance(v, np.ndarray) and v.size > MAX_PRINTED_ELEMENTS:
                continue
            items.append(f"{_name(k)}={_literal(v)}")
        for rname, region in node.regions.items():
            items.append(f"region.{rname}={tuple(region.path)!r}")
    return "<" + ", ".join(items) + ">" if items else ""


def _opname(node: Node) -> str:
    if isinstance(node, Compute):
        return _name(node.op) if not node.domain else _name(f"{node.domain}.{node.op}")
    return node.opname


def _node_line(node: Node) -> str:
    outs = ", ".join(_operand(v) for v in node.outputs)
    lhs = f"{outs} = " if node.outputs else ""
    ins = ", ".join(_operand(v) for v in node.inputs)
    results = list(node.results())
    known = any(v.type.dtype or v.type.shape is not None for v in results)
    typed = ", ".join(_type(v.type) for v in results) if known and not isinstance(node, (LoadSlot, Store)) else ""
    return f"{lhs}{_opname(node)}{_attrs(node)}({ins}){_loc(node)}" + (f" : {typed}" if typed else "")


def print_program(program: PrintedProgram) -> str:
    """The program as IR text (format version 1); :func:`parse_program` reads it back."""
    lines = [f"program @{_name(program.name)} {{"]
    for s in program.slots:
        extra = ""
        if s.address != f"slot:{s.name}":
            extra += f" address {json.dumps(s.address)}"
        if s.alias_of is not None:
            extra += f" aliases {'slot' if isinstance(s.alias_of, Slot) else 'out'}:{_name(s.alias_of.name)}"
        if s.provenance.value and s.provenance.value != s.name:
            extra += f" loc {json.dumps(s.provenance.value)}"
        lines.append(f"  slot @{_name(s.name)} : {_type(s.type)} init={_init(s.init)}{extra}")
    for o in program.outputs:
        lines.append(f"  output {_name(o.name)} : {_type(o.type)}")
    used = [v for v in program.externals.values() if v.uses]
    for v in used:
        const = ""
        if v.const is not None and np.asarray(v.const).size <= MAX_PRINTED_ELEMENTS:
            const = " = " + _dense(np.asarray(v.const))
        lines.append(f"  value %{_name(v.name)} : {_type(v.type)}{const}")
    for kind, pairs in (("pair", program.state_pairs), ("suggested pair", program.suggested_pairs)):
        for p in pairs:
            out = "<nothing>" if p.output is None else _name(p.output)
            lines.append(f"  {kind} {_name(p.input)} -> {out} {p.source.value} {json.dumps(p.reason)}")
    lines.append("")
    for node in program.nodes:
        lines.append("  " + _node_line(node))
    for u, v, data in sorted(program.graph.edges(data=True)):
        if data.get("kind") == "order":
            a, b = program.node(u), program.node(v)
            lines.append(f"  order {_node_ref(a)} -> {_node_ref(b)}")
    lines.append("}")
    return "\n".join(lines)


def _node_ref(node: Node) -> str:
    """An ordering edge names a node by its first result, or by its id (``#id``) when it has none."""
    first = next(node.results(), None)
    return _operand(first) if first is not None else "#" + _name(node.id)
