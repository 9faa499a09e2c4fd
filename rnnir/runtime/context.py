"""Input context: the part of the previous *input* a streaming model needs, kept outside the model.

silero-vad's own Python wrapper keeps the last 64 samples of every chunk and
prepends them to the next 512-sample chunk (576 samples go into the model;
zeros before the first chunk).  The model does not carry those samples as
state, so a caller who forgets them gets plausible but wrong probabilities.
Declaring the context makes the session keep it:

    s = StatefulSession("silero_vad.onnx", context={"input": 64})
    s.run({"input": chunk_512, "sr": sr})     # the model sees [last 64 samples of the previous call | chunk]

The context runs along the input's time axis: the axis that reaches a
recurrent op's time axis when there is one, else the input's last axis
(samples); ``{"input": (64, 1)}`` or :class:`InputContext` names it.  It is
stream state: ``reset()`` clears it, ``fork()`` copies it, ``save_state()``
stores it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnir.errors import StateError

__all__ = ["ContextSpec", "InputContext", "parse_context"]


@dataclass(frozen=True)
class InputContext:
    """Keep the last ``size`` elements of ``input`` along ``axis`` and prepend them to the next call's chunk."""

    input: str
    size: int
    axis: int | None = None  # None: resolved against the model (see module docstring)


ContextSpec = Mapping[str, "int | tuple[int, int] | InputContext"]


def parse_context(spec: ContextSpec | None, inputs: Mapping[str, Any], time_axes: Mapping[str, int], state_inputs: set[str], label: str,
                  max_bytes: int | None = None) -> tuple[InputContext, ...]:
    """Validate a ``context=`` argument against the model: resolved axes, known non-state inputs, positive sizes.

    ``inputs`` maps input names to IOSpecs (``shape`` may be None), ``time_axes`` names the axis of inputs
    that reach a recurrent op's time axis.  ``max_bytes`` (the session's ``max_slot_bytes``) bounds what one
    kept context may take, as it bounds a state slot: counted here from the declared dims, at the first call
    from the real ones.
    """
    if not spec:
        return ()
    out: list[InputContext] = []
    for name, value in spec.items():
        if isinstance(value, InputContext):
            size, axis = value.size, value.axis
        elif isinstance(value, tuple):
            size, axis = value
        else:
            size, axis = value, None
        if name in state_inputs:
            raise StateError(f"{label}: context names {name!r}, a state input: its state is kept already; context is for plain inputs")
        if name not in inputs:
            raise StateError(f"{label}: context names {name!r}, which is not an input; inputs are {sorted(n for n in inputs if n not in state_inputs)}")
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise StateError(f"{label}: context size for {name!r} must be an integer, got {size!r}") from None
        if size <= 0:
            raise StateError(f"{label}: context size for {name!r} must be positive, got {size}")
        shape = inputs[name].shape
        if axis is None:
            axis = time_axes.get(name, (len(shape) - 1) if shape else None)
            if axis is None:
                raise StateError(f"{label}: input {name!r} declares no shape: give the context axis, e.g. context={{{name!r}: ({size}, AXIS)}}")
        axis = int(axis)
        if shape is not None:
            if axis < 0:
                axis += len(shape)
            if not 0 <= axis < len(shape):
                raise StateError(f"{label}: context axis {axis} is outside input {name!r} of rank {len(shape)}")
            dim = shape[axis]
            if isinstance(dim, int) and dim > 0 and dim <= size:
                raise StateError(f"{label}: input {name!r} takes {dim} steps along axis {axis}; a context of {size} leaves no room for new input")
        if max_bytes is not None:
            dtype = inputs[name].dtype
            others = [d for k, d in enumerate(shape or ()) if k != axis and isinstance(d, int) and d > 0]
            _check_size(label, name, size * math.prod(others) * (np.dtype(dtype).itemsize if dtype is not None else 1), max_bytes)
        out.append(InputContext(name, size, axis))
    return tuple(out)


def _check_size(label: str, name: str, nbytes: int, max_bytes: int) -> None:
    if nbytes > max_bytes:
        raise StateError(
            f"{label}: the context kept for input {name!r} would take {nbytes:,} bytes, over the {max_bytes:,}-byte limit per slot "
            "(max_slot_bytes; rnnir run --max-slot-mb)"
        )


class ContextKeeper:
    """One stream's kept context: the tail of each declared input from the previous call."""

    __slots__ = ("specs", "tails", "dtypes", "max_bytes")

    def __init__(self, specs: tuple[InputContext, ...], dtypes: Mapping[str, np.dtype | None], max_bytes: int | None = None) -> None:
        self.specs = specs
        self.tails: dict[str, np.ndarray] = {}
        self.dtypes = dict(dtypes)
        self.max_bytes = max_bytes

    def copy(self) -> ContextKeeper:
        twin = ContextKeeper(self.specs, self.dtypes, self.max_bytes)
        twin.tails = {k: v.copy() for k, v in self.tails.items()}
        return twin

    def clear(self) -> None:
        self.tails = {}

    def extend(self, feeds: Mapping[str, Any], label: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The feeds with each context prepended, and the tails to keep once the call succeeded."""
        out = dict(feeds)
        pending: dict[str, np.ndarray] = {}
        for spec in self.specs:
            if spec.input not in feeds:
                continue  # the call itself reports the missing input
            chunk = np.asarray(feeds[spec.input])
            dtype = self.dtypes.get(spec.input) or chunk.dtype
            axis = spec.axis if spec.axis is not None else chunk.ndim - 1
            if chunk.ndim <= axis:
                raise StateError(f"{label}: input {spec.input!r} has shape {chunk.shape}: no axis {axis} to prepend the context along")
            tail = self.tails.get(spec.input)
            want = chunk.shape[:axis] + (spec.size,) + chunk.shape[axis + 1 :]
            if tail is None:
                if self.max_bytes is not None:
                    _check_size(label, spec.input, math.prod(want) * np.dtype(dtype).itemsize, self.max_bytes)
                tail = np.zeros(want, dtype=dtype)  # the wrapper's zeros before the first chunk
            elif tail.shape != want:
                raise StateError(
                    f"{label}: input {spec.input!r} has shape {chunk.shape}, but the kept context is {tail.shape}: "
                    "a chunk may change only along the context axis within a stream; reset() first"
                )
            combined = np.concatenate([tail, chunk.astype(dtype, copy=False)], axis=axis)
            index = [slice(None)] * combined.ndim
            index[axis] = slice(combined.shape[axis] - spec.size, None)
            pending[spec.input] = np.ascontiguousarray(combined[tuple(index)])
            out[spec.input] = combined
        return out, pending

    def commit(self, pending: Mapping[str, np.ndarray]) -> None:
        self.tails.update(pending)

    def caller_shape(self, name: str, shape: tuple[int | str | None, ...] | None) -> tuple[int | str | None, ...] | None:
        """The shape the caller feeds: the model's, less the context along its axis (when static)."""
        for spec in self.specs:
            if spec.input == name and shape is not None and spec.axis is not None:
                dim = shape[spec.axis]
                if isinstance(dim, int) and dim > 0:
                    return shape[: spec.axis] + (dim - spec.size,) + shape[spec.axis + 1 :]
        return shape

    def nbytes(self) -> int:
        return sum(int(t.nbytes) for t in self.tails.values())
