"""``[tool.rnnir]`` configuration read from a ``pyproject.toml``.

Recognised keys (all optional)::

    [tool.rnnir]
    select = ["SD", "OR"]            # rule codes, prefixes or names (wrong-slot) to run (default: all)
    ignore = ["SD006"]               # rule codes, prefixes or names to skip
    pairs = { h0 = "hn", c0 = "cn" } # declared state pairs (input = output; "" = no output)
    lower-entry = "dynamic"          # lowering policy for demonstrations: dynamic | constant
    lower-exit = "fanout"            # lowering policy for demonstrations: fanout | chain | reuse-single-store

    [tool.rnnir.per-file-ignores]
    "models/legacy/*.onnx" = ["SD006"]

Each model gets its own configuration, the way Ruff finds ``[tool.ruff]`` per
linted file (:class:`ConfigFinder`): the nearest ``pyproject.toml`` holding a
``[tool.rnnir]`` table at or above the *model's* folder; a model with none
above it falls back to the one found from the working directory, else to the
defaults.  ``--config FILE`` names one file for every model, ``--no-config``
none.  ``per-file-ignores`` patterns are ``fnmatch`` globs matched against the
model's path relative to the folder of that ``pyproject.toml`` (``*`` also
crosses ``/``; a pattern without ``/`` also matches the bare file name; a
leading ``**/`` may match nothing).

Command-line flags override the file key by key: ``--select`` replaces
``select`` (and the configured ``ignore``), ``--ignore`` replaces ``ignore``,
any ``--pair`` replaces ``pairs``.

``entry``/``exit`` are the old spellings of ``lower-entry``/``lower-exit``:
still read, with a deprecation notice (:attr:`Config.deprecations`), because
they read like exit-code settings while they pick a lowering policy.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnir.errors import RnnirError
from rnnir.util.regularfile import UnreadableFile, read_regular

__all__ = ["Config", "ConfigError", "ConfigFinder", "find_config", "load_config", "parse_pair"]

#: the largest pyproject.toml read: real ones are a few KiB
MAX_CONFIG_BYTES = 4 << 20
ENTRY_POLICIES = ("dynamic", "constant")
EXIT_POLICIES = ("fanout", "chain", "reuse-single-store")

_KEYS = ("select", "ignore", "pairs", "per-file-ignores", "lower-entry", "lower-exit", "strict")
#: old key -> new key: still read, with a notice (they read like exit-code settings, not lowering policies)
_RENAMED_KEYS = {"entry": "lower-entry", "exit": "lower-exit"}


class ConfigError(RnnirError):
    """The ``[tool.rnnir]`` table (or a ``--pair`` flag) cannot be used as written."""


@dataclass(frozen=True)
class Config:
    """Settings for one lint run; ``None`` means "not set here" (fall back to the default)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    pairs: Mapping[str, str | None] | None = None
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    entry: str | None = None
    exit: str | None = None
    strict: bool | None = None  # unverified state (SD009) and unexposed state (SD010) are errors
    path: Path | None = None  # the pyproject.toml it came from
    root: Path | None = field(default=None)  # folder per-file-ignores patterns are relative to
    deprecations: tuple[str, ...] = ()  # notices about old spellings in the file, for the CLI to print once

    def ignores_for(self, model: Path) -> tuple[str, ...]:
        """Codes the ``per-file-ignores`` table adds for ``model``."""
        if not self.per_file_ignores:
            return ()
        rel = _relative_posix(model, self.root)
        name = model.name
        codes: list[str] = []
        for pattern, pattern_codes in self.per_file_ignores:
            if _glob_matches(pattern, rel, name):
                codes.extend(c for c in pattern_codes if c not in codes)
        return tuple(codes)


def find_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.rnnir]`` table."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            if "rnnir" in _tool_table(_read_toml(candidate), candidate):
                return candidate
    return None


def load_config(path: Path) -> Config:
    """Read ``[tool.rnnir]`` from ``path``; a file without the table gives an empty :class:`Config`."""
    return _config_from(_read_toml(path), path)


def _config_from(data: Mapping[str, Any], path: Path) -> Config:
    table = _tool_table(data, path).get("rnnir", {})
    where = f"{path}: [tool.rnnir]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - set(_KEYS) - set(_RENAMED_KEYS))
    if unknown:
        raise ConfigError(f"{where} has unknown key(s) {', '.join(map(repr, unknown))}; known keys: {', '.join(_KEYS)}")
    select = _codes(table, "select", where)
    if select is not None and not select:
        raise ConfigError(f'{where} select is empty, which would run no rule at all; name codes or prefixes (select = ["SD", "OR"]) or drop the key')
    ignore = _codes(table, "ignore", where)
    pairs = None
    if "pairs" in table:
        raw = table["pairs"]
        if not isinstance(raw, dict):
            raise ConfigError(f'{where} pairs must be a table of input = "output" strings, e.g. pairs = {{h0 = "hn"}}, not {raw!r}')
        bad = next((k for k, v in raw.items() if not isinstance(v, str)), None)
        if bad is not None:
            raise ConfigError(f'{where} pairs entry {bad} = {raw[bad]!r}: the output must be a string, e.g. pairs = {{{bad} = "hn"}} ("" for none)')
        pairs = {k: (v or None) for k, v in raw.items()}
    pfi: list[tuple[str, tuple[str, ...]]] = []
    raw_pfi = table.get("per-file-ignores", {})
    if not isinstance(raw_pfi, dict):
        raise ConfigError(f'{where} per-file-ignores must be a table of "glob" = ["CODE", ...]')
    for pattern, codes in raw_pfi.items():
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(f'{where} per-file-ignores entry {pattern!r} must be a list of rule codes')
        pfi.append((pattern, _selectors(codes)))
    deprecations: list[str] = []
    for old, new in _RENAMED_KEYS.items():
        if old in table:
            if new in table:
                raise ConfigError(f"{where} sets both {old!r} and {new!r}; keep {new!r} ({old!r} is its old spelling)")
            deprecations.append(f"{where} key {old!r} is deprecated; rename it to {new!r} (it picks a lowering policy, not an exit code)")
    entry = _choice(table, "lower-entry" if "lower-entry" in table else "entry", ENTRY_POLICIES, where)
    exit_ = _choice(table, "lower-exit" if "lower-exit" in table else "exit", EXIT_POLICIES, where)
    strict = table.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise ConfigError(f"{where} strict must be true or false, not {strict!r}")
    return Config(
        strict=strict,
        select=select,
        ignore=ignore,
        pairs=pairs,
        per_file_ignores=tuple(pfi),
        entry=entry,
        exit=exit_,
        path=path,
        root=path.resolve().parent,
        deprecations=tuple(deprecations),
    )


class ConfigFinder:
    """The configuration of each model, found the way Ruff finds each file's: the nearest ``pyproject.toml``
    with a ``[tool.rnnir]`` table at or above the model's folder, else ``fallback`` (the one found from the
    working directory, or the defaults).  Each file is read once per finder, however many models share it."""

    def __init__(self, fallback: Config) -> None:
        self.fallback = fallback
        self._by_folder: dict[Path, Config] = {}

    def for_model(self, model: str | Path) -> Config:
        # the folder the model was found in, symlinks not resolved: a symlinked model takes the configuration of
        # the folder it is linked into, as Ruff does (and a symlink loop has no target to resolve)
        folder = Path(os.path.abspath(model)).parent
        walked: list[Path] = []  # folders whose answer this walk decides: each is asked once however many models it holds
        while True:
            known = self._by_folder.get(folder)
            if known is not None:
                break
            walked.append(folder)
            candidate = folder / "pyproject.toml"
            data = _read_toml(candidate) if candidate.is_file() else None
            if data is not None and "rnnir" in _tool_table(data, candidate):
                known = _config_from(data, candidate)  # read once: its folder is cached from here on
                break
            if folder.parent == folder:
                known = self.fallback
                break
            folder = folder.parent
        for f in walked:
            self._by_folder[f] = known
        return known


def parse_pair(text: str) -> tuple[str, str | None]:
    """``"h0=hn"`` → ``("h0", "hn")``; ``"h0="`` → ``("h0", None)`` (a state input with no output)."""
    name, sep, out = text.partition("=")
    name, out = name.strip(), out.strip()
    if not sep or not name:
        raise ConfigError(f"--pair {text!r}: expected INPUT=OUTPUT, e.g. --pair h0=hn")
    return name, (out or None)


def _tool_table(data: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: tool = {tool!r} must be a table ([tool]), as in every pyproject.toml")
    return tool


def _read_toml(path: Path) -> dict[str, Any]:
    # imported here: most lint runs find no pyproject.toml, and the parser is a noticeable part of a short run
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        text = read_regular(path, MAX_CONFIG_BYTES).decode("utf-8")
    except UnreadableFile as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        table: dict[str, Any] = tomllib.loads(text)
        return table
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply to read") from None
    except ValueError as exc:  # an integer past Python's digit limit for int(str)
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _codes(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    if key not in table:
        return None
    raw = table[key]
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise ConfigError(f'{where} {key} must be a list of rule codes or prefixes, e.g. {key} = ["SD", "OR001"]')
    return _selectors(raw)


def _selectors(raw: list[str]) -> tuple[str, ...]:
    """Rule codes, prefixes or names as codes and prefixes (:func:`rnnir.passes.catalogue.selector_code`)."""
    from rnnir.passes.catalogue import selector_code  # here: the rule catalogue only when a file names rules

    return tuple(selector_code(c) for c in raw if c.strip())


def _choice(table: Mapping[str, Any], key: str, allowed: tuple[str, ...], where: str) -> str | None:
    if key not in table:
        return None
    value = table[key]
    if value not in allowed:
        raise ConfigError(f"{where} {key} = {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _relative_posix(model: Path, root: Path | None) -> str:
    """``model`` relative to ``root`` as found (a symlinked model by the link's path, as Ruff matches it), else
    as resolved (``root`` itself is resolved), else absolute."""
    given = Path(os.path.abspath(model))
    try:
        resolved = model.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        resolved = given
    if root is not None:
        for path in (given, resolved):
            try:
                return path.relative_to(root).as_posix()
            except ValueError:
                pass
    return given.as_posix()


def _glob_matches(pattern: str, rel: str, name: str) -> bool:
    pattern = pattern.replace("\\", "/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    if pattern.startswith("**/") and fnmatch.fnmatchcase(rel, pattern[3:]):
        return True
    return "/" not in pattern and fnmatch.fnmatchcase(name, pattern)
