"""SD009 unverified-state: a state slice rnnir could not follow to a recurrence: neither verified nor violated.

Found by :mod:`rnnir.passes.coverage`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD009`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD009", "unverified-state", Severity.INFO, "a state slice rnnir could not follow to a recurrence: neither verified nor violated", """
    What it finds
        A slice of a state pair whose journey rnnir could not resolve: the
        live-in state reaches an op rnnir does not understand before any
        recurrence reads it, or what is written back passes through an op that
        changes values, or comes from something that is not a recurrence's final
        state.  The message names the slice, the node where understanding
        stopped and why.

    Why it matters
        Silence is not a pass.  rnnir checks state write-back only where it can
        follow the state from the slot into a recurrence and back; everywhere
        else the model may be right or wrong and nobody has checked.  A CI job
        that must not trust what was not verified runs ``rnnir lint --strict``,
        which makes this rule an error.

    Not this rule
        A slice a rule reports on (SD001-SD008, AL, OR): that slice is
        *violated*, not unverified.

    Bad (ONNX sketch)
        state -> Gather(0) -> MatMul(W) -> Tanh -> Mul(0.5) -> stateN   # a scaled cell: not an RNN cell

    Fixed
        state -> RNN(initial_h=state) -> Y_h -> stateN                  # a recurrence rnnir understands

    Bad (IR)
        program @bad {
          slot @h : float32[1,4] init=zeros
          output hn : float32[1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          value %x1 : float32[1,3]
          value %W1 : float32[3,4]
          value %R1 : float32[4,4]

          %h = load_slot<@h, copy>()
          %a = MatMul(%x1, %W1)
          %b = MatMul(%h, %R1)
          %sum = Add(%a, %b)
          %t = Tanh(%sum)                                    // a hand-written step: no recurrent op to check it against
          %s = store<@h, token>(%t)
          %o = store<out:hn, value>(%t)
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
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)    // the same step as an RNN op
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "unverified-slice": Message(
        "state {label!r} is not verified: {reason}",
        hint="rnnir checks state it can follow into a recurrence and back; see `rnnir explain SD009` for what it understands",
    ),
    "nothing-found": Message(
        "no state pair and no recurrence found: rnnir verified nothing in this model",
        hint="declare the state pairs (--pair INPUT=OUTPUT) if the model carries state in plain ops",
    ),
})
