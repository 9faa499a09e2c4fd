"""The rule catalogue: every pass in run order, every rule by code, and ``explain``.

Codes are stable: a rule never changes meaning once released, and a retired
rule keeps its code reserved (listed in :data:`RETIRED`, never reused).
"""

from __future__ import annotations

from collections.abc import Iterable

from rnnir.passes.aliasing import Aliasing
from rnnir.passes.coverage import StateCoverage
from rnnir.passes.diagnostics import Rule
from rnnir.passes.manager import AnalysisPass, SelectionError
from rnnir.passes.ordering import Ordering
from rnnir.passes.rules import CATALOGUE
from rnnir.passes.store_destinations import StoreDestinations

__all__ = ["PASSES", "RETIRED", "RULES", "check_selectors", "explain", "rule_for", "selector_code"]

#: the default pipeline, in run order
PASSES: tuple[AnalysisPass, ...] = (StoreDestinations(), Aliasing(), Ordering(), StateCoverage())

#: code -> Rule, in the order of the code table (:data:`rnnir.passes.rules.CODE_TABLE`, one file a rule);
#: RN100 (unused-suppression) is no pass's: it judges the model's own suppression list once the passes have run
RULES: dict[str, Rule] = {r.rule.code: r.rule for r in CATALOGUE}

#: codes that were released and retired: reserved forever
RETIRED: dict[str, str] = {}


def rule_for(code_or_name: str) -> Rule:
    """The rule a code (``SD002``) or a name (``wrong-slot``) refers to, either case-insensitively."""
    key = code_or_name.strip() if isinstance(code_or_name, str) else code_or_name
    if isinstance(key, str):
        by_code = RULES.get(key.upper())
        if by_code is not None:
            return by_code
        by_name = _rule_named(key)
        if by_name is not None:
            return by_name
        if key.upper() in RETIRED:
            raise ValueError(f"rule {key.upper()} is retired: {RETIRED[key.upper()]}")
    known = ", ".join(f"{r.code} {r.name}" for r in RULES.values())
    raise ValueError(f"unknown rule code {code_or_name!r}: neither a rule code nor a rule name; known rules: {known}")


def _rule_named(name: str) -> Rule | None:
    """The rule whose name (slug) is ``name``, in any case and with ``_`` for ``-``; None for no rule."""
    key = name.strip().lower().replace("_", "-")
    return next((r for r in RULES.values() if r.name == key), None)


def selector_code(selector: str) -> str:
    """A rule selector (``--select``, ``--ignore``, ``--extend-select``, a configuration's ``select``/``ignore``/
    ``per-file-ignores``, ``passes.run(select=...)``) as the code or code prefix it stands for: a rule name
    (``wrong-slot``, any case) is its rule's code (``SD002``), a code or prefix is upper-cased (``sd`` -> ``SD``).
    Whether it matches any rule is the selection's check, which names the selector as typed when it does not."""
    key = selector.strip()
    rule = _rule_named(key)
    if rule is not None:
        return rule.code
    return key.upper() if key.isalnum() else key  # not a code's shape: kept as typed for the error message


def check_selectors(selectors: Iterable[str], what: str, known: Iterable[str] | None = None) -> None:
    """Raise :class:`SelectionError` naming ``what`` (``--select``, ``pyproject.toml: select``) and every selector
    (as :func:`selector_code` read it) that is neither a code of ``known`` (default: :data:`RULES`) nor a prefix of one."""
    codes = sorted(RULES if known is None else known)
    unknown = [s for s in selectors if not s or not any(code.startswith(s) for code in codes)]
    if unknown:
        raise SelectionError(
            f"{what}: unknown rule code, prefix or name {', '.join(map(repr, unknown))}; known codes: {', '.join(codes)} "
            "(or their names: `rnnir rules` lists both)"
        )


def explain(code: str) -> str:
    """The rule's docstring: what it finds, why it matters, a bad example and the fixed one.

    ``code`` is a rule code (``SD002``) or its name (``wrong-slot``), in any case.
    """
    return rule_for(code).doc
