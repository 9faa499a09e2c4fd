"""Diagnostics are data: a rule code, severity, message, locations and a hint.

Rendering (text, JSON, SARIF, GitHub annotations) happens only at the edge, in
the CLI; no pass formats its own message for a particular output.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 2, "warning": 1, "info": 0}[self.value]


@dataclass(frozen=True)
class Location:
    """Where a finding applies: IR node id, ONNX node / value names, If-branch path."""

    node: str | None = None  # IR node id
    onnx_node: str | None = None
    value: str | None = None
    branch: tuple[str, ...] = ()

    @property
    def logical(self) -> str:
        """``graph/node/value`` style name for SARIF logical locations."""
        parts = ["graph", *self.branch]
        if self.onnx_node:
            parts.append(self.onnx_node)
        if self.value:
            parts.append(self.value)
        return "/".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.onnx_node,
            "ir_node": self.node,
            "value": self.value,
            "branch": "/".join(self.branch),
        }


@dataclass(frozen=True)
class Rule:
    """A rule of the catalogue. ``doc`` is the docstring ``rnnir explain`` prints."""

    code: str
    name: str
    severity: Severity
    summary: str
    doc: str

    def diagnostic(
        self,
        message: str,
        *,
        hint: str,
        locations: Iterable[Location] = (),
        slot: str | None = None,
        severity: Severity | None = None,
        **data: Any,
    ) -> Diagnostic:
        """A finding of this rule; ``severity`` overrides the rule's default (e.g. SD003's INFO case)."""
        if not hint or "\n" in hint:
            raise ValueError(f"{self.code}: every diagnostic needs a one-line hint")
        return Diagnostic(
            code=self.code,
            name=self.name,
            severity=severity or self.severity,
            message=message,
            locations=tuple(locations),
            hint=hint,
            slot=slot,
            data=data,
        )


def rule(code: str, name: str, severity: Severity, summary: str, doc: str) -> Rule:
    """A :class:`Rule`; ``doc`` (What it finds / Why it matters / Bad / Fixed) is what ``rnnir explain`` prints.

    The rule is a module-level constant of the pass that emits it, so its text sits
    next to the code that emits it (one source of truth).  A call, not a class
    decorator, so type checkers see a ``Rule``::

        SLOT_NEVER_WRITTEN = rule("SD001", "slot-never-written", Severity.ERROR, "a slot is read but never written back", \"\"\"
            What it finds ... Why it matters ... Bad ... Fixed ...
            \"\"\")
    """
    doc = inspect.cleandoc(doc)
    if not doc:
        raise ValueError(f"rule {code} has no documentation")
    return Rule(code=code, name=name, severity=severity, summary=summary, doc=doc)


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    severity: Severity
    message: str
    locations: tuple[Location, ...] = ()
    hint: str = ""
    slot: str | None = None
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "locations": [loc.to_json() for loc in self.locations],
            "hint": self.hint,
            **({"slot": self.slot} if self.slot else {}),
        }

    def sort_key(self) -> tuple[int, str, str, str]:
        return (-self.severity.rank, self.code, self.slot or "", self.message)

    def __str__(self) -> str:
        """``node: CODE [severity] message`` and the hint indented under it, as ``rnnir lint`` prints a finding
        (``print(d)`` in a notebook or a log should read like the tool, not like a dataclass)."""
        where = next((loc.onnx_node or loc.value for loc in self.locations if loc.onnx_node or loc.value), None)
        head = f"{where}: " if where else ""
        text = f"{head}{self.code} [{self.severity.value}] {self.message}"
        return text + (f"\n  hint: {self.hint}" if self.hint else "")
