"""SD002 wrong-slot's fix: put the operands of the Concat that assembles the state back in the order the slot's
slices are read, when every slice has exactly one operand that belongs there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.analysis.slices import _port_ref, slice_maps, slot_store_value
from rnnir.analysis.tracer import Origin, OriginKind, Ref, Tracer
from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.ir.nodes import Compute, Value
from rnnir.passes.rules.sd002_wrong_slot import RULE
from rnnir.render.escape import printable

if TYPE_CHECKING:
    import onnx

    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(
    RULE.code,
    "safe",
    "puts the operands of the Concat that assembles the state back in the order the slot's slices are read "
    "(h/c swapped, layers or directions swapped), when every slice has exactly one operand that belongs there",
)


def assembling_concats(value: Value) -> list[Compute]:
    """Concat(axis=0) nodes that build ``value`` through value-preserving ops and If branches."""
    found: list[Compute] = []
    stack: list[Value | None] = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        p = v.producer
        if not isinstance(p, Compute):
            continue
        if p.op == "Concat" and int(p.attributes.get("axis", 0)) == 0:
            found.append(p)
        elif p.op in ("Identity", "Cast"):
            stack.append(p.inputs[0])
        elif p.op == "If":
            k = p.outputs.index(v)
            stack.extend(p.branch_yields(r)[k] for r in ("then_branch", "else_branch"))
    return found


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    from rnnir.fixes.final_state import expected_exits, port_key  # onnx: imported when a fix is planned, not when listed
    from rnnir.fixes.onnx_edit import node_label

    program = ctx.program
    if d.slot is None:
        return FIX.refuse(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    slot = pair.slot
    value = slot_store_value(program, slot, pair.output)
    if value is None:
        return FIX.refuse(d, "no value is written back into the slot")
    expected = expected_exits(program, pair)
    tr = Tracer(program)
    plans: list[tuple[Compute, list[int]]] = []
    for concat in assembling_concats(value):
        operands: list[tuple[int, list[tuple[str, str, int]]]] = []
        for k, v in enumerate(concat.inputs):
            a = tr.trace(v)
            elems = tr.to_elems(a)
            if elems is None:
                return FIX.refuse(d, f"operand {k} of Concat {concat.describe()!r} is not a layout-only slice of final states")
            keys = []
            for r in elems:
                if r.origin.kind is not OriginKind.PORT:
                    return FIX.refuse(d, f"operand {k} of Concat {concat.describe()!r} is not a final state")
                keys.append(port_key(program, _port_ref(tr, tr.canon(r), ())))
            operands.append((k, keys))
        order: list[int] = []
        pos = 0
        left = list(operands)
        while left:
            fits = [
                (k, keys)
                for k, keys in left
                if all(keys[j] in expected.get(tr.canon(Ref(Origin.of_slot(slot.name), (pos + j,))).index, set()) for j in range(len(keys)))
            ]
            if len(fits) != 1:
                why = "no operand belongs" if not fits else "several operands could belong"
                return FIX.refuse(d, f"{why} at position {pos} of Concat {concat.describe()!r}")
            order.append(fits[0][0])
            pos += len(fits[0][1])
            left.remove(fits[0])
        if order != sorted(order):
            plans.append((concat, order))
    if not plans:
        return FIX.refuse(d, "the wrong slice is not assembled by a Concat whose operands can be reordered")
    rewrites: list[tuple[onnx.NodeProto, list[str], list[str]]] = []  # (Concat, inputs before, inputs after)
    for concat, order in plans:
        if concat.onnx_node is None:
            return FIX.refuse(d, f"Concat {concat.describe()!r} has no ONNX node to edit")
        names = list(concat.onnx_node.input)
        rewrites.append((concat.onnx_node, names, [names[k] for k in order]))

    def apply() -> None:
        for node, _, new in rewrites:
            del node.input[:]
            node.input.extend(new)

    first_node, first_before, first_after = rewrites[0]
    more = f" (and {len(rewrites) - 1} more Concat)" if len(rewrites) > 1 else ""
    edit = Edit(
        RULE.code,
        f"Concat {node_label(first_node)!r}{more}",
        f"inputs ({', '.join(map(printable, first_before))})",
        f"inputs ({', '.join(map(printable, first_after))})",
        True,
        f"slot {pair.input!r}: wrote each final state back into the slice its op reads",
    )
    return Plan(edit, apply)
