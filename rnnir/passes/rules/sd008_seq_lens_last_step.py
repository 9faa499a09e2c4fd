"""SD008 seq-lens-last-step: the state written back is Y at the last step although sequence_lens can end the sequence earlier.

Found by :mod:`rnnir.passes.store_destinations.destinations`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD008`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD008", "seq-lens-last-step", Severity.ERROR, "the state written back is Y at the last step although sequence_lens can end the sequence earlier", """
    What it finds
        A slot written with ``Y`` at the last time step of an op that has a
        ``sequence_lens`` input.

    Why it matters
        For a batch entry shorter than the chunk, ONNX zeroes ``Y`` past its
        length, so ``Y[-1]`` is zeros for that entry while ``Y_h`` holds its
        real final state: padded entries restart from zero at the next call.

    Bad (ONNX sketch)
        Y, Y_h = GRU(x, W, R, B, seq_lens, initial_h=h0)
        hn = Squeeze(Slice(Y, -1:), axis=0)

    Fixed
        hn = Y_h

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          value %lens : int32[1]
          value %minus1 : int64[] = dense<int64[] -1>
          value %one : int64[1] = dense<int64[1] [1]>

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, %lens, %h)
          %last = Gather<axis=0>(%y, %minus1)                // Y[-1]: zeros where a sequence ended early
          %f = Squeeze(%last, %one)
          %s = store<@h, token>(%f)
          %o = store<out:hn, value>(%f)
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
          value %lens : int32[1]

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, %lens, %h)
          %s = store<@h, token>(%hn)                         // Y_h: each sequence's own last step
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "last-step": Message(
        "slice {here} is written with {got}, Y at the last time step of {op}{where}, which has a sequence_lens input",
        consequence="a batch entry shorter than the chunk gets zeros there and restarts at the next call",
        hint="write {op}.Y_h (the final state per entry) into {label}",
    ),
})
