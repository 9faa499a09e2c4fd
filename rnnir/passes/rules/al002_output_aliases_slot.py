"""AL002 output-aliases-slot: a graph output shares storage with a slot: the caller's value changes at the next call.

Found by :mod:`rnnir.passes.aliasing`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain AL002`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("AL002", "output-aliases-slot", Severity.ERROR, "a graph output shares storage with a slot: the caller's value changes at the next call", """
    What it finds
        A graph output that is the same memory as a slot: the slot is declared
        an alias of the output (the lowering that reuses the output store as
        the slot store), or an output store of ALIAS kind whose value is a
        VIEW load of a slot or an ALIAS result of a slot store.

    Why it matters
        The caller owns an output after the call returns; the slot is written
        again by the next call.  With one buffer for both, the value the
        caller holds changes under it at the next call (must-alias across
        calls), and a caller that writes into its output corrupts the state.

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros aliases out:hn
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %o = store<out:hn, value>(%hn)                     // the slot lives in this output's buffer
          return<by runtime>(%o)
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
          %s = store<@h, token>(%hn)                         // the slot has its own storage and store
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "lives-in-output": Message(
        "slot {slot!r} lives in graph output {output!r}'s buffer (must-alias): the single store into {output!r} doubles as "
        "the slot store, so the value the caller holds is overwritten by the next call, and a caller writing into it corrupts the state",
        hint="give slot {slot!r} its own storage: store the final state into the slot and into {output!r} separately",
    ),
    "view-load-output": Message(
        "output {output!r} is stored as an alias of a VIEW load of slot {slot!r} (may-alias across calls): the caller's value "
        "changes when the next call writes slot {slot!r}",
        hint="store a copy (result=value) into {output!r}, or load {slot!r} as a copy",
    ),
    "alias-result-output": Message(
        "output {output!r} is stored as an alias of the ALIAS result of the store into slot {slot!r} (may-alias across calls): "
        "the caller's value changes when the next call writes slot {slot!r}",
        hint="store a copy (result=value) into {output!r}, or load {slot!r} as a copy",
    ),
})
