"""SD010 state-not-exposed's fix: expose the state as ``rnnir fix --expose-state`` does (:mod:`rnnir.fixes.expose`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, FixResult, Plan, subject
from rnnir.passes.rules.sd010_state_not_exposed import RULE

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

FIX = FixInfo(
    RULE.code,
    "unsafe",
    "exposes the state as `rnnir fix --expose-state` does: a state input wired to the op's initial state, paired with "
    "the final state the model already returns; unsafe because the new input changes the model's interface "
    "(callers must feed it back)",
    repairs_warnings=True,
    exposes_state=True,
)


def _recurrence(d: Diagnostic) -> str:
    """The recurrence the finding is about, from the ``kind`` and ``node`` the rule records in ``d.data``."""
    kind, node = d.data.get("kind"), d.data.get("node")
    if isinstance(kind, str) and isinstance(node, str):
        return f"{kind} {node!r} starts afresh on every call"
    return subject(d)


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    import onnx  # the edit machinery: imported when a fix is planned, not when `rnnir explain` lists it

    from rnnir.fixes.expose import expose

    model, pairs, label = ctx.model, ctx.pairs, ctx.label
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    trial = FixResult(probe)
    expose(probe, trial, packed=False, defaults=False, pairs=pairs, label=label)
    if not trial.edits:
        reasons = "; ".join(f"{e.target}: {e.reason}" for e in trial.skipped) or "no recurrence rnnir can expose"
        return FIX.refuse(d, reasons, what=_recurrence(d))

    def apply() -> list[Edit]:
        done = FixResult(model)
        expose(model, done, packed=False, defaults=False, pairs=pairs, label=label)
        return done.edits

    edit = Edit(
        RULE.code,
        "recurrences that start from zeros",
        "final state returned, initial state absent or constant",
        "state input/output pairs (see the EXPOSE edits)",
        False,
        _recurrence(d),
    )
    return Plan(edit, apply)
