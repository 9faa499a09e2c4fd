"""Diagnostics are data: a rule code, severity, message, locations and a hint.

Rendering (text, JSON, SARIF, GitHub annotations) happens only at the edge, in
the CLI; no pass formats its own message for a particular output.
"""

from __future__ import annotations

import enum
import functools
import inspect
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rnnir.util.fastinit import fast_init

if TYPE_CHECKING:
    from rnnir.ir.nodes import LoadSlot, Node, Return, Store


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 2, "warning": 1, "info": 0}[self.value]


@functools.cache
def _ir_node_kinds() -> tuple[type[LoadSlot], type[Return], type[Store]]:
    """The IR node classes :func:`onnx_node_of` tells apart, imported on first use (once: it runs per finding)."""
    from rnnir.ir.nodes import LoadSlot, Return, Store

    return LoadSlot, Return, Store


def onnx_node_of(node: Node) -> str | None:
    """The ONNX node a finding about IR node ``node`` points at: the node it was lowered from; for a store (which
    no ONNX graph has) the node that produced the stored value, such as the Concat that packs the state; None
    when no ONNX node stands behind it (a slot load, the Return, a store of a loaded value, a program written as
    IR text without ``node`` provenance)."""
    LoadSlot, Return, Store = _ir_node_kinds()  # noqa: N806 - the classes, under their own names
    current: Node | None = node
    while isinstance(current, Store):  # a chain of stores (AL001) leads back to the value first stored; a DAG has no cycle
        value = current.value
        current = value.producer if value is not None else None
    if current is None or isinstance(current, (LoadSlot, Return)):
        return None
    return current.provenance.node


@fast_init
@dataclass(frozen=True)
class Location:
    """Where a finding applies: IR node id, ONNX node / value names, If-branch path.

    ``onnx_node`` is always a node of the ONNX graph (or None), never an id rnnir made up; ``node`` is the IR
    node id beside it (``ir_node`` in JSON), which a program written as IR text shows as ``loc{'id': ...}``.
    """

    node: str | None = None  # IR node id
    onnx_node: str | None = None
    value: str | None = None
    branch: tuple[str, ...] = ()

    @classmethod
    def at(cls, node: Node, value: str | None = None) -> Location:
        """The location of IR node ``node``: its ONNX node (see :func:`onnx_node_of`), ``value``, its branch."""
        return cls(node=node.id, onnx_node=onnx_node_of(node), value=value, branch=tuple(node.provenance.branch))

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
class Message:
    """One way a rule words a finding: ``str.format`` templates for the message and its one-line hint.

    Fields are named (``{slot!r}``, ``{here}``); :meth:`Rule.diagnostic` refuses a finding that
    leaves a field out or passes one no template uses, so a template and its call site cannot
    drift apart.  ``slot`` is the diagnostic's own slot, available to every template.

    With a ``consequence`` the message is slice-level: it reads ``slot 'x': <text>: <consequence>``
    and the findings of one rule on one slot merge into one diagnostic (:func:`merge_slices`), so
    the two slices of a swap are one finding.  ``severity`` overrides the rule's default (SD003's
    warnings).
    """

    text: str
    hint: str
    consequence: str | None = None
    severity: Severity | None = None

    def __post_init__(self) -> None:
        if not self.hint or "\n" in self.hint:
            raise ValueError(f"message {self.text!r}: every diagnostic needs a one-line hint")

    @property
    def fields(self) -> frozenset[str]:
        """The names the templates format (``slot`` included when they use it)."""
        templates = (self.text, self.hint, self.consequence or "")
        return frozenset(name for t in templates for _, name, _, _ in string.Formatter().parse(t) if name)


@dataclass(frozen=True)
class Rule:
    """A rule of the catalogue. ``doc`` is the docstring ``rnnir explain`` prints; ``messages`` are its words."""

    code: str
    name: str
    severity: Severity
    summary: str
    doc: str
    messages: Mapping[str, Message] = field(default_factory=dict, compare=False, hash=False)

    def diagnostic(
        self,
        message: str,
        *,
        locations: Iterable[Location] = (),
        slot: str | None = None,
        data: Mapping[str, Any] | None = None,
        **fields: object,
    ) -> Diagnostic:
        """A finding of this rule worded by its message ``message`` (a key of :attr:`messages`) with ``fields``.

        ``data`` is machine-readable detail kept on the diagnostic (``Diagnostic.data``), never shown.
        """
        words = self.messages.get(message)
        if words is None:
            raise ValueError(f"{self.code}: no message {message!r}; it has {', '.join(self.messages) or 'none'}")
        given = set(fields) | ({"slot"} if slot is not None else set())
        needed = words.fields
        if not needed <= given or not set(fields) <= needed:
            missing = ", ".join(sorted(needed - given)) or "none"
            unused = ", ".join(sorted(set(fields) - needed)) or "none"
            raise ValueError(f"{self.code} {message}: fields do not match the message (missing: {missing}; unused: {unused})")
        values = {**fields, "slot": slot}
        text = words.text.format(**values)
        hint = words.hint.format(**values)
        # the template is one line (Message checks it): a line break here came from a model's name
        hint = hint.replace("\r", "\\r").replace("\n", "\\n")
        extra = dict(data or {})
        if words.consequence is not None:
            if slot is None:
                raise ValueError(f"{self.code} {message}: a slice-level message needs its slot")
            consequence = words.consequence.format(**values)
            extra = {**extra, "part": text, "consequence": consequence}
            text = f"slot {slot!r}: {text}: {consequence}"
        return Diagnostic(
            code=self.code,
            name=self.name,
            severity=words.severity or self.severity,
            message=text,
            locations=tuple(locations),
            hint=hint,
            slot=slot,
            data=extra,
        )


def rule(code: str, name: str, severity: Severity, summary: str, doc: str, *, messages: Mapping[str, Message] | None = None) -> Rule:
    """A :class:`Rule`; ``doc`` (What it finds / Why it matters / Bad / Fixed) is what ``rnnir explain`` prints.

    The rule is the ``RULE`` constant of its own file under :mod:`rnnir.passes.rules`, with every message it
    words a finding with, so its text sits in one place and the code that finds a bug only names the
    message and fills its fields.  A call, not a class decorator, so type checkers see a ``Rule``::

        RULE = rule("SD001", "slot-never-written", Severity.ERROR, "a slot is read but never written back", \"\"\"
            What it finds ... Why it matters ... Bad ... Fixed ...
            \"\"\", messages={
            "no-store": Message("slot {slot!r} is loaded but no store writes it back", hint="store the final state into {slot!r}"),
        })
        RULE.diagnostic("no-store", slot="h", locations=[...])
    """
    doc = inspect.cleandoc(doc)
    if not doc:
        raise ValueError(f"rule {code} has no documentation")
    return Rule(code=code, name=name, severity=severity, summary=summary, doc=doc, messages=dict(messages or {}))


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


def merge_slices(diags: list[Diagnostic]) -> list[Diagnostic]:
    """One diagnostic per (rule, slot, severity) for slice-level findings: the slices of a swap are one finding, not two.

    Findings worded by a slice-level :class:`Message` (they carry ``part``/``consequence``) merge into
    ``slot 'x': <part>; <part>: <consequence>``; any other finding passes through as it is.
    """
    groups: dict[tuple[str, str | None, Severity], list[Diagnostic]] = {}
    for d in diags:
        groups.setdefault((d.code, d.slot, d.severity), []).append(d)
    out: list[Diagnostic] = []
    for (code, slot, severity), group in groups.items():
        if len(group) == 1 or not all("part" in d.data for d in group):
            out.extend(group)
            continue
        parts = list(dict.fromkeys(str(d.data["part"]) for d in group))
        consequence = "; ".join(dict.fromkeys(str(d.data["consequence"]) for d in group))
        hints = list(dict.fromkeys(d.hint for d in group))
        locs = list(dict.fromkeys(loc for d in group for loc in d.locations))
        out.append(
            Diagnostic(
                code=code,
                name=group[0].name,
                severity=severity,
                message=f"slot {slot!r}: " + "; ".join(parts) + f": {consequence}",
                locations=tuple(locs),
                hint=hints[0] if len(hints) == 1 else "; ".join(hints),
                slot=slot,
                data={"slices": [dict(d.data) for d in group]},
            )
        )
    return out
