"""A slot loaded and never written back still gets a verdict (mutation survivors of rnnir/passes/coverage.py).

In its own file because the mutation tool took only the fastest covering test of each file when these
mutants were measured (before it ran the module's own test files first), and in test_pinned_coverage.py a faster test that covers the same lines (and cannot see this fallback) is chosen."""

from __future__ import annotations

from tests.passes.test_coverage import _sd009, _slices


def test_a_slot_loaded_and_never_written_back_still_gets_a_verdict_and_sd009_says_nothing_is_written_back():
    # no store, no recurrence: the slot has no slice map at all, so the verdicts fall back to the whole slot
    body = """
  %h = load_slot<@h, copy>()
  return<by runtime>()"""
    (verdict, reason, where) = _slices(body)["h"]
    assert (verdict, where) == ("violated", "h") and reason.startswith("slot 'h' is loaded but no store writes it back")
    assert _sd009(body) == [("state 'h' is not verified: nothing is written back into 'h'", (None,))]
