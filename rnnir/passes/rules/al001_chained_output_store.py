"""AL001 chained-output-store: the output store reads the result of a slot store (chain), not the final state.

Found by :mod:`rnnir.passes.aliasing`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain AL001`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("AL001", "chained-output-store", Severity.ERROR, "the output store reads the result of a slot store (chain), not the final state", """
    What it finds
        A store to a graph output whose value is the *result* of a store to a
        slot: ``final_state -> Store(slot) -> Store(output)``, the chain,
        instead of the fan-out where both stores read the final state.

    Why it matters
        What a slot store returns is not the final state.  A TOKEN result is
        an effect, not a tensor: the caller gets garbage.  An ALIAS result is
        a view of the slot's memory: the caller's output changes when the
        next call writes the slot (a may-alias across calls).  Even a VALUE
        result costs an extra out-of-place copy and serialises the output
        behind the slot write.

    Fixed (IR: fan-out)
        %s = store<@h, token>(%hn)
        %o = store<out:hn, value>(%hn)         # both stores read the final state

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
          %s = store<@h, alias>(%hn)                         // returns a view of the slot's memory
          %o = store<out:hn, value>(%s)                      // chained: the output reads that view
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
          %s = store<@h, alias>(%hn)
          %o = store<out:hn, value>(%hn)                     // fan-out: both stores read the final state
          return<by runtime>(%s, %o)
        }
    """, messages={
    "token-chain": Message(
        "output {output!r} is stored from the result of the store into slot {slot!r} (a chain %{final} -> @{slot} -> out:{output}), "
        "not from the final state %{final}; that result is an effect token, not a tensor: the caller receives no state",
        hint="fan out: store %{final} into slot {slot!r} and into output {output!r} directly",
    ),
    "alias-chain": Message(
        "output {output!r} is stored from the result of the store into slot {slot!r} (a chain %{final} -> @{slot} -> out:{output}), "
        "not from the final state %{final}; that result is a view of the memory of slot {slot!r}: the caller's value changes "
        "when the next call writes the slot",
        hint="fan out: store %{final} into slot {slot!r} and into output {output!r} directly",
    ),
    "copy-chain": Message(
        "output {output!r} is stored from the result of the store into slot {slot!r} (a chain %{final} -> @{slot} -> out:{output}), "
        "not from the final state %{final}; that result is a copy made by the slot store: an extra out-of-place copy, "
        "and the output waits for the slot write",
        hint="fan out: store %{final} into slot {slot!r} and into output {output!r} directly",
    ),
})
