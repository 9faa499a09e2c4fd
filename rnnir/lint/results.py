"""What linting produced: :class:`FileResult` per model and :class:`LintResult` per run.

The renderers (:mod:`rnnir.render`) read these; the lint library (:mod:`rnnir.lint`) makes them and never
imports a renderer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnir.passes.diagnostics import Diagnostic, Rule, Severity

__all__ = ["FileResult", "LintResult", "unicode_text"]


def unicode_text(text: str) -> str:
    """``text`` as valid Unicode for JSON/SARIF: an undecodable file-name byte becomes the text ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")



def _renderable(record: dict[str, Any]) -> bool:
    try:
        # no check for cycles: a record that holds itself then recurses without end, which fails it all the same
        json.dumps(record, ensure_ascii=False, check_circular=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeError, RecursionError):
        return False
    return True


def _held(f: FileResult, with_cost: bool) -> tuple[tuple[object, ...], tuple[int | bool, ...]]:
    """What of a file a report writes and could fail to write (its counts are numbers), and how many findings and
    pairs it lists (a list grown or shrunk in place is looked at again) with whether its cost is written."""
    return (
        (f.path, f.config, f.state_pairs, f.suggested_pairs, f.diagnostics, f.verdicts, f.error, f.cost),
        (len(f.state_pairs), len(f.suggested_pairs), len(f.diagnostics), with_cost),
    )


@dataclass
class FileResult:
    """What linting one model produced; ``error`` is set when it could not be analysed."""

    path: str
    state_pairs: list[dict[str, Any]] = field(default_factory=list)
    suggested_pairs: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: dict[str, str] | None = None  # {"type": ..., "message": ...}
    cost: dict[str, Any] | None = None
    verdicts: dict[str, Any] | None = None  # passes.Verification.to_json(): a verdict per slice and per recurrence
    config: str | None = None  # the pyproject.toml whose [tool.rnnir] applied (None: the defaults)
    suppressed: int = 0  # selected findings the model's own suppressions (metadata rnnir.noqa) hid
    baselined: int = 0  # findings --baseline FILE hid (recorded there, so not new)
    warnings: list[str] = field(default_factory=list)  # about how the model was read (pairs a declaration left out): stderr only

    def to_json(self, *, with_cost: bool) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "config": self.config,
            "state_pairs": self.state_pairs,
            "suggested_pairs": self.suggested_pairs,
            "diagnostics": [x.to_json() for x in self.diagnostics],
            "verdicts": self.verdicts,
            "error": self.error,
            "suppressed": self.suppressed,
            "baselined": self.baselined,
        }
        if with_cost:
            d["cost"] = self.cost
        return d


@dataclass
class LintResult:
    """All files of one run, the rule catalogue they were checked against, and the tool version."""

    files: list[FileResult]
    rules: Mapping[str, Rule]
    version: str
    with_cost: bool = False
    cwd: Path = field(default_factory=Path.cwd)
    verbose: bool = False  # text: also each model's pairs, slices and "no findings" (rnnir lint -v)
    baseline_stale: int | None = None  # --baseline: entries that matched nothing in this run (None: no baseline)
    # id of a file found writable -> the file and what it held then (kept, so no other object takes those ids)
    _vetted: dict[int, tuple[FileResult, tuple[object, ...], tuple[int | bool, ...]]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def quarantine(self) -> None:
        """Turn a file whose record cannot be written as JSON into that file's error record, so one bad
        name never blanks the whole report (idempotent; :func:`render` calls it).

        A file found writable is not encoded again while it holds the same objects (``rnnir lint`` quarantines
        before it reports, then renders: a large model's record took a few milliseconds per look)."""
        for k, f in enumerate(self.files):
            if f.error is not None:
                continue
            held, sizes = _held(f, self.with_cost)
            seen = self._vetted.get(id(f))
            # seen[0] keeps the file alive, so no other object has its id: the entry is this file's
            if seen is not None and seen[2] == sizes and all(a is b for a, b in zip(seen[1], held)):
                continue
            if _renderable({**f.to_json(with_cost=self.with_cost), "path": unicode_text(f.path)}):
                self._vetted[id(f)] = (f, held, sizes)
            else:
                self.files[k] = FileResult(
                    f.path, error={"type": "RenderError", "message": "the analysis holds text that cannot be written as JSON (a name that is not valid UTF-8?)"}
                )

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.error is not None]

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.files for d in f.diagnostics if d.severity is severity)

    @property
    def exit_code(self) -> int:
        """2 when any file could not be analysed, else 1 when any error-level finding, else 0."""
        if self.failed:
            return 2
        return 1 if self.count(Severity.ERROR) else 0

    def slice_counts(self) -> dict[str, int]:
        """State slices per verdict over every file (verified, violated, unverified)."""
        counts = {"verified": 0, "violated": 0, "unverified": 0}
        for f in self.files:
            for key in counts:
                counts[key] += int((f.verdicts or {}).get(key, 0))
        return counts

    def summary(self) -> dict[str, Any]:
        by_code: dict[str, int] = {}
        for f in self.files:
            for d in f.diagnostics:
                by_code[d.code] = by_code.get(d.code, 0) + 1
        counts = self.slice_counts()
        return {
            "state_slices": sum(counts.values()),
            **{f"slices_{k}": v for k, v in counts.items()},
            "files": len(self.files),
            "failed": len(self.failed),
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "infos": self.count(Severity.INFO),
            "by_code": dict(sorted(by_code.items())),
            "suppressed": sum(f.suppressed for f in self.files),
            "baselined": sum(f.baselined for f in self.files),
            **({} if self.baseline_stale is None else {"baseline_stale": self.baseline_stale}),
            "exit_code": self.exit_code,
        }

