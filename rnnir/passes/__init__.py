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
from dataclasses import dataclass, field
from typing import Any

from rnnir.ir.core import Program
from rnnir.passes.catalogue import PASSES, RULES, explain, rule_for, selector_code
from rnnir.passes.cost import CostReport, cost
from rnnir.passes.coverage import (
    STRICT_CODES,
    RecurrenceState,
    RecurrenceVerdict,
    SliceVerdict,
    Verdict,
    recurrence_verdicts,
    slice_verdicts,
)
from rnnir.passes.diagnostics import Diagnostic, Location, Message, Rule, Severity
from rnnir.passes.manager import AnalysisPass, PassContractError, PassManager, SelectionError, selected_codes
from rnnir.passes.suppression import UNUSED_SUPPRESSION, Suppression, apply_suppressions, suppressions_of

__all__ = [
    "RULES",
    "STRICT_CODES",
    "AnalysisPass",
    "CostReport",
    "Diagnostic",
    "Location",
    "Message",
    "PassContractError",
    "PassManager",
    "RecurrenceState",
    "RecurrenceVerdict",
    "Rule",
    "SelectionError",
    "Severity",
    "SliceVerdict",
    "Suppression",
    "UNUSED_SUPPRESSION",
    "Verdict",
    "Verification",
    "cost",
    "explain",
    "rule_for",
    "run",
    "verify",
]


def _manager(select: Sequence[str] | None, ignore: Sequence[str] | None, strict: bool) -> tuple[PassManager, set[str]]:
    """The manager of the passes' selected rules, and every selected code of the catalogue (RN100 is no pass's)."""
    codes = selected_codes(
        RULES,
        tuple(map(selector_code, select)) if select is not None else None,  # rule names (wrong-slot) as their codes
        tuple(map(selector_code, ignore)) if ignore is not None else None,
    )
    pass_codes = tuple(sorted(codes & {c for p in PASSES for c in p.codes()}))
    severity = dict.fromkeys(STRICT_CODES, Severity.ERROR) if strict else {}
    return PassManager(PASSES, select=pass_codes, severity=severity), codes


def run(
    program: Program, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None, *, strict: bool = False, noqa: bool = True
) -> list[Diagnostic]:
    """Every selected rule over ``program``, sorted by :meth:`Diagnostic.sort_key`; the program is never changed.

    ``select``/``ignore`` take rule codes, code prefixes or rule names (``"SD"``, ``"OR001"``, ``"wrong-slot"``);
    a pattern that matches no rule raises :class:`SelectionError` (a ``ValueError``).
    ``strict`` makes what rnnir could not verify an error (:data:`STRICT_CODES`: SD009, SD010).
    ``noqa``: honour the suppressions the model stores (``metadata_props`` ``rnnir.noqa``) and report unused
    ones as RN100 (see :mod:`rnnir.passes.suppression`); ``False`` reports every finding.
    """
    manager, codes = _manager(select, ignore, strict)
    found = manager.run(program)
    if not noqa:
        return found
    return apply_suppressions(found, suppressions_of(program), ran=manager.codes, selected=codes, known=RULES).kept


@dataclass(frozen=True)
class Verification:
    """What rnnir concluded about one program: the findings, and a verdict per state slice and per recurrence."""

    diagnostics: list[Diagnostic]
    slices: list[SliceVerdict]
    recurrences: list[RecurrenceVerdict]
    suppressed: list[Diagnostic] = field(default_factory=list)  # selected findings the model's own suppressions hide

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


def verify(
    program: Program, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None, *, strict: bool = False, noqa: bool = True
) -> Verification:
    """:func:`run` plus verdicts: every state slice verified, violated or unverified (with the reason),
    every recurrence stateful, stateless by design or with its state not exposed.

    Verdicts come from every rule whatever the selection (a slice is violated when any rule reports it,
    suppressed or not); ``diagnostics`` holds only the selected findings the model does not suppress,
    ``suppressed`` the selected ones it does.  Every rule runs here, so a suppression is judged used or
    unused (RN100) against all of them, not only the selected ones.
    """
    manager, codes = _manager(select, ignore, strict)
    every, facts = manager.run_with_facts(program, every_pass=True)
    if noqa:
        outcome = apply_suppressions(every, suppressions_of(program), ran={c for p in PASSES for c in p.codes()}, selected=codes, known=RULES)
        kept, suppressed = outcome.kept, outcome.suppressed
    else:
        kept, suppressed = [d for d in every if d.code in codes], []
    return Verification(kept, slice_verdicts(facts, every), recurrence_verdicts(facts), suppressed)
