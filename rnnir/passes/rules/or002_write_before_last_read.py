"""OR002 write-before-last-read: a slot store may run before the last reader of the slot's current value (write-after-read on an in-place slot).

Found by :mod:`rnnir.passes.ordering`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain OR002`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("OR002", "write-before-last-read", Severity.ERROR, "a slot store may run before the last reader of the slot's current value (write-after-read on an in-place slot)", """
    What it finds
        A slot loaded as a VIEW (read in place) and a store into the same slot
        that is not ordered after every reader of the loaded value: a
        write-after-read hazard, the store may clobber the live-in state while
        it is still being read.  COPY loads never trigger it.

    Why it matters
        A reader that runs after the store sees the *new* state where it
        expected the old one: e.g. an output that echoes the incoming state,
        or a second op reading the same live-in, silently computes with the
        wrong value when the scheduler reorders them.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          output norm : float32[]

          %h = load_slot<@h, view>()                         // loaded in place
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %n = ReduceL2<keepdims=0>(%h)                      // a second reader of the slot's current value
          %s = store<@h, token>(%hn)                         // may overwrite it before ReduceL2 reads it
          %o = store<out:hn, value>(%hn)
          %on = store<out:norm, value>(%n)
          return<by runtime>(%s, %o, %on)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          output norm : float32[]

          %h = load_slot<@h, view>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %n = ReduceL2<keepdims=0>(%h)
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          %on = store<out:norm, value>(%n)
          return<by runtime>(%s, %o, %on)
          order %on -> %s                                    // the reader's store runs before the slot store
        }
    """, messages={
    "view-race": Message(
        "slot {slot!r} is loaded as a VIEW and the store of %{value} into it is not ordered after {count} reader(s) of the "
        "loaded value ({readers}): write-after-read hazard, the store may clobber the live-in state while it is still read; "
        "{layer} orders whole calls only, so inside the call the program itself must order them",
        hint="load {slot!r} as a copy, or order the store after every reader of the loaded value",
    ),
})
