"""Analysis passes that find state-persistence bugs in an rnnir Program.

    import rnnir
    from rnnir import passes
    prog = rnnir.load("model.onnx")
    for d in passes.run(prog, ignore=["SD006"]):
        print(d.code, d.severity.value, d.message, "--", d.hint)
    print(passes.explain("SD002"))
    print(passes.cost(prog).to_json())

Every pass is an analysis: it reads the program and returns diagnostics, never
a new or changed program (the manager checks this around every pass).  The
rule catalogue (codes, slugs, docstrings) is :data:`RULES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rnnir.ir import Program

from .catalogue import PASSES, RULES, explain, rule_for
from .cost import CostReport, cost
from .coverage import STRICT_CODES, RecurrenceState, RecurrenceVerdict, SliceVerdict, Verdict, recurrence_verdicts, slice_verdicts
from .diagnostics import Diagnostic, Location, Rule, Severity
from .manager import AnalysisPass, PassContractError, PassManager, SelectionError

__all__ = [
    "RULES",
    "STRICT_CODES",
    "AnalysisPass",
    "CostReport",
    "Diagnostic",
    "Location",
    "PassContractError",
    "PassManager",
    "RecurrenceState",
    "RecurrenceVerdict",
    "Rule",
    "SelectionError",
    "Severity",
    "SliceVerdict",
    "Verdict",
    "Verification",
    "cost",
    "explain",
    "rule_for",
    "run",
    "verify",
]


def _manager(select: Sequence[str] | None, ignore: Sequence[str] | None, strict: bool) -> PassManager:
    severity = dict.fromkeys(STRICT_CODES, Severity.ERROR) if strict else {}
    return PassManager(PASSES, select=tuple(select) if select is not None else None, ignore=tuple(ignore) if ignore is not None else None, severity=severity)


def run(program: Program, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None, *, strict: bool = False) -> list[Diagnostic]:
    """Every selected rule over ``program``, sorted by :meth:`Diagnostic.sort_key`; the program is never changed.

    ``select``/``ignore`` take rule codes or code prefixes (``"SD"``, ``"OR001"``);
    a pattern that matches no rule raises :class:`SelectionError` (a ``ValueError``).
    ``strict`` makes what rnnir could not verify an error (:data:`STRICT_CODES`: SD009, SD010).
    """
    return _manager(select, ignore, strict).run(program)


@dataclass(frozen=True)
class Verification:
    """What rnnir concluded about one program: the findings, and a verdict per state slice and per recurrence."""

    diagnostics: list[Diagnostic]
    slices: list[SliceVerdict]
    recurrences: list[RecurrenceVerdict]

    def count(self, verdict: Verdict) -> int:
        return sum(1 for s in self.slices if s.verdict is verdict)

    @property
    def all_verified(self) -> bool:
        return all(s.verdict is Verdict.VERIFIED for s in self.slices)

    def to_json(self) -> dict[str, Any]:
        return {
            "slices": [s.to_json() for s in self.slices],
            "recurrences": [r.to_json() for r in self.recurrences],
            "verified": self.count(Verdict.VERIFIED),
            "violated": self.count(Verdict.VIOLATED),
            "unverified": self.count(Verdict.UNVERIFIED),
        }


def verify(program: Program, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None, *, strict: bool = False) -> Verification:
    """:func:`run` plus verdicts: every state slice verified, violated or unverified (with the reason),
    every recurrence stateful, stateless by design or with its state not exposed.

    Verdicts come from every rule whatever the selection (a slice is violated when any rule reports it);
    ``diagnostics`` holds only the selected findings.
    """
    manager = _manager(select, ignore, strict)
    every, facts = manager.run_with_facts(program, every_pass=True)
    codes = manager.codes
    return Verification([d for d in every if d.code in codes], slice_verdicts(facts, every), recurrence_verdicts(facts))
