"""SD005 state-type-mismatch: slot and final state disagree: dtype, directions, batch, hidden size, layout, quantization.

Found by :mod:`rnnir.passes.store_destinations.state_types`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD005`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD005", "state-type-mismatch", Severity.ERROR, "slot and final state disagree: dtype, directions, batch, hidden size, layout, quantization", """
    What it finds
        A slot whose declared type disagrees with the final state written into
        it: another dtype (a Cast on the exit path, or a paired output of
        another dtype), another number of directions, batch, hidden size (last
        dim), layout or quantization.  Only static dims are compared; a
        symbolic dim never counts as a mismatch.

    Why it matters
        The caller feeds the returned state back as the next input: a runtime
        either rejects it (shape/dtype error on call 2) or, worse, converts it
        (float16 round trips lose precision at every call and the error
        accumulates through the recurrence).

    Bad (ONNX sketch)
        inputs: state float32[2, B, 128]      outputs: stateN float16[2, B, 128]
        stateN = Cast(Concat(Y_h, Y_c), to=FLOAT16)

    Fixed
        outputs: stateN float32[2, B, 128]
        stateN = Concat(Y_h, Y_c)

    Bad (IR)
        program @bad {
          slot @h : float16[1,1,4] init=zeros           // float16 slot, float32 state
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)
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
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "mismatch": Message(
        "slot {slot!r} ({declared}) and the final state written into it disagree on {aspects} ({detail}): "
        "the state fed back at the next call is not what the slot declares",
        hint="make the returned state match the state input exactly ({declared}); convert outside the recurrence if needed",
    ),
})
