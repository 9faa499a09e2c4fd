"""GitHub workflow commands (``rnnir lint --format github``): one ``::error``/``::warning``/``::notice`` line per
finding, annotated on the model in a pull request."""

from __future__ import annotations

from pathlib import Path

from rnnir.lint.results import LintResult
from rnnir.passes.diagnostics import Severity
from rnnir.render.escape import printable
from rnnir.render.sarif import _absolute
from rnnir.render.text import summary_line

__all__ = ["render_github"]

_GITHUB_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _gh_data(text: str) -> str:
    # GitHub's own escapes for %, CR and LF; any other control character (ESC) made visible
    return "%0A".join("%0D".join(printable(part.replace("%", "%25")) for part in line.split("\r")) for line in text.split("\n"))


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _gh_path(path: str, cwd: Path) -> str:
    """GitHub wants paths relative to the repository: relative to the working directory when below it."""
    resolved = _absolute(path, cwd)
    try:
        return resolved.relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def render_github(result: LintResult) -> str:
    """``::error file=…,line=1,title=CODE name::message`` lines, then the summary as a plain log line."""
    lines: list[str] = []
    for f in result.files:
        file_prop = _gh_property(_gh_path(f.path, result.cwd))
        if f.error is not None:
            title = _gh_property(f"rnnir {f.error['type']}")
            lines.append(f"::error file={file_prop},line=1,title={title}::{_gh_data('could not analyse: ' + f.error['message'])}")
            continue
        for d in f.diagnostics:
            title = _gh_property(f"{d.code} {d.name}")
            text = d.message + (f"\nhint: {d.hint}" if d.hint else "")
            lines.append(f"::{_GITHUB_COMMAND[d.severity]} file={file_prop},line=1,title={title}::{_gh_data(text)}")
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"
