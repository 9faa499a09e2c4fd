"""The ``rnnir`` command line: :func:`main` (the console script ``rnnir``, and ``python -m rnnir.cli``).

One module per command (:mod:`~rnnir.cli.lint`, :mod:`~rnnir.cli.cost`, :mod:`~rnnir.cli.show`,
:mod:`~rnnir.cli.rules` with ``explain``, :mod:`~rnnir.cli.fix`, :mod:`~rnnir.cli.run`, :mod:`~rnnir.cli.deploy`),
each imported only when its command runs; :mod:`~rnnir.cli.app` holds the parser and the command table,
:mod:`~rnnir.cli.common` what the commands share.  The lint library (``LintJob``, ``collect_models``,
``lint_one``, ``Settings``, ...) lives in :mod:`rnnir.lint`; its names are re-exported here for the old
``rnnir.cli.LintJob`` spellings.
"""

from __future__ import annotations

from rnnir.cli.app import COMMANDS, build_parser, main
from rnnir.cli.common import UsageError
from rnnir.lint.jobs import LintJob, Target, collect_models, lint_one
from rnnir.lint.settings import Settings, pairs_declared_in

__all__ = [
    "COMMANDS",
    "LintJob",
    "Settings",
    "Target",
    "UsageError",
    "build_parser",
    "collect_models",
    "lint_one",
    "main",
    "pairs_declared_in",
]
