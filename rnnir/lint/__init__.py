"""Linting as a library: settings resolution, jobs, the worker loop and results.

``rnnir lint``, ``rnnir cost`` and :func:`rnnir.lint_many` are all built from these pieces:

* :mod:`rnnir.lint.settings` — a model's ``[tool.rnnir]`` with the caller's :class:`Overrides` on top;
* :mod:`rnnir.lint.jobs` — :func:`collect_models` (paths to :class:`Target` s), :class:`LintJob`, :func:`lint_one`;
* :mod:`rnnir.lint.executor` — :func:`run_jobs`, the one worker loop, on any ``concurrent.futures.Executor``;
* results are :class:`rnnir.lint.results.FileResult` / :class:`rnnir.lint.results.LintResult` (:mod:`rnnir.render` renders them).

Nothing here imports the command line (``tests/lint/test_library.py`` checks it).
"""

from __future__ import annotations

from rnnir.lint.executor import process_pool, run_jobs
from rnnir.lint.jobs import LintJob, Target, collect_models, job_for, lint_one
from rnnir.lint.results import FileResult, LintResult
from rnnir.lint.settings import (
    Overrides,
    Settings,
    SettingsError,
    config_finder,
    pairs_declared_in,
    resolve,
    resolve_checked,
)

__all__ = [
    "FileResult",
    "LintJob",
    "LintResult",
    "Overrides",
    "Settings",
    "SettingsError",
    "Target",
    "collect_models",
    "config_finder",
    "job_for",
    "lint_one",
    "pairs_declared_in",
    "process_pool",
    "resolve",
    "resolve_checked",
    "run_jobs",
]
