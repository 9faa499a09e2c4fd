"""The text report: concise (one line per finding, Ruff's default) or verbose (``rnnir lint -v``: each
model's pairs, slices and "no findings"), and the cost tables of ``--cost`` / ``rnnir cost``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rnnir.lint.results import LintResult
from rnnir.passes.diagnostics import Diagnostic
from rnnir.render.escape import printable

__all__ = ["plural", "render_cost_text", "render_text", "summary_line"]


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
    lines.append(summary_line(result))
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
    lines.append(summary_line(result))
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


def plural(n: int, word: str, many: str = "") -> str:
    """``n`` and ``word``, with ``many`` (default: word + s) unless n is 1: "1 file", "2 files", "2 unsafe fixes"."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def summary_line(result: LintResult) -> str:
    s = result.summary()
    parts = [plural(s["errors"], "error"), plural(s["warnings"], "warning")]
    if s["infos"]:
        parts.append(plural(s["infos"], "info"))
    line = f"{', '.join(parts)} in {plural(s['files'], 'file')}"
    hidden = [f"{s[k]} {k}" for k in ("suppressed", "baselined") if s[k]]  # said, so nothing is hidden silently
    if hidden:
        line += f" ({', '.join(hidden)})"
    if s["failed"]:
        line += f"; {s['failed']} could not be analysed"
    if s["state_slices"]:
        line += f"; {s['slices_verified']} of {plural(s['state_slices'], 'state slice')} verified"
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
