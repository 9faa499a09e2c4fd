"""A recurrence that reads a state input is stateful (mutation survivors of rnnir/passes/coverage.py).

In its own file because the mutation tool took only the fastest covering test of each file when these
mutants were measured (before it ran the module's own test files first), and in test_pinned_coverage.py a faster test whose recurrence also writes state back is chosen, which cannot tell
"reads a state input" from "writes a state output"."""

from __future__ import annotations

from rnnir import passes
from tests.passes.test_coverage import _HEAD, _RNN_READS_H, _prog


def test_a_recurrence_reading_the_slot_whose_final_state_is_only_returned_is_stateful():
    # hn is returned but a constant goes back into the slot: the op still reads a state input, so it is
    # exposed (SD003 reports the constant), not "starts afresh" and not a writer
    body = _RNN_READS_H + """
  %s = store<@h, token>(%zeros)
  %o = store<out:hn, value>(%hn)
  return<by runtime>(%s, %o)"""
    v = passes.verify(_prog(body, _HEAD))
    assert [(r.node, r.state.value, r.reason) for r in v.recurrences] == [("rnn", "stateful", "reads a state input")]
    assert "SD010" not in [d.code for d in v.diagnostics]
