"""OR001 and OR002 name the value the late store writes (mutation survivors of rnnir/passes/ordering.py).

The IR text of each case says which value is stored into the slot (``store<@h>(%hn)``), so the expected ``%hn``
is read off the program, not off the rule."""

from __future__ import annotations

from rnnir import passes
from rnnir.ir.text import parse_program

_HEAD = """program @p {
  slot @h : float32[1,1,4] init=zeros
  output hn : float32[1,1,4]
  output norm : float32[]
  value %x : float32[T,1,3]
  value %W : float32[1,4,3]
  value %R : float32[1,4,4]
  pair h -> hn declared "test"
"""


def _messages(body: str, code: str) -> list[str]:
    return [d.message for d in passes.run(parse_program(_HEAD + body + "\n}\n"), select=[code])]


def test_or001_names_the_value_the_store_the_return_does_not_wait_for_writes():
    body = """
  %h = load_slot<@h, copy>()
  %y, %fresh = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h) loc{'id': 'rnn0', 'node': 'rnn'}
  %s = store<@h, token>(%fresh)
  %o = store<out:hn, value>(%fresh)
  return<by device>(%o)"""
    (message,) = _messages(body, "OR001")
    assert message.startswith("store of %fresh into slot 'h' may complete after the call returns: the Return (ordered by a device event")


def test_or002_names_the_value_the_store_racing_a_view_reader_writes():
    body = """
  %h = load_slot<@h, view>()
  %y, %fresh = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h) loc{'id': 'rnn0', 'node': 'rnn'}
  %n = ReduceL2<keepdims=0>(%h) loc{'id': 'r0', 'node': 'norm'}
  %s = store<@h, token>(%fresh)
  %o = store<out:hn, value>(%fresh)
  %on = store<out:norm, value>(%n)
  return<by runtime>(%s, %o, %on)"""
    (message,) = _messages(body, "OR002")
    assert message.startswith("slot 'h' is loaded as a VIEW and the store of %fresh into it is not ordered after 1 reader(s) of the loaded value (ReduceL2 'norm')")
