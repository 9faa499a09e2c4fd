"""SD004 slot-written-twice: a slot is written more than once in one call.

Found by :mod:`rnnir.passes.store_destinations.write_back`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD004`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD004", "slot-written-twice", Severity.ERROR, "a slot is written more than once in one call", """
    What it finds
        Two stores to the same slot on one call path (stores in the two
        alternatives of one If are fine).

    Why it matters
        Which value survives depends on store order, which the dataflow may
        not fix (a write-after-write race); even when ordered, one of the
        writes is dead and usually a sign that two state instances were
        merged into one slot.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s0 = store<@h, token>(%hn)
          %s1 = store<@h, token>(%hn)                        // a second store into the same slot
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s0, %s1, %o)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // one store per call
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "written-twice": Message(
        "slot {slot!r} is written {count} times in one call{where} ({values}): a write-after-write on persistent state; "
        "which value the next call sees depends on store order",
        hint="keep exactly one store of the final state into {slot!r} per call path",
    ),
})
