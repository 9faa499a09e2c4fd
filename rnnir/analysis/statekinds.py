"""State that is not a recurrence: the cache kinds, beside the recurrence registry (:mod:`rnnir.ir.recurrence`).

A recurrence's state is checked port against port (``initial_h`` <-> ``Y_h``).  Streaming models keep
other state too, and each kind has its own exact meaning of "written back right":

* a **sliding window** (FSMN's memory, a conv's input history): ``cache' = last L of (cache ++ new)`` along
  one axis, ``L`` the cache's own length there.  Verified when the window keeps exactly the newest ``L``
  frames of that concatenation; a window of another slot, cut on another axis, one frame too long or too
  short, or ending before the newest frame is an error naming the slot;
* an **append-only** cache (a transformer's KV cache, ``present = Concat(past, new)`` on its sequence
  axis, or ONNX ``Attention``'s ``past_key -> present_key``): state that grows by design along that axis;
  verified with the axis named, never a shape contract error for the growth;
* a **feature cache** whose write-back is computed from its own live-in value by ops rnnir does not model
  (GTCRN's ``conv_cache`` filled by ``ScatterND`` from computed indices): unverified with the reason, never
  an error.

:class:`Window` is what the slice tracer (:mod:`rnnir.slices`) knows of a value built from one slot's
live-in value by appending frames; :func:`judge` turns it into a verdict.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = [
    "APPEND_OPS",
    "CACHE_KINDS",
    "AppendOp",
    "CacheKind",
    "CacheKindSpec",
    "Cut",
    "Judgement",
    "Problem",
    "Window",
    "judge",
]

#: a Slice end at or beyond this reaches the last element whatever the length (exporters write INT64_MAX)
END = 2**62


class CacheKind(enum.Enum):
    WINDOW = "window"
    APPEND = "append"
    FEATURE = "feature"


@dataclass(frozen=True)
class CacheKindSpec:
    """One kind of non-recurrent state: how rnnir recognises it and what it verifies."""

    kind: CacheKind
    summary: str
    verified_when: str


#: every kind of non-recurrent state rnnir knows (read-only)
CACHE_KINDS: Mapping[CacheKind, CacheKindSpec] = MappingProxyType({
    s.kind: s
    for s in (
        CacheKindSpec(CacheKind.WINDOW, "sliding window: the newest frames of (cache ++ new) along one axis",
                      "the write-back keeps exactly the newest L frames of this slot's cache ++ new, L the slot's length on that axis"),
        CacheKindSpec(CacheKind.APPEND, "append-only cache: (cache ++ new) along one axis, growing every call",
                      "the write-back is this slot's cache with new entries appended after it on one axis"),
        CacheKindSpec(CacheKind.FEATURE, "feature cache: written back with a value computed from its own live-in value",
                      "never: rnnir does not model what the computation keeps (unverified, never an error)"),
    )
})


@dataclass(frozen=True)
class AppendOp:
    """An op that appends to a state input inside itself: ``outputs[exit] = inputs[entry] ++ new`` on ``axis``."""

    op_type: str
    domain: str
    entry: int
    exit: int
    axis: int


#: ONNX Attention (opset 23): present_key = Concat(past_key, K), present_value = Concat(past_value, V) on axis 2
APPEND_OPS: tuple[AppendOp, ...] = (
    AppendOp("Attention", "", 4, 1, 2),
    AppendOp("Attention", "", 5, 2, 2),
)


@dataclass(frozen=True)
class Cut:
    """A Slice taken of the appended value: ``start:end:step`` on slot axis ``axis`` (None: an axis the slot lacks)."""

    axis: int | None
    start: int
    end: int
    step: int


@dataclass(frozen=True)
class Window:
    """A value built from slot ``slot``'s live-in value by appending ``new_len`` frames on slot axis ``axis``.

    ``axes`` maps each axis of the value to the slot's axis it holds (None: an axis the slot lacks), so a
    Transpose or Unsqueeze after the append is followed; ``cut`` is the Slice that keeps the window (None:
    the value grows); ``via`` names the node that appends, for messages.
    """

    slot: str
    axis: int
    axes: tuple[int | None, ...]
    new_first: bool = False
    new_len: int | None = None
    cut: Cut | None = None
    via: str = ""
    segments: tuple[tuple[int, int], ...] = ()  # windows proven element by element: (start, length) on ``axis``

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"of": self.slot, "axis": self.axis, "kind": (CacheKind.APPEND if self.cut is None else CacheKind.WINDOW).value}
        if self.cut is not None and not self.segments:
            d["cut"] = {"axis": self.cut.axis, "start": self.cut.start, "end": None if self.cut.end >= END else self.cut.end, "step": self.cut.step}
        if self.segments:
            d["segments"] = [list(s) for s in self.segments]
        return d


class Problem(enum.Enum):
    """What makes a window written back wrong (or, for UNKNOWN, not provable)."""

    OTHER_SLOT = "other-slot"
    NEW_FIRST = "new-first"
    OTHER_AXIS = "other-axis"
    LENGTH = "length"
    DROPS_NEWEST = "drops-newest"
    STEP = "step"
    REARRANGED = "rearranged"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Judgement:
    """The verdict on one window written back into one slot: ``problem`` None when verified."""

    kind: CacheKind
    problem: Problem | None
    detail: str


def judge(slot: str, shape: tuple[int | str | None, ...] | None, w: Window) -> Judgement:
    """Is ``w``, written back into ``slot`` of ``shape``, exactly this slot's window (or its appended cache)?"""
    kind = CacheKind.APPEND if w.cut is None else CacheKind.WINDOW
    rank = len(shape) if shape is not None else None
    length = shape[w.axis] if shape is not None and w.axis < len(shape) else None
    length = length if isinstance(length, int) else None
    if w.slot != slot:
        return Judgement(kind, Problem.OTHER_SLOT, f"the {kind.value} of slot {w.slot!r}")
    if rank is not None and w.axes != tuple(range(rank)):
        return Judgement(kind, Problem.REARRANGED, f"its axes rearranged ({_axes_text(w.axes)}, the slot's are 0..{rank - 1})")
    if w.cut is None:
        order = ", newest first" if w.new_first else ""
        return Judgement(kind, None, f"grows along axis {w.axis} by the new entries{order} (append-only)")
    if w.segments:  # proven element by element (rnnir.analysis.elements): each keeps its own newest frames
        spans = ", ".join(f"{a}:{a + n}" for a, n in w.segments)
        return Judgement(kind, None, f"keeps the newest frames of {len(w.segments)} window(s) packed on axis {w.axis} ({spans})")
    c = w.cut
    if c.axis != w.axis:
        return Judgement(kind, Problem.OTHER_AXIS, f"cut on axis {c.axis}, not on axis {w.axis} where the new frames were appended")
    if c.step != 1:
        return Judgement(kind, Problem.STEP, f"every {c.step}th frame kept")
    total = length + w.new_len if length is not None and w.new_len is not None else None
    if w.new_first:
        return _newest_first(kind, w, c, length, total)
    end = c.end if c.end < END else None
    if end is not None and end < 0:
        return Judgement(kind, Problem.DROPS_NEWEST, f"the newest {-end} frame(s) of cache ++ new dropped (Slice ends at {end})")
    if end is not None and total is None:
        # right only for some numbers of new frames: not provably wrong, not provably right
        return Judgement(kind, Problem.UNKNOWN, f"a window ending at frame {end} of cache ++ new, whose length is not static")
    if end is not None and total is not None and end < total:
        return Judgement(kind, Problem.DROPS_NEWEST, f"a window ending at frame {end} of the {total} of cache ++ new: the newest {total - end} dropped")
    if c.start < 0:
        keep = -c.start
    elif total is not None:
        keep = max(total - c.start, 0)
    else:
        return Judgement(kind, Problem.UNKNOWN, f"frames counted from the oldest (Slice starts at {c.start}) of cache ++ new, whose length is not static")
    if length is None:
        return Judgement(kind, Problem.UNKNOWN, f"the newest {keep} frames kept, but the slot's length on axis {w.axis} is not static")
    if keep != length:
        off = f"{keep - length} stale frame(s) too many" if keep > length else f"{length - keep} frame(s) too few"
        return Judgement(kind, Problem.LENGTH, f"the newest {keep} frames kept on axis {w.axis} while the cache holds {length}: {off}")
    return Judgement(kind, None, f"keeps the newest {length} frames on axis {w.axis}")


def _newest_first(kind: CacheKind, w: Window, c: Cut, length: int | None, total: int | None) -> Judgement:
    """``new ++ cache`` keeps time newest first: the window is its first ``L`` frames (``0:L``)."""
    if c.start < 0:
        return Judgement(kind, Problem.NEW_FIRST, f"the last {-c.start} frames of new ++ cache on axis {w.axis}: the stalest, not the newest")
    if c.start > 0:
        return Judgement(kind, Problem.DROPS_NEWEST, f"the newest {c.start} frame(s) of new ++ cache dropped (Slice starts at {c.start})")
    keep = c.end if c.end >= 0 else total + c.end if total is not None else None
    if keep is None or length is None:
        return Judgement(kind, Problem.UNKNOWN, f"the first frames of new ++ cache on axis {w.axis}, whose length is not static")
    if keep != length:
        off = f"{keep - length} stale frame(s) too many" if keep > length else f"{length - keep} frame(s) too few"
        return Judgement(kind, Problem.LENGTH, f"the newest {keep} frames kept on axis {w.axis}, newest first, while the cache holds {length}: {off}")
    return Judgement(kind, None, f"keeps the newest {length} frames on axis {w.axis}, newest first")


def _axes_text(axes: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("new" if a is None else str(a) for a in axes) + ")"
