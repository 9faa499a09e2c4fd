"""The command line of ``rnnir run``: the multi-call and streaming checks on onnxruntime.

Kept apart from the other commands so ``lint``'s options and ``run``'s can change independently, and so
``lint`` never imports what ``run`` needs.  What the input flags feed is read by :mod:`rnnir.cli.run_inputs`
(flags to :class:`rnnir.deploy.inputs.InputFlags`) and checked against the model by :mod:`rnnir.deploy.inputs`.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rnnir.cli.common import UsageError, add_model_options, emit, isatty, settings_for
from rnnir.cli.run_inputs import InputArgs, input_flags
from rnnir.deploy.inputs import PreparedInputs, check_flag_names, model_interface, prepare_inputs, shape_text
from rnnir.errors import ModelError, RnnirError
from rnnir.lint.settings import pairs_declared_in
from rnnir.render.escape import printable, printable_lines
from rnnir.util.writing import refuse_output_over_inputs

if TYPE_CHECKING:
    import numpy as np
else:  # `rnnir lint` builds the parser that imports this module: numpy only when a run needs it
    from rnnir.util.lazymod import numpy as np

__all__ = ["RunArgs", "add_parser", "cmd_run"]


@dataclass(frozen=True, kw_only=True)
class RunArgs(InputArgs):
    """``rnnir run``'s arguments."""

    drop: int | None = None
    drop_mode: str = "skip"
    reconnect: int | None = None
    burst: str | None = None
    burst_kind: str = "noise"
    long: int | None = None
    streams: int | None = None
    recovery_tol: float = 1e-3
    format: str = "text"
    output: str | None = None
    verbose: bool = False
    quiet: bool = False
    plot: str | None = None
    max_slot_mb: float = 256


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="run a model across calls and check that its state persists")
    p.add_argument("model", metavar="MODEL", help="the ONNX model to run")
    p.add_argument("--calls", type=int, metavar="N", help=f"calls to run (default: {DEFAULT_CALLS}, or all the data --input/--audio give)")
    p.add_argument("--chunk", type=int, default=16, help="time steps per call (default: 16; models without a time axis take one frame per call)")
    p.add_argument("--shape", action="append", metavar="INPUT=D0,D1,...", help="one call's shape of an input the model leaves open, e.g. --shape input=1,576 (or 1x576); on a state input, the state's shape (repeatable)")
    p.add_argument("--value", action="append", metavar="INPUT=NUMBER", help="feed an input this value on every call, e.g. --value sr=16000 (repeatable)")
    p.add_argument("--input", action="append", metavar="INPUT=FILE.npy", help="feed INPUT from a .npy file: the whole sequence, split into calls along the input's time axis (or a leading call axis); repeatable")
    p.add_argument(
        "--audio", "--wav", action="append", dest="audio", metavar="[INPUT=]FILE.wav",
        help="feed a 16-bit PCM WAV file (channels averaged, scaled to [-1, 1)) into INPUT (default: the one float input), one call's "
        "shape of samples per call; an input named sr/sample_rate gets the file's rate unless --value sets it (repeatable)",
    )
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
    p.add_argument("--verbose", "-v", action="store_true", help="also show onnxruntime's own log (warnings and errors) on stderr")
    p.add_argument("--quiet", "-q", action="store_true", help="text: only the verdict lines; no progress on stderr")
    p.add_argument("--plot", metavar="FILE", help="also draw the run per call (variants, their divergence, state norms) into FILE (.png, .svg, .pdf); needs rnnir[plot]")
    p.add_argument(
        "--max-slot-mb", type=float, default=256, metavar="MB", help="refuse a state slot larger than MB mebibytes (default: 256)"
    )
    add_model_options(p)
    p.set_defaults(func=cmd_run, args_type=RunArgs)


def cmd_run(args: RunArgs) -> int:
    """Exit 1 when the report's status is ``fail`` (persistence broken, or a bug the stream can show
    went unnoticed) or a streaming check fails (never recovers, state growing); ``pass``,
    ``inconclusive`` and ``no-state`` exit 0 with the verdict printed.  Per-call latency and the
    state bytes per session are always measured (the ``streaming`` part of the report).  Exit 2 when
    what the flags feed does not fit the model: every such problem is printed, each with its flag."""
    from rnnir.check import multicall as testing  # imports onnxruntime: only this command pays for it
    from rnnir.check import streaming  # imports onnxruntime: only this command pays for it
    from rnnir.lower import Policy, lower, read_model
    from rnnir.runtime.session import OnnxRuntimeError, StatefulSession
    from rnnir.util.gcpause import paused_gc

    _check_numbers(args)
    flags = input_flags(args)
    read_files = [args.model, *flags.files.values(), *(a.rpartition("=")[2] for a in flags.audio)]
    refuse_output_over_inputs(args.output, read_files, what="--output", error=UsageError)  # before the run, not after it
    settings = settings_for(args)
    with paused_gc(), pairs_declared_in(settings.pairs_origin):  # as rnnir.load, but an ONNX model only: IR text has no graph onnxruntime could run
        program = lower(read_model(args.model), settings.pairs, Policy.named(settings.entry, settings.exit))
    if settings.exit != "fanout":  # the chain / reused store exists in the IR only: never a silent pass
        print(printable(f"rnnir: warning: {args.model}: --lower-exit {settings.exit} changes the program rnnir analyses, not the graph "
                        "onnxruntime runs, so this run cannot show it; rnnir lint reports it, rnnir.simulate.Simulator runs it"), file=sys.stderr)
    if settings.pairs and program.source is not None:
        from rnnir.lower.pairing import left_out_pair_warnings

        src = program.source
        for line in left_out_pair_warnings(src.model, label=src.label, declared=settings.pairs, model_path=src.path):
            print(printable(f"rnnir: warning: {args.model}: {line}"), file=sys.stderr)

    interface = model_interface(program)
    problems = check_flag_names(flags, interface)
    if problems:
        return _report_problems(args.model, problems)
    state_inputs = {p.input for p in program.state_pairs}
    # onnxruntime logs a failed call's errors itself, in red, before rnnir can say what went wrong: quiet unless -v
    session = StatefulSession(
        program, cast_state=True, context=flags.context or None, max_slot_bytes=int(args.max_slot_mb * 2**20),
        session_options=ort_session_options(verbose=args.verbose),
        state_shapes={n: d for n, d in flags.shapes.items() if n in state_inputs} or None,
    )
    axes = testing.time_axes(session)
    prepared, problems = prepare_inputs(flags, session, interface, axes, args.calls, args.chunk)
    if problems:
        return _report_problems(args.model, problems)
    if args.verbose:
        for name, rate in prepared.rate_filled.items():
            print(printable(f"rnnir: {args.model}: feeding {name}={rate}, the sample rate of the audio file"), file=sys.stderr)
    stream = prepared.stream or None
    calls = args.calls if args.calls is not None else DEFAULT_CALLS
    try:
        chunks, _ = streaming.make_chunks(
            session, stream, calls=calls, chunk=args.chunk, input_shapes=prepared.shapes, input_values=prepared.values
        )
    except testing.StreamError as exc:
        raise UsageError(str(exc)) from None
    if len(chunks) < 2:
        raise UsageError(f"the stream makes {len(chunks)} call(s); the checks need at least 2 (more data, or a smaller --chunk)")
    failure = _first_call(session, chunks[0], prepared)
    if failure:
        return _report_problems(args.model, failure)
    misfits, growing = _state_misfits(session, chunks[0])
    if growing:
        return _report_problems(args.model, growing)
    if misfits:  # the model's own write-back cannot be fed back: no call after the first can run
        print(printable(f"{args.model}: FAIL: {misfits[0]}"))
        for more in misfits[1:]:
            print(printable(f"  {more}"))
        return 1
    n_calls = len(chunks)
    for flag, value in (("--drop", args.drop), ("--reconnect", args.reconnect)):
        if value is not None and not 0 <= value < n_calls - 1:
            raise UsageError(f"{flag} {value}: needs a call index from 0 to {n_calls - 2} (the stream has {n_calls} calls)")
    burst = _burst(args.burst, n_calls) if args.burst else None
    progress = RunProgress(enabled=not args.quiet)
    try:
        report = testing.check_multicall(
            session, stream=stream, calls=calls, chunk=args.chunk, input_shapes=prepared.shapes, input_values=prepared.values,
            progress=progress.step,
        )
        stream_report = streaming.check_streaming(
            session, stream, calls=calls, chunk=args.chunk, input_shapes=prepared.shapes, input_values=prepared.values,
            drop=args.drop, drop_mode=args.drop_mode, reconnect=args.reconnect, burst=burst, burst_kind=args.burst_kind,
            long=args.long, tol=args.recovery_tol, streams=args.streams, progress=progress.step,
        )
    except OnnxRuntimeError as exc:  # the session's wrapper: say onnxruntime's own words, cut to the failing op
        raise ModelError(f"onnxruntime cannot run the model: {_ort_message(exc.__cause__ or exc)}", model=args.model) from None
    except RnnirError:
        raise
    except MemoryError:
        raise ModelError("running the model needs more memory than there is (its state or outputs are too large)", model=args.model) from None
    except Exception as exc:
        if not _onnxruntime_failure(exc):
            raise
        # the model linted but onnxruntime cannot execute it (e.g. hidden_size disagreeing with W): the model's problem
        raise ModelError(f"onnxruntime cannot run the model: {_ort_message(exc)}", model=args.model) from None
    finally:
        progress.close()
    if args.format == "json":
        doc = report.to_json()
        doc["streaming"] = stream_report.to_json()
        text = json.dumps(doc, indent=2) + "\n"
    else:
        text = testing.report_to_text(report)
        text = text if text.endswith("\n") else text + "\n"
        if stream_report.checked or not args.quiet:  # measurements alone have no verdict line for -q to keep
            text += streaming.streaming_to_text(stream_report, persistence=report.status)
        if args.quiet:
            text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith(" "))
        text = printable_lines(text)  # output and slot names come from the model
    emit(text, args.output, read_files)
    if args.plot:
        from rnnir.check.plot import plot_report

        plot_report(report, args.plot)
    return 1 if report.status == "fail" or not stream_report.ok else 0


def _check_numbers(args: RunArgs) -> None:
    """The flags that are numbers, before the model is read: a typo costs no model load."""
    if (args.calls is not None and args.calls <= 0) or args.chunk <= 0:
        raise UsageError("--calls and --chunk must be positive")
    if args.plot:
        from rnnir.check.plot import require_matplotlib

        require_matplotlib()  # before the run: a missing optional extra is the first thing to fix
        if not Path(args.plot).resolve().parent.is_dir():
            raise UsageError(f"{args.plot}: cannot write the plot: no folder {str(Path(args.plot).parent)!r}")
    if args.calls is not None and args.calls > MAX_CALLS:
        raise UsageError(f"--calls {args.calls}: at most {MAX_CALLS} calls (the limit keeps a run's inputs and outputs in memory)")
    if args.long is not None and args.long < 4:
        raise UsageError("--long needs at least 4 calls")
    if args.long is not None and args.long > MAX_LONG_CALLS:
        raise UsageError(f"--long {args.long}: at most {MAX_LONG_CALLS} calls (one latency and state sample is kept per call)")
    if args.streams is not None and args.streams < 2:
        raise UsageError("--streams needs at least 2 streams")
    if args.streams is not None and args.streams > MAX_STREAMS:
        raise UsageError(f"--streams {args.streams}: at most {MAX_STREAMS} streams (each keeps its own state and solo run)")
    if not math.isfinite(args.recovery_tol) or args.recovery_tol < 0:
        raise UsageError(f"--recovery-tol {args.recovery_tol}: give a finite number, 0 or more")
    if not args.max_slot_mb > 0:
        raise UsageError("--max-slot-mb must be positive")
    for flag, value in (("--drop", args.drop), ("--reconnect", args.reconnect)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} {value}: needs a call index, 0 or more")


#: calls in a generated stream when --calls is not given (a data file gives its own length)
DEFAULT_CALLS = 200
#: the most calls ``--calls`` runs
MAX_CALLS = 1_000_000
#: the most calls ``--long`` runs (100,000 take minutes)
MAX_LONG_CALLS = 1_000_000
#: the most streams ``--streams`` serves from one pool (100,000 took 1.8 GB and 90 s)
MAX_STREAMS = 1024


class RunProgress:
    """``reinit, chunk 16: call 120/200`` on a terminal's stderr, rewritten in place at most ten times a second;
    silent when stderr is not a terminal (piped, redirected, CI) or with ``-q``."""

    INTERVAL = 0.1

    def __init__(self, *, enabled: bool = True, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and isatty(self.stream)
        self.clock = clock
        self.shown = False
        self.last = -math.inf

    def step(self, what: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.last < self.INTERVAL and done < total:
            return
        self.last = now
        self.stream.write(f"\r\x1b[K{printable(what)}: call {done}/{total}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def ort_session_options(*, verbose: bool) -> Any:
    """onnxruntime's options for ``rnnir run``: its log at FATAL only (its default, WARNING, with ``-v``)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 2 if verbose else 4
    return options


def _report_problems(model: str, problems: Sequence[str]) -> int:
    """Each problem as its own ``rnnir: error:`` line (a problem's indented detail lines as they are); exit 2."""
    for problem in problems:
        head, *detail = problem.split("\n")
        print(printable(f"rnnir: error: {model}: {head}"), file=sys.stderr)
        for line in detail:
            print("  " + printable(line), file=sys.stderr)
    return 2


def _first_call(session: Any, feed: Mapping[str, Any], prepared: PreparedInputs) -> list[str]:
    """Run the first call alone: when onnxruntime refuses it, say so with what each input was and where it came
    from, instead of failing deep inside a check (a wrong --value sends a model like silero-vad down a branch
    that cannot take the input; onnxruntime then names an op, not the flag)."""
    from rnnir.errors import StateError
    from rnnir.runtime.initial import StateShapeError
    from rnnir.runtime.session import OnnxRuntimeError

    slots = {s.input: s for s in session.slots}
    try:
        initial = session.initial_state(feed)
    except StateShapeError as exc:
        # the runtime's message names StatefulSession's argument (state_shapes=); say the flag.  Any other
        # StateError (a slot over --max-slot-mb) is already phrased for the command line.
        unknown = [s for s in session.slots if s.input not in prepared.state_shapes and not _static(s.shape)]
        return [
            f"cannot tell the shape of state input {s.input!r} (declared {shape_text(s.dtype, s.shape)}) from the inputs; "
            f"give it with --shape {s.input}={','.join(str(d) if isinstance(d, int) and d > 0 else f'D{k}' for k, d in enumerate(s.shape or ()))}"
            for s in unknown[:1]
        ] or [str(exc)]
    try:
        session.fork(reset=True).run_dict(dict(feed))
        return []
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types; the state error carries its cause
        cause = exc.__cause__ if isinstance(exc, (StateError, OnnxRuntimeError)) and exc.__cause__ is not None else exc
        if not _onnxruntime_failure(cause):
            raise
    fed = []
    for name, arr in feed.items():
        a = np.asarray(arr)
        value = f" = {_value_text(a)}" if a.size == 1 else ""
        fed.append(f"{name} {shape_text(a.dtype, a.shape)}{value} ({prepared.sources.get(name, 'random' if a.dtype.kind == 'f' else 'zeros')})")
    for name, arr in initial.items():
        spec = slots[name]
        start = "zeros" if not np.any(arr) else "its initial value"
        if name in prepared.state_shapes:
            how = ", shape from --shape"
        elif _static(spec.shape):
            how = ""
        else:
            how = f", declared {shape_text(spec.dtype, spec.shape)}: another shape with --shape {name}=D0,D1,..."
        fed.append(f"{name} {shape_text(arr.dtype, arr.shape)} (the state: {start}{how})")
    return [f"onnxruntime cannot run the model on the first call: {_ort_message(cause)}\nthe inputs rnnir fed it: " + "; ".join(fed)]


def _state_misfits(session: Any, feed: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """After one call, each state output whose shape the paired input's declared static dims refuse (a window
    one frame too long, a cache cut on the wrong axis): the caller cannot feed it back, so persistence fails.
    An append-only cache growing on the axis rnnir verified it grows on is no failure, but onnxruntime cannot
    run it across calls while that dim is declared static: the second list says so."""
    outs = session.fork(reset=True).run_dict(dict(feed))
    found: list[str] = []
    growing: list[str] = []
    from rnnir.analysis.slices import slice_maps

    maps = slice_maps(session.program)
    for slot in session.slots:
        grows = {w.axis for sm in maps.pair(slot.pair.input).slices for w in sm.windows.values() if w.cut is None}
        got = outs.get(slot.output) if slot.output is not None else None
        if got is None or slot.shape is None:
            continue
        shape = tuple(np.asarray(got).shape)
        bad = [k for k, d in enumerate(slot.shape) if k < len(shape) and isinstance(d, int) and d > 0 and shape[k] != d]
        if len(shape) == len(slot.shape) and bad and set(bad) <= grows:
            growing.append(
                f"state input {slot.input!r} is an append-only cache growing along axis {bad[0]} every call "
                f"({shape[bad[0]]} after the first call), but its input declares that dim static "
                f"({shape_text(slot.dtype, slot.shape)}): onnxruntime refuses the grown cache at the next call; "
                "declare that dim symbolic to run it across calls"
            )
            continue
        if len(shape) != len(slot.shape) or bad:
            found.append(
                f"the state written back into {slot.input!r} ({slot.output!r}) has shape {list(shape)} after the first call, "
                f"but {slot.input!r} is declared {shape_text(slot.dtype, slot.shape)}"
                + (f" (dim {', '.join(map(str, bad))})" if bad else "")
                + ": the next call cannot take it back (rnnir lint names what the write-back does)"
            )
    return found, growing


def _static(shape: Sequence[int | str | None] | None) -> bool:
    return shape is not None and all(isinstance(d, int) and d > 0 for d in shape)


def _value_text(a: Any) -> str:
    v = a.reshape(()).item()
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


#: ``... running If node. Name:'If_0' Status Message: ... running LSTM node. Name:'x' Status Message: <why>``
_ORT_NODE = re.compile(r"running (\w+) node\. Name:'([^']*)' Status Message: ")


def _ort_message(exc: BaseException) -> str:
    """onnxruntime's message, cut to the op that failed and why: its nested ``If``/``Loop`` wrappers repeat each other."""
    text = " ".join(str(exc).split())
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"^Error in execution: ", "", text)
    found = list(_ORT_NODE.finditer(text))
    if found:
        last = found[-1]
        return f"{last.group(1)} node {last.group(2)!r}: {text[last.end():].strip()}"
    return text


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
    """An exception raised by onnxruntime while running a session (its own types, the RuntimeError of its C++ binding,
    or the session's :class:`~rnnir.runtime.OnnxRuntimeError` around either)."""
    from rnnir.runtime.session import OnnxRuntimeError

    if isinstance(exc, OnnxRuntimeError) or type(exc).__module__.startswith("onnxruntime"):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (text.startswith("Error in execution") or "[ONNXRuntimeError]" in text)
