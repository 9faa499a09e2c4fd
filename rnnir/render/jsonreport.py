"""The JSON report of ``rnnir lint --format json`` (and ``rnnir cost --format json``), and the fast indented JSON writer.

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
from typing import Any

from rnnir.lint.results import LintResult, unicode_text

__all__ = ["JSON_SCHEMA_VERSION", "dumps_indented", "render_json"]

JSON_SCHEMA_VERSION = 1


def _json_default(value: Any) -> Any:
    """Last resort for values no renderer expects (bytes from a protobuf string field): readable text."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


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
            if type(item) is str:  # most leaves: written here rather than by a call each
                out.append(_ESCAPE(item))
            else:
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
            text = key if type(key) is str else _key_text(key)
            if text is None:
                raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
            head = (inner if first else "," + inner) + _ESCAPE(text) + ": "
            first = False
            kind = type(value)
            if kind is str:  # most leaves: written here rather than by a call each
                out.append(head + _ESCAPE(value))
            elif value is None:
                out.append(head + "null")
            elif kind is int:
                out.append(head + int.__repr__(value))
            else:
                out.append(head)
                _encode(value, out, inner, default)
        out.append(newline + "}")
    else:
        if default is None:
            raise TypeError(f"Object of type {obj.__class__.__name__} is not JSON serializable")
        _encode(default(obj), out, newline, default)


_ESCAPE = json.encoder.encode_basestring_ascii
