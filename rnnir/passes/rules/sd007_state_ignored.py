"""SD007 state-ignored: a state input never reaches the op it is paired for: the caller's state is ignored.

Found by :mod:`rnnir.passes.store_destinations.ignored`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD007`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD007", "state-ignored", Severity.ERROR, "a state input never reaches the op it is paired for: the caller's state is ignored", """
    What it finds
        A state pair whose input never reaches the recurrent op that produces
        the state written back: the op starts from zeros, a constant or some
        other value, while its final state is returned as this slot's state.
        Not reported for recurrences written as plain ops (no RNN/GRU/LSTM
        node carries them).

    Why it matters
        The caller dutifully feeds the state back and the model ignores it:
        every call restarts, exactly like a slot that is never written, but the
        graph's interface looks stateful.

    Bad (ONNX sketch)
        inputs: x, state
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=zeros, initial_c=zeros)
        stateN = Concat(Y_h, Y_c)

    Fixed
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=Unsqueeze(Gather(state, 0)),
                                    initial_c=Unsqueeze(Gather(state, 1)))

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          value %zeros : float32[1,1,4] = dense<float32[1,1,4] [0.0, 0.0, 0.0, 0.0]>

          %h = load_slot<@h, copy>()                          // loaded, never read
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %zeros)
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
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)    // the op starts from the slot
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "slice-ignored": Message(
        "slice {here} never reaches the op whose final state is written back ({finals}); {starts}",
        consequence="the caller's state is ignored and every call restarts",
        hint="feed {slot!r} (its slice) into the op's initial state instead of the constant/other value",
    ),
    "input-ignored": Message(
        "the state input never reaches the op whose final state is written back ({finals}); {starts}",
        consequence="the caller's state is ignored and every call restarts",
        hint="feed {slot!r} (its slice) into the op's initial state instead of the constant/other value",
    ),
})
