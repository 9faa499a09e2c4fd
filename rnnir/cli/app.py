"""The ``rnnir`` command line: the parser, the command table, and the one edge where errors become exit codes.

    rnnir lint PATH... [--format text|json|sarif|github] [--select SD,OR] [--ignore SD006]
                       [--pair h0=hn ...] [--lower-entry dynamic|constant] [--lower-exit fanout|chain|reuse-single-store]
                       [--cost] [--jobs N] [--output FILE] [--config pyproject.toml | --no-config] [--show-settings]
                       [--baseline FILE | --write-baseline FILE] [--add-noqa]
    rnnir show MODEL [--format text|dot|mermaid|json] [--full] [-o FILE.svg|.png|.pdf|.dot|.mmd]
    rnnir rules [--format text|json]
    rnnir explain CODE-OR-NAME          (SD002, or wrong-slot)
    rnnir cost PATH... [--format text|json] [--jobs N] [--output FILE]
    rnnir run MODEL [--calls 200] [--chunk 16] [--shape IN=D0,D1] [--value IN=X] [--input IN=FILE.npy]
                    [--audio [IN=]FILE.wav] [--context IN=N[:AXIS]] [-v] [-q]
                    [--drop K [--drop-mode skip|zero]] [--reconnect K] [--burst K:N [--burst-kind noise|silence]]
                    [--long N] [--streams N] [--recovery-tol X] [--max-slot-mb 256] [--format text|json] [--output FILE] [--plot run.png]
    rnnir deploy triton MODEL -o REPO/ | deploy openvino MODEL -o model.xml
    rnnir --version                     (python -m rnnir ... is the same command)

``show``, ``cost`` and ``run`` take the same ``--pair``/``--lower-entry``/``--lower-exit``/``--config``/
``--no-config`` options as ``lint`` (``--entry``/``--exit`` are the deprecated old spellings of the
lowering-policy options).  Each model's ``[tool.rnnir]`` is the nearest one above the model
(:class:`rnnir.lint.config.ConfigFinder`).  ``cost`` is ``lint --cost`` without the rules: the cost table
(or the lint JSON document with empty ``diagnostics``), exit 0 or 2.

Exit codes (every command):

* 0 — done, and no error-level finding (warnings and infos do not fail a run);
* 1 — at least one error-level finding (``lint``), or multi-call persistence broken (``run``);
* 2 — the tool could not do its job: bad arguments or configuration, an unknown rule code, or a
  model that could not be read or analysed.  With several models, **2 wins over 1**: a CI job must
  not pass (or fail "normally") when part of what it was asked to check was never checked.  The
  other models are still linted and reported; the failed one appears in the output with its
  ``error``, and on stderr as ``rnnir: error: <file>: <message>`` unless the output is a text report on
  stdout that already shows it (``--quiet``, ``--statistics``, ``-o FILE`` and the other formats keep the line).

``lint --baseline FILE`` reports only findings FILE does not accept (:mod:`rnnir.lint.baseline`), and
``--write-baseline FILE`` records them; suppressions stored in a model (``rnnir.noqa`` metadata) are
applied by the passes themselves (:mod:`rnnir.passes.suppression`).

Each command is one module of :mod:`rnnir.cli` (:data:`COMMANDS` names it), imported only when that
command runs; it reads a typed arguments object (:func:`rnnir.cli.common.arguments`).
``lint`` never imports onnxruntime (nor :mod:`rnnir.runtime` / :mod:`rnnir.testing`); only ``run``
does.  No traceback reaches the user unless ``RNNIR_DEBUG=1`` is set.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from rnnir import __version__
from rnnir.cli.common import OneModelArgs, UsageError, arguments
from rnnir.errors import ModelError, RnnirError
from rnnir.lint.config import ConfigError
from rnnir.lint.jobs import REPORT_HINT, debug
from rnnir.lint.settings import SettingsError
from rnnir.render.escape import printable

__all__ = ["COMMAND_TABLE", "COMMANDS", "Command", "build_parser", "main"]


@dataclass(frozen=True)
class Command:
    """One subcommand: the module of :mod:`rnnir.cli` that holds it, and the function there that adds its parser
    (which sets ``func``, the command, and ``args_type``, its typed arguments)."""

    name: str
    module: str
    adder: str = "add_parser"
    # run as the process's own command line, its heap may be left to the OS (rnnir.util.gcpause.paused_for_the_process)
    ends_the_process: bool = False

    def add_to(self, sub: Any) -> None:
        getattr(import_module(f"rnnir.cli.{self.module}"), self.adder)(sub)


#: every subcommand, in the order ``rnnir --help`` lists them
COMMAND_TABLE = (
    Command("lint", "lint", ends_the_process=True),
    Command("cost", "cost"),
    Command("show", "show"),
    Command("rules", "rules", "add_rules_parser"),
    Command("explain", "rules", "add_explain_parser"),
    Command("run", "run"),
    Command("fix", "fix"),
    Command("deploy", "deploy"),
)
COMMANDS = tuple(c.name for c in COMMAND_TABLE)


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is reported with *its* usage (``rnnir lint
    --bogus`` shows how to call ``lint``), not with the top level's, which says nothing about ``lint``."""

    def parse_known_args(  # type: ignore[override]  # typeshed overloads on the namespace type; one signature suffices here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``only`` (a name in :data:`COMMANDS`) just that subcommand's.

    One run parses one subcommand: building the other seven (and importing their modules) cost about a
    fifth of linting a small model.  ``rnnir --help`` and anything that is not a subcommand get them all.
    """
    parser = argparse.ArgumentParser(
        prog="rnnir",
        description="Verify how recurrent models keep their state across inference calls.",
        epilog="exit codes: 0 clean, 1 error-level findings, 2 the tool could not do its job",
    )
    parser.add_argument("--version", action="version", version=f"rnnir {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_SubcommandParser)
    sub.required = True
    for command in COMMAND_TABLE:
        if only is None or only == command.name:
            command.add_to(sub)
    return parser


def _edge_message(exc: BaseException, args: object) -> str:
    """``<file>: <message>`` for the one-line ``rnnir: error:`` report."""
    model = args.model if isinstance(args, OneModelArgs) else None
    if isinstance(exc, (ModelError, UsageError, SettingsError, ConfigError)):
        return str(exc)
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else model
        return f"{name}: {exc.strerror or exc}" if name else str(exc)
    text = str(exc) or type(exc).__name__
    return f"{model}: {text}" if model and not text.startswith(f"{model}:") else text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        namespace = parser.parse_args(words)
    except SystemExit as exc:  # --help, --version, or bad arguments (argparse already printed why)
        return exc.code if isinstance(exc.code, int) else 2
    func: Callable[[Any], int] = namespace.func
    args: object = None
    try:
        args = arguments(namespace.args_type, namespace)
        if argv is None and any(c.ends_the_process for c in COMMAND_TABLE if c.name == namespace.command):
            # the process's own command line (the console script, python -m rnnir): its heap is left to the OS
            from rnnir.util.gcpause import paused_for_the_process

            with paused_for_the_process():
                return func(args)
        return func(args)
    except BrokenPipeError:  # output piped into `head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 2
    except (RnnirError, OSError) as exc:
        if debug():
            import traceback

            traceback.print_exc()
        print(printable(f"rnnir: error: {_edge_message(exc, args)}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rnnir: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug():
            import traceback

            traceback.print_exc()
        print(printable(f"rnnir: internal error: {type(exc).__name__}: {exc} ({REPORT_HINT})"), file=sys.stderr)
        return 2
