"""The command line of ``rnnir deploy triton|openvino``.

    rnnir deploy triton MODEL -o REPO/ [--name N] [--max-batch-size 8] [--control start,ready,...] [--force]
    rnnir deploy openvino MODEL -o model.xml [--calls 50] [--chunk 16] [--shape/--value/--input/--audio/--context ...]
                          [--precision f32|bf16|f16|default] [--tol X] [--format text|json]

Both take ``--pair``/``--config``/``--no-config`` as ``lint`` does, and ``--allow-unverified``.  Exit 0 when
written (and, for OpenVINO, proven equal); 1 when refused (a pair violated, unverified or guessed: each
refusal printed with the flag that gets past it) or when OpenVINO's model differs; 2 when the tool could
not do its job (a model OpenVINO cannot convert, OpenVINO not installed, bad flags).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from rnnir.cli.common import OneModelArgs, UsageError, add_model_options, settings_for
from rnnir.cli.run_inputs import InputArgs, input_flags
from rnnir.deploy import DeployPlan, DeployRefused, plan_deployment
from rnnir.render.escape import printable

__all__ = ["OpenvinoArgs", "TritonArgs", "add_parser"]


@dataclass(frozen=True, kw_only=True)
class TritonArgs(OneModelArgs):
    """``rnnir deploy triton``'s arguments."""

    output: str
    name: str | None = None
    max_batch_size: int = 8
    control: tuple[str, ...] = ()
    force: bool = False
    allow_unverified: bool = False


@dataclass(frozen=True, kw_only=True)
class OpenvinoArgs(InputArgs):
    """``rnnir deploy openvino``'s arguments (the input flags as for ``rnnir run``)."""

    output: str
    precision: str = "f32"
    tol: float | None = None
    device: str = "CPU"
    format: str = "text"
    allow_unverified: bool = False


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "deploy", help="write a serving configuration from the verified state pairs (Triton, OpenVINO)",
        description="Deploy the state pairs rnnir verified: a Triton model repository with implicit state, or an OpenVINO "
        "stateful model checked against onnxruntime.  A pair that is violated, unverified or only guessed is refused.",
    )
    targets = p.add_subparsers(dest="target", metavar="TARGET", parser_class=type(p), help="where to deploy: triton or openvino")
    targets.required = True

    t = targets.add_parser("triton", help="a Triton model repository: config.pbtxt with sequence_batching state, and the model")
    t.add_argument("model", metavar="MODEL", help="the ONNX model to deploy")
    t.add_argument("--output", "-o", required=True, metavar="REPO", help="the model repository folder; writes REPO/NAME/config.pbtxt and REPO/NAME/1/model.onnx")
    t.add_argument("--name", help="the model's name in the repository (default: the file's stem)")
    t.add_argument("--max-batch-size", type=int, default=8, metavar="N", help="max_batch_size for a batch-first model (default 8; others get 0)")
    t.add_argument("--control", action="append", metavar="KINDS", help="add control inputs: start, ready, end, corrid (comma-separated, repeatable)")
    t.add_argument("--force", action="store_true", help="replace an existing config.pbtxt")
    _common(t)
    t.set_defaults(func=cmd_deploy_triton, args_type=TritonArgs)

    o = targets.add_parser("openvino", help="an OpenVINO stateful model (.xml/.bin), run against onnxruntime's loop to prove it")
    o.add_argument("model", metavar="MODEL", help="the ONNX model to deploy")
    o.add_argument("--output", "-o", required=True, metavar="FILE.xml", help="where to write the OpenVINO model (weights go to FILE.bin)")
    o.add_argument("--calls", type=int, metavar="N", help="calls of the check (default 50, or all the data --input/--audio give)")
    o.add_argument("--chunk", type=int, default=16, help="time steps per call (default 16), as for rnnir run")
    o.add_argument("--shape", action="append", metavar="INPUT=D0,D1,...", help="one call's shape of an input the model leaves open (as for rnnir run)")
    o.add_argument("--value", action="append", metavar="INPUT=NUMBER", help="feed an input this value on every call (as for rnnir run)")
    o.add_argument("--input", action="append", metavar="INPUT=FILE.npy", help="feed INPUT from a .npy file (as for rnnir run)")
    o.add_argument("--audio", "--wav", action="append", dest="audio", metavar="[INPUT=]FILE.wav", help="feed a 16-bit PCM WAV file (as for rnnir run)")
    o.add_argument("--context", action="append", metavar="INPUT=N[:AXIS]", help="keep the last N steps of INPUT and prepend them to the next call (as for rnnir run)")
    o.add_argument("--precision", choices=("f32", "bf16", "f16", "default"), default="f32", help="OpenVINO's INFERENCE_PRECISION_HINT for the check (default f32)")
    o.add_argument("--tol", type=float, metavar="X", help="largest |diff| per output that passes (default 1e-5 with f32, 1e-2 otherwise)")
    o.add_argument("--device", default="CPU", help="OpenVINO device of the check (default CPU)")
    o.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
    _common(o)
    o.set_defaults(func=cmd_deploy_openvino, args_type=OpenvinoArgs)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-unverified", action="store_true", help="deploy pairs rnnir could not verify (SD009) when they are declared with --pair")
    add_model_options(p)


def _plan(args: TritonArgs | OpenvinoArgs) -> DeployPlan | None:
    """The gate; None (after printing every refusal) when the model is refused."""
    if args.lower_entry or args.lower_exit:  # a demonstration policy changes the program, not the model a server runs
        raise UsageError("--lower-entry/--lower-exit pick lowering policies for demonstrations; deploy serves the model as it is")
    settings = settings_for(args)
    try:
        return plan_deployment(args.model, settings.pairs, allow_unverified=args.allow_unverified)
    except DeployRefused as exc:
        print(printable(f"{exc.model}: deploy refused"))
        for r in exc.refusals:
            print(printable(f"  {r.subject}: {r.reason}"))
            if r.fix:
                print(printable(f"    fix: {r.fix}"))
        return None


def _notes(plan: DeployPlan) -> None:
    for s in plan.states:
        if not s.verified:
            print(printable(f"rnnir: warning: {plan.label}: pair {s.input} -> {s.output} is not verified; deployed as declared (--allow-unverified)"), file=sys.stderr)


def cmd_deploy_triton(args: TritonArgs) -> int:
    from rnnir.deploy.triton import CONTROLS, write_repository

    controls = [c.strip().lower() for v in args.control for c in v.split(",") if c.strip()]
    unknown = [c for c in controls if c not in CONTROLS]
    if unknown:
        raise UsageError(f"--control {', '.join(unknown)}: known controls are {', '.join(CONTROLS)}")
    if args.max_batch_size < 0:
        raise UsageError("--max-batch-size must not be negative")
    plan = _plan(args)
    if plan is None:
        return 1
    _notes(plan)
    folder = write_repository(plan, args.output, name=args.name, max_batch_size=args.max_batch_size, controls=controls, force=args.force)
    pairs = ", ".join(f"{s.input} -> {s.output}" for s in plan.states)
    print(printable(f"wrote {folder / 'config.pbtxt'} and {folder / '1' / 'model.onnx'} (state: {pairs})"))
    print(printable(f"serve it: tritonserver --model-repository {folder.parent}"))
    return 0


def cmd_deploy_openvino(args: OpenvinoArgs) -> int:
    from rnnir.deploy.openvino import check_stateful, convert, make_stateful, require_openvino, save, stream_feeds

    if (args.calls is not None and args.calls <= 1) or args.chunk <= 0:
        raise UsageError("--calls must be at least 2 and --chunk positive")
    if args.tol is not None and not args.tol >= 0:
        raise UsageError("--tol must not be negative")
    flags = input_flags(args)
    require_openvino()  # before the model is read: a missing extra is the first thing to fix
    plan = _plan(args)
    if plan is None:
        return 1
    _notes(plan)
    model = convert(args.model)  # before the stream: a model OpenVINO cannot take needs no --shape to say so
    feeds, session = stream_feeds(plan, flags, args.calls, args.chunk)
    if args.calls is not None:  # a model with a static chunk shorter than --chunk cuts the stream into more calls
        feeds = feeds[: args.calls]
    initial = session.initial_state(feeds[0])
    state_shapes = {s.input: tuple(initial[s.input].shape) for s in plan.states}
    make_stateful(model, plan, state_shapes)
    xml = save(model, args.output)
    report = check_stateful(xml, plan, feeds, session, precision=args.precision, tolerance=args.tol, device=args.device)
    text = json.dumps(report.to_json(), indent=2) + "\n" if args.format == "json" else report.text()
    if args.format == "text":  # names come from the model: no raw escape sequence reaches the terminal
        text = "\n".join(map(printable, text.split("\n")))
    sys.stdout.write(text)
    return 0 if report.ok else 1
