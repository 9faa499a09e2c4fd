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

__all__ = ["PASSES", "RETIRED", "RULES", "explain"]

#: the default pipeline, in run order
PASSES: tuple[AnalysisPass, ...] = (StoreDestinations(), Aliasing(), Ordering(), StateCoverage())

#: code -> Rule, in catalogue order (SD001-SD008, AL, OR, SD009-SD010)
RULES: dict[str, Rule] = {r.code: r for p in PASSES for r in type(p).rules}

#: codes that were released and retired: reserved forever
RETIRED: dict[str, str] = {}


def explain(code: str) -> str:
    """The rule's docstring: what it finds, why it matters, a bad example and the fixed one."""
    key = code.strip().upper() if isinstance(code, str) else code
    rule = RULES.get(key)
    if rule is None:
        if key in RETIRED:
            raise ValueError(f"rule {key} is retired: {RETIRED[key]}")
        raise ValueError(f"unknown rule code {code!r}; known codes: {', '.join(RULES)}")
    return rule.doc
