"""The two directions of a bidirectional recurrence swapped on the way back: each slice gets the other
direction's final state (mutation survivors of rnnir/passes/coverage.py).

In its own file because the mutation tool took only the fastest covering test of each file when these
mutants were measured (before it ran the module's own test files first), and in test_pinned_coverage.py a faster test is chosen whose recurrence runs one direction."""

from __future__ import annotations

from tests.passes.test_coverage import _sd009

_BIDI_HEAD = """program @p {
  slot @h : float32[2,1,4] init=zeros
  output hn : float32[2,1,4]
  value %x : float32[T,1,3]
  value %W : float32[2,4,3]
  value %R : float32[2,4,4]
  value %i0 : int64[1] = dense<int64[1] [0]>
  value %i1 : int64[1] = dense<int64[1] [1]>
  pair h -> hn declared "both directions"
"""


def _bidi(order: str) -> str:
    return f"""
  %h = load_slot<@h, copy>()
  %y, %hn = recurrent.RNN<hidden_size=4, direction='bidirectional'>(%x, %W, %R, _, _, %h) loc{{'id': 'rnn0', 'node': 'rnn'}}
  %fw = Gather<axis=0>(%hn, %i0) loc{{'id': 'g0', 'node': 'forward_h'}}
  %bw = Gather<axis=0>(%hn, %i1) loc{{'id': 'g1', 'node': 'backward_h'}}
  %back = Concat<axis=0>({order}) loc{{'id': 'cat0', 'node': 'pack'}}
  %s = store<@h, token>(%back)
  %o = store<out:hn, value>(%back)
  return<by runtime>(%s, %o)"""


def test_the_directions_of_a_bidirectional_rnn_swapped_on_the_way_back_do_not_read_their_slices():
    found = sorted(m for m, _ in _sd009(_bidi("%bw, %fw"), _BIDI_HEAD))
    assert found == [
        "state 'h[0]' is not verified: 'h[0]' is written back with RNN 'rnn'.Y_h[1], which does not read this slice",
        "state 'h[1]' is not verified: 'h[1]' is written back with RNN 'rnn'.Y_h[0], which does not read this slice",
    ]
    assert _sd009(_bidi("%fw, %bw"), _BIDI_HEAD) == []
