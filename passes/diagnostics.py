"""Diagnostics are data: a rule code, severity, message, locations and a hint.

Rendering (text, JSON, SARIF, GitHub annotations) happens only at the edge, in
the CLI; no pass formats its own message for a particular output.
"""

from __future__ import annotations

import enum
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

    def sort_key(self) -> tuple:
        return (-self.severity.rank, self.code, self.slot or "", self.message)
