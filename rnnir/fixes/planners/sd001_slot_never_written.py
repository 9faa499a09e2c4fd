"""SD001 slot-never-written's fix: return the final state of the ops that read the slot, as an output paired with it
by name (h0 -> hn), through If branches like ``--expose-state``; when the state is handed straight back, return the
final state of the op that reads each slice instead (:mod:`rnnir.fixes.final_state`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.analysis.slices import slice_maps
from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.ir.nodes import Recurrent
from rnnir.lower.pairing import _name_candidates
from rnnir.passes.rules.sd001_slot_never_written import RULE

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(
    RULE.code,
    "safe",
    "when a state input is read by forward ops and no output returns their final state: adds that output, named "
    "so it pairs with the input (h0 -> hn), through If branches like --expose-state; when the state is handed "
    "straight back: returns the final state of the op that reads each slice instead",
)


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    """A state input read by forward ops whose final state no output returns: return it, paired by name."""
    import onnx  # the edit machinery: imported when a fix is planned, not when `rnnir explain` lists it
    from onnx import helper

    from rnnir.fixes.expose import lift_final
    from rnnir.fixes.final_state import plan_final_state
    from rnnir.fixes.onnx_edit import Names, dims_of, graph_of, node_label, record_pairs
    from rnnir.fixes.state_plan import Alternative, StatePlan

    model, program, label = ctx.model, ctx.program, ctx.label
    if d.slot is None:
        return FIX.refuse(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    if pair.output is not None:  # the state is handed straight back: return the reading op's final state instead
        return plan_final_state(ctx, d, FIX)
    if len(pair.slices) != 1 or pair.slices[0].index != ():
        return FIX.refuse(d, "the slot is read in slices (packed state): rnnir does not assemble a new packed output")
    entries = [e for e in pair.slices[0].entry if e.note != "derived"]
    alternatives: list[Alternative] = []
    roles: set[str] = set()
    op_kind = ""
    for e in entries:
        rec = program.node(e.node_id)
        if not isinstance(rec, Recurrent) or rec.onnx_node is None or rec.direction != "forward":
            return FIX.refuse(d, f"{e.label} is not a forward recurrent op rnnir can edit")
        exit_port = rec.spec.exit_of(e.port)
        out_index = rec.spec.output_index(exit_port) if exit_port else None
        ref = graph_of(model, rec.onnx_node)
        if out_index is None or ref is None or any(not b.startswith(("then_branch", "else_branch")) for _, b in ref.owners):
            return FIX.refuse(d, f"the final state of {e.label} cannot be threaded out")
        node = rec.onnx_node
        final = node.output[out_index] if out_index < len(node.output) else ""
        alternatives.append(Alternative(ref, [], final, node, out_index, f"slot {pair.input!r}"))
        roles.add(next(st.role for st in rec.spec.states if st.entry == e.port))
        op_kind = rec.kind
    if not alternatives or len(roles) != 1:
        return FIX.refuse(d, "the slot is not read as one state of recurrent ops")
    if len(alternatives) > 1:
        chains = [a.graph.owners for a in alternatives]
        last = {id(c[-1][0]) if c else None for c in chains}
        if len(alternatives) != 2 or None in last or len(last) != 1 or {c[-1][1] for c in chains} != {"then_branch", "else_branch"}:
            return FIX.refuse(d, "several ops read the slot in the same call: whose final state to return is not certain")
    names = Names(model)
    out_name = next((c for c in _name_candidates(pair.input) if names.free(c)), None)
    if out_name is None:
        return FIX.refuse(d, f"no free output name pairs with {pair.input!r}")
    slot_vi = next((vi for vi in model.graph.input if vi.name == pair.input), None)
    if slot_vi is None:
        return FIX.refuse(d, f"{pair.input!r} is not a graph input")
    dtype = slot_vi.type.tensor_type.elem_type or onnx.TensorProto.FLOAT
    shape = dims_of(slot_vi.type) or []
    state = StatePlan(roles.pop(), op_kind, node_label(alternatives[0].final_node), dtype, shape, alternatives, None)
    existing = {p.input: p.output for p in program.state_pairs}

    def apply() -> None:
        final = lift_final(model, state, pair.input, names)
        model.graph.node.append(helper.make_node("Identity", [final], [out_name], name=names.fresh(f"fix_{out_name}")))
        model.graph.output.append(helper.make_tensor_value_info(out_name, dtype, shape))
        record_pairs(model, {**existing, pair.input: out_name}, label)

    edit = Edit(
        RULE.code,
        f"state input {pair.input!r}",
        f"read by {state.what}, final state not returned",
        f"graph output {out_name!r} = {'Y_h' if state.role == 'h' else 'Y_c'}, paired with {pair.input!r}",
        True,
        f"slot {pair.input!r}: returned the final state of the op that reads it",
    )
    return Plan(edit, apply)
