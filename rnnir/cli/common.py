"""What every command of the command line shares: its error, its output, the model options and the settings glue.

A command reads a typed arguments object (a frozen dataclass below or in its own module), built from argparse's
``Namespace`` in one place, :func:`arguments`; nothing else reads the ``Namespace``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from rnnir.errors import RnnirError
from rnnir.lint.config import ENTRY_POLICIES, EXIT_POLICIES
from rnnir.lint.settings import Overrides, Settings, config_finder, deprecation_notices, resolve
from rnnir.render.escape import printable

if TYPE_CHECKING:
    from rnnir.lint.config import Config

__all__ = [
    "ModelArgs",
    "OneModelArgs",
    "UsageError",
    "add_model_options",
    "arguments",
    "emit",
    "isatty",
    "passes_backend",
    "print_deprecations",
    "say_written",
    "settings_for",
]


class UsageError(RnnirError):
    """The command line asks for something that cannot be done (unknown rule code, empty folder, ...)."""


# -- typed arguments -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelArgs:
    """The options of every command that reads models (:func:`add_model_options`)."""

    pair: tuple[str, ...] = ()  # "h0=hn" as typed after --pair
    lower_entry: str | None = None
    lower_exit: str | None = None
    config: str | None = None  # --config FILE
    no_config: bool = False

    def overrides(self) -> Overrides:
        """What these options say on top of each model's ``[tool.rnnir]`` (the rule selection is ``lint``'s own)."""
        return Overrides(pairs=self.pair, entry=self.lower_entry, exit=self.lower_exit, config=self.config or None, no_config=self.no_config)


@dataclass(frozen=True, kw_only=True)
class OneModelArgs(ModelArgs):
    """A command of one model (``show``, ``run``, ``fix``, ``deploy``): its settings are that model's."""

    model: str


A = TypeVar("A")


def arguments(kind: type[A], namespace: argparse.Namespace) -> A:
    """The one place argparse's ``Namespace`` becomes a command's typed arguments: each field of ``kind``
    (a dataclass) from the option of that name; an option not given (None) leaves the field's default, and a
    repeatable option's list becomes a tuple."""
    given = vars(namespace)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(kind):  # type: ignore[arg-type]  # kind is a dataclass type; typeshed wants an instance's
        value = given.get(f.name)
        if value is not None:
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return kind(**values)


# -- settings: pyproject.toml + flags (rnnir.lint.settings) ----------------------------------


def settings_for(args: ModelArgs, overrides: Overrides | None = None, config: Config | None = None) -> Settings:
    """The settings of one model: ``config`` (default: the one found for ``args.model``, for the commands that
    take one model) with ``overrides`` (default: ``args``' model options) on top."""
    overrides = overrides if overrides is not None else args.overrides()
    if config is None:
        finder = config_finder(overrides)
        config = finder.for_model(args.model) if isinstance(args, OneModelArgs) else finder.fallback
        print_deprecations([config])
    return resolve(overrides, config)


def print_deprecations(configs: Sequence[Config]) -> None:
    for notice in deprecation_notices(configs):
        print(printable(f"rnnir: warning: {notice}"), file=sys.stderr)


def passes_backend() -> ModuleType:
    """The analysis package, imported when first needed (tests may replace this function)."""
    from rnnir import passes

    return passes


# -- output ----------------------------------------------------------------------------------


def emit(text: str, output: str | None, inputs: Sequence[str] = ()) -> None:
    """``text`` to stdout, or to ``output`` with :func:`rnnir.util.writing.write_file` (never over one of ``inputs``,
    never over a device or FIFO, atomically)."""
    if output:
        from rnnir.util.writing import write_file

        write_file(output, text, protect=inputs, error=UsageError)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def say_written(output: str, what: str) -> None:
    """``rnnir: wrote FILE: WHAT`` on stderr, as ``--write-baseline`` and ``fix`` say what they wrote: a file
    written without a word leaves the user wondering whether anything happened."""
    print(printable(f"rnnir: wrote {output}: {what}"), file=sys.stderr)


def isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# -- parser pieces ---------------------------------------------------------------------------


class DeprecatedSpelling(argparse.Action):
    """An old spelling of a renamed option: stores into the new option's ``dest`` and says what to type now
    (Ruff keeps renamed options working with a warning, so scripts and CI jobs keep running)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print(f"rnnir: warning: {option_string} is deprecated; use {self.new} (it picks the lowering policy for demonstrations, not an exit code)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_model_options(p: argparse.ArgumentParser, *, config: bool = True) -> None:
    """The options of :class:`ModelArgs`."""
    p.add_argument("--pair", action="append", metavar="INPUT=OUTPUT", help="declare a state pair (repeatable); replaces every other way of finding pairs; INPUT= means no output")
    p.add_argument(
        "--lower-entry", choices=ENTRY_POLICIES,
        help="lowering policy for demonstrations: where state enters (default: dynamic; constant: initial states as constants)",
    )
    p.add_argument(
        "--lower-exit", choices=EXIT_POLICIES,
        help="lowering policy for demonstrations: how state is written back (default: fanout; chain and reuse-single-store lower a known-bad model)",
    )
    # the old spellings read like exit-code options: still accepted, with a warning, but no longer shown in --help
    p.add_argument("--entry", dest="lower_entry", choices=ENTRY_POLICIES, action=DeprecatedSpelling, new="--lower-entry", help=argparse.SUPPRESS)
    p.add_argument("--exit", dest="lower_exit", choices=EXIT_POLICIES, action=DeprecatedSpelling, new="--lower-exit", help=argparse.SUPPRESS)
    if config:
        group = p.add_mutually_exclusive_group()
        group.add_argument("--config", metavar="FILE", help="read [tool.rnnir] from FILE for every model instead of the nearest pyproject.toml above each")
        group.add_argument("--no-config", action="store_true", help="ignore any pyproject.toml")
