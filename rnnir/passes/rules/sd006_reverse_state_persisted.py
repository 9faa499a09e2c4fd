"""SD006 reverse-state-persisted: persisting the final state of a reverse or bidirectional op across calls.

Found by :mod:`rnnir.passes.store_destinations.destinations`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD006`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD006", "reverse-state-persisted", Severity.WARNING, "persisting the final state of a reverse or bidirectional op across calls", """
    What it finds
        A slot written with the final state of the reverse direction of an
        RNN/GRU/LSTM (``direction="reverse"``, or direction 1 of a
        bidirectional op).

    Why it matters
        A reverse recurrence runs from the end of the chunk to its start; its
        final state belongs to the *start* of this chunk.  Feeding it into the
        next chunk joins the sequence out of order, so chunked results never
        equal a single pass.  It is a warning, not an error: some streaming
        models do this on purpose and accept the approximation.

    Bad (ONNX sketch)
        Y, Y_h, Y_c = LSTM(x, ..., direction="bidirectional", initial_h=h0, initial_c=c0)
        hn = Y_h; cn = Y_c                              # [1] is the reverse direction

    Fixed
        persist only the forward direction (Y_h[0:1], Y_c[0:1]) and start the
        reverse direction from zeros at every chunk (or use a forward-only
        model for streaming)

    Bad (IR)
        program @bad {
          slot @h : float32[2,1,4] init=zeros
          output hn : float32[2,1,4]
          value %x : float32[T,1,3]
          value %W : float32[2,4,3]
          value %R : float32[2,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<direction='bidirectional', hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // the reverse direction's state persisted
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
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
          %y, %hn = recurrent.RNN<direction='forward', hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // a forward op: its state continues the stream
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "slice-reverse": Message(
        "slice {here} persists {got}, the final state of the reverse direction of {which} {op}{where}",
        consequence="across chunks the reverse recurrence sees the chunks out of order",
        hint="persist only forward-direction state; restart the reverse direction from zeros at every chunk",
    ),
    "computed-from-reverse": Message(
        "slot {slot!r} is written back with a value computed from {got}, the final state of the reverse direction of "
        "{direction} {op}: across chunks the reverse recurrence sees the chunks out of order",
        hint="persist only forward-direction state; restart the reverse direction from zeros at every chunk",
    ),
})
