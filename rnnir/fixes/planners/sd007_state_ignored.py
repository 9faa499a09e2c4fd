"""SD007 state-ignored's fix: feed the state input to the initial-state port of the op whose final state the slot
gets, instead of the constant it starts from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.analysis.slices import slice_maps
from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.ir.nodes import Recurrent
from rnnir.passes.rules.sd007_state_ignored import RULE

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(
    RULE.code,
    "unsafe",
    "feeds the state input to the initial-state port of the op whose final state it gets, instead of the "
    "constant; unsafe because starting from the constant may be a deliberate reset",
)


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    """The op whose final state a slot gets starts from a constant: feed it the slot instead (unsafe: a reset?)."""
    from rnnir.fixes.final_state import shape_differs, state_shape  # onnx: imported when a fix is planned, not when listed
    from rnnir.fixes.onnx_edit import node_label, prune

    model, program = ctx.model, ctx.program
    if d.slot is None:
        return FIX.refuse(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    if len(pair.slices) != 1 or pair.slices[0].index != () or pair.slices[0].entry:
        return FIX.refuse(d, "the slot is read in slices, or read at all: which port it should feed is not certain")
    exits = {(r.node_id, r.port) for r in pair.slices[0].exit if r.note != "derived"}
    if len(exits) != 1:
        return FIX.refuse(d, "the value written back comes from several ports")
    node_id, port = next(iter(exits))
    rec = program.node(node_id)
    if not isinstance(rec, Recurrent) or rec.onnx_node is None or rec.num_directions != 1:
        return FIX.refuse(d, "the op is not a one-direction recurrent op rnnir can edit")
    entry = rec.spec.entry_of(port)
    index = rec.spec.input_index(entry) if entry else None
    if index is None:
        return FIX.refuse(d, f"{port} has no initial-state port")
    # the slot is fed as it is: a slot of another layout (written back through Unsqueeze, say) needs the inverse
    # layout op first, which rnnir does not build; onnxruntime would reject the initial state's shape
    want = state_shape(rec)
    if shape_differs(pair.slot.type, want):
        shape = ",".join(str(w) for w in want)
        return FIX.refuse(d, f"the slot is {pair.slot.type}, not the [{shape}] of {entry}: rnnir does not insert the layout change")
    node = rec.onnx_node
    old = node.input[index] if index < len(node.input) else ""

    def apply() -> None:
        while len(node.input) <= index:
            node.input.append("")
        node.input[index] = pair.input
        if old:
            prune(model, {old})

    edit = Edit(
        RULE.code,
        f"{rec.kind} {node_label(node)!r}.{entry}",
        repr(old) if old else "absent (zeros)",
        repr(pair.input),
        False,
        f"slot {pair.input!r}: fed the state input to the op whose final state it gets",
    )
    return Plan(edit, apply)
