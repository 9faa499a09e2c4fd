"""The model's own ``# noqa``, pinned in-process (mutation survivors of rnnir/passes/suppression.py).

The findings are made up by each test (code, slot, node), so which suppression matches which finding, and
which entries are reported unused (RN100) with which words, is read off the test, not off the code.
``test_lint_suppression.py`` runs the same behaviour through the CLI in a subprocess, which the mutation
tracer cannot follow.
"""

from __future__ import annotations

import pytest

from rnnir.passes.diagnostics import Diagnostic, Location, Severity
from rnnir.passes.suppression import Suppression, apply_suppressions

KNOWN = ("SD001", "SD002", "SD009", "RN100")
HINT = "remove it: rnnir fix MODEL --unsuppress {!r} --in-place"


def _finding(code: str, slot: str | None = None, node: str | None = None) -> Diagnostic:
    return Diagnostic(code, "made-up", Severity.ERROR, f"{code} at {node or slot}", (Location(onnx_node=node),) if node else (), slot=slot)


def _apply(found, entries, *, ran=("SD001", "SD002", "SD009"), selected=KNOWN, known=KNOWN):
    outcome = apply_suppressions(found, [Suppression.parse(e) for e in entries], ran=ran, selected=selected, known=known)
    return [(d.code, d.message) for d in outcome.kept], [(d.code, d.message) for d in outcome.suppressed]


@pytest.mark.parametrize(
    ("text", "code", "node"),
    [
        ("SD002", "SD002", None),
        (" sd002 ", "SD002", None),
        ("SD002:", "SD002", None),  # a colon with no name after it is the whole rule, not a name ""
        ("sd002:/lstm/LSTM", "SD002", "/lstm/LSTM"),
        ("SD002:onnx::LSTM_94", "SD002", "onnx::LSTM_94"),  # names may hold ':'; codes never do
    ],
)
def test_an_entry_is_a_code_in_upper_case_and_an_optional_name(text, code, node):
    s = Suppression.parse(text)
    assert (s.code, s.node) == (code, node)
    assert s.text == (code if node is None else f"{code}:{node}")


def test_an_entry_ending_in_a_colon_suppresses_every_finding_of_its_rule():
    kept, suppressed = _apply([_finding("SD002", "h", "/a"), _finding("SD002", "c", "/b")], ["SD002:"])
    assert kept == [] and [c for c, _ in suppressed] == ["SD002", "SD002"]


def test_an_entry_naming_a_node_matches_no_finding_elsewhere_and_is_reported_with_the_node():
    kept, suppressed = _apply([_finding("SD002", "h", "/other")], ["SD002:/lstm/LSTM"])
    message = "suppression 'SD002:/lstm/LSTM' in metadata_props 'rnnir.noqa' matches no SD002 finding naming '/lstm/LSTM'"
    assert kept == [("SD002", "SD002 at /other"), ("RN100", message)] and suppressed == []


def test_the_words_of_each_kind_of_unused_entry():
    outcome = apply_suppressions(
        [], [Suppression.parse(e) for e in ("SD001", "SD001:/x", "XX123")], ran=["SD001"], selected=KNOWN, known=KNOWN
    )
    assert sorted((d.message, d.hint) for d in outcome.kept) == [
        ("suppression 'SD001' in metadata_props 'rnnir.noqa' matches no SD001 finding", HINT.format("SD001")),
        ("suppression 'SD001:/x' in metadata_props 'rnnir.noqa' matches no SD001 finding naming '/x'", HINT.format("SD001:/x")),
        ("suppression 'XX123' in metadata_props 'rnnir.noqa' names 'XX123', which is not a rule code", HINT.format("XX123")),
    ]
    assert {d.code for d in outcome.kept} == {"RN100"}


def test_an_entry_whose_rule_did_not_run_is_not_judged_and_one_whose_rule_ran_is():
    assert _apply([], ["SD002"], ran=["SD001"]) == ([], [])
    assert _apply([], ["SD002"], ran=["SD001", "SD002"]) == (
        [("RN100", "suppression 'SD002' in metadata_props 'rnnir.noqa' matches no SD002 finding")], [],
    )


def test_an_rn100_entry_is_never_reported_unused_even_when_rn100_counts_as_run():
    assert _apply([], ["RN100"], ran=KNOWN) == ([], [])
    assert _apply([], ["RN100:anything"], ran=KNOWN) == ([], [])


def test_a_plain_rn100_entry_suppresses_the_other_entries_rn100_and_a_named_one_does_not():
    unused = ("RN100", "suppression 'SD002' in metadata_props 'rnnir.noqa' matches no SD002 finding")
    assert _apply([], ["SD002", "RN100"]) == ([], [unused])
    # an RN100 finding names no node, so "RN100:NAME" matches none: the stale SD002 entry is still reported
    assert _apply([], ["SD002", "RN100:/lstm/LSTM"]) == ([unused], [])


def test_near_miss_without_rn100_selected_no_entry_is_reported():
    assert _apply([_finding("SD001", "h")], ["SD002", "XX123"], selected=("SD001",)) == ([("SD001", "SD001 at h")], [])
