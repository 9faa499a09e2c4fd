"""An LSTM's h and c swapped on the way back: each slot gets a final state that does not read it (mutation
survivors of rnnir/passes/coverage.py).

In its own file because the mutation tool took only the fastest covering test of each file when these
mutants were measured (before it ran the module's own test files first), and in test_pinned_coverage.py a faster test is chosen whose recurrence has one state port."""

from __future__ import annotations

from tests.passes.test_coverage import _sd009

_LSTM_HEAD = """program @p {
  slot @h0 : float32[1,1,4] init=zeros
  slot @c0 : float32[1,1,4] init=zeros
  output hn : float32[1,1,4]
  output cn : float32[1,1,4]
  value %x : float32[T,1,3]
  value %W : float32[1,16,3]
  value %R : float32[1,16,4]
  pair h0 -> hn declared "h"
  pair c0 -> cn declared "c"
"""


def _lstm(h_back: str, c_back: str) -> str:
    return f"""
  %h0 = load_slot<@h0, copy>()
  %c0 = load_slot<@c0, copy>()
  %y, %yh, %yc = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h0, %c0) loc{{'id': 'l0', 'node': 'lstm'}}
  %sh = store<@h0, token>({h_back})
  %oh = store<out:hn, value>({h_back})
  %sc = store<@c0, token>({c_back})
  %oc = store<out:cn, value>({c_back})
  return<by runtime>(%sh, %oh, %sc, %oc)"""


def test_h_and_c_swapped_on_the_way_back_each_is_written_back_with_a_state_that_does_not_read_it():
    found = sorted(m for m, _ in _sd009(_lstm("%yc", "%yh"), _LSTM_HEAD))
    assert found == [
        "state 'c0' is not verified: 'c0' is written back with LSTM 'lstm'.Y_h[0], which does not read this slice",
        "state 'h0' is not verified: 'h0' is written back with LSTM 'lstm'.Y_c[0], which does not read this slice",
    ]
    assert _sd009(_lstm("%yh", "%yc"), _LSTM_HEAD) == []  # near-miss: each back where it came from
