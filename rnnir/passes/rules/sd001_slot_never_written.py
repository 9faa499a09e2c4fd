"""SD001 slot-never-written: a slot is read but no call path writes it back: every call restarts.

Found by :mod:`rnnir.passes.store_destinations.write_back`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD001`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD001", "slot-never-written", Severity.ERROR, "a slot is read but no call path writes it back: every call restarts", """
    What it finds
        A slot (a state input) that the call reads but that no call path writes
        back: no graph output returns it, no store writes the slot, or what is
        written back is the slot's own incoming value, the same slice, in every
        If branch (the state is handed straight back).

    Why it matters
        The recurrence never advances across calls: every call restarts from
        the initial state (or from whatever the caller keeps passing), so a
        streaming model behaves like a stateless one and only the first chunk
        is right.  Nothing fails; the output is just wrong from call 2 on.

    Not this rule
        An If branch that deliberately restarts from zeros (silero-vad's
        ``decoder/If_1`` else branch runs its LSTM from ConstantOfShape) while
        another branch writes the slot.  A slot that lives in a graph output
        buffer (``alias_of`` an output that is stored) is AL002's case.

    Bad (ONNX sketch)
        inputs: x, h0            outputs: y            # nothing returns the state
        Y, Y_h = GRU(x, W, R, initial_h=h0)

        or, the state returned unchanged:
        stateN = Identity(state)

    Fixed
        inputs: x, h0            outputs: y, hn
        Y, hn = GRU(x, W, R, initial_h=h0)             # the final state is returned

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
          %s = store<@h, token>(%h)                          // the state handed straight back
          %o = store<out:hn, value>(%h)
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
          %s = store<@h, token>(%hn)                         // the final state fans out
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "no-output": Message(
        "state input {slot!r}{feeds} is live-in but no graph output returns its final state: every call restarts from the initial state",
        hint="add a graph output with the final state of {slot!r} and pair it (e.g. {slot}_out)",
    ),
    "output-not-stored": Message(
        "slot {slot!r}{feeds} lives in output {output!r}, which nothing stores: every call restarts from the initial state",
        hint="store the final state into {slot!r} (and into {output!r} separately)",
    ),
    "no-store": Message(
        "slot {slot!r}{feeds} is loaded but no store writes it back{paired}: every call restarts from the initial state",
        hint="store the final state into slot {slot!r} on every call path",
    ),
    "handed-back": Message(
        "slot {slot!r} is written back with its own live-in value on every call path (the state is handed straight back): "
        "the recurrence never advances across calls",
        hint="write the recurrent op's final state into {slot!r}, not the loaded value",
    ),
    "slice-handed-back": Message(
        "slice {here} is written back with its own live-in value on every call path",
        consequence="that part of the state never advances across calls",
        hint="write the final state that belongs to {label} into it",
    ),
})
