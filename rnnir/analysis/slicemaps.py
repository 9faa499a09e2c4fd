"""Slice maps: where each slice of a state slot goes in and where the value written back comes from.

The result of slice analysis (:mod:`rnnir.analysis.slices`) for one state pair, slice by slice: the recurrent
ports that read it (``entry``), the ports its written-back value comes from (``exit``) and what that value is
(:class:`ExitKind`).  Results, not IR: the passes compare the caller's declared pairs with them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rnnir.analysis.statekinds import Window
from rnnir.util.fastinit import fast_init

__all__ = ["ExitKind", "PortRef", "SliceMap"]


@fast_init
@dataclass(frozen=True)
class PortRef:
    """One end of a slice's journey: a recurrent op port (or a plain value) at a direction index."""

    node_id: str  # IR node id
    onnx_node: str  # ONNX node name (for messages)
    op: str  # RNN / GRU / LSTM, or the op type of a plain-op producer
    port: str  # initial_h / initial_c / Y_h / Y_c / Y / value
    direction: int | None = 0  # index along num_directions; None when the whole port
    branch: tuple[str, ...] = ()
    step: str | None = None  # for Y: "last" / "first" / other step taken
    note: str = ""

    @property
    def label(self) -> str:
        d = "" if self.direction is None else f"[{self.direction}]"
        step = f"@{self.step}" if self.step else ""
        return f"{self.op} {self.onnx_node!r}.{self.port}{d}{step}"

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.onnx_node,
            "op": self.op,
            "port": self.port,
            "direction": self.direction,
            "branch": "/".join(self.branch),
            **({"step": self.step} if self.step else {}),
        }


class ExitKind(str, enum.Enum):
    """What a slice written back is (str-valued: JSON and the rule messages show the value)."""

    FINAL = "final"  # a recurrent op's final state
    SEQUENCE = "sequence"  # a step of a recurrent op's sequence output (Y)
    PASSTHROUGH = "passthrough"  # the slot's own incoming value, unchanged
    DERIVED = "derived"  # computed from state through ops that change values
    CONSTANT = "constant"
    UNKNOWN = "unknown"  # the tracer could not follow it
    WINDOW = "window"  # the newest frames of (the slot's live-in ++ new frames): a sliding-window cache
    APPEND = "append"  # the slot's live-in with new entries appended: an append-only (KV) cache


@fast_init
@dataclass
class SliceMap:
    """Where one slice of a slot goes in (``entry``) and where the value written back comes from (``exit``).

    ``index`` is the position along the slot's first axis (``()`` for the whole
    slot).  ``exit_kind`` says what the written-back slice is: ``final`` (a
    recurrent final state), ``passthrough`` (the slot's own incoming value),
    ``derived`` (computed from state through non-layout ops), ``constant`` or
    ``unknown``; per branch when the write-back differs by If branch.
    """

    index: tuple[int, ...]
    label: str
    entry: list[PortRef] = field(default_factory=list)
    exit: list[PortRef] = field(default_factory=list)
    exit_kind: dict[str, ExitKind] = field(default_factory=dict)  # branch path -> kind
    exit_slot_refs: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    windows: dict[str, Window] = field(default_factory=dict)  # branch path -> the window (WINDOW/APPEND exits)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "slice": self.label,
            "entry": [p.to_json() for p in self.entry],
            "exit": [p.to_json() for p in self.exit],
            "exit_kind": {bp: kind.value for bp, kind in self.exit_kind.items()},
        }
        if self.windows:
            d["windows"] = {bp: w.to_json() for bp, w in self.windows.items()}
        return d
