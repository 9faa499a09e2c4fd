"""A slot's initial value and shape: symbolic dims resolved from the first call's feeds (the ``state_shapes=``
argument, a dim symbol shared with a fed input, a recurrent op's batch axis, a leading dynamic dim), each slot
bounded by ``max_slot_bytes`` before anything is allocated, and the size a state file may expand to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rnnir.errors import StateError
from rnnir.runtime.spec import SessionModel, SlotSpec
from rnnir.runtime.statefile import shape_text

__all__ = ["StateShapeError", "batch_size_of", "check_slot_size", "initial_value", "resolve_shape", "state_file_limit"]

_STATE_META_BYTES = 2**20  # room for a state file's metadata entry and zip headers


class StateShapeError(StateError):
    """A state input's shape cannot be resolved from its declaration and the feeds: pass ``state_shapes=``."""


def initial_value(
    m: SessionModel, state_shapes: Mapping[str, tuple[int, ...]], spec: SlotSpec, plain: Mapping[str, np.ndarray], batch: int | None = None
) -> tuple[np.ndarray, str]:
    """What slot ``spec`` starts from, shaped from this call's feeds (``plain``), and how a dim was guessed, if one was."""
    if spec.init.kind == "caller":
        raise StateError(f"{m.label}: state input {spec.input!r} has no initial value; pass it in the first call's feeds")
    shape, guess = resolve_shape(m, state_shapes, spec, plain, batch)
    check_slot_size(m, spec, shape)
    if spec.init.kind == "constant" and spec.init.value is not None:
        value = np.array(np.broadcast_to(np.asarray(spec.init.value, dtype=spec.dtype), shape))
    else:
        value = np.zeros(shape, dtype=spec.dtype)
    return value, guess


def state_file_limit(m: SessionModel, exact: bool = True, context: bool = False) -> int:
    """The most a state file of this model may expand to: each slot's exact size when its shape is fixed
    (``exact``: the file must come from this state layout), else the per-slot bound; plus the input
    context (``context``: the session keeps one), and room for the metadata."""
    total = _STATE_META_BYTES
    for spec in m.slots:
        dims = spec.shape
        if exact and dims is not None and all(isinstance(d, int) and d > 0 for d in dims):
            size = spec.dtype.itemsize
            for d in dims:
                size *= int(d)  # type: ignore[arg-type]  # all ints: checked just above
            total += min(size, m.max_slot_bytes)
        else:
            total += m.max_slot_bytes * (1 if exact else 2)  # a migration may read an older, larger layout
    if context:
        total += m.max_slot_bytes
    return total


def check_slot_size(m: SessionModel, spec: SlotSpec, shape: Sequence[int], what: str = "") -> None:
    """Refuse a slot over ``max_slot_bytes`` before allocating it (Python ints: no overflow)."""
    size = spec.dtype.itemsize
    for d in shape:
        size *= int(d)
    limit = m.max_slot_bytes
    if size > limit:
        raise StateError(
            f"{what or m.label}: state input {spec.input!r} of shape {shape_text(tuple(shape))} would take {size:,} bytes, "
            f"over the {limit:,}-byte limit per slot; raise it with StatefulSession(max_slot_bytes=...) "
            "or `rnnir run --max-slot-mb` if the model really keeps that much state"
        )


def resolve_shape(
    m: SessionModel, state_shapes: Mapping[str, tuple[int, ...]], spec: SlotSpec, plain: Mapping[str, np.ndarray], batch_size: int | None = None
) -> tuple[tuple[int, ...], str]:
    """The slot's shape and, when a dim had to be guessed from the batch, how."""
    if spec.input in state_shapes:
        return state_shapes[spec.input], ""
    if spec.init.kind == "constant" and spec.init.value is not None and spec.shape is None:
        return tuple(np.shape(spec.init.value)), ""
    if spec.shape is None:
        raise StateShapeError(
            f"{m.label}: state input {spec.input!r} declares no shape; pass state_shapes={{{spec.input!r}: (...)}}"
        )
    symbols: dict[str, int] = {}
    for name, arr in plain.items():
        declared = m.inputs[name].shape
        if declared is None or len(declared) != arr.ndim:
            continue
        for d, size in zip(declared, arr.shape):
            if isinstance(d, str):
                symbols.setdefault(d, int(size))
    dims: list[int] = []
    guessed: list[str] = []
    batch: tuple[int, str] | None = None
    for axis, d in enumerate(spec.shape):
        if isinstance(d, int) and d > 0:
            dims.append(d)
            continue
        if isinstance(d, str) and d in symbols:
            dims.append(symbols[d])
            continue
        if batch is None:
            batch = batch_size_of(m, plain)
            if batch is None and batch_size is not None:
                batch = (batch_size, "the batch size asked for")
        if batch is None:
            raise StateShapeError(
                f"{m.label}: cannot tell dim {axis} ({d or '?'}) of state input {spec.input!r} "
                f"(declared {shape_text(spec.shape)}) from the feeds; pass state_shapes={{{spec.input!r}: (...)}}"
            )
        dims.append(batch[0])
        guessed.append(f"dim {axis} = {batch[0]} ({batch[1]})")
    return tuple(dims), ", ".join(guessed)


def batch_size_of(m: SessionModel, plain: Mapping[str, np.ndarray]) -> tuple[int, str] | None:
    """The batch size the feeds tell (a recurrent op's batch axis, or a leading dynamic dim), and where it came from."""
    for ri in m.recurrent_inputs:
        arr = plain.get(ri.input)
        if arr is not None and arr.ndim > ri.batch_axis:
            return int(arr.shape[ri.batch_axis]), f"batch axis of {ri.input!r}, which feeds {ri.node!r}"
    for name in m.plain_inputs:
        arr = plain.get(name)
        declared = m.inputs[name].shape
        if arr is None or arr.ndim == 0 or not declared or isinstance(declared[0], int) and declared[0] > 0:
            continue
        return int(arr.shape[0]), f"leading dim of {name!r}"
    return None
