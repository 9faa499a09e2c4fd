"""Lowering policies: where state enters a slot and how the final state leaves (the known-bad ones show the passes at work)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rnnir.ir.attributes import LoadKind, StoreResult


class EntryPolicy(str, enum.Enum):
    """Where a slot's state comes from: graph inputs only, or also constants a recurrent op starts from."""

    DYNAMIC = "dynamic"
    CONSTANT = "constant"


class ExitPolicy(str, enum.Enum):
    """How the final state reaches its slot and the caller (the last two exist to show the passes catch them)."""

    FANOUT = "fanout"  # correct: the slot store and the output store both read the final state
    CHAIN = "chain"  # the output store reads the slot store's result
    REUSE_SINGLE_STORE = "reuse-single-store"  # no slot store: the slot lives in the output buffer


@dataclass(frozen=True)
class Policy:
    """Lowering policies.

    ``entry``: ``dynamic`` (state comes from graph inputs) or ``constant`` (a
    recurrent op whose initial state is a constant and whose final state is a
    graph output gets a slot initialised with that constant).
    ``exit``: ``fanout`` (correct: both stores read the final state), ``chain``
    (the output store reads the slot store's result) or ``reuse-single-store``
    (no slot store when the final state already has a store user: the slot
    then lives in the output buffer).  :meth:`named` takes them by name.
    """

    entry: EntryPolicy = EntryPolicy.DYNAMIC
    exit: ExitPolicy = ExitPolicy.FANOUT
    chain_result: StoreResult = StoreResult.ALIAS
    load: LoadKind = LoadKind.COPY

    def __post_init__(self) -> None:  # Policy(exit="chain") works too: a name becomes its member, or ValueError
        object.__setattr__(self, "entry", EntryPolicy(self.entry))
        object.__setattr__(self, "exit", ExitPolicy(self.exit))

    @classmethod
    def named(cls, entry: str = "dynamic", exit: str = "fanout") -> Policy:
        """The policies given by their names (``rnnir.load``'s and the command line's spelling)."""
        try:
            entry_policy = EntryPolicy(entry)
        except ValueError:
            raise ValueError(f"entry policy must be 'dynamic' or 'constant', not {entry!r}") from None
        try:
            exit_policy = ExitPolicy(exit)
        except ValueError:
            raise ValueError(f"exit policy must be 'fanout', 'chain' or 'reuse-single-store', not {exit!r}") from None
        return cls(entry_policy, exit_policy)
