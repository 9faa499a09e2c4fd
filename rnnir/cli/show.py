"""``rnnir show``: draw the state's journey through a call (text, Graphviz, Mermaid, an image), print the whole
program, or the state pairs as JSON.

    rnnir show MODEL [--format text|dot|mermaid|json] [--full] [-o FILE.svg|.png|.pdf|.dot|.mmd]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnnir.cli.common import OneModelArgs, UsageError, add_model_options, emit, say_written, settings_for
from rnnir.lint.results import unicode_text
from rnnir.lint.settings import Settings, pairs_declared_in
from rnnir.render.escape import printable

if TYPE_CHECKING:
    from rnnir.ir.core import Program

__all__ = ["ShowArgs", "add_parser", "cmd_show"]


@dataclass(frozen=True, kw_only=True)
class ShowArgs(OneModelArgs):
    format: str | None = None  # None: from -o's suffix, else text
    full: bool = False
    output: str | None = None


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="draw the state's journey through a call (the fan-out), or print the IR or the state pairs",
        description="Show the state's journey through one call: slots, loads, recurrences, the stores of the fan-out and "
        "outputs, with layout-only ops and If nests folded into labelled arrows.  --full shows every node.",
    )
    p.add_argument("model", metavar="MODEL", help="the ONNX model to show")
    p.add_argument(
        "--format", choices=("text", "dot", "mermaid", "json"), default=None,
        help="text (default), dot (Graphviz), mermaid (for Markdown) or json (the state pairs); default: from -o's suffix, else text",
    )
    p.add_argument("--full", action="store_true", help="the whole program (every node), not only the state's journey")
    p.add_argument(
        "--output", "-o", metavar="FILE",
        help="write to FILE; .svg, .png and .pdf are rendered with Graphviz's dot, .dot/.gv, .mmd, .json, .txt choose the format",
    )
    add_model_options(p)
    p.set_defaults(func=cmd_show, args_type=ShowArgs)


def _load(args: ShowArgs) -> tuple[Program, Settings]:
    import rnnir

    settings = settings_for(args)
    with pairs_declared_in(settings.pairs_origin):
        return rnnir.load(args.model, pairs=settings.pairs, entry=settings.entry, exit=settings.exit), settings


#: ``rnnir show -o FILE``: suffixes Graphviz renders, and suffixes that choose a text format
_IMAGE_SUFFIXES = (".svg", ".png", ".pdf")
_TEXT_SUFFIXES = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".json": "json", ".txt": "text"}


def cmd_show(args: ShowArgs) -> int:
    from rnnir.render.graph import print_program, to_dot, to_mermaid
    from rnnir.render.journey import journey_text

    output: str | None = args.output
    from rnnir.util.writing import refuse_output_over_inputs

    refuse_output_over_inputs(output, [args.model], what="--output", error=UsageError)  # rnnir show m.onnx -o m.onnx
    suffix = Path(output).suffix.lower() if output else ""
    fmt = args.format or _TEXT_SUFFIXES.get(suffix, "text")
    if suffix in _IMAGE_SUFFIXES:
        import shutil

        dot = shutil.which("dot")  # before loading: a missing Graphviz is the user's first thing to fix
        if dot is None:
            raise UsageError(
                f"{output}: rendering {suffix[1:].upper()} needs Graphviz's `dot` program, which is not on PATH; install Graphviz "
                "(apt-get install graphviz, brew install graphviz, choco install graphviz) or write DOT text with -o FILE.dot / --format dot"
            )
        if args.format not in (None, "dot"):
            raise UsageError(f"{output}: an image is rendered from the DOT picture; --format {args.format} does not apply")
    program, _ = _load(args)
    journey = not args.full
    if args.full and not program.suggested_pairs:
        from rnnir.analysis.suggest import suggested_pairs

        # the whole program's text names the pairs dataflow suggests, as IR text written by hand may do itself
        program.suggested_pairs = suggested_pairs(program)
    what = "the state pairs" if fmt == "json" else "the whole program" if args.full else "the state's journey"
    if suffix in _IMAGE_SUFFIXES:
        _render_image(to_dot(program, journey=journey), dot, suffix[1:], output)  # type: ignore[arg-type]
        say_written(output, f"{what}, drawn by Graphviz")  # type: ignore[arg-type]
        return 0
    if fmt == "json":
        from rnnir.analysis.slices import pair_json, slice_maps
        from rnnir.analysis.suggest import suggested_pairs

        doc = {
            "version": 1,
            "path": unicode_text(args.model),
            "state_pairs": slice_maps(program).to_json(),
            "suggested_pairs": [pair_json(p) for p in suggested_pairs(program)],
        }
        text = json.dumps(doc, indent=2)
    elif fmt == "text":
        text = print_program(program) if args.full else journey_text(program)
    else:
        text = {"dot": to_dot, "mermaid": to_mermaid}[fmt](program, journey=journey)
    if fmt != "json":  # names come from the model: no raw escape sequence reaches the terminal
        text = "\n".join(map(printable, text.split("\n")))
    emit(text + "\n", output, [args.model])
    if output:
        say_written(output, f"{what} as {fmt}")
    return 0


def _render_image(dot_text: str, dot: str, kind: str, output: str) -> None:
    """Run Graphviz's ``dot -T<kind>`` on ``dot_text`` into ``output``."""
    import subprocess

    try:
        done = subprocess.run([dot, f"-T{kind}"], input=dot_text.encode("utf-8"), capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{output}: Graphviz's dot could not run: {exc}") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(printable(f"{output}: Graphviz's dot failed (exit {done.returncode}){': ' + detail[-1] if detail else ''}"))
    from rnnir.util.writing import write_file  # rnnir writes the image, not dot: atomically, never over a device

    write_file(output, done.stdout, error=UsageError)
