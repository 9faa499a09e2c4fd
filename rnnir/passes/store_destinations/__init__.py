"""Store destinations: is each slot written back, with the right final state, in the right slice?

One pass, :class:`StoreDestinations`, compares a state pair's contract with
what the graph does, slice by slice (:class:`rnnir.pairs.SliceMap`): which
recurrent port reads slice i at the start of the call (its *entry*, the
live-in state) and what is written back into slice i (its *exit*, the
live-out state), per If branch.

Each rule is declared in its own file under :mod:`rnnir.passes.rules` (the docstring
``rnnir explain`` prints and every message it words a finding with); the family of
checks that emits it imports it:

- :mod:`.write_back`: SD001 slot-never-written, SD004 slot-written-twice
- :mod:`.destinations`: SD002 wrong-slot, SD003 not-final-state, SD006 reverse-state-persisted,
  SD008 seq-lens-last-step (exits that are a final state, a live-in value or a constant)
- :mod:`.derived`: SD003/SD006 for exits computed through value-changing ops
- :mod:`.state_types`: SD005 state-type-mismatch
- :mod:`.ignored`: SD007 state-ignored
- :mod:`.caches`: SD002/SD003 for sliding-window and append-only caches, and which slots are feature caches
- :mod:`.context`: the facts they share (who reads which slice, how to name it)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from rnnir.analysis.slices import TracedPair
from rnnir.passes.diagnostics import Diagnostic, merge_slices
from rnnir.passes.manager import AnalysisPass, ProgramFacts
from rnnir.passes.rules import Family, rules_of
from rnnir.passes.store_destinations.caches import cache_exits, is_feature_cache
from rnnir.passes.store_destinations.context import Context
from rnnir.passes.store_destinations.derived import derived_exits
from rnnir.passes.store_destinations.destinations import (
    NOT_FINAL_STATE,
    REVERSE_STATE_PERSISTED,
    SEQ_LENS_LAST_STEP,
    WRONG_SLOT,
    exits,
)
from rnnir.passes.store_destinations.ignored import STATE_IGNORED, ignored
from rnnir.passes.store_destinations.state_types import STATE_TYPE_MISMATCH, state_types
from rnnir.passes.store_destinations.write_back import (
    SLOT_NEVER_WRITTEN,
    SLOT_WRITTEN_TWICE,
    handed_back,
    never_written,
    written_twice,
)

__all__ = [
    "SLOT_NEVER_WRITTEN",
    "WRONG_SLOT",
    "NOT_FINAL_STATE",
    "SLOT_WRITTEN_TWICE",
    "STATE_TYPE_MISMATCH",
    "REVERSE_STATE_PERSISTED",
    "STATE_IGNORED",
    "SEQ_LENS_LAST_STEP",
    "StoreDestinations",
]


@dataclass(frozen=True)
class StoreDestinations(AnalysisPass):
    """SD001–SD008: compare each slot's live-in roles with its live-out values, slice by slice."""

    name: ClassVar[str] = "store-destinations"
    rules: ClassVar = rules_of(Family.STORE_DESTINATIONS)

    def analyse(self, facts: ProgramFacts) -> Iterable[Diagnostic]:
        ctx = Context(facts)
        out: list[Diagnostic] = []
        for pair in facts.pairs:
            out.extend(_check_pair(ctx, pair))
        out.extend(written_twice(facts))
        return merge_slices(out)


def _check_pair(ctx: Context, pair: TracedPair) -> Iterator[Diagnostic]:
    facts = ctx.facts
    stores = facts.stores_to_storage(pair.slot)
    if not stores:
        loads = facts.loads_of(pair.slot)
        if loads:
            yield never_written(ctx, pair, loads)
        return
    plain = pair.plain_recurrence is not None  # a recurrence written as plain ops: no op to check ports against
    yield from handed_back(ctx, pair, stores)
    yield from cache_exits(ctx, pair, stores)
    feature = is_feature_cache(ctx, pair, stores)  # no recurrence's state: unverified (SD009), never SD003/SD007
    covered = (yield from ignored(ctx, pair, stores, plain)) if not feature else set()
    reverse_seen: set[str] = set()  # SD006 names each reverse op once, whichever family meets it first
    yield from exits(ctx, pair, stores, covered, reverse_seen)
    if not plain and not feature:
        yield from derived_exits(ctx, pair, stores, reverse_seen)
    yield from state_types(ctx, pair, stores)
