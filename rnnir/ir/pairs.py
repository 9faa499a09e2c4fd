"""State pairs: which graph input the caller feeds back from which graph output, and why.

A pair is the caller's contract, so it comes first from what the caller sees
(declaration, metadata, Triton, names); only where names say nothing from the
dataflow (an input that starts a recurrence's state, the output that returns
exactly its final value), then position (docs/pairing.md).  What the graph
really does with each pair, slice by slice, is derived apart from it
(:mod:`rnnir.analysis.slices`), so the passes can compare the two.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rnnir.util.fastinit import fast_init

if TYPE_CHECKING:
    from rnnir.ir.nodes import Slot


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


@fast_init
@dataclass(frozen=True)
class StatePair:
    """A graph input the caller feeds with what a graph output returned at the previous call: a declaration.

    What the graph does with it, slice by slice, is an analysis result, not part of the pair
    (:class:`rnnir.analysis.slices.SliceAnalysis`).  A pair is frozen: to change a program's pairs, assign
    new ones to ``program.state_pairs`` (which moves the program's version).
    """

    input: str
    output: str | None
    source: PairSource
    reason: str = ""
    slot: Slot | None = None  # the slot the program keeps the state in (None: a suggestion, or no such slot)

    def __str__(self) -> str:
        out = self.output if self.output is not None else "<nothing>"
        return f"{self.input} -> {out} ({self.source.value}: {self.reason})"
