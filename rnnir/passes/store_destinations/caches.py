"""SD002/SD003 for state that is not a recurrence's: sliding windows and append-only caches (rnnir.analysis.statekinds).

A window written back is judged against the slot it is written into (:func:`rnnir.analysis.statekinds.judge`):
another slot's window is SD002 (crossed caches), a window that keeps the wrong frames (off by one, ending
before the newest frame, cut on another axis) is SD003.  A feature cache -- a slot no recurrence reads,
written back with a value computed from its own live-in value -- is no recurrence's state: SD003's
"computed value" and SD007 do not apply to it, and StateCoverage reports it unverified with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator

from rnnir.analysis.slicemaps import ExitKind
from rnnir.analysis.slices import TracedPair
from rnnir.analysis.statekinds import Problem, judge
from rnnir.analysis.tracer import Origin
from rnnir.ir.nodes import Store
from rnnir.passes.diagnostics import Diagnostic
from rnnir.passes.store_destinations.context import Context, branch_text
from rnnir.passes.store_destinations.destinations import NOT_FINAL_STATE, WRONG_SLOT

__all__ = ["cache_exits", "is_feature_cache"]


def cache_exits(ctx: Context, pair: TracedPair, stores: list[Store]) -> Iterator[Diagnostic]:
    """SD002 for another slot's window written back, SD003 for a window that keeps the wrong frames."""
    slot = pair.slot
    for sm in pair.slices:
        for bp, w in sm.windows.items():
            verdict = judge(slot.name, slot.type.shape, w)
            if verdict.problem is None or verdict.problem is Problem.UNKNOWN:
                continue
            length = slot.type.dim(w.axis) if slot.type.shape is not None else None
            fields = {"got": f"{verdict.detail} (appended by {w.via})", "where": branch_text(bp), "axis": w.axis, "length": length if isinstance(length, int) else "L"}
            data = {"slice": sm.label, "problem": verdict.problem.value, "kind": verdict.kind.value}
            if verdict.problem is Problem.OTHER_SLOT:
                yield WRONG_SLOT.diagnostic("window-of-other-slot", slot=slot.name, locations=ctx.store_locs(stores), data={**data, "from": w.slot}, **fields)
            else:
                yield NOT_FINAL_STATE.diagnostic("bad-window", slot=slot.name, locations=ctx.store_locs(stores), data=data, **fields)


def is_feature_cache(ctx: Context, pair: TracedPair, stores: list[Store]) -> bool:
    """No recurrence reads the slot, and it is written back with values computed from its own live-in value."""
    if not pair.slices or any(sm.entry for sm in pair.slices):
        return False
    if not all(k is ExitKind.DERIVED for sm in pair.slices for k in sm.exit_kind.values()):
        return False
    value = next((st.value for st in stores if st.value is not None), None)
    return value is not None and Origin.of_slot(pair.slot.name) in ctx.facts.tracer.trace(value).all_origins()
