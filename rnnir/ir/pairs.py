"""State pairs: which graph input the caller feeds back from which graph output, and why.

A pair is the caller's contract, so it comes first from what the caller sees
(declaration, metadata, Triton, names); only where names say nothing from the
dataflow (an input that starts a recurrence's state, the output that returns
exactly its final value), then position (docs/pairing.md).  The dataflow is
recorded next to each pair, slice by slice, so the passes can compare the
contract with what the graph really does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rnnir.statekinds import Window


class PairSource(enum.Enum):
    """Where a state pair came from, strongest first."""

    DECLARED = "declared"  # pairs= argument or --pair
    METADATA = "metadata"  # rnnir.* metadata_props written by rnnir.export
    TRITON = "triton"  # sequence_batching.state in a config.pbtxt beside the model
    NAME = "name"  # naming convention (state/stateN, h0/hn, cache_x/new_cache_x, ...)
    DATAFLOW = "dataflow"  # the input starts a recurrence's state, the output returns its final value (or a suggestion)
    POSITION = "position"  # same position among the remaining inputs/outputs, same type
    CONSTANT = "constant"  # the lowering's constant-entry policy made a slot of a constant initial state
    BUILDER = "builder"  # a Program built with rnnir.Builder


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


_TRACED = frozenset(("slices", "plain_recurrence"))  # what slice analysis writes into a pair
SLICE_MAPS = "slice-maps"  # the analysis key: the state pairs' slices were traced on the program as it is


@dataclass
class StatePair:
    """A graph input the caller feeds with what a graph output returned at the previous call."""

    input: str
    output: str | None
    source: PairSource
    reason: str = ""
    slices: list[SliceMap] = field(default_factory=list)
    plain_recurrence: list[str] | None = None  # dependency path when no Recurrent node carries it
    slot: Any = None  # the ir.Slot

    def __setattr__(self, name: str, value: Any) -> None:
        # a pair in a program is part of it: changing the declaration (not the traced slices, an analysis result)
        # moves the program's version, or raises while an analysis has it frozen
        program = self.__dict__.get("_program")
        if program is not None:
            if name in _TRACED:
                program.forget(SLICE_MAPS)  # slices written by hand: the passes trace again
            else:
                program._changed()
        object.__setattr__(self, name, value)

    def _adopt(self, program: Any) -> None:
        object.__setattr__(self, "_program", program)

    def __str__(self) -> str:
        out = self.output if self.output is not None else "<nothing>"
        return f"{self.input} -> {out} ({self.source.value}: {self.reason})"

    def slice(self, label: str) -> SliceMap:
        for s in self.slices:
            if s.label == label:
                return s
        raise KeyError(label)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "input": self.input,
            "output": self.output,
            "source": self.source.value,
            "reason": self.reason,
            "slices": [s.to_json() for s in self.slices],
        }
        if self.plain_recurrence is not None:
            d["plain_recurrence"] = list(self.plain_recurrence)
        return d
