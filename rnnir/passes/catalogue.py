"""The rule catalogue: every pass in run order, every rule by code, and ``explain``.

Codes are stable: a rule never changes meaning once released, and a retired
rule keeps its code reserved (listed in :data:`RETIRED`, never reused).
"""

from __future__ import annotations

from .aliasing import Aliasing
from .coverage import StateCoverage
from .diagnostics import Rule
from .manager import AnalysisPass
from .ordering import Ordering
from .store_destinations import StoreDestinations
from .suppression import UNUSED_SUPPRESSION

__all__ = ["PASSES", "RETIRED", "RULES", "explain", "rule_for"]

#: the default pipeline, in run order
PASSES: tuple[AnalysisPass, ...] = (StoreDestinations(), Aliasing(), Ordering(), StateCoverage())

#: code -> Rule, in catalogue order (SD001-SD008, AL, OR, SD009-SD010, then RN100); RN100 (unused-suppression)
#: is no pass's: it judges the model's own suppression list once the passes have run (passes/suppression.py)
RULES: dict[str, Rule] = {**{r.code: r for p in PASSES for r in type(p).rules}, UNUSED_SUPPRESSION.code: UNUSED_SUPPRESSION}

#: codes that were released and retired: reserved forever
RETIRED: dict[str, str] = {}


def rule_for(code_or_name: str) -> Rule:
    """The rule a code (``SD002``) or a name (``wrong-slot``) refers to, either case-insensitively."""
    key = code_or_name.strip() if isinstance(code_or_name, str) else code_or_name
    if isinstance(key, str):
        by_code = RULES.get(key.upper())
        if by_code is not None:
            return by_code
        by_name = next((r for r in RULES.values() if r.name == key.lower().replace("_", "-")), None)
        if by_name is not None:
            return by_name
        if key.upper() in RETIRED:
            raise ValueError(f"rule {key.upper()} is retired: {RETIRED[key.upper()]}")
    known = ", ".join(f"{r.code} {r.name}" for r in RULES.values())
    raise ValueError(f"unknown rule code {code_or_name!r}: neither a rule code nor a rule name; known rules: {known}")


def explain(code: str) -> str:
    """The rule's docstring: what it finds, why it matters, a bad example and the fixed one.

    ``code`` is a rule code (``SD002``) or its name (``wrong-slot``), in any case.
    """
    return rule_for(code).doc
