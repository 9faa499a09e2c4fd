"""AL003 shared-slot-storage: two state instances share one slot's storage.

Found by :mod:`rnnir.passes.aliasing`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain AL003`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("AL003", "shared-slot-storage", Severity.ERROR, "two state instances share one slot's storage", """
    What it finds
        Two slots with the same storage: the same address, or one declared an
        alias of the other.

    Why it matters
        Two state instances (two layers, h and c, two streams) then read and
        write one buffer: whichever store lands last wins, and both recurrences
        continue from it at the next call.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros address "mem:0"
          slot @c : float32[1,1,4] init=zeros address "mem:0"   // h and c at one address
          output hn : float32[1,1,4]
          output cn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,16,3]
          value %R : float32[1,16,4]
          pair h -> hn declared "the caller feeds hn back as h"
          pair c -> cn declared "the caller feeds cn back as c"

          %h = load_slot<@h, copy>()
          %c = load_slot<@c, copy>()
          %y, %hn, %cn = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h, %c, _)
          %sh = store<@h, token>(%hn)
          %sc = store<@c, token>(%cn)
          %oh = store<out:hn, value>(%hn)
          %oc = store<out:cn, value>(%cn)
          return<by runtime>(%sh, %sc, %oh, %oc)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          slot @c : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          output cn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,16,3]
          value %R : float32[1,16,4]
          pair h -> hn declared "the caller feeds hn back as h"
          pair c -> cn declared "the caller feeds cn back as c"

          %h = load_slot<@h, copy>()
          %c = load_slot<@c, copy>()
          %y, %hn, %cn = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h, %c, _)
          %sh = store<@h, token>(%hn)
          %sc = store<@c, token>(%cn)
          %oh = store<out:hn, value>(%hn)
          %oc = store<out:cn, value>(%cn)
          return<by runtime>(%sh, %sc, %oh, %oc)
        }
    """, messages={
    "shared": Message(
        "slots {names} share one storage ({why}): two state instances clobber each other, and every call continues all of "
        "them from whichever store landed last",
        hint="give every state instance its own slot storage (distinct address, no alias between slots)",
    ),
})
