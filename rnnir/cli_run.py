"""The command line of ``rnnir run``: the multi-call and streaming checks on onnxruntime.

Kept apart from :mod:`rnnir.cli` so ``lint``'s options and ``run``'s can change independently, and so
``lint`` never imports what ``run`` needs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .cli import UsageError, _emit, _settings
from .errors import ModelError, RnnirError

__all__ = ["add_run_command", "cmd_run"]


def add_run_command(sub: Any, add_model_options: Any) -> None:
    p = sub.add_parser("run", help="run a model across calls and check that its state persists")
    p.add_argument("model", metavar="MODEL", help="the ONNX model to run")
    p.add_argument("--calls", type=int, default=200, help="calls to run (default: 200)")
    p.add_argument("--chunk", type=int, default=16, help="time steps per call (default: 16; models without a time axis take one frame per call)")
    p.add_argument("--shape", action="append", metavar="INPUT=D0,D1,...", help="shape of one call of a generated input whose dims the model leaves open (repeatable)")
    p.add_argument("--value", action="append", metavar="INPUT=NUMBER", help="feed a generated input this value on every call, e.g. --value sr=16000 (repeatable)")
    p.add_argument("--wav", action="append", metavar="INPUT=FILE", help="stream a 16-bit PCM WAV file into INPUT, --shape INPUT=... samples per call (repeatable)")
    p.add_argument("--context", action="append", metavar="INPUT=N[:AXIS]", help="keep the last N steps of INPUT and prepend them to the next call, as silero-vad's wrapper does (input=64); repeatable")
    p.add_argument("--drop", type=int, metavar="K", help="lose chunk K: how far the outputs depart and how many calls until they are back within --recovery-tol")
    p.add_argument("--drop-mode", choices=("skip", "zero"), default="skip", help="a lost chunk is skipped (default) or replaced by zeros")
    p.add_argument("--reconnect", type=int, metavar="K", help="restart from the initial state at call K: calls until agreement, and the cold-start time")
    p.add_argument("--burst", metavar="K:N", help="replace calls K..K+N-1 by a burst: recovery afterwards and state health")
    p.add_argument("--burst-kind", choices=("noise", "silence"), default="noise", help="the burst is loud noise (default, 4x the stream's spread) or silence")
    p.add_argument("--long", type=int, metavar="N", help="run the stream repeated to N calls: state trend, saturation, float16 headroom, latency (100000: minutes)")
    p.add_argument("--streams", type=int, metavar="N", help="serve N streams from one batched session pool and check each equals its solo run (no leak between rows)")
    p.add_argument("--recovery-tol", type=float, default=1e-3, metavar="X", help="max |diff| that counts as recovered (default 1e-3)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--plot", metavar="FILE", help="also draw the run per call (variants, their divergence, state norms) into FILE (.png, .svg, .pdf); needs rnnir[plot]")
    p.add_argument(
        "--max-slot-mb", type=float, default=256, metavar="MB", help="refuse a state slot larger than MB mebibytes (default: 256)"
    )
    add_model_options(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """Exit 1 when the report's status is ``fail`` (persistence broken, or a bug the stream can show
    went unnoticed) or a streaming check fails (never recovers, state growing); ``pass``,
    ``inconclusive`` and ``no-state`` exit 0 with the verdict printed.  Per-call latency and the
    state bytes per session are always measured (the ``streaming`` part of the report)."""
    from . import streaming, testing  # imports onnxruntime: only this command pays for it
    from .runtime import DEFAULT_MAX_SLOT_BYTES, StatefulSession

    if args.calls <= 0 or args.chunk <= 0:
        raise UsageError("--calls and --chunk must be positive")
    if args.plot:
        from .plot import require_matplotlib

        require_matplotlib()  # before the run: a missing optional extra is the first thing to fix
        if not Path(args.plot).resolve().parent.is_dir():
            raise UsageError(f"{args.plot}: cannot write the plot: no folder {str(Path(args.plot).parent)!r}")
    for flag, value in (("--drop", args.drop), ("--reconnect", args.reconnect)):
        if value is not None and not 0 <= value < args.calls - 1:
            raise UsageError(f"{flag} {value}: needs a call index from 0 to {args.calls - 2} (--calls {args.calls})")
    burst = _burst(args.burst, args.calls) if args.burst else None
    if args.long is not None and args.long < 4:
        raise UsageError("--long needs at least 4 calls")
    if args.streams is not None and args.streams < 2:
        raise UsageError("--streams needs at least 2 streams")
    if args.recovery_tol < 0:
        raise UsageError("--recovery-tol must not be negative")
    settings = _settings(args)
    model: Any = args.model
    pairs = settings.pairs
    if (settings.entry, settings.exit) != ("dynamic", "fanout"):
        import rnnir

        # A non-default lowering policy is a property of the Program: run the Program itself.
        model, pairs = rnnir.load(args.model, pairs=settings.pairs, entry=settings.entry, exit=settings.exit), None
    if not args.max_slot_mb > 0:
        raise UsageError("--max-slot-mb must be positive")
    slot_limit = int(args.max_slot_mb * 2**20)
    context = _parse_assignments(args.context or [], "--context", _context_size)
    shapes = _parse_assignments(args.shape or [], "--shape", _dims)
    values = _parse_assignments(args.value or [], "--value", float)
    stream = _wav_stream(_parse_assignments(args.wav or [], "--wav", str), shapes, args.calls)
    try:
        if context or slot_limit != DEFAULT_MAX_SLOT_BYTES:  # one session carries the options into both checks
            model, pairs = StatefulSession(model, pairs=pairs, cast_state=True, context=context or None, max_slot_bytes=slot_limit), None
        report = testing.check_multicall(
            model, stream=stream, pairs=pairs, calls=args.calls, chunk=args.chunk, input_shapes=shapes, input_values=values
        )
        stream_report = streaming.check_streaming(
            model, stream, pairs=pairs, calls=args.calls, chunk=args.chunk, input_shapes=shapes, input_values=values,
            drop=args.drop, drop_mode=args.drop_mode, reconnect=args.reconnect, burst=burst, burst_kind=args.burst_kind,
            long=args.long, tol=args.recovery_tol, streams=args.streams,
        )
    except RnnirError:
        raise
    except MemoryError:
        raise ModelError("running the model needs more memory than there is (its state or outputs are too large)", model=args.model) from None
    except Exception as exc:
        if not _onnxruntime_failure(exc):
            raise
        # the model linted but onnxruntime cannot execute it (e.g. hidden_size disagreeing with W): the model's problem
        raise ModelError(f"onnxruntime cannot run the model: {_first_line(exc)}", model=args.model) from None
    if args.format == "json":
        doc = report.to_json()
        doc["streaming"] = stream_report.to_json()
        text = json.dumps(doc, indent=2) + "\n"
    else:
        text = testing.report_to_text(report)
        text = (text if text.endswith("\n") else text + "\n") + streaming.streaming_to_text(stream_report)
    _emit(text, args.output)
    if args.plot:
        from .plot import plot_report

        plot_report(report, args.plot)
    return 1 if report.status == "fail" or not stream_report.ok else 0


def _wav_stream(files: Mapping[str, str], shapes: Mapping[str, tuple[int, ...]], calls: int) -> dict[str, Any] | None:
    """``--wav INPUT=FILE``: the file's samples (16-bit PCM, channels averaged) as INPUT's stream, one call's
    worth per call: ``--shape INPUT=1,512`` takes 512 samples per call, up to ``--calls`` calls."""
    if not files:
        return None
    import wave

    import numpy as np

    out: dict[str, Any] = {}
    for name, path in files.items():
        shape = shapes.get(name)
        if not shape:
            raise UsageError(f"--wav {name}={path} needs --shape {name}=D0,D1,... (one call's samples, e.g. 1,512)")
        try:
            with wave.open(path, "rb") as w:
                if w.getsampwidth() != 2:
                    raise UsageError(f"{path}: {8 * w.getsampwidth()}-bit samples; --wav reads 16-bit PCM")
                channels = w.getnchannels()
                pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        except (wave.Error, EOFError) as exc:
            raise UsageError(f"{path}: not a readable WAV file ({exc})") from None
        samples = (pcm.reshape(-1, channels).mean(axis=1) / 32768.0).astype(np.float32)
        per_call = int(np.prod(shape))
        n = min(calls, len(samples) // per_call)
        if n < 2:
            raise UsageError(f"{path}: {len(samples)} samples make fewer than 2 calls of {per_call}")
        out[name] = samples[: n * per_call].reshape(n, *shape)
    return out


def _context_size(text: str) -> int | tuple[int, int]:
    """``64`` or ``64:1`` (size along the input's time axis, or along the given axis)."""
    size, sep, axis = text.partition(":")
    return (int(size), int(axis)) if sep else int(size)


def _burst(text: str, calls: int) -> tuple[int, int]:
    start, sep, length = text.partition(":")
    try:
        at, n = int(start), int(length) if sep else 1
    except ValueError:
        raise UsageError(f"--burst takes K:N (start call and number of calls), got {text!r}") from None
    if at < 0 or n < 1 or at + n >= calls:
        raise UsageError(f"--burst {text}: calls {at}..{at + n - 1} must end before the last of --calls {calls}")
    return at, n


def _onnxruntime_failure(exc: BaseException) -> bool:
    """An exception raised by onnxruntime while running a session (its own types, or the RuntimeError of its C++ binding)."""
    if type(exc).__module__.startswith("onnxruntime"):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (text.startswith("Error in execution") or "[ONNXRuntimeError]" in text)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _dims(text: str) -> tuple[int, ...]:
    dims = tuple(int(d) for d in text.split(",") if d.strip())
    if any(d < 0 for d in dims):
        raise ValueError("negative dim")
    return dims


def _parse_assignments(items: Sequence[str], flag: str, convert: Any) -> dict[str, Any]:
    """``NAME=VALUE`` flags (``--shape input=1,576``, ``--value sr=16000``) as a dict."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"{flag} takes NAME=VALUE, got {item!r}")
        try:
            out[name] = convert(value)
        except ValueError:
            raise UsageError(f"{flag} {item!r}: {value!r} is not valid here") from None
    return out
