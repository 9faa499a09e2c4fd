"""The state's journey through one call: the picture ``rnnir show`` draws by default.

A real model's program has hundreds of nodes, most of them moving the state
around (Gather, Unsqueeze, Squeeze, Identity, Concat) inside nested ``If``
branches.  The journey keeps only what a reader needs to see the fan-out:

* **boxes**: slots, slot loads, recurrences, stores, outputs;
* **arrows**: a slot into its load, a store into its slot or output, and one
  arrow for every way a value travels between two boxes, with the ops on the
  way and the If branches folded into the arrow's label
  (``state[0] → initial_h`` / ``via Gather, Unsqueeze``).  An arrow through an
  op that changes the value (anything but a layout-only op) says so, since
  that is where a written-back state stops being the final state.

Shape-only uses of the state (``Shape``, ``Size``, ``ConstantOfShape``) and an
``If``'s condition carry none of the state's values and are not arrows.
``rnnir show --full`` draws the whole program instead (:func:`full_picture`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from rnnir.analysis.slices import slice_maps
from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.render.escape import printable

if TYPE_CHECKING:
    from rnnir.ir.core import Program
    from rnnir.ir.nodes import Node, Value


class BoxKind(Enum):
    SLOT = "slot"
    OUTPUT = "output"
    LOAD = "load"
    RECURRENT = "recurrent"
    STORE = "store"
    COMPUTE = "compute"
    OTHER = "other"


class ArrowKind(Enum):
    DATA = "data"  # a value flows (possibly through folded layout-only ops)
    CHANGED = "changed"  # a value flows through at least one op that changes it
    ORDER = "order"  # an explicit ordering edge
    READ = "read"  # a slot into its load
    WRITE = "write"  # a store into its slot or output


@dataclass(frozen=True)
class Box:
    key: str
    kind: BoxKind
    label: str


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    kind: ArrowKind
    label: str = ""


@dataclass(frozen=True)
class Picture:
    """What the Graphviz and Mermaid renderers draw."""

    name: str
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]


#: ops whose result holds none of their input's values (only its shape), so the state does not travel through them
_SHAPE_ONLY = ops_with(OpTrait.SHAPE_ONLY) | {"ConstantOfShape", "EyeLike"}
#: ops that only move elements: folded into an arrow without marking the value changed
_LAYOUT = ops_with(OpTrait.LAYOUT)


@dataclass(frozen=True)
class _Way:
    """How values get from one box's port to a value: the op types passed (in order) and those changing the value."""

    ops: tuple[str, ...] = ()
    changed: frozenset[str] = frozenset()

    def merged(self, other: _Way) -> _Way:
        return _Way(self.ops + tuple(op for op in other.ops if op not in self.ops), self.changed | other.changed)

    def through(self, op: str, layout: bool) -> _Way:
        ops = self.ops if op in self.ops else self.ops + (op,)
        return _Way(ops, self.changed if layout else self.changed | {op})


def _is_box(node: Node) -> bool:
    from rnnir.ir.nodes import LoadSlot, Recurrent, Store

    return isinstance(node, (LoadSlot, Recurrent, Store))


def _port(node: Node, value: Value, position: int, outgoing: bool) -> str:
    from rnnir.ir.nodes import Recurrent, Store

    if isinstance(node, Recurrent):
        return node.port_of(value) or (f"out{position}" if outgoing else f"in{position}")
    if isinstance(node, Store):
        return "store result" if outgoing else "value"  # outgoing: a chain, the store's result read again
    return ""


def short_branch(branch: Iterable[str]) -> str:
    """``('If_0.else_branch', 'x/decoder/If_1.then_branch')`` → ``If_0.else › If_1.then``."""
    parts = [b.rsplit("/", 1)[-1].removesuffix("_branch") for b in branch]
    return " › ".join(parts)


def _slice_labels(program: Program) -> dict[tuple[str, str], list[str]]:
    """(recurrent node id, port) -> the slot slices entering or leaving through it (``state[0]``)."""
    found: dict[tuple[str, str], list[str]] = {}
    for pair in slice_maps(program).declared:
        for sl in pair.slices:
            for ref in (*sl.entry, *sl.exit):
                labels = found.setdefault((ref.node_id, ref.port), [])
                if shown(sl.label) not in labels:
                    labels.append(shown(sl.label))
    return found


def journey(program: Program) -> Picture:
    """The state's journey (see the module docstring)."""
    from rnnir.ir.nodes import Compute, LoadSlot, Recurrent, Store

    reach: dict[int, dict[tuple[str, str], _Way]] = {}  # id(value) -> (box id, port) -> way

    def sources(value: Value) -> dict[tuple[str, str], _Way]:
        # iterative post-order: a deep chain of layout ops must not hit Python's recursion limit
        stack = [value]
        while stack:
            v = stack[-1]
            if id(v) in reach:
                stack.pop()
                continue
            node = v.producer
            if node is None:
                reach[id(v)] = {}
                stack.pop()
                continue
            if _is_box(node):
                reach[id(v)] = {(node.id, _port(node, v, v.index, outgoing=True)): _Way()}
                stack.pop()
                continue
            op = node.op if isinstance(node, Compute) else node.opname
            if op in _SHAPE_ONLY:
                operands: list[Value] = []
            elif op == "If" and isinstance(node, Compute):  # output i is then_yields[i] or else_yields[i]; the condition carries no state
                n = len(node.outputs)
                operands = [x for x in (node.inputs[1 + v.index], node.inputs[1 + n + v.index]) if x is not None]
            else:
                operands = [x for x in node.inputs if x is not None]
            pending = [x for x in operands if id(x) not in reach]
            if pending:
                stack.extend(pending)
                continue
            found: dict[tuple[str, str], _Way] = {}
            for x in operands:
                for key, way in reach[id(x)].items():
                    step = way if op == "If" else way.through(op, op in _LAYOUT)
                    found[key] = found[key].merged(step) if key in found else step
            reach[id(v)] = found
            stack.pop()
        return reach[id(value)]

    slices = _slice_labels(program)
    arrows: list[Arrow] = []
    used_outputs: set[str] = set()
    inner: dict[BoxKind, list[Box]] = {BoxKind.LOAD: [], BoxKind.RECURRENT: [], BoxKind.STORE: []}
    flows: dict[tuple[str, str], list[tuple[str, _Way]]] = {}  # (source box, target box) -> (head, way) per port pair
    fed_by_slot: set[str] = set()
    # a value read by two or more stores is the fan-out itself: drawn as one junction box feeding each store
    readers: dict[int, list[Store]] = {}
    for st in program.stores:
        if st.value is not None:
            readers.setdefault(id(st.value), []).append(st)
    junctions: dict[int, Box] = {}
    for node in program.nodes:
        if not _is_box(node):
            continue
        if isinstance(node, LoadSlot):
            name = node.slot.name if node.slot is not None else "?"
            inner[BoxKind.LOAD].append(Box(node.id, BoxKind.LOAD, f"load {shown(name)}"))
            if node.slot is not None:
                arrows.append(Arrow(f"slot:{node.slot.name}", node.id, ArrowKind.READ))
            continue
        if isinstance(node, Recurrent):
            ports = [(node.spec.inputs[i] if i < len(node.spec.inputs) else f"in{i}", v) for i, v in enumerate(node.inputs)]
        else:
            assert isinstance(node, Store)
            dest = node.dest
            target = "?" if dest is None else (f"slot {shown(dest.name)}" if node.to_slot else f"output {shown(dest.name)}")
            inner[BoxKind.STORE].append(Box(node.id, BoxKind.STORE, f"store → {target}"))
            if dest is not None:
                arrows.append(Arrow(node.id, ("slot:" if node.to_slot else "out:") + dest.name, ArrowKind.WRITE, "read by the next call" if node.to_slot else ""))
                if not node.to_slot:
                    used_outputs.add(dest.name)
            ports = [("value", node.value)]
            value = node.value
            if value is not None and len(readers.get(id(value), ())) > 1:
                junction = junctions.get(id(value))
                if junction is None:
                    fans = readers[id(value)]
                    junction = Box(f"value:{value.name}", BoxKind.COMPUTE, f"fan-out: %{shown(value.name)}\nread by {len(fans)} stores")
                    junctions[id(value)] = junction
                    # the slot store names the slices; the arrows into the junction use its names
                    named = next((st for st in fans if st.to_slot), fans[0])
                    for (src, src_port), way in sources(value).items():
                        flows.setdefault((src, junction.key), []).append((_arrow_head(src, src_port, named, "value", slices), way))
                arrows.append(Arrow(junction.key, node.id, ArrowKind.DATA))
                continue
        for port, value in ports:
            if value is None:
                continue
            for (src, src_port), way in sources(value).items():
                flows.setdefault((src, node.id), []).append((_arrow_head(src, src_port, node, port, slices), way))
                if isinstance(program.node(src), LoadSlot):
                    fed_by_slot.add(node.id)
    for rec in program.recurrents:
        where = short_branch(rec.provenance.branch)
        lines = [f"{rec.kind} {short_name(rec.describe())}", f"{rec.direction}, hidden {rec.hidden_size}"]
        if where:
            lines.append(f"in {where}")
        if rec.id not in fed_by_slot:
            lines.append("state in: not from a slot")
        inner[BoxKind.RECURRENT].append(Box(rec.id, BoxKind.RECURRENT, "\n".join(lines)))
    for (src, dst), parts in flows.items():
        way = parts[0][1]
        for _, other in parts[1:]:
            way = way.merged(other)
        heads = list(dict.fromkeys(h for h, _ in parts if h))
        arrows.append(Arrow(src, dst, ArrowKind.CHANGED if way.changed else ArrowKind.DATA, _arrow_label(heads, way)))
    drawn = {b.key for kind in inner.values() for b in kind}
    for u, v, d in program.graph.edges(data=True):  # explicit orderings between drawn boxes: what OR rules are about
        if d.get("kind") != "data" and u in drawn and v in drawn:
            arrows.append(Arrow(u, v, ArrowKind.ORDER, "runs first"))
    boxes = [Box(f"slot:{s.name}", BoxKind.SLOT, f"slot {shown(s.name)}\n{s.type}") for s in program.slots]
    boxes += [b for kind in (BoxKind.LOAD, BoxKind.RECURRENT) for b in inner[kind]]
    boxes += list(junctions.values()) + inner[BoxKind.STORE]
    boxes += [Box(f"out:{o.name}", BoxKind.OUTPUT, f"output {shown(o.name)}\n{o.type}") for o in program.outputs if o.name in used_outputs]
    return Picture(program.name, tuple(boxes), tuple(arrows))


def short_name(name: str) -> str:
    """An ONNX node name without the inlining prefixes: ``If_0_then_branch__Inline_0__/decoder/rnn/LSTM`` → ``decoder/rnn/LSTM``."""
    return shown(name.rsplit("__/", 1)[-1] if "__/" in name else name)


def shown(name: str) -> str:
    """A name as a picture shows it: control characters escaped (``\\n``), since labels break lines at real newlines
    (:func:`rnnir.render.printable`, the one escaping every printed name goes through)."""
    return printable(name)


def _arrow_head(src: str, src_port: str, dst: Node, dst_port: str, slices: dict[tuple[str, str], list[str]]) -> str:
    """``state[0] → initial_h`` into a recurrence, ``Y_h → stateN[0]`` into a store, else the two ports."""
    from rnnir.ir.nodes import Store

    dst_slices = slices.get((dst.id, dst_port), [])
    if dst_slices:  # into a recurrence: which slice of the slot enters this port
        return f"{' + '.join(dst_slices)} → {dst_port}"
    src_slices = slices.get((src, src_port), [])
    if src_slices and isinstance(dst, Store) and dst.dest is not None:  # written back: which slice it becomes
        where = [s[s.index("[") :] if "[" in s else "" for s in src_slices]
        return f"{src_port} → " + " + ".join(shown(dst.dest.name) + w for w in where)
    return " → ".join(p for p in (src_port, "" if dst_port == "value" else dst_port) if p)


def _arrow_label(heads: list[str], way: _Way) -> str:
    """The port pairs, one a line, then the ops folded into the arrow; value-changing ops named as such."""
    lines = list(heads)
    if way.ops:
        shown = list(way.ops[:6]) + ([f"+{len(way.ops) - 6} more"] if len(way.ops) > 6 else [])
        lines.append("via " + ", ".join(shown))
    if way.changed:
        changed = sorted(way.changed)
        lines.append("value changed by " + ", ".join(changed[:4]) + (" …" if len(changed) > 4 else ""))
    return "\n".join(lines)


def full_picture(program: Program) -> Picture:
    """Every node of the program (``rnnir show --full``): boxes per node, arrows per graph edge."""
    from rnnir.ir.nodes import Compute, LoadSlot, Recurrent, Store

    kinds = {LoadSlot: BoxKind.LOAD, Recurrent: BoxKind.RECURRENT, Store: BoxKind.STORE, Compute: BoxKind.COMPUTE}
    boxes = [Box(f"slot:{s.name}", BoxKind.SLOT, f"slot {shown(s.name)}") for s in program.slots]
    boxes += [Box(f"out:{o.name}", BoxKind.OUTPUT, f"output {shown(o.name)}") for o in program.outputs]
    arrows: list[Arrow] = []
    for node in program.nodes:
        kind = kinds.get(type(node), BoxKind.OTHER)
        label = f"store {node._attrs_text()}" if isinstance(node, Store) else node.opname
        boxes.append(Box(node.id, kind, f"{shown(label)}\n{shown(node.describe())}"))
        if isinstance(node, LoadSlot) and node.slot is not None:
            arrows.append(Arrow(f"slot:{node.slot.name}", node.id, ArrowKind.READ))
        if isinstance(node, Store) and node.dest is not None:
            arrows.append(Arrow(node.id, ("slot:" if node.to_slot else "out:") + node.dest.name, ArrowKind.WRITE))
    edges = [Arrow(u, v, ArrowKind.DATA if d.get("kind") == "data" else ArrowKind.ORDER) for u, v, d in program.graph.edges(data=True)]
    return Picture(program.name, tuple(boxes), tuple(edges + arrows))


def journey_text(program: Program) -> str:
    """The journey as text: one line per box, its incoming arrows indented under it."""
    pic = journey(program)
    incoming: dict[str, list[Arrow]] = {}
    for a in pic.arrows:
        incoming.setdefault(a.target, []).append(a)
    names = {b.key: b.label.split("\n", 1)[0] + "".join(f" ({x})" for x in b.label.split("\n")[1:] if x.startswith("in ")) for b in pic.boxes}
    lines = [f"state journey of @{shown(program.name)} ({len(program)} nodes; rnnir show --full for all of them)"]
    for pair in program.state_pairs:
        lines.append(f"  pair {shown(str(pair))}")
    if not program.state_pairs:
        lines.append("  no state pairs: nothing persists across calls")
    for b in pic.boxes:
        lines.append("  " + b.label.replace("\n", "; "))
        for a in incoming.get(b.key, []):
            how = a.label.replace("\n", "; ")
            lines.append(f"    <- {names.get(a.source, a.source)}" + (f": {how}" if how else ""))
    return "\n".join(lines)
