"""OR001 return-before-store: the call's Return does not wait for a slot store: the next call may read stale state.

Found by :mod:`rnnir.passes.ordering`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain OR001`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("OR001", "return-before-store", Severity.ERROR, "the call's Return does not wait for a slot store: the next call may read stale state", """
    What it finds
        A store into a slot that the call's Return does not wait for, directly
        or through happens-before edges, so nothing orders it before the next
        call's load of the same slot (a read-after-write across calls that is
        not guaranteed).  Also every slot store of a program whose Return is
        ordered by nobody (layer ``none``).

    Why it matters
        The next call may start while the write is still in flight (an async
        device copy, a store scheduled after the outputs are handed back) and
        read the previous state, or a half-written one.  It shows only under
        load, on some devices, and never in a one-call test.

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
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by device>(%o)                              // does not wait for the slot store
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
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by device>(%s, %o)                          // the next call starts after the slot store
        }
    """, messages={
    "calls-unordered": Message(
        "store of %{value} into slot {slot!r} may complete after the call returns: nothing orders call k+1 after call k "
        "(the Return is ordered by {layer}); the next call may read stale state (read-after-write across calls not guaranteed)",
        hint="order the calls: give the Return a layer (runtime, device event or caller) and make it wait for the slot store",
    ),
    "return-does-not-wait": Message(
        "store of %{value} into slot {slot!r} may complete after the call returns: the Return (ordered by {layer}) does not "
        "wait for it, directly or through happens-before edges, so call k+1's load_slot(@{slot}) is not ordered after it; "
        "the next call may read stale state (read-after-write across calls not guaranteed)",
        hint="make the Return wait for the store into {slot!r} (add its result to the Return's waits)",
    ),
})
