"""Analysis passes that find state-persistence bugs in an rnnir Program.

    import rnnir, passes
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

from rnnir.ir import Program

from .catalogue import PASSES, RULES, explain
from .cost import CostReport, cost
from .diagnostics import Diagnostic, Location, Rule, Severity
from .manager import AnalysisPass, PassContractError, PassManager, SelectionError

__all__ = [
    "RULES",
    "AnalysisPass",
    "CostReport",
    "Diagnostic",
    "Location",
    "PassContractError",
    "PassManager",
    "Rule",
    "SelectionError",
    "Severity",
    "cost",
    "explain",
    "run",
]


def run(program: Program, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None) -> list[Diagnostic]:
    """Every selected rule over ``program``, sorted by :meth:`Diagnostic.sort_key`; the program is never changed.

    ``select``/``ignore`` take rule codes or code prefixes (``"SD"``, ``"OR001"``);
    a pattern that matches no rule raises :class:`SelectionError` (a ``ValueError``).
    """
    return PassManager(PASSES, select=select, ignore=ignore).run(program)
