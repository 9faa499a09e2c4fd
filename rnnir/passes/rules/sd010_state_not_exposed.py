"""SD010 state-not-exposed: a recurrence starts from zeros every call while its final state is returned.

Found by :mod:`rnnir.passes.coverage`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD010`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD010", "state-not-exposed", Severity.WARNING, "a recurrence starts from zeros every call while its final state is returned", """
    What it finds
        A recurrent op (or a recognised cell) whose initial state is absent or a
        constant — it starts from zeros on every call — while the model returns
        its final state as a graph output.  The model looks streaming (it hands
        the state out) but can never take it back in.

    Why it matters
        This is the most common streaming bug in exported models ("the LSTM
        forgets between calls"): the exporter left ``initial_h``/``initial_c``
        empty, so chunked inference differs from one call over the whole
        sequence after the first chunk.  Streaming users raise it to an error
        with ``--strict``.

    Not this rule
        A bidirectional encoder, or an op whose final state nobody returns:
        stateless by design.

    Bad (ONNX sketch)
        Y, Y_h = GRU(x, W, R)                   # no initial_h: zeros every call
        outputs: y, hn = Y_h

    Fixed
        Y, Y_h = GRU(x, W, R, initial_h=h0)     # h0 a graph input, fed back from hn by the caller
        inputs: x, h0   outputs: y, hn = Y_h     (``rnnir fix --expose-state`` does this edit)

    Bad (IR)
        program @bad {
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          value %zeros : float32[1,1,4] = dense<float32[1,1,4] [0.0, 0.0, 0.0, 0.0]>

          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %zeros)   // starts from zeros every call
          %o = store<out:hn, value>(%hn)                     // while its final state is returned
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
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)    // the state is a slot now
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "unpaired-input": Message(
        "{kind} {node!r} starts afresh on every call: {reason}; chunked calls forget the past",
        hint="if the caller feeds that input back from the returned state, declare the pair (--pair INPUT=OUTPUT)",
    ),
    "state-not-exposed": Message(
        "{kind} {node!r} starts afresh on every call: {reason}; chunked calls forget the past",
        hint="export its {ports} as graph inputs fed back from the returned final state (rnnir fix --expose-state)",
    ),
})
