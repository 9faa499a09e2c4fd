"""The rule fixtures' snapshots: beside each ``tests/rules/<CODE>/<name>.rnnir``, ``<name>.expected.txt`` holds what
``rnnir lint <name>.rnnir`` prints, run in the fixture's folder (so the text names the file alone), and its exit code.
``tests/rules/test_fixtures.py`` checks every snapshot byte for byte; after a deliberate change of wording, rewrite
them all and read the diff (each line is a verdict somebody checked against the rule):

    python -m tests.rules.snapshots
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from rnnir.cli import main

FIXTURES = Path(__file__).resolve().parent


def fixtures(folder: Path = FIXTURES) -> list[Path]:
    """Every fixture program, ``<CODE>/<name>.rnnir``, in a stable order."""
    return sorted(folder.glob("*/*.rnnir"))


def snapshot_of(fixture: Path) -> Path:
    return fixture.with_name(fixture.name[: -len(".rnnir")] + ".expected.txt")


def lint_output(fixture: Path) -> str:
    """``rnnir lint``'s text output on the fixture, from its folder, then the exit code on a line of its own."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(fixture.parent)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["lint", "--no-config", fixture.name])
    finally:
        os.chdir(here)
    return f"{out.getvalue()}{err.getvalue()}exit {code}\n"


def write_all(folder: Path = FIXTURES) -> list[Path]:
    """Rewrite every snapshot; returns the ones whose bytes changed."""
    changed = []
    for fixture in fixtures(folder):
        target, text = snapshot_of(fixture), lint_output(fixture)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            changed.append(target)
    return changed


if __name__ == "__main__":
    for path in write_all():
        print(f"rewrote {path.relative_to(FIXTURES.parents[1])}")
