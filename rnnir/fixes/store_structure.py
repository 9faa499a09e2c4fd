"""The fixes of the store structure an rnnir export records as IR text (``rnnir.ir`` metadata): AL001, AL002, AL003,
OR001, OR002 and SD004.  onnxruntime ignores the stores, so these edits never change an output.

Each rule's planner edits the program's :class:`~rnnir.ir.structure.StoreStructure` (which store reads what, which
slots share storage, what the Return waits for); applying the plan lowers the graph with the edited stores and
records the new program's IR text in place of the old."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan
from rnnir.ir.structure import StoreStructure, structure_of
from rnnir.lower import Policy, lower
from rnnir.onnxio.metadata import META_IR
from rnnir.onnxio.metadata import read as metadata
from rnnir.onnxio.metadata import write as _set_meta
from rnnir.onnxio.source import read_model

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["StructureChange", "plan_structure_edit"]


@dataclass(frozen=True)
class StructureChange:
    """What a planner changed in the store structure, for the edit's text."""

    what: str
    before: str
    after: str


#: a rule's edit of the store structure, made in place: what it changed, or why it cannot
StructureEdit = Callable[[StoreStructure, "Diagnostic"], "StructureChange | str"]


def plan_structure_edit(ctx: FixContext, d: Diagnostic, info: FixInfo, message: str, edit: StructureEdit) -> Plan | Edit:
    """Plan ``edit`` of the recorded store structure for finding ``d``; ``message`` says what the fixed model does."""
    model, label = ctx.model, ctx.label
    if META_IR not in metadata(model):
        return info.refuse(d, f"the store structure is not recorded in the model ({META_IR} metadata): it comes from a lowering policy")
    spec = structure_of(ctx.program)
    change = edit(spec, d)
    if isinstance(change, str):
        return info.refuse(d, change)

    def apply() -> None:
        from rnnir.ir.text import print_program  # numpy: here, so `rnnir explain` lists these fixes without it

        fixed = lower(read_model(model, label=label), None, Policy(), structure=spec)
        _set_meta(model, META_IR, print_program(fixed))

    edit_made = Edit(d.code, f"{META_IR} {change.what}", change.before, change.after, True, f"slot {d.slot!r}: {message}")
    return Plan(edit_made, apply)
