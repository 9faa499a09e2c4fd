"""A merged finding (the slices of one swap reported once) makes only the slices it lists violated (mutation
survivors of rnnir/passes/coverage.py).

In its own file because the mutation tool took only the fastest covering test of each file when these
mutants were measured (before it ran the module's own test files first), and in test_pinned_coverage.py a faster test is chosen whose findings name one slice or none."""

from __future__ import annotations

from rnnir.passes.diagnostics import Severity
from tests.passes.test_coverage import _made_up, _verdicts_with


def test_a_merged_finding_names_its_slices_in_a_list():
    merged = _made_up("SD003", Severity.ERROR, "state", {"slices": [{"slice": "state[1]"}, "not a slice", {"other": 1}]})
    assert _verdicts_with(merged) == {"state[0]": ("verified", ()), "state[1]": ("violated", ("SD003",))}
