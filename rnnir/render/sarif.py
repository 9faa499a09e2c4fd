"""The SARIF 2.1.0 report (``rnnir lint --format sarif``), for code-scanning uploads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rnnir.lint.results import LintResult, unicode_text
from rnnir.passes.diagnostics import Diagnostic, Rule, Severity
from rnnir.render.jsonreport import _json_default, dumps_indented

__all__ = ["INFORMATION_URI", "SARIF_SCHEMA_URI", "SRCROOT", "render_sarif"]

INFORMATION_URI = "https://pypi.org/project/rnnir/"
SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
_FINGERPRINT_KEY = "rnnirFingerprint/v1"

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
