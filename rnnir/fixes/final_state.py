"""Which final state belongs to each slice of a slot, and the edit that returns the op's own final state instead of
the value written back (the repair of SD003, SD008, and of SD001 when the state is handed straight back)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx
from onnx import helper

from rnnir.analysis.slicemaps import ExitKind
from rnnir.analysis.slices import slice_maps
from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.fixes.onnx_edit import Names, name_stem, node_label, prune
from rnnir.ir.core import Program
from rnnir.ir.nodes import Recurrent
from rnnir.ir.recurrence import FINAL_OF
from rnnir.onnxio.source import iter_graphs

if TYPE_CHECKING:
    from rnnir.analysis.slicemaps import PortRef
    from rnnir.analysis.slices import TracedPair
    from rnnir.ir.attributes import TensorType
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FINAL_OF", "expected_exits", "plan_final_state", "port_key", "shape_differs", "state_shape"]


def port_key(program: Program, ref: PortRef) -> tuple[str, str, int]:
    """``(node id, port, direction)``: a one-direction op's port is direction 0 however ``ref`` names it (no
    direction, 0 or -1); a two-direction op's direction -1 is its last, 1; a ref to the whole port of a two-direction
    op (or of a plain op) is direction -1, apart from either direction."""
    node = program.node(ref.node_id)
    d = ref.direction
    if isinstance(node, Recurrent) and (d is not None or node.num_directions == 1):
        d = (d or 0) % node.num_directions  # Y_h[-1] (a Gather at -1) is the last direction
    return (ref.node_id, ref.port, -1 if d is None else d)


def state_shape(rec: Recurrent) -> tuple[int | str | None, ...]:
    """The shape of ``rec``'s initial and final states: [directions, batch, hidden], batch first for layout=1."""
    if rec.layout == 0:
        return (rec.num_directions, "batch", rec.hidden_size)
    return ("batch", rec.num_directions, rec.hidden_size)


def shape_differs(have: TensorType, want: Sequence[int | str | None]) -> bool:
    """A value of type ``have`` cannot be of shape ``want``: another rank, or a fixed dim where ``want`` fixes another
    (a symbolic or unknown dim on either side matches anything, and so does an unknown shape)."""
    if have.shape is None:
        return False
    return len(have.shape) != len(want) or any(isinstance(h, int) and isinstance(w, int) and h != w for h, w in zip(have.shape, want))


def expected_exits(program: Program, pair: TracedPair) -> dict[tuple[int, ...], set[tuple[str, str, int]]]:
    """Per slice index: the final-state ports that belong there (the finals of the ports that read it)."""
    out: dict[tuple[int, ...], set[tuple[str, str, int]]] = {}
    for sm in pair.slices:
        keys = set()
        for e in sm.entry:
            if e.note == "derived" or e.port not in FINAL_OF:
                continue
            node_id, port, d = port_key(program, e)
            keys.add((node_id, FINAL_OF[port], d))
        out[sm.index] = keys
    return out


def plan_final_state(ctx: FixContext, d: Diagnostic, info: FixInfo) -> Plan | Edit:
    """Return the final state of the op that reads each slice instead of the value written back (SD003, SD008, and
    SD001 when the state is handed straight back); ``info`` is the fix of ``d``'s rule, which words a refusal."""
    model, program = ctx.model, ctx.program
    if d.slot is None:
        return info.refuse(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    if pair.output is None:
        return info.refuse(d, "the slot has no paired output to rewrite")
    kinds = {k for sm in pair.slices for k in sm.exit_kind.values()}
    branches = {bp for sm in pair.slices for bp in sm.exit_kind}
    if branches - {""}:
        return info.refuse(d, "the value written back differs by If branch; rnnir does not rewrite branches here")
    replaceable = {ExitKind.FINAL, ExitKind.SEQUENCE, ExitKind.CONSTANT, ExitKind.PASSTHROUGH}
    if kinds - replaceable:
        odd = ", ".join(sorted(k.value for k in kinds - replaceable))
        return info.refuse(d, f"the value written back is {odd}, not a step, final state or live-in value rnnir can replace")
    handed_back = kinds == {ExitKind.PASSTHROUGH} and all(
        sm.exit_slot_refs.get(bp) == (pair.slot.name, sm.index) for sm in pair.slices for bp in sm.exit_kind
    )
    expected = expected_exits(program, pair)
    finals: list[tuple[Recurrent, str]] = []  # (op, final port) per slice, in slice order
    for sm in sorted(pair.slices, key=lambda s: s.index):
        keys = expected.get(sm.index, set())
        if len(keys) != 1:
            return info.refuse(d, f"slice {sm.label} is read by {len(keys)} ports: which final state belongs there is ambiguous")
        node_id, port, _ = next(iter(keys))
        rec = program.node(node_id)
        if not isinstance(rec, Recurrent) or rec.num_directions != 1 or rec.provenance.branch:
            return info.refuse(d, f"slice {sm.label} is read by an op inside an If branch or with two directions")
        finals.append((rec, port))
    if not finals:
        return info.refuse(d, "no recurrent op reads the slot")
    if len(finals) > 1 and any(len(sm.index) != 1 for sm in pair.slices):
        return info.refuse(d, "the slot's slices are not one per position of its first axis")
    want = state_shape(finals[0][0])
    if len(finals) > 1:  # one slice per position of axis 0, each a final state of size 1 there: stacked on axis 0 below
        want = (len(finals), *want[1:])
    if shape_differs(pair.slot.type, want):
        shape = ",".join(str(w) for w in want)
        return info.refuse(d, f"the slot is {pair.slot.type}, not the [{shape}] of the final state: rnnir does not insert the layout change")
    written_by = {r.node_id for sm in pair.slices for r in sm.exit}
    own = handed_back or (written_by and written_by <= {rec.id for rec, _ in finals} and not kinds & {ExitKind.CONSTANT, ExitKind.PASSTHROUGH})
    out_name = pair.output
    graph = model.graph
    if not any(o.name == out_name for o in graph.output) or not any(out_name in n.output for n in graph.node):
        return info.refuse(d, f"output {out_name!r} is not computed by a node of the main graph")
    names = Names(model)
    sources: list[tuple[onnx.NodeProto, int, str]] = []  # (op, output index, port) per slice
    for rec, port in finals:
        index = rec.spec.output_index(port)
        if rec.onnx_node is None or index is None:
            return info.refuse(d, f"{rec.describe()!r} is not one ONNX node with a {port} output")
        sources.append((rec.onnx_node, index, port))
    before = producer_text(graph, out_name)
    after = ", ".join(f"{node_label(n)}.{port}" for n, _, port in sources)

    def apply() -> None:
        srcs = []
        for node, i, port in sources:
            while len(node.output) <= i:
                node.output.append("")
            if not node.output[i]:
                node.output[i] = names.fresh(f"{name_stem(node_label(node))}_{port}")
            srcs.append(node.output[i])
        old = names.fresh(f"{out_name}_replaced")
        for g in iter_graphs(graph):
            for n in g.node:
                for k, nm in enumerate(n.output):
                    if nm == out_name:
                        n.output[k] = old
                for k, nm in enumerate(n.input):
                    if nm == out_name:
                        n.input[k] = old
        if len(srcs) == 1:
            graph.node.append(helper.make_node("Identity", srcs, [out_name], name=names.fresh(f"fix_{out_name}")))
        else:  # one forward op's final state per slice, each [1, batch, hidden]: they stack on axis 0
            graph.node.append(helper.make_node("Concat", srcs, [out_name], name=names.fresh(f"fix_{out_name}"), axis=0))
        prune(model, {old})

    edit = Edit(
        d.code,
        f"output {out_name!r}",
        before,
        after,
        bool(own),
        f"slot {pair.input!r}: returned the final state of the op that reads it",
    )
    return Plan(edit, apply)


def producer_text(graph: onnx.GraphProto, name: str) -> str:
    for n in graph.node:
        if name in n.output:
            ins = ", ".join(i for i in n.input if i)
            return f"{n.op_type} {node_label(n)!r}({ins})"
    return repr(name)
