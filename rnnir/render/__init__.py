"""Renderers of lint results, one module per output format: :mod:`~rnnir.render.text` (concise and
verbose), :mod:`~rnnir.render.jsonreport`, :mod:`~rnnir.render.sarif` (2.1.0) and :mod:`~rnnir.render.github`
(workflow commands); :mod:`~rnnir.render.graph` and :mod:`~rnnir.render.journey` draw a program.

Every format renders the same data (:class:`rnnir.lint.results.LintResult`); no rule formats its
own output.  Nothing here depends on time, process or machine, so a run with
``--jobs N`` renders byte for byte what a serial run renders.  The results live in :mod:`rnnir.lint`,
which never imports a renderer.
"""

from __future__ import annotations

from rnnir.lint.results import FileResult, LintResult, unicode_text
from rnnir.render.escape import printable, printable_lines
from rnnir.render.github import render_github
from rnnir.render.jsonreport import JSON_SCHEMA_VERSION, dumps_indented, render_json
from rnnir.render.sarif import INFORMATION_URI, SARIF_SCHEMA_URI, SRCROOT, render_sarif
from rnnir.render.text import render_cost_text, render_text

__all__ = [
    "FORMATS",
    "INFORMATION_URI",
    "JSON_SCHEMA_VERSION",
    "SARIF_SCHEMA_URI",
    "SRCROOT",
    "FileResult",
    "LintResult",
    "dumps_indented",
    "printable",
    "printable_lines",
    "render",
    "render_cost_text",
    "render_github",
    "render_json",
    "render_sarif",
    "render_text",
    "unicode_text",
]

#: the report formats of ``rnnir lint --format``
FORMATS = ("text", "json", "sarif", "github")

_RENDERERS = {"text": render_text, "json": render_json, "sarif": render_sarif, "github": render_github}

def render(result: LintResult, fmt: str) -> str:
    """Render ``result`` in ``fmt`` (one of :data:`FORMATS`); the text ends with a newline."""
    renderer = _RENDERERS[fmt]
    result.quarantine()
    return renderer(result)
