"""The rule catalogue's code table: one file per rule, one registration line per rule.

Each rule is declared in its own module here, ``<code>_<slug>.py``: the :class:`~rnnir.passes.diagnostics.Rule`
constant ``RULE`` with its code, name, severity, summary, every message it words a finding with, and the doc
``rnnir explain`` prints (What it finds / Why it matters / Bad / Fixed, with ``Bad (IR)``/``Fixed (IR)`` programs
that ``tests/rules/test_docs.py`` parses and judges).  Detection stays in the family passes (a dataflow family walks
the slices once for all its rules); they import the constants they emit.

Adding a rule is its file, its fixture folder ``tests/rules/<CODE>/`` and one line of :data:`CODE_TABLE`
(``python tools/add_rule.py CODE slug family`` writes all three); the passes, ``rnnir rules``, the README's
rule table and the tests take the rule from here.
"""

from __future__ import annotations

import enum
import importlib
from dataclasses import dataclass

from rnnir.passes.diagnostics import Rule

__all__ = ["CATALOGUE", "CODE_TABLE", "Family", "RegisteredRule", "rules_of"]


class Family(enum.Enum):
    """What detects a rule: the :class:`~rnnir.passes.manager.AnalysisPass` of that name, or (``SUPPRESSION``)
    the step that judges the model's own suppressions once the passes have run (:mod:`rnnir.passes.suppression`)."""

    STORE_DESTINATIONS = "store-destinations"
    ALIASING = "aliasing"
    ORDERING = "ordering"
    STATE_COVERAGE = "state-coverage"
    SUPPRESSION = "suppression"


#: the code table, in catalogue order: (module under rnnir/passes/rules/, the family that detects it), one line a rule
CODE_TABLE: tuple[tuple[str, Family], ...] = (
    ("sd001_slot_never_written", Family.STORE_DESTINATIONS),
    ("sd002_wrong_slot", Family.STORE_DESTINATIONS),
    ("sd003_not_final_state", Family.STORE_DESTINATIONS),
    ("sd004_slot_written_twice", Family.STORE_DESTINATIONS),
    ("sd005_state_type_mismatch", Family.STORE_DESTINATIONS),
    ("sd006_reverse_state_persisted", Family.STORE_DESTINATIONS),
    ("sd007_state_ignored", Family.STORE_DESTINATIONS),
    ("sd008_seq_lens_last_step", Family.STORE_DESTINATIONS),
    ("al001_chained_output_store", Family.ALIASING),
    ("al002_output_aliases_slot", Family.ALIASING),
    ("al003_shared_slot_storage", Family.ALIASING),
    ("or001_return_before_store", Family.ORDERING),
    ("or002_write_before_last_read", Family.ORDERING),
    ("sd009_unverified_state", Family.STATE_COVERAGE),
    ("sd010_state_not_exposed", Family.STATE_COVERAGE),
    ("rn100_unused_suppression", Family.SUPPRESSION),
)


@dataclass(frozen=True)
class RegisteredRule:
    """A line of the code table, loaded: the rule, the module that declares it and the family that detects it."""

    rule: Rule
    module: str
    family: Family


def _load(module: str, family: Family) -> RegisteredRule:
    """The ``RULE`` of ``rnnir.passes.rules.<module>``, checked against the module's name (``<code>_<slug>``)."""
    declared = getattr(importlib.import_module(f"{__name__}.{module}"), "RULE", None)
    if not isinstance(declared, Rule):
        raise TypeError(f"rnnir/passes/rules/{module}.py declares no RULE = rule(...)")
    expected = f"{declared.code.lower()}_{declared.name.replace('-', '_')}"
    if module != expected:
        raise ValueError(f"rnnir/passes/rules/{module}.py declares {declared.code} {declared.name}: its file must be {expected}.py")
    return RegisteredRule(declared, module, family)


#: every registered rule, in code-table order
CATALOGUE: tuple[RegisteredRule, ...] = tuple(_load(module, family) for module, family in CODE_TABLE)


def rules_of(family: Family) -> tuple[Rule, ...]:
    """The rules ``family`` detects, in catalogue order (an analysis pass's ``rules``)."""
    return tuple(r.rule for r in CATALOGUE if r.family is family)
