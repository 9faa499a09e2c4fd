"""Multi-call checks: run one input stream several ways and say whether state persistence holds.

    from rnnir.testing import check_multicall, report_to_text
    report = check_multicall("model.onnx", {"x": x}, chunk_sizes=[1, 7, 64])
    report.persistent_matches_whole   # chunked calls with persistence == one call over the whole stream
    report.first_divergence["reinit"] # first call where re-initialising the state differs, and by how much
    print(report_to_text(report)); report.to_json()

The variants (for every chunk size):

``persistent``
    the runtime keeps the state (:class:`~rnnir.runtime.StatefulSession`);
``reinit``
    the state is reset before every call (a slot that is never written);
``stale``
    call k starts from the state call k-2 wrote (a slot store that lands one call late);
``hc-swapped``
    h and c written into each other's place (packed slices, or two slots of the same shape).

``persistent`` is compared with one call over the whole stream (``whole``)
when the model can take it; every broken variant is compared with
``persistent``, call by call, on every output.  A broken variant that never
diverges means the stream cannot reveal that bug, and the report says so
instead of passing silently.

Time axis: a stream is split along the time axis of each input that has one
(``time_axis=``; else the input that reaches a recurrent op's ``X``, through
Transpose when needed; else a dim named like time: T, time, seq, sequence,
frames, ..., unless it is the input's last axis, which holds features or samples).  A model whose inputs have no time axis (one frame per call, like
silero-vad) is run in *calls mode*: each stream array carries one more leading
axis than the input, the call index; its whole-sequence oracle, when one
exists, is passed as ``whole=`` (a callable taking the stream and returning the
outputs stacked along the call axis, and the final state).

Long-run health: every slot's min, max and L2 norm after each call of the
longest persistent run, and a trend (``bounded``, ``growing``, ``decaying``,
``non-finite``), with the headroom to float16's largest value.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .analysis.slices import slice_maps
from .errors import RnnirError
from .runtime import StatefulSession
from .sessionspec import DEFAULT_MAX_SLOT_BYTES
from .statefile import shape_text

__all__ = [
    "Divergence",
    "MulticallReport",
    "SlotHealth",
    "StreamError",
    "VariantResult",
    "ProgressCallback",
    "check_multicall",
    "report_to_text",
    "time_axes",
]

VARIANTS = ("persistent", "reinit", "stale", "hc-swapped")
BROKEN = ("reinit", "stale", "hc-swapped")
# a dim named for time steps; also a compound ending in one (feats_length: FSMN's frames of features)
_TIME_NAMES = re.compile(
    r"^(t|time|times|seq|seq_len|sequence|sequence_length|seqlen|frames?|n_frames|num_frames|steps?|len|length)$"
    r"|^[a-z]+_(length|len|frames|steps)$",
    re.I,
)
_FP16_MAX = 65504.0
_DEFAULT_MAX_ELEMENTS = 50_000_000


#: ``progress(what, done, total)``: called after every model call of a check (``rnnir run`` shows it on a terminal)
ProgressCallback = Callable[[str, int, int], None]


class StreamError(RnnirError, ValueError):
    """The stream cannot be used or generated: unknown input, wrong rank, unknown or absurd dims."""


@dataclass
class Divergence:
    """Where a variant first differs from its reference: call index (0-based), output, and by how much."""

    call: int
    output: str
    max_abs_diff: float
    chunk: int | None

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call, "output": self.output, "max_abs_diff": _num(self.max_abs_diff), "chunk": self.chunk}


@dataclass
class VariantResult:
    """One variant at one chunk size, compared with its reference (``whole`` or ``persistent``)."""

    variant: str
    chunk: int | None
    calls: int
    reference: str
    first_divergence: Divergence | None
    max_abs_diff: float
    per_output: dict[str, float] = field(default_factory=dict)
    note: str = ""
    #: per call: max |diff| from the reference over every output (broken variants; empty for ``persistent``)
    per_call: list[float] = field(default_factory=list)
    #: per call: the mean of the report's ``watched`` output (what ``rnnir run --plot`` draws)
    trace: list[float] = field(default_factory=list)

    @property
    def diverges(self) -> bool:
        return self.first_divergence is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "chunk": self.chunk,
            "calls": self.calls,
            "reference": self.reference,
            "diverges": self.diverges,
            "first_divergence": None if self.first_divergence is None else self.first_divergence.to_json(),
            "max_abs_diff": _num(self.max_abs_diff),
            "per_output": {k: _num(v) for k, v in self.per_output.items()},
            "note": self.note,
            "trace": [_num(x) for x in self.trace],  # per call: the mean of the report's "watched" output
        }


@dataclass
class SlotHealth:
    """A slot's magnitude over a long run: per call min, max and L2 norm, and the trend they show."""

    slot: str
    min: list[float]
    max: list[float]
    norm: list[float]
    trend: str  # bounded / growing / decaying / non-finite / constant
    growth: float  # mean norm over the last quarter / over the first quarter
    peak_abs: float

    @property
    def fp16_headroom(self) -> float:
        """How many times the peak magnitude fits under float16's largest finite value."""
        return math.inf if self.peak_abs == 0 else _FP16_MAX / self.peak_abs

    def summary(self) -> str:
        head = "inf" if math.isinf(self.fp16_headroom) else f"{self.fp16_headroom:.3g}x"
        return (
            f"{self.slot}: {self.trend} over {len(self.norm)} calls (norm {_fmt(self.norm[0])} -> {_fmt(self.norm[-1])}, "
            f"growth x{_fmt(self.growth)}, |max| {_fmt(self.peak_abs)}, float16 headroom {head})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "trend": self.trend,
            "growth": _num(self.growth),
            "peak_abs": _num(self.peak_abs),
            "fp16_headroom": _num(self.fp16_headroom),
            "min": [_num(v) for v in self.min],
            "max": [_num(v) for v in self.max],
            "norm": [_num(v) for v in self.norm],
        }


@dataclass
class MulticallReport:
    """Everything :func:`check_multicall` found; render with :func:`report_to_text` or :meth:`to_json`."""

    model: str
    fingerprint: str
    mode: str  # "time" (chunks along a time axis) or "calls" (one frame per call)
    pairs: list[tuple[str, str | None]]
    time_axes: dict[str, int | None]
    stream_length: int
    chunk_sizes: list[int]
    variants: list[VariantResult]
    whole_available: bool
    persistent_matches_whole: bool | None
    revealing: bool
    status: str  # pass / fail / inconclusive / no-state
    verdict: str
    notes: list[str] = field(default_factory=list)
    health: dict[str, SlotHealth] = field(default_factory=dict)
    tol: float = 1e-5
    watched: str | None = None  # the output each variant's ``trace`` follows: the first output that is not state

    @property
    def ok(self) -> bool:
        """Persistence verified and the stream able to show it (``status == "pass"``)."""
        return self.status == "pass"

    @property
    def first_divergence(self) -> dict[str, Divergence | None]:
        """Per broken variant: its earliest divergence from ``persistent`` over every chunk size (None: never)."""
        out: dict[str, Divergence | None] = {}
        for name in BROKEN:
            runs = [v for v in self.variants if v.variant == name]
            if not runs:
                continue
            hits = [v.first_divergence for v in runs if v.first_divergence is not None]
            out[name] = min(hits, key=lambda d: (d.call, d.chunk or 0)) if hits else None
        return out

    def __str__(self) -> str:
        """The readable report (:func:`report_to_text`): ``print(report)`` shows the verdict, not a dataclass."""
        return report_to_text(self)

    def variant(self, name: str, chunk: int | None = None) -> VariantResult:
        for v in self.variants:
            if v.variant == name and (chunk is None or v.chunk == chunk):
                return v
        raise KeyError((name, chunk))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "model": self.model,
            "fingerprint": self.fingerprint,
            "mode": self.mode,
            "status": self.status,
            "ok": self.ok,
            "verdict": self.verdict,
            "pairs": [{"input": i, "output": o} for i, o in self.pairs],
            "time_axes": dict(self.time_axes),
            "stream_length": self.stream_length,
            "chunk_sizes": list(self.chunk_sizes),
            "tol": self.tol,
            "whole_available": self.whole_available,
            "persistent_matches_whole": self.persistent_matches_whole,
            "revealing": self.revealing,
            "first_divergence": {k: None if v is None else v.to_json() for k, v in self.first_divergence.items()},
            "variants": [v.to_json() for v in self.variants],
            "health": {k: h.to_json() for k, h in self.health.items()},
            "notes": list(self.notes),
            "watched": self.watched,
        }


# -- the check ---------------------------------------------------------------------------------


def check_multicall(
    model: Any,
    stream: Mapping[str, Any] | np.ndarray | None = None,
    chunk_sizes: Sequence[int] = (1, 7, 64),
    *,
    pairs: Mapping[str, str | None] | None = None,
    time_axis: int | Mapping[str, int | None] | None = None,
    whole: Callable[[dict[str, np.ndarray]], Mapping[str, Any]] | None = None,
    calls: int | None = None,
    chunk: int | None = None,
    length: int | None = None,
    tol: float = 1e-5,
    seed: int = 0,
    batch: int = 1,
    state_shapes: Mapping[str, Sequence[int]] | None = None,
    variants: Sequence[str] = VARIANTS,
    max_elements: int = _DEFAULT_MAX_ELEMENTS,
    session_options: Any = None,
    providers: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, float] | None = None,
    max_slot_bytes: int = DEFAULT_MAX_SLOT_BYTES,
    progress: ProgressCallback | None = None,
) -> MulticallReport:
    """Run ``stream`` through ``model`` whole, chunked with persistence, and with each persistence bug.

    ``model``: a path, bytes, ``onnx.ModelProto``, :class:`~rnnir.Program` or a
    :class:`~rnnir.runtime.StatefulSession` (its forks are used; its own state is left alone).
    ``stream``: input name -> array over the whole stream (an array alone feeds the one streamed
    input), converted to the dtype each input takes; inputs left out are generated from the model's input types (seeded by ``seed``).
    ``chunk`` (one size) replaces ``chunk_sizes``; ``calls``/``length`` size a generated stream
    (``length`` time steps, default ``calls * max chunk`` or ``3 * max chunk``; calls mode:
    ``calls`` frames, default 48).  ``whole``: an oracle for the whole stream (see module docstring).
    ``input_shapes`` gives generated inputs a shape where the model leaves dims unknown (one call's
    shape; the time axis, if any, is sized by the stream); ``input_values`` fills a generated input
    with one value every call (e.g. a sample rate).  ``max_slot_bytes`` raises (or lowers) the
    runtime's bound on one slot's size (:data:`rnnir.runtime.DEFAULT_MAX_SLOT_BYTES`).  ``progress(what, done,
    total)`` is called after every call of every variant.
    """
    session = model if isinstance(model, StatefulSession) else StatefulSession(
        model, pairs=pairs, session_options=session_options, providers=providers, state_shapes=state_shapes, cast_state=True,
        max_slot_bytes=max_slot_bytes,
    )
    sizes = [int(chunk)] if chunk is not None else [int(c) for c in chunk_sizes]
    if not sizes or any(c <= 0 for c in sizes):
        raise StreamError(f"chunk sizes must be positive integers, got {sizes}")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise StreamError(f"unknown variant(s) {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    if not session.slots:
        variants = ["persistent"]  # nothing persists: every broken variant is the same run
    notes: list[str] = []
    axes = _time_axes(session, time_axis)
    mode = "time" if any(a is not None for a in axes.values()) else "calls"
    feeds, stream_len, const_names, lengths = _prepare_stream(
        session, stream, axes, mode, sizes, calls, length, seed, batch, max_elements, notes,
        _InputHints(dict(input_shapes or {}), dict(input_values or {})),
    )
    for s in session.slots:
        if s.output_dtype is not None and s.output_dtype != s.dtype:
            notes.append(
                f"state output {s.output!r} is {s.output_dtype} but state input {s.input!r} takes {s.dtype}: every variant "
                "converts it between calls, as a caller would have to (SD005); the rounding shows against the whole call"
            )

    if mode == "calls":
        if sizes != [1]:
            notes.append(f"no input has a time axis: every call takes one frame, so chunk sizes {sizes} do not apply (chunk = 1 frame)")
        sizes = [1]
    else:
        sizes = _usable_chunks(session, axes, sizes, stream_len, notes)

    runner = _Runner(session, feeds, axes, const_names, lengths, mode, stream_len, tol)
    runner.progress = progress
    whole_out = runner.whole(whole, notes)
    results: list[VariantResult] = []
    health_run: tuple[int, list[dict[str, np.ndarray]]] | None = None
    for c in sizes:
        chunks = runner.chunks(c)
        persistent, states = runner.persistent(chunks, c)
        if health_run is None or len(states) > len(health_run[1]):
            health_run = (c, states)
        results.append(runner.compare_whole(persistent, whole_out, c))
        for name in variants:
            if name == "persistent":
                continue
            out = runner.broken(name, chunks, c)
            if out is None:
                plain = [p.input for p in slice_maps(session.program).declared if p.plain_recurrence]
                if c == sizes[0] and (plain or any(r.kind == "LSTM" for r in session.program.recurrents)):
                    why = (
                        f"the state of {', '.join(repr(p) for p in plain)} is carried by plain ops, whose h and c the IR does not name"
                        if plain
                        else "no pair's slices place h and c of one op where they could be swapped"
                    )
                    notes.append(f"{name} not run: {why}")
                continue
            results.append(runner.compare_calls(name, out, persistent, c))

    health = _health(health_run[1]) if health_run else {}
    report = MulticallReport(
        model=session.label,
        fingerprint=session.fingerprint,
        mode=mode,
        pairs=[(s.input, s.output) for s in session.slots],
        time_axes=dict(axes),
        stream_length=stream_len,
        chunk_sizes=sizes,
        variants=results,
        whole_available=whole_out is not None,
        persistent_matches_whole=None,
        revealing=False,
        status="inconclusive",
        verdict="",
        notes=notes,
        health=health,
        tol=tol,
        watched=runner.watched,
    )
    _judge(report, session)
    return report


# -- time axes and the stream ------------------------------------------------------------------


def time_axes(session: StatefulSession, time_axis: int | Mapping[str, int | None] | None = None) -> dict[str, int | None]:
    """Each input the caller feeds -> the axis a stream is split along into calls (None: one frame per call,
    or fed unchanged), as :func:`check_multicall` decides it (traced to a recurrent op's X, or a time-named dim)."""
    return _time_axes(session, time_axis)


def _time_axes(session: StatefulSession, time_axis: int | Mapping[str, int | None] | None) -> dict[str, int | None]:
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
            if isinstance(d, str) and not last and d not in state_syms and _TIME_NAMES.match(d):
                axes[name] = axis
                break
    return axes


@dataclass(frozen=True)
class _InputHints:
    """What the caller says about inputs the model leaves open: shapes and fixed values."""

    shapes: dict[str, Sequence[int]]
    values: dict[str, float]


def _with_shape(spec: Any, shape: tuple[int, ...]) -> Any:
    return dataclasses.replace(spec, shape=shape)


def _prepare_stream(
    session: StatefulSession,
    stream: Mapping[str, Any] | np.ndarray | None,
    axes: dict[str, int | None],
    mode: str,
    sizes: list[int],
    calls: int | None,
    length: int | None,
    seed: int,
    batch: int,
    max_elements: int,
    notes: list[str],
    hints: _InputHints,
) -> tuple[dict[str, np.ndarray], int, set[str], set[str]]:
    """The whole stream as arrays, its length (time steps or calls), the inputs fed unchanged every call,
    and the generated ``sequence_lens`` inputs (fed each call's length)."""
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
            stream_len = length if length is not None else (calls * max(sizes) if calls else 3 * max(sizes))
        else:
            stream_len = calls if calls is not None else (length if length is not None else 48)
    if stream_len <= 0:
        raise StreamError(f"the stream is empty (length {stream_len})")

    rng = np.random.default_rng(seed)
    symbols = _symbols(session, given, axes, mode, batch)
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
    return given, int(stream_len), const_names, lengths


def _as_input_dtype(a: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    return a if dtype is None or a.dtype == dtype else a.astype(dtype)


def _symbols(session: StatefulSession, given: Mapping[str, np.ndarray], axes: dict[str, int | None], mode: str, batch: int) -> dict[str, int]:
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
    hints: _InputHints,
) -> np.ndarray:
    given_shape = hints.shapes.get(name)
    if given_shape is not None:
        spec = _with_shape(spec, tuple(int(d) for d in given_shape))  # a time axis is still sized by the stream
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


def _usable_chunks(session: StatefulSession, axes: dict[str, int | None], sizes: list[int], stream_len: int, notes: list[str]) -> list[int]:
    static: set[int] = set()
    for n, spec in session.inputs.items():
        ax = axes[n]
        dim = None if ax is None or spec.shape is None else spec.shape[ax]
        if isinstance(dim, int) and dim > 0:
            static.add(dim)
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


# -- running the variants ----------------------------------------------------------------------


class _Runner:
    """Runs the variants of one stream on forks of one StatefulSession and compares them."""

    def __init__(
        self,
        session: StatefulSession,
        feeds: dict[str, np.ndarray],
        axes: dict[str, int | None],
        const: set[str],
        lengths: set[str],
        mode: str,
        length: int,
        tol: float,
    ) -> None:
        self.session = session
        self.feeds = {n: (np.full_like(a, length) if n in lengths else a) for n, a in feeds.items()}
        self.axes = axes
        self.const = const
        self.lengths = lengths
        self.mode = mode
        self.length = length
        self.tol = tol
        self.slots = session.slots
        self.writers = [s for s in self.slots if s.output is not None]
        self.swaps = _hc_swaps(session)
        state_outputs = {s.output for s in self.writers}
        names = session.output_names
        self.watched: str | None = next((n for n in names if n not in state_outputs), names[0] if names else None)
        self.progress: ProgressCallback | None = None

    def trace(self, outs: list[dict[str, np.ndarray]]) -> list[float]:
        """The watched output's mean, call by call (NaN where a call did not return it)."""
        name = self.watched
        return [float(np.asarray(o[name], dtype=np.float64).mean()) if name in o and np.size(o[name]) else math.nan for o in outs]

    def chunks(self, c: int) -> list[dict[str, np.ndarray]]:
        out = []
        static = self._static_steps()
        stop = self.length - (self.length % c if static else 0)
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

    def _static_steps(self) -> bool:
        return any(
            (ax := self.axes[n]) is not None and spec.shape is not None and isinstance(spec.shape[ax], int)
            for n, spec in self.session.inputs.items()
        )

    def whole(self, oracle: Callable[[dict[str, np.ndarray]], Mapping[str, Any]] | None, notes: list[str]) -> dict[str, np.ndarray] | None:
        if oracle is not None:
            return {k: np.asarray(v) for k, v in oracle(dict(self.feeds)).items()}
        if self.mode == "calls":
            notes.append("calls mode and no whole= oracle: persistence is judged by the broken variants only")
            return None
        if self._static_steps():
            notes.append("the model's time axis is static, so one call cannot take the whole stream: persistence is judged by the broken variants only")
            return None
        if self.session.context:
            notes.append("an input context is declared: chunked calls see overlapping input that one whole call does not, so there is no whole-stream oracle")
            return None
        s = self.session.fork(reset=True, alias_outputs=False)
        try:
            return s.run_dict(self.feeds)
        except Exception as exc:  # noqa: BLE001 - any runtime failure makes the oracle unavailable, and the report says why
            notes.append(f"one call over the whole stream failed ({type(exc).__name__}: {exc}); persistence judged by the broken variants only")
            return None

    def persistent(self, chunks: list[dict[str, np.ndarray]], c: int) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
        s = self.session.fork(reset=True, alias_outputs=False)
        outs, states = [], []
        what = "persistent" + self._chunk_label(c)
        for feed in chunks:
            outs.append(s.run_dict(feed))
            states.append(s.state)
            self._tick(what, len(outs), len(chunks))
        return outs, states

    def _chunk_label(self, c: int) -> str:
        return "" if self.mode == "calls" else f", chunk {c}"  # c, not length / calls: the last call may be shorter

    def _tick(self, what: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(what, done, total)

    def broken(self, name: str, chunks: list[dict[str, np.ndarray]], c: int) -> list[dict[str, np.ndarray]] | None:
        if name == "hc-swapped" and not self.swaps:
            return None
        s = self.session.fork(reset=True, alias_outputs=False)
        outs: list[dict[str, np.ndarray]] = []
        initial = s.initial_state(chunks[0]) if chunks else {}
        what = name + self._chunk_label(c)
        for k, feed in enumerate(chunks):
            self._tick(what, k, len(chunks))
            if name == "reinit":
                s.reset()
                outs.append(s.run_dict(feed))
                continue
            if name == "stale":
                # call k reads what call k-2 wrote: the store of call k-1 had not landed yet
                start = initial if k < 2 else self._written(outs[k - 2], initial)
            else:  # hc-swapped: h and c land in each other's place
                start = initial if k == 0 else _apply_swaps(self._written(outs[k - 1], initial), self.swaps)
            outs.append(s.run_dict({**feed, **start}))
        self._tick(what, len(chunks), len(chunks))
        return outs

    def _written(self, out: Mapping[str, np.ndarray], initial: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        # a state output of another dtype (SD005) is converted as a caller would have to: the session refuses it as is
        return {s.input: (out[s.output].astype(s.dtype, copy=False) if s.output is not None else initial[s.input]) for s in self.slots}

    # -- comparisons -------------------------------------------------------------------------
    def compare_calls(self, name: str, outs: list[dict[str, np.ndarray]], ref: list[dict[str, np.ndarray]], c: int) -> VariantResult:
        first: Divergence | None = None
        per: dict[str, float] = {}
        per_call: list[float] = []
        for k, (a, b) in enumerate(zip(outs, ref)):
            worst = 0.0
            for out_name in b:
                d = _max_diff(a[out_name], b[out_name])
                per[out_name] = max(per.get(out_name, 0.0), d)
                worst = max(worst, d)
                if first is None and d > self.tol:
                    first = Divergence(k, out_name, d, c)
            per_call.append(worst)
        return VariantResult(name, c, len(outs), "persistent", first, max(per.values(), default=0.0), per, per_call=per_call, trace=self.trace(outs))

    def compare_whole(self, outs: list[dict[str, np.ndarray]], whole: Mapping[str, np.ndarray] | None, c: int) -> VariantResult:
        if whole is None:
            return VariantResult("persistent", c, len(outs), "none", None, 0.0, trace=self.trace(outs))
        per: dict[str, float] = {}
        first: Divergence | None = None
        notes: list[str] = []
        state_outs = {s.output for s in self.writers if s.output is not None}
        last = len(outs) - 1
        for name, ref in whole.items():
            if not outs or name not in outs[0]:
                notes.append(f"oracle output {name!r} is not a model output: ignored")
                continue
            got = [o[name] for o in outs]
            per_call = self._split_like(name, ref, got, state_outs)
            if per_call is None:
                if name not in state_outs:  # a per-call summary (of the chunk, or of the incoming state)
                    notes.append(f"output {name!r} has no time axis the chunks split: it cannot equal the whole call's, not compared")
                    continue
                d = _max_diff(got[-1], ref)  # the final state: the last call's against the whole call's
                per[name] = d
                if d > self.tol and (first is None or last < first.call):
                    first = Divergence(last, name, d, c)
                continue
            for k, (g, r) in enumerate(zip(got, per_call)):
                d = _max_diff(g, r)
                per[name] = max(per.get(name, 0.0), d)
                if d > self.tol and (first is None or k < first.call):
                    first = Divergence(k, name, d, c)
        return VariantResult("persistent", c, len(outs), "whole", first, max(per.values(), default=0.0), per, "; ".join(notes), trace=self.trace(outs))

    def _split_like(self, name: str, ref: np.ndarray, got: list[np.ndarray], state_outs: set[str]) -> list[np.ndarray] | None:
        """The whole-stream output cut into the per-call pieces, or None when it has no call/time axis."""
        if name in state_outs:
            return None
        if self.mode == "calls":
            total = sum(g.size for g in got)
            if ref.size != total:
                return None
            flat = ref.reshape(-1)
            pieces, pos = [], 0
            for g in got:
                pieces.append(flat[pos : pos + g.size].reshape(g.shape))
                pos += g.size
            return pieces
        lengths = [g.shape for g in got]
        for axis in range(ref.ndim):
            if ref.shape[axis] != self.length or any(len(s) != ref.ndim for s in lengths):
                continue
            if sum(s[axis] for s in lengths) != self.length:
                continue
            if any(s[:axis] + s[axis + 1 :] != ref.shape[:axis] + ref.shape[axis + 1 :] for s in lengths):
                continue
            pieces, pos = [], 0
            for s in lengths:
                index = [slice(None)] * ref.ndim
                index[axis] = slice(pos, pos + s[axis])
                pieces.append(ref[tuple(index)])
                pos += s[axis]
            return pieces
        return None


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        if a.size != b.size:
            return math.inf
        b = b.reshape(a.shape)
    if a.size == 0:
        return 0.0
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    if (nan_a != nan_b).any():
        return math.inf
    diff = np.abs(np.where(nan_a, 0.0, a64) - np.where(nan_b, 0.0, b64))
    return float(np.nan_to_num(diff, nan=math.inf).max())


# -- h/c swaps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Swap:
    """Two places that hold h and c of the same op and direction: (slot, index along axis 0 or None)."""

    a: tuple[str, int | None]
    b: tuple[str, int | None]


def _hc_swaps(session: StatefulSession) -> list[_Swap]:
    """Where h and c of one recurrent op live, from the pairs' slice maps (packed slices or two slots)."""
    places: dict[tuple[str, int | None, str], tuple[str, int | None]] = {}
    shapes = {s.input: s.shape for s in session.slots}
    for pair in slice_maps(session.program).declared:
        for sl in pair.slices:
            for ref in sl.entry:
                if ref.port not in ("initial_h", "initial_c") or ref.note:
                    continue
                if len(sl.index) > 1:
                    continue  # deeper than one packed axis: not a place this check swaps
                idx = sl.index[0] if sl.index else None
                key = (ref.node_id, ref.direction, ref.port)
                places.setdefault(key, (pair.input, idx))
    swaps: list[_Swap] = []
    seen: set[tuple[tuple[str, int | None], tuple[str, int | None]]] = set()
    for (node, direction, port), h in places.items():
        if port != "initial_h":
            continue
        c = places.get((node, direction, "initial_c"))
        if c is None or c == h:
            continue
        if h[1] is None and c[1] is None and shapes.get(h[0]) != shapes.get(c[0]):
            continue  # two whole slots of different shapes cannot be swapped
        swap = (h, c)
        if swap not in seen:
            seen.add(swap)
            swaps.append(_Swap(h, c))
    return swaps


def _apply_swaps(state: Mapping[str, np.ndarray], swaps: list[_Swap]) -> dict[str, np.ndarray]:
    out = {k: np.array(v, copy=True) for k, v in state.items()}
    for sw in swaps:
        (sa, ia), (sb, ib) = sw.a, sw.b
        va = state[sa] if ia is None else state[sa][ia]
        vb = state[sb] if ib is None else state[sb][ib]
        if va.shape != vb.shape:
            continue
        if ia is None:
            out[sa] = np.array(vb, copy=True)
        else:
            out[sa][ia] = vb
        if ib is None:
            out[sb] = np.array(va, copy=True)
        else:
            out[sb][ib] = va
    return out


# -- health ------------------------------------------------------------------------------------


def _health(states: list[dict[str, np.ndarray]]) -> dict[str, SlotHealth]:
    if not states:
        return {}
    out: dict[str, SlotHealth] = {}
    for name in states[0]:
        arrs = [np.asarray(s[name], dtype=np.float64) for s in states]
        mins = [float(a.min()) if a.size else 0.0 for a in arrs]
        maxs = [float(a.max()) if a.size else 0.0 for a in arrs]
        norms = [float(np.linalg.norm(a.ravel())) for a in arrs]
        peak = max((abs(v) for v in mins + maxs), default=0.0)
        out[name] = SlotHealth(name, mins, maxs, norms, *_trend(norms), peak)
    return out


def _trend(norms: list[float]) -> tuple[str, float]:
    """Classify a norm series: non-finite, constant, growing (last quarter > 2x first and still rising), decaying, bounded."""
    arr = np.asarray(norms, dtype=np.float64)
    if not np.isfinite(arr).all():
        return "non-finite", math.inf
    q = max(1, len(arr) // 4)
    first, last = float(arr[:q].mean()), float(arr[-q:].mean())
    growth = last / first if first > 0 else (math.inf if last > 0 else 1.0)
    if arr.max() - arr.min() <= 1e-12 * max(1.0, float(np.abs(arr).max())):
        return "constant", growth
    half = arr[len(arr) // 2 :]
    rising = len(half) > 1 and float(np.polyfit(np.arange(len(half)), half, 1)[0]) > 0
    if growth > 2.0 and rising:
        return "growing", growth
    if growth < 0.5:
        return "decaying", growth
    return "bounded", growth


# -- the verdict -------------------------------------------------------------------------------


def _judge(report: MulticallReport, session: StatefulSession) -> None:
    persist = [v for v in report.variants if v.variant == "persistent"]
    with_whole = [v for v in persist if v.reference == "whole"]
    if with_whole:
        report.persistent_matches_whole = not any(v.diverges for v in with_whole)
    reinit = [v for v in report.variants if v.variant == "reinit"]
    report.revealing = any(v.diverges for v in reinit)
    notes = report.notes
    reverse = [r.describe() for r in session.program.recurrents if r.direction in ("reverse", "bidirectional")]

    unwritten = [i for i, o in report.pairs if o is None]
    for v in report.variants:
        if v.variant in BROKEN and not v.diverges:
            v.note = _why_not(v.variant, report)
            if unwritten and len(unwritten) == len(report.pairs):
                v.note = "no state is ever written back (no state input has a paired output), so every variant restarts alike"
    restart = (
        f" State input(s) {', '.join(repr(i) for i in unwritten)} have no paired output: nothing writes them back, "
        "so every call restarts from the initial state (SD001)."
        if unwritten
        else ""
    )
    restarting = _restarting_states(session)
    if not report.pairs:
        report.status = "no-state"
        extra = ""
        if report.persistent_matches_whole is False:
            extra = " Chunked calls differ from one call over the whole stream: the model restarts every call, so it cannot stream."
        report.verdict = "NO STATE: the model has no state pairs, so nothing persists across calls." + extra
        return
    if report.persistent_matches_whole is False:
        bad = min((v.first_divergence for v in with_whole if v.first_divergence), key=lambda d: (d.call, d.chunk or 0))
        report.status = "fail"
        report.verdict = (
            f"FAIL: chunked calls with persistence differ from one call over the whole stream "
            f"(chunk {bad.chunk}, call {bad.call}, output {bad.output!r}, max |diff| {_fmt(bad.max_abs_diff)}): "
            "the state carried between calls is not the state the model needs."
        ) + restart
        if reverse:
            report.verdict += (
                f" The model runs {', '.join(repr(r) for r in reverse)} backwards in time (reverse/bidirectional): "
                "its final state is the state at the chunk's start, which no later call can use (SD006)."
            )
        return
    broken_by_design = restarting + (
        [f"state input {i!r} has no paired output: nothing writes it back, so every call restarts it from its initial value (SD001)" for i in unwritten]
        if len(unwritten) < len(report.pairs)
        else []
    )
    if broken_by_design and report.persistent_matches_whole is not True:
        # the graph itself restarts part of the state every call while it carries the rest: no stream makes that
        # persistence, whether or not this one can show it (a static time axis leaves no whole-stream oracle)
        report.status = "fail"
        report.verdict = "FAIL: part of the state restarts on every call while the rest is carried: " + "; ".join(broken_by_design) + "."
        return
    if broken_by_design:
        notes.extend(f"{why}; this stream does not show it (chunked calls equal one whole call)" for why in broken_by_design)
    if reverse and report.persistent_matches_whole is None:
        notes.append(
            f"the model runs {', '.join(repr(r) for r in reverse)} backwards in time: carrying its state across calls is "
            "not equivalent to one call over the whole stream (SD006), but no whole-stream oracle is here to show it"
        )
    if not report.revealing:
        report.status = "inconclusive"
        report.verdict = (
            "INCONCLUSIVE: re-initialising the state before every call gives the same outputs as keeping it, "
            "so this stream cannot reveal a persistence bug (the state never leaves its initial value, or the "
            "outputs do not depend on it: silent or zero input?). Use a stream with activity from the first chunk."
        )
        return
    first = report.first_divergence["reinit"]
    assert first is not None  # revealing: the re-initialised variant diverged somewhere
    unverified = [] if report.persistent_matches_whole else _unverified_slices(session)
    if unverified:
        # the broken variants show that the state matters, not that what is fed back is the state: without a
        # whole-stream oracle only rnnir's own check of the write-back can say that, and it could not
        report.status = "inconclusive"
        report.verdict = (
            "NOT VERIFIED: the state matters (a lost state shows from call "
            f"{first.call} on, output {first.output!r}), but no whole-stream oracle is here and rnnir could not verify "
            "that what each call writes back is the state: " + "; ".join(unverified) + ". Pass whole= (or a stream with a "
            "time axis) to compare with one call over the whole stream."
        )
        return
    if report.persistent_matches_whole:
        matched = "persistence holds: chunked calls equal one call over the whole stream"
    else:
        matched = "no whole-stream oracle, so persistence is judged by the broken variants only"
    report.status = "pass"
    report.verdict = f"PASS: {matched}; a lost state shows from call {first.call} on (output {first.output!r})."
    for v in reinit:
        d = v.first_divergence
        if d is not None and d.call > 1:
            notes.append(
                f"chunk {v.chunk}: re-initialising makes no difference before call {d.call}: the state stays at its "
                f"initial value through call {d.call - 1}, so a stream that starts with silence shows a lost or stale "
                "state only after the onset"
            )


def _unverified_slices(session: StatefulSession) -> list[str]:
    """Each state slice rnnir's passes do not verify, with the reason (``rnnir lint``'s verdicts)."""
    from .passes import verify
    from .passes.coverage import Verdict

    return [
        f"{s.slice!r} {s.verdict.value} ({s.reason})" if s.reason else f"{s.slice!r} {s.verdict.value}"
        for s in verify(session.program, noqa=False).slices
        if s.verdict is not Verdict.VERIFIED
    ]


def _restarting_states(session: StatefulSession) -> list[str]:
    """Recurrences that carry one state across calls (read from a slot that is written back) while another of their
    states starts every call from a plain input the caller feeds, or from nothing (zeros): with ``--pair initial_h=Y_h``
    alone an LSTM keeps h and restarts c, and chunked calls cannot equal one call over the whole stream."""
    from .ir import Compute, LoadSlot
    from .optraits import OpTrait, ops_with

    layout = ops_with(OpTrait.LAYOUT)
    written = {s.input for s in session.slots if s.output is not None}
    plain = set(session.inputs)
    out: list[str] = []
    for rec in session.program.recurrents:
        carried: list[str] = []
        restarted: list[str] = []
        for state in rec.spec.states:
            v = rec.port(state.entry)
            while v is not None and isinstance(v.producer, Compute) and v.producer.op in layout and v.producer.inputs:
                v = v.producer.inputs[0]
            if v is None:
                restarted.append(f"its {state.entry} is not given (zeros every call)")
            elif isinstance(v.producer, LoadSlot) and v.producer.slot is not None and v.producer.slot.name in written:
                carried.append(state.entry)
            elif v.producer is None and v.name in plain:
                restarted.append(f"its {state.entry} comes from the plain input {v.name!r}, fed anew every call")
        if carried and restarted:
            out.append(f"{rec.kind} {rec.describe()!r} carries {', '.join(carried)} across calls but " + " and ".join(restarted))
    return out


def _why_not(variant: str, report: MulticallReport) -> str:
    if variant == "reinit":
        return "re-initialised state gives the same outputs: the state never leaves its initial value on this stream"
    if variant == "stale":
        if all(v.calls < 3 for v in report.variants if v.variant == "stale"):
            return "fewer than 3 calls: a state one call stale cannot differ yet"
        return "the state one call stale equals the current state at every call: the state does not change between calls on this stream"
    return "h and c are equal wherever they are swapped on this stream, so a swap is invisible"


# -- text --------------------------------------------------------------------------------------


def report_to_text(report: MulticallReport) -> str:
    """A human-readable report: verdict first, then the variants, health and notes."""
    from .render import printable  # names come from the model: one line each, no raw control character

    lines = [f"{printable(report.model)}: {report.verdict}"]
    pairs = ", ".join(f"{printable(i)} -> {printable(o) if o else '<nothing>'}" for i, o in report.pairs) or "none"
    lines.append(f"  state pairs: {pairs}")
    if report.mode == "time":
        axes = ", ".join(f"{printable(n)}[{a}]" for n, a in report.time_axes.items() if a is not None)
        lines.append(f"  stream: {report.stream_length} time steps along {axes}; chunk sizes {report.chunk_sizes}")
    else:
        lines.append(f"  stream: {report.stream_length} calls, one frame each (no input has a time axis)")
    lines.append(f"  tolerance: max |diff| <= {report.tol:g}")
    lines.append("  variants:")
    state_outputs = {o for _, o in report.pairs if o is not None}
    for v in report.variants:
        chunk = "" if v.chunk is None else f" chunk={v.chunk}"
        head = f"    {v.variant:<11}{chunk:<10} {v.calls:>5} calls vs {v.reference:<10}"
        if v.reference == "none":
            body = "not compared (no whole-stream oracle)"
        elif v.first_divergence is None:
            body = f"equal (max |diff| {_largest(v, state_outputs) if v.max_abs_diff else 0})"
        else:
            d = v.first_divergence
            body = f"diverges at call {d.call} on {d.output!r} (|diff| {_fmt(d.max_abs_diff)}); max |diff| {_largest(v, state_outputs)}"
        lines.append(head + " " + body + (f"  -- {v.note}" if v.note else ""))
    if report.health:
        lines.append("  state health (longest persistent run):")
        for h in report.health.values():
            lines.append("    " + printable(h.summary()))
    for n in report.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines) + "\n"


def _largest(v: VariantResult, state_outputs: set[str]) -> str:
    """The largest difference per output, each named: a probability's 0.87 is not a state's 17.  The outputs the
    caller reads come first; a state output says so."""
    if not v.per_output:
        return _fmt(v.max_abs_diff)
    ordered = sorted(v.per_output.items(), key=lambda kv: kv[0] in state_outputs)  # stable: model order within each group
    shown = [f"{_fmt(d)} on {name!r}{' (state)' if name in state_outputs else ''}" for name, d in ordered[:3]]
    more = len(ordered) - len(shown)
    return ", ".join(shown) + (f" and {more} more output(s)" if more else "")


def _fmt(x: float) -> str:
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    return f"{x:.3g}"


def _num(x: float) -> float | str:
    """JSON has no inf/nan: write them as strings."""
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    return x
