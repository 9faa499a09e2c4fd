"""The stream a check runs: each input's time axis, the inputs generated where the caller gave none, and the
stream cut into calls.

Time axis: a stream is split along the time axis of each input that has one (``time_axis=``; else the input
that reaches a recurrent op's ``X``, through Transpose when needed; else a dim named like time: T, time, seq,
sequence, frames, ..., unless it is the input's last axis, which holds features or samples).  A model whose
inputs have no time axis (one frame per call, like silero-vad) runs in *calls mode*: each stream array carries
one more leading axis than the input, the call index.

The multi-call check and the streaming checks cut a stream the same way: both go through :func:`prepare_stream`
and :meth:`Stream.chunks`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnir.errors import RnnirError
from rnnir.runtime.session import StatefulSession
from rnnir.runtime.statefile import shape_text

__all__ = [
    "DEFAULT_MAX_ELEMENTS",
    "TIME_NAMES",
    "InputHints",
    "ProgressCallback",
    "Stream",
    "StreamError",
    "prepare_stream",
    "time_axes",
]

# a dim named for time steps; also a compound ending in one (feats_length: FSMN's frames of features)
TIME_NAMES = re.compile(
    r"^(t|time|times|seq|seq_len|sequence|sequence_length|seqlen|frames?|n_frames|num_frames|steps?|len|length)$"
    r"|^[a-z]+_(length|len|frames|steps)$",
    re.I,
)
#: the most elements a generated input may hold (``max_elements=``)
DEFAULT_MAX_ELEMENTS = 50_000_000


#: ``progress(what, done, total)``: called after every model call of a check (``rnnir run`` shows it on a terminal)
ProgressCallback = Callable[[str, int, int], None]


class StreamError(RnnirError, ValueError):
    """The stream cannot be used or generated: unknown input, wrong rank, unknown or absurd dims."""


def time_axes(session: StatefulSession, time_axis: int | Mapping[str, int | None] | None = None) -> dict[str, int | None]:
    """Each input the caller feeds -> the axis a stream is split along into calls (None: one frame per call,
    or fed unchanged), as :func:`check_multicall` decides it (traced to a recurrent op's X, or a time-named dim)."""
    inputs = session.inputs
    if isinstance(time_axis, Mapping):
        unknown = set(time_axis) - set(inputs)
        if unknown:
            raise StreamError(f"time_axis names {sorted(unknown)}, which are not (non-state) inputs {sorted(inputs)}")
        return {n: (None if (ax := time_axis.get(n)) is None else int(ax)) for n in inputs}
    if time_axis is not None:
        return {n: (int(time_axis) if spec.shape is not None and len(spec.shape) > int(time_axis) else None) for n, spec in inputs.items()}
    axes: dict[str, int | None] = {n: None for n in inputs}
    traced = {ri.input: ri.time_axis for ri in session.recurrent_inputs}
    state_syms = {d for s in session.slots for d in (s.shape or ()) if isinstance(d, str)}
    for name, spec in inputs.items():
        if name in traced:
            axes[name] = traced[name]
            continue
        shape = spec.shape or ()
        for axis, d in enumerate(shape):
            # the last axis of a multi-axis input holds features or samples, not time steps
            last = axis == len(shape) - 1 and len(shape) > 1
            if isinstance(d, str) and not last and d not in state_syms and TIME_NAMES.match(d):
                axes[name] = axis
                break
    return axes


@dataclass(frozen=True)
class InputHints:
    """What the caller says about inputs the model leaves open: shapes and fixed values."""

    shapes: dict[str, Sequence[int]]
    values: dict[str, float]


@dataclass(frozen=True)
class Stream:
    """The whole stream as arrays, ready to cut into calls.

    ``mode``: ``"time"`` (chunks along each input's time axis) or ``"calls"`` (one frame per call);
    ``length``: time steps or calls; ``const``: the inputs fed unchanged every call; ``lengths``: the generated
    ``sequence_lens`` inputs, fed each call's length (in ``feeds``: the whole stream's)."""

    inputs: Mapping[str, Any]  # the session's input specs: a static time axis fixes the chunk size
    feeds: dict[str, np.ndarray]
    axes: dict[str, int | None]
    mode: str
    length: int
    const: frozenset[str]
    lengths: frozenset[str]

    @property
    def static_steps(self) -> bool:
        """Whether a streamed input's time axis is static (every call takes that many steps)."""
        return any(
            (ax := self.axes[n]) is not None and spec.shape is not None and isinstance(spec.shape[ax], int)
            for n, spec in self.inputs.items()
        )

    def usable_chunks(self, sizes: list[int], notes: list[str]) -> list[int]:
        """The chunk sizes this stream can be cut into: 1 in calls mode (one frame per call); the model's own when
        its time axis is static; else those no longer than the stream (``notes`` says which were dropped and why)."""
        if self.mode == "calls":
            return [1]
        static: set[int] = set()
        for n, spec in self.inputs.items():
            ax = self.axes[n]
            dim = None if ax is None or spec.shape is None else spec.shape[ax]
            if isinstance(dim, int) and dim > 0:
                static.add(dim)
        stream_len = self.length
        if static:
            fixed = static.pop()
            if sizes != [fixed]:
                notes.append(f"the model's time axis is static ({fixed} steps per call): chunk size {fixed} used instead of {sizes}")
            if stream_len < fixed:
                raise StreamError(f"the stream has {stream_len} steps, fewer than the {fixed} every call of this model takes")
            if stream_len % fixed:
                notes.append(f"the last {stream_len % fixed} steps of the stream do not fill a call of {fixed} steps: not run")
            return [fixed]
        usable = [c for c in sizes if c <= stream_len]
        for c in sizes:
            if c > stream_len:
                notes.append(f"chunk size {c} is longer than the stream ({stream_len} steps): skipped")
        if not usable:
            raise StreamError(f"every chunk size {sizes} is longer than the stream ({stream_len} steps)")
        return usable

    def chunks(self, c: int) -> list[dict[str, np.ndarray]]:
        """The feeds of each call, ``c`` time steps each (calls mode: one frame each); with a static time axis,
        the steps left over that do not fill a call are not run."""
        out = []
        stop = self.length - (self.length % c if self.static_steps else 0)
        for start in range(0, stop, c):
            feed: dict[str, np.ndarray] = {}
            for name, arr in self.feeds.items():
                if name in self.lengths:
                    feed[name] = np.full_like(arr, min(start + c, self.length) - start)
                elif name in self.const:
                    feed[name] = arr
                elif self.mode == "calls":
                    feed[name] = arr[start]
                else:
                    ax = self.axes[name]
                    assert ax is not None  # an input without a time axis is in self.const
                    index = [slice(None)] * arr.ndim
                    index[ax] = slice(start, min(start + c, self.length))
                    feed[name] = np.ascontiguousarray(arr[tuple(index)])
            out.append(feed)
        return out


def prepare_stream(
    session: StatefulSession,
    stream: Mapping[str, Any] | np.ndarray | None,
    axes: dict[str, int | None],
    *,
    chunk_sizes: list[int],
    calls: int | None,
    length: int | None,
    seed: int,
    batch: int,
    max_elements: int,
    notes: list[str],
    hints: InputHints,
) -> Stream:
    """The whole stream: the caller's arrays converted to each input's dtype, the other inputs generated
    (seeded by ``seed``), its length checked.  ``notes`` collects what the caller should know (an input
    generated as zeros, a ``sequence_lens`` fed the full length)."""
    mode = "time" if any(a is not None for a in axes.values()) else "calls"
    inputs = session.inputs
    if stream is None:
        given: dict[str, np.ndarray] = {}
    elif isinstance(stream, Mapping):
        given = {k: np.asarray(v) for k, v in stream.items()}
    else:
        streamed = [n for n, a in axes.items() if a is not None] or [n for n in inputs if n not in session.optional_inputs]
        if len(streamed) != 1:
            raise StreamError(f"a bare array needs exactly one streamed input; this model has {streamed}: pass a dict")
        given = {streamed[0]: np.asarray(stream)}
    # the stream is data to cut into calls: each input's part is converted to the dtype the input takes, as a
    # caller feeding the model must (StatefulSession refuses another dtype, as onnxruntime does)
    given = {k: _as_input_dtype(a, inputs[k].dtype) if k in inputs else a for k, a in given.items()}
    unknown = set(given) - set(inputs)
    if unknown:
        states = set(given) & {s.input for s in session.slots}
        hint = " (state inputs come from the slots; use StatefulSession for an explicit initial state)" if states else ""
        raise StreamError(f"{session.label}: stream names {sorted(unknown)}, which are not inputs the caller feeds {sorted(inputs)}{hint}")

    const_names: set[str] = set()
    stream_len: int | None = None
    for name, arr in given.items():
        spec = inputs[name]
        rank = None if spec.shape is None else len(spec.shape)
        if mode == "time":
            ax = axes[name]
            if ax is None:
                const_names.add(name)
                continue
            if arr.ndim <= ax or (rank is not None and arr.ndim != rank):
                raise StreamError(
                    f"stream {name!r} has shape {arr.shape}; the input has rank {rank} with time axis {ax}. "
                    "For one frame per call, pass time_axis={} and a leading call axis"
                )
            n = arr.shape[ax]
        else:
            if rank is not None and arr.ndim == rank:
                const_names.add(name)
                continue
            if rank is not None and arr.ndim != rank + 1:
                raise StreamError(
                    f"stream {name!r} has rank {arr.ndim}; in calls mode it needs the input's rank {rank} plus a leading call axis"
                )
            n = arr.shape[0]
        if stream_len is not None and n != stream_len:
            raise StreamError(f"stream inputs disagree on the stream length: {name!r} has {n}, another has {stream_len}")
        stream_len = n
    if stream_len is None:
        if mode == "time":
            stream_len = length if length is not None else (calls * max(chunk_sizes) if calls else 3 * max(chunk_sizes))
        else:
            stream_len = calls if calls is not None else (length if length is not None else 48)
    if stream_len <= 0:
        raise StreamError(f"the stream is empty (length {stream_len})")

    rng = np.random.default_rng(seed)
    symbols = _symbols(session, given, mode, batch)
    lengths: set[str] = set()
    for name, spec in inputs.items():
        if name in given or name in session.optional_inputs:
            continue
        if mode == "time" and name in session.length_inputs:
            lengths.add(name)
            given[name] = _generate(session, name, spec, None, mode, stream_len, symbols, rng, max_elements, batch, [], hints)
            notes.append(
                f"sequence_lens input {name!r} is fed each call's full length: bugs that need shorter sequences "
                "(SD008) stay hidden; pass it in stream= to test them"
            )
            continue
        given[name] = _generate(session, name, spec, axes[name], mode, stream_len, symbols, rng, max_elements, batch, notes, hints)
        if mode == "time" and axes[name] is None:
            const_names.add(name)
    feeds = {n: (np.full_like(a, stream_len) if n in lengths else a) for n, a in given.items()}
    return Stream(inputs, feeds, dict(axes), mode, int(stream_len), frozenset(const_names), frozenset(lengths))


def _as_input_dtype(a: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    return a if dtype is None or a.dtype == dtype else a.astype(dtype)


def _symbols(session: StatefulSession, given: Mapping[str, np.ndarray], mode: str, batch: int) -> dict[str, int]:
    """Sizes of symbolic dims seen in the given stream (the call axis removed in calls mode)."""
    out: dict[str, int] = {}
    for name, arr in given.items():
        spec = session.inputs[name]
        if spec.shape is None:
            continue
        shape = arr.shape[1:] if mode == "calls" and arr.ndim == len(spec.shape) + 1 else arr.shape
        if len(shape) != len(spec.shape):
            continue
        for d, size in zip(spec.shape, shape):
            if isinstance(d, str):
                out.setdefault(d, int(size))
    for s in session.slots:
        for d in s.shape or ():
            if isinstance(d, str):
                out.setdefault(d, batch)  # a symbol a state shares is the batch
    return out


def _generate(
    session: StatefulSession,
    name: str,
    spec: Any,
    axis: int | None,
    mode: str,
    stream_len: int,
    symbols: Mapping[str, int],
    rng: np.random.Generator,
    max_elements: int,
    batch: int,
    notes: list[str],
    hints: InputHints,
) -> np.ndarray:
    given_shape = hints.shapes.get(name)
    if given_shape is not None:
        spec = dataclasses.replace(spec, shape=tuple(int(d) for d in given_shape))  # a time axis is still sized by the stream
    if spec.shape is None:
        raise StreamError(f"{session.label}: cannot generate input {name!r}: it declares no shape; pass it in stream=")
    batch_axes = {ri.batch_axis for ri in session.recurrent_inputs if ri.input == name}
    dims: list[int] = []
    for k, d in enumerate(spec.shape):
        if axis is not None and k == axis:
            dims.append(stream_len)
        elif isinstance(d, int) and d > 0:
            dims.append(d)
        elif isinstance(d, int) and d < 0:
            raise StreamError(f"{session.label}: input {name!r} declares a negative dim {d} at axis {k}")
        elif isinstance(d, str) and d in symbols:
            dims.append(symbols[d])
        elif k in batch_axes:
            dims.append(batch)
        else:
            raise StreamError(
                f"{session.label}: cannot generate input {name!r}: dim {k} ({d or '?'}) of {shape_text(spec.shape)} "
                "is unknown; pass the input in stream= or give its shape (input_shapes=, or --shape NAME=D0,D1 on the command line)"
            )
    if mode == "calls":
        dims = [stream_len, *dims]
    size = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if size > max_elements:
        raise StreamError(
            f"{session.label}: refusing to generate input {name!r} of shape {tuple(dims)} ({size} elements > max_elements={max_elements}); "
            "pass a smaller stream, calls= or length="
        )
    dtype = spec.dtype or np.dtype(np.float32)
    if name in hints.values:
        return np.full(dims, hints.values[name], dtype=dtype)
    if np.issubdtype(dtype, np.floating):
        return (0.5 * rng.standard_normal(dims)).astype(dtype)
    notes.append(f"generated input {name!r} ({dtype}) as zeros; pass it in stream= if zero is not a meaningful value")
    return np.zeros(dims, dtype=dtype)
