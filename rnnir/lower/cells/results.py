"""What a cell check concludes: a confirmed cell (its weights and state ports), a look-alike with its reason, and
the exceptions a check raises to say "not this cell" or "not yet"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from rnnir.lower.scope import Scope


@dataclass(frozen=True)
class CellWeights:
    """A recognised cell's parameters as the ONNX op takes them (one direction, ONNX gate order)."""

    W: np.ndarray = field(repr=False)  # [1, G*H, input]
    R: np.ndarray = field(repr=False)  # [1, G*H, H]
    B: np.ndarray = field(repr=False)  # [1, 2*G*H]
    activations: tuple[str, ...]
    linear_before_reset: int = 0
    activation_alpha: tuple[float, ...] | None = None  # for HardSigmoid gates, in ONNX's order (activations that take one)
    activation_beta: tuple[float, ...] | None = None


@dataclass(frozen=True)
class CellMatch:
    """A cell confirmed by execution: its state enters at ``h_in``/``c_in`` and leaves at ``h_out``/``c_out``.

    ``h_views``/``c_views`` are every value through which the cell reads that state (one slice,
    possibly rearranged differently); ``h_in``/``c_in`` is the first of them. ``x`` are the values
    the cell reads as input, in the column order of ``weights.W``. ``h_source``/``c_source`` name the
    state source each view is a layout-only rearrangement of.
    """

    kind: str  # "LSTM" | "GRU" | "RNN"
    scope_path: tuple[str, ...]
    nodes: tuple[str, ...]
    x: tuple[str, ...]
    h_in: str
    c_in: str | None
    h_out: str
    c_out: str | None
    hidden_size: int
    weights: CellWeights
    h_views: tuple[str, ...] = ()
    c_views: tuple[str, ...] = ()
    h_source: str = ""
    c_source: str | None = None
    max_error: float = 0.0
    x_shapes: tuple[tuple[int, ...], ...] = ()  # of the x values, batch 1
    scope: Scope | None = field(default=None, compare=False, repr=False)

    @property
    def anchor(self) -> str:
        return self.nodes[0] if self.nodes else self.h_out


@dataclass(frozen=True)
class CellCandidate:
    """Looked like a cell, was not confirmed: ``reason`` says why (for an *unverified* verdict)."""

    kind: str
    anchor: str
    reason: str
    scope_path: tuple[str, ...] = ()


class NotACell(Exception):
    """Raised inside a check: the structure is not this kind of cell (reason for a candidate)."""


class Retry(Exception):
    """The structure needs a state input that is not known yet (an unrolled loop's previous step): try again later."""


class SilentRetry(Retry):
    """As Retry, for a structure too common to report when it never becomes a cell (act(affine) for RNNs)."""
