"""Per-model lint settings: a model's ``[tool.rnnir]`` with the caller's overrides on top.

The command line, ``rnnir fix``/``run``/``show`` and any other front end describe what they were told in one
typed :class:`Overrides`; :func:`config_finder` says where each model's configuration comes from and
:func:`resolve` (or :func:`resolve_checked`, which also checks every rule code) turns a configuration and
the overrides into the :class:`Settings` a :class:`rnnir.lint.LintJob` is made from.  Precedence is Ruff's:
a flag beats the configuration, a ``select`` given as an override drops the configured ``ignore``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rnnir.errors import PairingError, RnnirError
from rnnir.lint.config import Config, ConfigError, ConfigFinder, find_config, load_config, parse_pair

__all__ = [
    "Overrides",
    "Settings",
    "SettingsError",
    "check_selectors",
    "config_finder",
    "deprecation_notices",
    "pairs_declared_in",
    "resolve",
    "resolve_checked",
    "shown_path",
    "split_codes",
]


class SettingsError(RnnirError):
    """The overrides ask for something that cannot be done (an empty selection, an unknown rule code)."""


@dataclass(frozen=True, kw_only=True)
class Overrides:
    """What the caller says on top of each model's configuration; ``None`` (or empty) leaves the configuration's.

    ``select``/``ignore``/``extend_select`` are rule selectors as typed (``"SD,OR"``, ``"wrong-slot"``):
    :func:`split_codes` reads them.  ``pairs`` is a ``--pair`` declaration (output -> input names).
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] | None = None
    pairs: tuple[str, ...] = ()  # "h0=hn" as typed after --pair
    entry: str | None = None
    exit: str | None = None
    strict: bool = False
    config: str | None = None  # one configuration file for every model (--config FILE)
    no_config: bool = False  # no configuration at all (--no-config)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One model's resolved settings."""

    select: tuple[str, ...] | None  # None: every rule
    ignore: tuple[str, ...]
    pairs: Mapping[str, str | None] | None
    entry: str
    exit: str
    config: Config
    strict: bool = False
    pairs_origin: str | None = None  # where configured pairs were declared (file and key); None: --pair or none


@contextmanager
def pairs_declared_in(origin: str | None) -> Iterator[None]:
    """A declared pair the model does not have is reported with where it was declared, when that is a
    configuration file: the user has to know which file to edit (the model's name alone does not say)."""
    try:
        yield
    except PairingError as exc:
        if origin is None:
            raise
        raise PairingError(f"{exc} (pairs declared in {origin})") from None


def config_finder(overrides: Overrides) -> ConfigFinder:
    """Where each model's ``[tool.rnnir]`` comes from: ``no_config`` (nowhere), ``config`` (that file for
    every model), else the nearest ``pyproject.toml`` above the model, falling back to the working
    directory's (Ruff's hierarchical discovery; see :class:`rnnir.lint.config.ConfigFinder`)."""
    if overrides.no_config:
        return _FixedConfig(Config())
    if overrides.config:
        path = Path(overrides.config)
        if not path.exists():  # a FIFO or a folder exists: load_config says what it is
            raise ConfigError(f"{path}: no such configuration file")
        return _FixedConfig(load_config(path))
    found = find_config(Path.cwd())
    return ConfigFinder(load_config(found) if found else Config())


class _FixedConfig(ConfigFinder):
    """One configuration for every model (``--config FILE`` or ``--no-config``)."""

    def for_model(self, model: str | Path) -> Config:
        return self.fallback


def resolve(overrides: Overrides, config: Config) -> Settings:
    """``config`` with ``overrides`` on top."""
    select = split_codes(overrides.select) if overrides.select is not None else config.select
    if select is not None and not select:
        # an empty selection would lint nothing and exit 0: a CI job that checks nothing must not pass
        raise SettingsError("--select names no rule code; give codes or prefixes such as --select SD,OR (or leave it out to run every rule)")
    if select is not None and "ALL" in select:
        select = None  # Ruff's spelling of "every rule"
    extend = split_codes(overrides.extend_select)
    if extend and select is not None:
        select = select + tuple(c for c in extend if c not in select)
    if overrides.ignore is not None:
        ignore = split_codes(overrides.ignore)
    elif overrides.select is not None:
        ignore = ()  # a select given as an override drops the configured ignore, as in Ruff
    else:
        ignore = config.ignore or ()
    pairs: Mapping[str, str | None] | None = config.pairs
    pairs_origin = f"{shown_path(config.path) or 'the configuration'}: [tool.rnnir] pairs" if pairs is not None else None
    if overrides.pairs:
        pairs, pairs_origin = dict(parse_pair(p) for p in overrides.pairs), None
    return Settings(
        select=select,
        ignore=tuple(ignore),
        pairs=pairs,
        entry=overrides.entry or config.entry or "dynamic",
        exit=overrides.exit or config.exit or "fanout",
        config=config,
        strict=bool(overrides.strict or config.strict),
        pairs_origin=pairs_origin,
    )


def resolve_checked(overrides: Overrides, config: Config, codes: Sequence[str]) -> Settings:
    """:func:`resolve`, every rule code in the overrides and ``config`` checked against ``codes`` (an error
    names where the code was written)."""
    settings = resolve(overrides, config)
    where = f"{config.path}: " if config.path else ""
    if settings.select is not None:
        check_selectors(settings.select, codes, "--select" if overrides.select is not None else f"{where}select")
    check_selectors(settings.ignore, codes, "--ignore" if overrides.ignore is not None else f"{where}ignore")
    for pattern, pattern_codes in config.per_file_ignores:
        check_selectors(pattern_codes, codes, f"{where}per-file-ignores {pattern!r}")
    return settings


def deprecation_notices(configs: Sequence[Config]) -> list[str]:
    """The deprecation notices of ``configs``, each once, in order."""
    seen: list[str] = []
    for config in configs:
        seen.extend(n for n in config.deprecations if n not in seen)
    return seen


def split_codes(values: Sequence[str]) -> tuple[str, ...]:
    """``["SD,OR", "AL001", "wrong-slot"]`` → ``("SD", "OR", "AL001", "SD002")``; repeated flags add up."""
    from rnnir.passes.catalogue import selector_code  # the one reading of a selector, shared with [tool.rnnir] and the library

    return tuple(selector_code(c) for v in values for c in v.split(",") if c.strip())


def check_selectors(selectors: Sequence[str], codes: Sequence[str], what: str) -> None:
    """Every selector names a rule of ``codes`` (a :class:`SettingsError` saying which does not)."""
    from rnnir.passes.catalogue import check_selectors as check
    from rnnir.passes.manager import SelectionError

    try:
        check(selectors, what, known=codes)
    except SelectionError as exc:
        raise SettingsError(str(exc)) from None


def shown_path(path: Path | None) -> str | None:
    """A configuration file as the user would type it: relative to the working directory when below it."""
    if path is None:
        return None
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)
