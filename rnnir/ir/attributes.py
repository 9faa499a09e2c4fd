"""What IR elements are annotated with: tensor types (with quantization), provenance, a slot's initial value,
and the kinds of loads, store results and ordering layers.  Plain frozen values: none of them belongs to a program.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rnnir.errors import IRError
from rnnir.util.fastinit import fast_init

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["LoadKind", "OrderingLayer", "Provenance", "QuantParams", "SlotInit", "StoreResult", "TensorType"]


@dataclass(frozen=True)
class QuantParams:
    """Quantization of a stored tensor (scale/zero point per tensor or per axis)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None


@fast_init
@dataclass(frozen=True)
class TensorType:
    """dtype (a numpy dtype name), shape (ints, symbolic names, or None for unknown dims)."""

    dtype: str | None = None
    shape: tuple[int | str | None, ...] | None = None
    layout: str | None = None
    quant: QuantParams | None = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def dim(self, axis: int) -> int | str | None:
        if self.shape is None or not -len(self.shape) <= axis < len(self.shape):
            return None
        return self.shape[axis]

    def __str__(self) -> str:
        dt = self.dtype or "?"
        if self.shape is None:
            return f"{dt}[*]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        q = f" q(scale={self.quant.scale})" if self.quant else ""
        lay = f" layout={self.layout}" if self.layout else ""
        return f"{dt}[{dims}]{lay}{q}"


@fast_init
@dataclass(frozen=True)
class Provenance:
    """Where an IR element came from: the ONNX node and value, and the path through If branches."""

    node: str | None = None
    value: str | None = None
    branch: tuple[str, ...] = ()

    @property
    def branch_path(self) -> str:
        return "/".join(self.branch)

    def __str__(self) -> str:
        parts = []
        if self.node:
            parts.append(f"node {self.node!r}")
        if self.value:
            parts.append(f"value {self.value!r}")
        if self.branch:
            parts.append(f"in {self.branch_path}")
        return ", ".join(parts)



class LoadKind(enum.Enum):
    """How a call reads a slot: in place (``VIEW``) or into a private copy (``COPY``)."""

    VIEW = "view"
    COPY = "copy"


class StoreResult(enum.Enum):
    """What a Store returns: an effect token, a view of the destination, or a true copy of the value."""

    TOKEN = "token"
    ALIAS = "alias"
    VALUE = "value"


class OrderingLayer(enum.Enum):
    """Who guarantees that a call's effects finish before the next call starts."""

    RUNTIME = "runtime"  # the runtime runs calls serially and completes every store first
    DEVICE = "device"  # a device event / stream sync issued by the compiled code
    CALLER = "caller"  # the caller must synchronise before starting the next call
    NONE = "none"  # nobody: the program does not order its effects

    def describe(self) -> str:
        return {
            OrderingLayer.RUNTIME: "the runtime's serial call sequencing",
            OrderingLayer.DEVICE: "a device event at the end of the call",
            OrderingLayer.CALLER: "the caller, who must synchronise before the next call",
            OrderingLayer.NONE: "nobody",
        }[self]


@fast_init
@dataclass(frozen=True)
class SlotInit:
    """A slot's value before the first call: ``zeros``, a ``constant`` or ``caller`` supplied."""

    kind: str = "zeros"
    value: np.ndarray | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("zeros", "constant", "caller"):
            raise IRError(f"slot init kind must be zeros, constant or caller, not {self.kind!r}")
        if self.kind == "constant" and self.value is None:
            raise IRError("a constant slot init needs a value")

    def __str__(self) -> str:
        if self.kind == "constant" and self.value is not None:
            flat = np.asarray(self.value).ravel()
            shown = ", ".join(f"{v:g}" for v in flat[:4]) + (", …" if flat.size > 4 else "")
            return f"constant[{shown}]"
        return self.kind
