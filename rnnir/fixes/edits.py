"""What a fix is and what it produces: its declaration (:class:`FixInfo`), a planned repair (:class:`Plan`),
the edits it makes (:class:`Edit`) and the result of :func:`rnnir.fix` (:class:`FixResult`).

Imports neither onnx nor numpy (the ONNX types are annotations only), so the fix catalogue that ``rnnir explain``
reads can declare every fix without paying for the model-editing machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rnnir.errors import RnnirError

if TYPE_CHECKING:
    import onnx

    from rnnir.ir.core import Program
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["EXPOSE", "Edit", "FixContext", "FixError", "FixInfo", "FixResult", "Plan", "refusal", "subject"]

#: the code of the edits ``expose_state`` makes (no rule: the model's author asked for them)
EXPOSE = "EXPOSE"


class FixError(RnnirError):
    """A fix cannot be made (a model rnnir cannot edit safely, or an edit that breaks the model)."""


@dataclass(frozen=True)
class Edit:
    """One change to the model: which rule (or ``EXPOSE``), what it touched, before and after."""

    code: str
    target: str  # node, value or metadata key edited
    before: str
    after: str
    safe: bool
    message: str
    applied: bool = True
    reason: str = ""  # why a fix was not applied
    fixable: bool = True  # False: rnnir found no certain edit at all (``reason`` says why), not just an unsafe one

    def __str__(self) -> str:
        kind = "safe" if self.safe else "unsafe"
        if not self.fixable:
            return f"{self.code} [no fix] {self.message}: {self.reason}"
        if not self.applied:
            return f"{self.code} [{kind}, not applied] {self.message}: {self.reason}"
        return f"{self.code} [{kind}] {self.message}: {self.target}: {self.before} -> {self.after}"

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "target": self.target,
            "before": self.before,
            "after": self.after,
            "safe": self.safe,
            "message": self.message,
            "applied": self.applied,
            "fixable": self.fixable,
            **({"reason": self.reason} if self.reason else {}),
        }


@dataclass
class FixResult:
    """The edited model, the edits applied and the fixes found but not applied (with their reason)."""

    model: onnx.ModelProto
    edits: list[Edit] = field(default_factory=list)
    skipped: list[Edit] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.edits)


@dataclass
class Plan:
    """A planned repair: the edit it makes and the function that makes it on the working model."""

    edit: Edit
    apply: Callable[[], list[Edit] | None]  # returns the detailed edits it made, when there are several


@dataclass(frozen=True)
class FixContext:
    """What a planner plans on: the working model (edited in place by ``Plan.apply``), the program lowered from it
    as it now is, the declared pairs and the model's label for messages."""

    model: onnx.ModelProto
    program: Program
    pairs: Mapping[str, str | None] | None
    label: str


def subject(d: Diagnostic) -> str:
    """What a finding is about, from its structured fields: its slot, else where it points."""
    if d.slot is not None:
        return f"slot {d.slot!r}"
    return next((loc.onnx_node or loc.value for loc in d.locations if loc.onnx_node or loc.value), None) or d.code


def refusal(d: Diagnostic, reason: str, *, safe: bool, what: str | None = None) -> Edit:
    """The fix of ``d`` that rnnir cannot make, and why (``what``: the finding's subject, default :func:`subject`)."""
    what = subject(d) if what is None else what
    return Edit(d.code, what, "", "", safe, f"{d.code} on {what}", applied=False, reason=reason, fixable=False)


@dataclass(frozen=True)
class FixInfo:
    """What the fix of one rule does and whether it is safe (``rnnir explain`` prints it)."""

    code: str
    safe: str  # "safe", "unsafe" or "safe or unsafe"
    text: str
    #: the fix also repairs the rule's warnings (SD010's warning is exactly what exposing the state repairs); other
    #: fixes repair errors only (SD003's info and warnings say rnnir cannot prove a computed write-back: nothing to fix)
    repairs_warnings: bool = False
    #: the fix is what ``fix(expose_state=True)`` does: asked for that way, it is done with the caller's options
    exposes_state: bool = False

    def refuse(self, d: Diagnostic, reason: str, what: str | None = None) -> Edit:
        """This fix cannot be made for ``d``, because of ``reason``."""
        return refusal(d, reason, safe=self.safe == "safe", what=what)
