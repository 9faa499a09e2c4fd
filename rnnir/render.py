"""Renderers of lint results: text, JSON, SARIF 2.1.0 and GitHub workflow commands.

Every format renders the same data (:class:`LintResult`); no rule formats its
own output.  Nothing here depends on time, process or machine, so a run with
``--jobs N`` renders byte for byte what a serial run renders.

JSON schema, version 1 (documented for users in ``docs/json-schema.md``)::

    {
      "version": 1,
      "tool": {"name": "rnnir", "version": "0.1.0"},
      "files": [
        {
          "path": "models/vad.onnx",             # as given / found, OS separators
          "config": "pyproject.toml" | null,     # the [tool.rnnir] file that applied to this model
          "state_pairs": [TracedPair.to_json()],  # input, output, source, reason, slices[...] (rnnir.analysis.slices)
          "suggested_pairs": [pair_json(pair)],    # the same, with no slices
          "diagnostics": [Diagnostic.to_json()],  # code, name, severity, message, locations, hint[, slot]
          "error": null | {"type": "ModelError", "message": "..."},
          "suppressed": 0, "baselined": 0,       # findings hidden by the model's noqa / by --baseline
          "cost": {...}                           # only with --cost / `rnnir cost`
        }
      ],
      "summary": {
        "files": 2, "failed": 0,
        "errors": 1, "warnings": 0, "infos": 0,
        "by_code": {"SD001": 1},
        "suppressed": 0,                      # hidden by the models' own rnnir.noqa metadata
        "baselined": 0,                       # hidden by --baseline FILE
        "baseline_stale": 0,                  # only with --baseline: entries that matched nothing
        "exit_code": 1
      }
    }

Files keep the order of the command line (folders expanded in sorted order);
diagnostics are sorted by severity (errors first), code, slot and message.
New keys may be added within version 1; a key is never removed or changes
meaning without bumping ``version``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnir.passes.diagnostics import Diagnostic, Rule, Severity

__all__ = [
    "FORMATS",
    "printable",
    "printable_lines",
    "JSON_SCHEMA_VERSION",
    "FileResult",
    "LintResult",
    "render",
    "render_cost_text",
    "render_github",
    "render_json",
    "render_sarif",
    "render_text",
]

JSON_SCHEMA_VERSION = 1
FORMATS = ("text", "json", "sarif", "github")
INFORMATION_URI = "https://pypi.org/project/rnnir/"
SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
_FINGERPRINT_KEY = "rnnirFingerprint/v1"


def printable(text: str) -> str:
    """``text`` safe to print on a terminal or into a CI log: control characters (newlines, ESC, BEL, CR,
    bidi overrides) and bytes that were not valid UTF-8 in a file name (surrogate escapes) become visible
    backslash escapes, and a line that would start a GitHub workflow command (``::set-env``, ``::error``,
    also after spaces) has its first colon escaped.  Every name rnnir prints goes through here."""
    if text.isprintable():
        return _no_workflow_command(text)
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x100:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\x{code:02x}"))
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return _no_workflow_command("".join(out))


def _no_workflow_command(line: str) -> str:
    # GitHub's runner reads a log line as a command when it starts with "::" after leading whitespace
    stripped = line.lstrip()
    if stripped.startswith("::"):
        return line[: len(line) - len(stripped)] + "\\x3a" + stripped[1:]
    return line


def printable_lines(text: str) -> str:
    """:func:`printable` applied to each line of ``text``, its line breaks kept."""
    return "\n".join(map(printable, text.split("\n")))


def unicode_text(text: str) -> str:
    """``text`` as valid Unicode for JSON/SARIF: an undecodable file-name byte becomes the text ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _json_default(value: Any) -> Any:
    """Last resort for values no renderer expects (bytes from a protobuf string field): readable text."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


def _renderable(record: dict[str, Any]) -> bool:
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeError, RecursionError):
        return False
    return True


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

    def quarantine(self) -> None:
        """Turn a file whose record cannot be written as JSON into that file's error record, so one bad
        name never blanks the whole report (idempotent; :func:`render` calls it)."""
        for k, f in enumerate(self.files):
            if f.error is None and not _renderable({**f.to_json(with_cost=self.with_cost), "path": unicode_text(f.path)}):
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


def render(result: LintResult, fmt: str) -> str:
    """Render ``result`` in ``fmt`` (one of :data:`FORMATS`); the text ends with a newline."""
    renderer = {"text": render_text, "json": render_json, "sarif": render_sarif, "github": render_github}[fmt]
    result.quarantine()
    return renderer(result)


# -- text ------------------------------------------------------------------------------------


def render_text(result: LintResult) -> str:
    """Concise by default, like Ruff: one line per finding (``path: node: CODE [severity] message``) with its
    hint indented under it, nothing for a clean file, one summary line.  ``verbose`` adds each model's pairs,
    slices and "no findings"."""
    if not result.verbose:
        return _render_concise(result)
    lines: list[str] = []
    for f in result.files:
        lines.append(f.path)
        if f.error is not None:
            lines.append(f"  {f.path}: error: {f.error['message']}")
            lines.append("")
            continue
        if not f.state_pairs:
            lines.append("  no state pairs")
        for p in f.state_pairs:
            lines.extend(_pair_lines("pair", p))
        for p in f.suggested_pairs:
            lines.extend(_pair_lines("suggested pair", p))
        for d in f.diagnostics:
            lines.append(f"  {f.path}: {d.code} [{d.severity.value}] {d.message}")
            branches = _branches(d)
            if branches:
                lines.append(f"    in If branch: {', '.join(branches)}")
            if d.hint:
                lines.append(f"    hint: {d.hint}")
        if not f.diagnostics:
            lines.append("  no findings")
        if f.config is not None:  # which [tool.rnnir] applied: each model finds its own, as in Ruff
            lines.append(f"  config: {f.config}")
        if result.with_cost and f.cost is not None:
            lines.append("  cost per call:")
            lines.extend("    " + line for line in render_cost_text(f.cost))
        lines.append("")
    lines.append(_summary_line(result))
    # names come from models: a newline or an escape sequence in one must not reach the terminal raw
    return "\n".join(map(printable, lines)) + "\n"


def _render_concise(result: LintResult) -> str:
    lines: list[str] = []
    for f in result.files:
        if f.error is not None:
            lines.append(f"{f.path}: error: {f.error['message']}")
            continue
        for d in f.diagnostics:
            where = next((loc.onnx_node or loc.value for loc in d.locations if loc.onnx_node or loc.value), None)
            branches = _branches(d)
            at = f"{where}: " if where else ""
            lines.append(f"{f.path}: {at}{d.code} [{d.severity.value}] {d.message}" + (f" (in {', '.join(branches)})" if branches else ""))
            if d.hint:
                lines.append(f"  hint: {d.hint}")
        if result.with_cost and f.cost is not None:
            lines.append(f"{f.path}: cost per call:")
            lines.extend("  " + line for line in render_cost_text(f.cost))
    if lines:
        lines.append("")
    lines.append(_summary_line(result))
    return "\n".join(map(printable, lines)) + "\n"


def _pair_lines(kind: str, pair: Mapping[str, Any]) -> list[str]:
    out = pair.get("output")
    lines = [f"  {kind} {pair['input']} -> {out if out is not None else '<nothing>'} ({pair['source']}: {pair.get('reason', '')})"]
    slices = pair.get("slices") or []
    if len(slices) > 1:
        for s in slices:
            entry = ", ".join(_port_label(p) for p in s.get("entry", [])) or "nothing"
            exit_ = ", ".join(_port_label(p) for p in s.get("exit", [])) or "nothing"
            kinds = ", ".join(f"{b or 'main'}: {k}" if len(s.get("exit_kind", {})) > 1 else k for b, k in s.get("exit_kind", {}).items())
            lines.append(f"    {s['slice']}: in -> {entry}; out <- {exit_}" + (f" ({kinds})" if kinds else ""))
    return lines


def _port_label(p: Mapping[str, Any]) -> str:
    d = "" if p.get("direction") is None else f"[{p['direction']}]"
    branch = f" in {p['branch']}" if p.get("branch") else ""
    step = f"@{p['step']}" if p.get("step") else ""
    return f"{p['op']} {p['node']!r}.{p['port']}{d}{step}{branch}"


def _branches(d: Diagnostic) -> list[str]:
    seen: list[str] = []
    for loc in d.locations:
        b = "/".join(loc.branch)
        if b and b not in seen:
            seen.append(b)
    return seen


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _summary_line(result: LintResult) -> str:
    s = result.summary()
    parts = [_plural(s["errors"], "error"), _plural(s["warnings"], "warning")]
    if s["infos"]:
        parts.append(_plural(s["infos"], "info"))
    line = f"{', '.join(parts)} in {_plural(s['files'], 'file')}"
    hidden = [f"{s[k]} {k}" for k in ("suppressed", "baselined") if s[k]]  # said, so nothing is hidden silently
    if hidden:
        line += f" ({', '.join(hidden)})"
    if s["failed"]:
        line += f"; {s['failed']} could not be analysed"
    if s["state_slices"]:
        line += f"; {s['slices_verified']} of {_plural(s['state_slices'], 'state slice')} verified"
        if s["slices_unverified"]:
            line += f" ({s['slices_unverified']} unverified)"
    return line


def render_cost_text(cost: Any, indent: str = "") -> list[str]:
    """A readable rendering of a cost report's JSON: scalars as ``key: value``, lists of records as tables."""
    lines: list[str] = []
    if isinstance(cost, Mapping):
        for key, value in cost.items():
            if isinstance(value, Mapping) and value or isinstance(value, list) and not _scalars(value):
                lines.append(f"{indent}{key}:")
                lines.extend(render_cost_text(value, indent + "  "))
            else:
                lines.append(f"{indent}{key}: {_scalar(value)}")
    elif isinstance(cost, list) and cost and all(isinstance(r, Mapping) for r in cost):
        columns: list[str] = []
        for r in cost:
            columns.extend(k for k in r if k not in columns)
        rows = [[_scalar(r.get(c, "")) for c in columns] for r in cost]
        widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(columns)]
        lines.append(indent + "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
        for row in rows:
            lines.append(indent + "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    else:
        lines.append(f"{indent}{_scalar(cost)}")
    return lines


def _scalars(values: list[Any]) -> bool:
    return all(not isinstance(v, (Mapping, list)) for v in values)


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list) and _scalars(value):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, (Mapping, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


# -- JSON ------------------------------------------------------------------------------------


def render_json(result: LintResult) -> str:
    doc = {
        "version": JSON_SCHEMA_VERSION,
        "tool": {"name": "rnnir", "version": result.version},
        "files": [{**f.to_json(with_cost=result.with_cost), "path": unicode_text(f.path)} for f in result.files],
        "summary": result.summary(),
    }
    return dumps_indented(doc, default=_json_default) + "\n"


def dumps_indented(obj: Any, default: Any = None) -> str:
    """``json.dumps(obj, indent=2, default=default)``, byte for byte, about twice as fast.

    With ``indent`` set, the json module encodes in pure Python through a generator per container (its C
    encoder only writes compact JSON before Python 3.13); a report of a model with a thousand state pairs is
    a few hundred thousand values, a tenth of that lint's time.  Strings go through json's own C escaper, and
    floats, dict keys and unknown objects (``default``) are handled as ``json.JSONEncoder`` handles them.
    """
    parts: list[str] = []
    _encode(obj, parts, "\n", default)
    return "".join(parts)


def _float_text(x: float) -> str:
    if x != x:
        return "NaN"
    if x == float("inf"):
        return "Infinity"
    if x == -float("inf"):
        return "-Infinity"
    return float.__repr__(x)


def _key_text(key: Any) -> str | None:
    """A dict key as json writes it (None: json raises TypeError for it)."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float_text(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    return None


def _encode(obj: Any, out: list[str], newline: str, default: Any) -> None:
    if isinstance(obj, str):
        out.append(_ESCAPE(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))
    elif isinstance(obj, float):
        out.append(_float_text(obj))
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        inner = newline + "  "
        out.append("[")
        first = True
        for item in obj:
            out.append(inner if first else "," + inner)
            first = False
            _encode(item, out, inner, default)
        out.append(newline + "]")
    elif isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        inner = newline + "  "
        out.append("{")
        first = True
        for key, value in obj.items():
            text = _key_text(key)
            if text is None:
                raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
            out.append((inner if first else "," + inner) + _ESCAPE(text) + ": ")
            first = False
            _encode(value, out, inner, default)
        out.append(newline + "}")
    else:
        if default is None:
            raise TypeError(f"Object of type {obj.__class__.__name__} is not JSON serializable")
        _encode(default(obj), out, newline, default)


_ESCAPE = json.encoder.encode_basestring_ascii


# -- SARIF 2.1.0 -----------------------------------------------------------------------------

_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _absolute(path: str, cwd: Path) -> Path:
    return Path(os.path.normpath(os.path.join(cwd.resolve(), path)))


def _artifact_location(path: str, cwd: Path) -> dict[str, Any]:
    """The file relative to the working directory (``%SRCROOT%``) when it lies below it, else an absolute URI."""
    from urllib.parse import quote  # SARIF only: the other formats never build a URI

    resolved = _absolute(path, cwd)
    try:
        rel = resolved.relative_to(cwd.resolve())
    except ValueError:
        return {"uri": "file://" + quote(os.fsencode(resolved.as_posix()))}
    # percent-encode the file name's bytes: a name that is not valid UTF-8 still makes a valid URI
    return {"uri": quote(os.fsencode(rel.as_posix())), "uriBaseId": SRCROOT}


def _fingerprint(d: Diagnostic, uri: str) -> str:
    """Stable across message rewording: code, file, slot and the logical locations only."""
    import hashlib  # SARIF only

    parts = [d.code, uri, d.slot or "", *sorted(loc.logical for loc in d.locations)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": _first_paragraph(rule.doc) or rule.summary},
        "help": {"text": rule.doc or rule.summary},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
    }


def _first_paragraph(doc: str) -> str:
    para: list[str] = []
    for line in (doc or "").strip().splitlines():
        if not line.strip():
            break
        para.append(line.strip())
    return " ".join(para)


def render_sarif(result: LintResult) -> str:
    codes = sorted(result.rules)
    rule_index = {code: i for i, code in enumerate(codes)}
    artifacts: list[dict[str, Any]] = []
    artifact_index: dict[str, int] = {}
    for f in result.files:
        loc = _artifact_location(f.path, result.cwd)
        artifact_index[f.path] = len(artifacts)
        artifact: dict[str, Any] = {"location": loc}
        if f.verdicts is not None:  # every state slice's verdict rides on its model's artifact
            artifact["properties"] = {"rnnirVerdicts": f.verdicts}
        artifacts.append(artifact)

    def physical(path: str) -> dict[str, Any]:
        loc = dict(artifacts[artifact_index[path]]["location"])  # a copy: the artifact keeps no index
        loc["index"] = artifact_index[path]
        return {"artifactLocation": loc, "region": {"startLine": 1}}

    results: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for f in result.files:
        if f.error is not None:
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": unicode_text(f"{f.path}: {f.error['message']}")},
                    "descriptor": {"id": f.error["type"]},
                    "locations": [{"physicalLocation": physical(f.path)}],
                }
            )
            continue
        uri = artifacts[artifact_index[f.path]]["location"]["uri"]
        for d in f.diagnostics:
            locations = [
                {
                    "physicalLocation": physical(f.path),
                    "logicalLocations": [
                        {
                            "fullyQualifiedName": loc.logical,
                            "name": loc.value or loc.onnx_node or "graph",
                            "kind": "variable" if loc.value else "function",
                        }
                    ],
                    # the ONNX names above are the graph's own; the IR node rnnir found it at rides beside them
                    **({"properties": {"irNode": loc.node}} if loc.node else {}),
                }
                for loc in d.locations
            ] or [{"physicalLocation": physical(f.path)}]
            text = d.message + (f"\nHint: {d.hint}" if d.hint else "")
            res: dict[str, Any] = {
                "ruleId": d.code,
                "level": _SARIF_LEVEL[d.severity],
                "message": {"text": text},
                "locations": locations,
                "partialFingerprints": {_FINGERPRINT_KEY: _fingerprint(d, uri)},
                "properties": {"name": d.name, "hint": d.hint, **({"slot": d.slot} if d.slot else {})},
            }
            if d.code in rule_index:
                res["ruleIndex"] = rule_index[d.code]
            results.append(res)

    invocation: dict[str, Any] = {"executionSuccessful": not notifications, "exitCode": result.exit_code}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "rnnir",
                "version": result.version,
                "semanticVersion": result.version,
                "informationUri": INFORMATION_URI,
                "rules": [_sarif_rule(result.rules[c]) for c in codes],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": result.cwd.resolve().as_uri() + "/"}},
        "artifacts": artifacts,
        "invocations": [invocation],
        "results": results,
        "columnKind": "unicodeCodePoints",
    }
    doc = {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return dumps_indented(doc, default=_json_default) + "\n"


# -- GitHub workflow commands -----------------------------------------------------------------

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
    lines.append(_summary_line(result))
    return "\n".join(lines) + "\n"
