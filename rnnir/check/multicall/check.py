"""Multi-call checks: run one input stream several ways and say whether state persistence holds.

    from rnnir.testing import check_multicall, report_to_text
    report = check_multicall("model.onnx", {"x": x}, chunk_sizes=[1, 7, 64])
    report.persistent_matches_whole   # chunked calls with persistence == one call over the whole stream
    report.first_divergence["reinit"] # first call where re-initialising the state differs, and by how much
    print(report_to_text(report)); report.to_json()

The variants (for every chunk size) are :mod:`~rnnir.check.multicall.variants`' ``persistent``, ``reinit``,
``stale`` and ``hc-swapped``.  ``persistent`` is compared with one call over the whole stream (``whole``) when
the model can take it; every broken variant is compared with ``persistent``, call by call, on every output.
A broken variant that never diverges means the stream cannot reveal that bug, and the report says so instead
of passing silently.

The stream is cut along each input's time axis (:mod:`~rnnir.check.multicall.stream`).  A model whose inputs
have no time axis (one frame per call, like silero-vad) is run in *calls mode*: each stream array carries one
more leading axis than the input, the call index; its whole-sequence oracle, when one exists, is passed as
``whole=`` (a callable taking the stream and returning the outputs stacked along the call axis, and the final
state).

Long-run health (:mod:`~rnnir.check.multicall.health`): every slot's min, max and L2 norm after each call of
the longest persistent run, and a trend (``bounded``, ``growing``, ``decaying``, ``non-finite``), with the
headroom to float16's largest value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rnnir.analysis.slices import slice_maps
from rnnir.check.multicall.compare import compare_calls, compare_whole
from rnnir.check.multicall.health import slot_health
from rnnir.check.multicall.report import VARIANTS, MulticallReport, VariantResult
from rnnir.check.multicall.stream import (
    DEFAULT_MAX_ELEMENTS,
    InputHints,
    ProgressCallback,
    StreamError,
    prepare_stream,
    time_axes,
)
from rnnir.check.multicall.variants import VariantRunner
from rnnir.check.multicall.verdict import judge
from rnnir.runtime.session import StatefulSession
from rnnir.runtime.spec import DEFAULT_MAX_SLOT_BYTES

__all__ = ["check_multicall"]


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
    max_elements: int = DEFAULT_MAX_ELEMENTS,
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
    axes = time_axes(session, time_axis)
    prepared = prepare_stream(
        session, stream, axes, chunk_sizes=sizes, calls=calls, length=length, seed=seed, batch=batch, max_elements=max_elements,
        notes=notes, hints=InputHints(dict(input_shapes or {}), dict(input_values or {})),
    )
    mode, stream_len = prepared.mode, prepared.length
    for s in session.slots:
        if s.output_dtype is not None and s.output_dtype != s.dtype:
            notes.append(
                f"state output {s.output!r} is {s.output_dtype} but state input {s.input!r} takes {s.dtype}: every variant "
                "converts it between calls, as a caller would have to (SD005); the rounding shows against the whole call"
            )

    if mode == "calls" and sizes != [1]:
        notes.append(f"no input has a time axis: every call takes one frame, so chunk sizes {sizes} do not apply (chunk = 1 frame)")
    sizes = prepared.usable_chunks(sizes, notes)

    runner = VariantRunner(session, prepared, progress)
    whole_out = runner.whole(whole, notes)
    results: list[VariantResult] = []
    health_run: tuple[int, list[dict[str, np.ndarray]]] | None = None
    for c in sizes:
        chunks = prepared.chunks(c)
        persistent, states = runner.persistent(chunks, c)
        if health_run is None or len(states) > len(health_run[1]):
            health_run = (c, states)
        results.append(compare_whole(
            persistent, whole_out, c, tol=tol, mode=mode, length=stream_len, state_outputs=runner.state_outputs, trace=runner.trace(persistent)
        ))
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
            results.append(compare_calls(name, out, persistent, c, tol, runner.trace(out)))

    health = slot_health(health_run[1]) if health_run else {}
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
    judge(report, session)
    return report
