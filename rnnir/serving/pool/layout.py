"""Where a model's batch is: the batch axis of every plain input and state input, read from the declared shapes
(:func:`static_layout`), and of every output, found by running the model (:func:`probe`).

Before the first batched call the pool probes the model: three different rows run as one batch must equal the
same rows run one at a time (1e-5), which also finds each output's batch axis.  A model whose batch is fixed
(``state[2, 1, 128]``) or that fails the probe runs one stream per call (``SessionPool.batching`` says why).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rnnir.errors import StateError
from rnnir.runtime.spec import SessionModel

__all__ = ["BatchLayout", "probe", "static_layout"]

PROBE_ROWS = 3
PROBE_TOL = 1e-5


@dataclass(frozen=True)
class BatchLayout:
    """Where the batch is: plain input -> axis (None: shared by every row), state input -> axis, output -> axis."""

    inputs: dict[str, int | None]
    states: dict[str, int]
    outputs: dict[str, int] = field(default_factory=dict)


def dynamic_dims(shape: Sequence[int | str | None] | None) -> list[int]:
    return [] if shape is None else [k for k, d in enumerate(shape) if not (isinstance(d, int) and d > 0)]


def static_layout(m: SessionModel, explicit: Mapping[str, int | None]) -> tuple[BatchLayout | None, str]:
    """The batch axes of the state and plain inputs, from the declared shapes (outputs come from the probe)."""
    unknown = set(explicit) - set(m.inputs)
    if unknown:
        raise StateError(f"{m.label}: batch_axes names {sorted(unknown)}, which are not inputs {sorted(m.inputs)}")
    states: dict[str, int] = {}
    symbols: set[str] = set()
    for slot in m.slots:
        if slot.input in explicit:
            axis = explicit[slot.input]
            if axis is None:
                return None, f"batch_axes says state input {slot.input!r} has no batch axis"
            states[slot.input] = int(axis)
            continue
        dyn = dynamic_dims(slot.shape)
        if slot.shape is None:
            return None, f"state input {slot.input!r} declares no shape: give batch_axes={{{slot.input!r}: AXIS}}"
        if not dyn:
            return None, f"state input {slot.input!r} has the static shape {list(slot.shape)}: its batch is fixed"
        if len(dyn) > 1:
            named = [k for k in dyn if isinstance(slot.shape[k], str)]
            shared = [k for k in named if any(slot.shape[k] in (m.inputs[n].shape or ()) for n in m.plain_inputs)]
            if len(shared) != 1:
                return None, f"state input {slot.input!r} has several dynamic dims {dyn}: give batch_axes={{{slot.input!r}: AXIS}}"
            dyn = shared
        states[slot.input] = dyn[0]
        if isinstance(slot.shape[dyn[0]], str):
            symbols.add(str(slot.shape[dyn[0]]))
    if not states:
        return None, "the model has no state: nothing to keep per stream"
    traced = {ri.input: ri.batch_axis for ri in m.recurrent_inputs}
    inputs: dict[str, int | None] = {}
    for name in m.plain_inputs:
        if name in explicit:
            inputs[name] = explicit[name]
            continue
        shape = m.inputs[name].shape
        by_symbol = [k for k, d in enumerate(shape or ()) if isinstance(d, str) and d in symbols]
        dyn = dynamic_dims(shape)
        if by_symbol:
            inputs[name] = by_symbol[0]
        elif name in traced:
            inputs[name] = traced[name]
        elif shape is None:
            return None, f"input {name!r} declares no shape: give batch_axes={{{name!r}: AXIS or None}}"
        elif dyn and dyn[0] == 0:
            inputs[name] = 0
        elif dyn:
            return None, f"input {name!r} {list(shape)} has no leading dynamic dim: give batch_axes={{{name!r}: AXIS or None}}"
        else:
            inputs[name] = None  # static: one value shared by the rows of a call (e.g. a sample rate)
    return BatchLayout(inputs, states), ""


def probe(
    sess: Any,
    m: SessionModel,
    layout: BatchLayout,
    batch: Mapping[str, np.ndarray],
    initial: Mapping[str, np.ndarray],
    model_feeds: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
) -> tuple[BatchLayout, str]:
    """Run three rows as one batch and one at a time on ``sess``: equal results, and each output's batch axis.

    ``batch`` is a tick's stacked feeds, ``initial`` one stream's initial state, ``model_feeds`` turns one row's
    feeds into the model's (a kept context prepended).  Returns the layout with its outputs' axes and "", or
    ``layout`` and why the model cannot batch."""
    one: list[dict[str, np.ndarray]] = []
    rng = np.random.default_rng(0)
    for k in range(PROBE_ROWS):
        feed: dict[str, np.ndarray] = {}
        for name, arr in batch.items():
            axis = layout.inputs.get(name)
            if axis is None:
                feed[name] = arr
                continue
            row = np.take(arr, [min(k, arr.shape[axis] - 1)], axis=axis)
            if k >= arr.shape[axis] and np.issubdtype(row.dtype, np.floating):
                row = (row * (1.0 - 0.5 * k) + 0.1 * rng.standard_normal(row.shape)).astype(row.dtype)
            feed[name] = row
        feed = model_feeds(feed)
        for name, state in initial.items():
            if np.issubdtype(state.dtype, np.floating):
                state = (state + 0.1 * rng.standard_normal(state.shape)).astype(state.dtype)  # distinct states per row
            feed[name] = state
        one.append(feed)
    try:
        solo = [dict(zip(m.output_names, sess.run(None, f))) for f in one]
        stacked = {
            name: (one[0][name] if (layout.inputs.get(name) is None and name not in layout.states)
                   else np.concatenate([f[name] for f in one], axis=layout.states.get(name, layout.inputs.get(name))))
            for name in one[0]
        }
        together = dict(zip(m.output_names, sess.run(None, stacked)))
    except Exception as exc:  # noqa: BLE001 - any failure means: do not batch this model
        return layout, f"a batch of {PROBE_ROWS} rows failed in onnxruntime ({type(exc).__name__}: {str(exc)[:160]})"
    outputs: dict[str, int] = {}
    for name, ref in solo[0].items():
        got = together[name]
        axis = grown_axis(np.shape(ref), np.shape(got), PROBE_ROWS)
        if axis is None:
            return layout, f"output {name!r} has shape {np.shape(ref)} for one row and {np.shape(got)} for {PROBE_ROWS}: no batch axis to split"
        for k in range(PROBE_ROWS):
            piece = np.take(got, [k], axis=axis)
            want = solo[k][name]
            if piece.shape != np.shape(want) or not np.allclose(piece, want, rtol=0, atol=PROBE_TOL, equal_nan=True):
                diff = float(np.max(np.abs(piece.astype(np.float64) - np.asarray(want, dtype=np.float64)))) if piece.shape == np.shape(want) else float("inf")
                return layout, (
                    f"row {k} of a batch of {PROBE_ROWS} differs from the same row run alone on output {name!r} "
                    f"(max |diff| {diff:.3g}): the model mixes batch rows"
                )
        outputs[name] = axis
    for slot in m.slots:
        out_axis = outputs.get(slot.output or "")
        if out_axis != layout.states[slot.input]:
            return layout, f"state output {slot.output!r} batches along axis {out_axis}, its input {slot.input!r} along {layout.states[slot.input]}"
    return BatchLayout(layout.inputs, layout.states, outputs), ""


def grown_axis(one: tuple[int, ...], many: tuple[int, ...], rows: int) -> int | None:
    """The one axis along which ``many`` has ``rows`` where ``one`` has 1, every other dim equal."""
    if len(one) != len(many):
        return None
    found = [k for k, (a, b) in enumerate(zip(one, many)) if a != b]
    if len(found) == 1 and one[found[0]] == 1 and many[found[0]] == rows:
        return found[0]
    if not found:
        ones = [k for k, a in enumerate(one) if a == 1 and rows == 1]
        return ones[0] if ones else None
    return None


def one_row(shape: tuple[int, ...], axis: int | None) -> tuple[int, ...]:
    """``shape`` with its batch dim (if any) set to 1."""
    return shape if axis is None or axis >= len(shape) else shape[:axis] + (1,) + shape[axis + 1 :]


def rows_shape(shape: tuple[int, ...], axis: int, rows: int) -> tuple[int, ...]:
    return shape[:axis] + (rows,) + shape[axis + 1 :]

