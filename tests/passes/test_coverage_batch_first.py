"""A batch-first recurrence's state has no direction on the way in and one on the way out, and is still
verified (mutation survivors of rnnir/passes/coverage.py).

In its own file because the mutation tool took only the fastest covering test of each file when these
mutants were measured (before it ran the module's own test files first), and in test_pinned_coverage.py a faster test is chosen whose recurrence has a direction on both sides."""

from __future__ import annotations

from tests.passes.test_coverage import _sd009, _slices


def test_an_rnn_with_the_batch_first_layout_reading_and_writing_back_the_slot_is_verified():
    # layout=1: the initial state is [batch, directions, hidden], so its entry has no direction; the exit has one
    body = """
  %h = load_slot<@h, copy>()
  %y, %hn = recurrent.RNN<hidden_size=4, layout=1>(%x, %W, %R, _, _, %h) loc{'id': 'rnn0', 'node': 'rnn'}
  %s = store<@h, token>(%hn)
  %o = store<out:hn, value>(%hn)
  return<by runtime>(%s, %o)"""
    assert _slices(body) == {"h": ("verified", "", None)} and _sd009(body) == []
