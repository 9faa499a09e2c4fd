"""The table of automatic fixes: which rule has one, whether it is safe, and what it does.

Kept apart from :mod:`rnnir.fixer` (which edits ONNX models and imports onnx and numpy) so ``rnnir explain``
can say whether a rule has a fix without paying for those imports.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FIXES", "FixInfo"]


@dataclass(frozen=True)
class FixInfo:
    """What the fix of one rule does and whether it is safe."""

    code: str
    safe: str  # "safe", "unsafe" or "safe or unsafe"
    text: str


#: rule code -> its fix; a code not listed has no automatic fix
FIXES: dict[str, FixInfo] = {
    "SD002": FixInfo(
        "SD002",
        "safe",
        "puts the operands of the Concat that assembles the state back in the order the slot's slices are read "
        "(h/c swapped, layers or directions swapped), when every slice has exactly one operand that belongs there",
    ),
    "SD003": FixInfo(
        "SD003",
        "safe or unsafe",
        "returns the final state (Y_h / Y_c) of the op that reads the slot instead of the value written back; safe when "
        "the written value is a step of that same op's Y, unsafe when it comes from another op or is a constant "
        "(the other repair, feeding the slot to that op, may have been meant)",
    ),
    "SD001": FixInfo(
        "SD001",
        "safe",
        "when a state input is read by forward ops and no output returns their final state: adds that output, named "
        "so it pairs with the input (h0 -> hn), through If branches like --expose-state; when the state is handed "
        "straight back: returns the final state of the op that reads each slice instead",
    ),
    "SD007": FixInfo(
        "SD007",
        "unsafe",
        "feeds the state input to the initial-state port of the op whose final state it gets, instead of the "
        "constant; unsafe because starting from the constant may be a deliberate reset",
    ),
    "SD004": FixInfo("SD004", "safe", "keeps one of the slot's stores when they all write the same value (the rnnir.ir IR text)"),
    "SD008": FixInfo("SD008", "safe", "returns Y_h (the final state of every batch entry) instead of Y at the last time step"),
    "SD010": FixInfo(
        "SD010",
        "unsafe",
        "exposes the state as `rnnir fix --expose-state` does: a state input wired to the op's initial state, paired with "
        "the final state the model already returns; unsafe because the new input changes the model's interface "
        "(callers must feed it back)",
    ),
    "AL001": FixInfo(
        "AL001",
        "safe",
        "re-points the chained output store at the final state the slot store reads (fan-out), in the rnnir.ir IR text",
    ),
    "AL002": FixInfo("AL002", "safe", "gives the slot its own storage and a store of the value the output gets (the rnnir.ir IR text)"),
    "AL003": FixInfo("AL003", "safe", "gives every slot of the group its own storage (the rnnir.ir IR text)"),
    "OR001": FixInfo("OR001", "safe", "makes the Return wait for the slot's stores (the rnnir.ir IR text)"),
    "OR002": FixInfo("OR002", "safe", "loads the slot as a private copy, so its store cannot clobber a reader (the rnnir.ir IR text)"),
}
