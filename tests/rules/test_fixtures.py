"""Each rule's fixture folder, ``tests/rules/<CODE>/``: IR-text programs the parser reads and the passes judge.

``bad*.rnnir`` must get the folder's rule; ``near_miss*.rnnir`` (a program one step from the bug) must not get it;
``fixed*.rnnir`` must get no error or warning at all, and exists exactly when the rule has a fix.  Every fixture has
a snapshot, ``<name>.expected.txt``: ``rnnir lint``'s output on it, byte for byte (``python -m tests.rules.snapshots``
rewrites them).  A rule IR text cannot show has a README.md in its folder saying why.  The rule doc's own
``Bad (IR)``/``Fixed (IR)`` programs are ``tests/rules/test_docs.py``'s; a folder holds the cases beyond them, and
``tools/add_rule.py`` starts one per rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rnnir import passes
from rnnir.fixes.catalogue import FIXES
from rnnir.ir.text import parse_program
from tests.rules import snapshots

FIXTURES = Path(__file__).resolve().parent
KINDS = ("bad", "near_miss", "fixed")
CASES = [p.relative_to(FIXTURES).as_posix() for p in snapshots.fixtures(FIXTURES)]


def _folders() -> list[Path]:
    return sorted(d for d in FIXTURES.iterdir() if d.is_dir() and not d.name.startswith(("_", ".")))


def _judged(case: str) -> tuple[str, str, list[tuple[str, str]]]:
    """(the folder's rule code, the fixture's kind, every finding's (code, severity))."""
    path = FIXTURES / case
    kind = next(k for k in KINDS if path.name.startswith(k))
    findings = passes.run(parse_program(path.read_text(encoding="utf-8")))
    return path.parent.name, kind, [(d.code, d.severity.value) for d in findings]


def test_every_folder_is_a_rule_and_every_fixture_says_what_it_expects():
    folders = [d.name for d in _folders()]
    assert folders, "no fixture folder at all"
    assert set(folders) <= set(passes.RULES), f"fixture folders naming no rule: {sorted(set(folders) - set(passes.RULES))}"
    unnamed = [c for c in CASES if not Path(c).name.startswith(KINDS)]
    assert unnamed == [], f"a fixture's name starts with one of {KINDS}"


@pytest.mark.parametrize("code", sorted(passes.RULES))
def test_every_rule_has_a_bad_and_a_near_miss_or_says_why_not(code):
    folder = FIXTURES / code
    assert folder.is_dir(), f"{code} has no fixture folder tests/rules/{code}/"
    names = [p.name for p in folder.glob("*.rnnir")]
    if not names:
        readme = folder / "README.md"
        assert readme.is_file() and code in readme.read_text(encoding="utf-8"), f"{code}: no fixture and no README.md saying why"
        return
    assert any(n.startswith("bad") for n in names) and any(n.startswith("near_miss") for n in names), f"{code}: {names}"
    # a fixed program shows what the rule's fix makes of the bug; a rule without a fix has none to show
    assert any(n.startswith("fixed") for n in names) == (code in FIXES), f"{code}: fixed*.rnnir exists exactly when the rule has a fix"


@pytest.mark.parametrize("case", CASES)
def test_the_fixture_gets_what_its_name_says(case):
    code, kind, findings = _judged(case)
    codes = {c for c, _ in findings}
    if kind == "bad":
        assert code in codes, f"{case}: expected {code}, got {findings}"
    elif kind == "near_miss":
        assert code not in codes, f"{case}: a near miss got {code}"
    else:
        assert [f for f in findings if f[1] in ("error", "warning")] == [], f"{case}: a fixed program got {findings}"


@pytest.mark.parametrize("case", CASES)
def test_the_snapshot_is_current(case):
    fixture = FIXTURES / case
    snapshot = snapshots.snapshot_of(fixture)
    assert snapshot.is_file(), f"{case} has no snapshot: run python -m tests.rules.snapshots"
    fresh = snapshots.lint_output(fixture)
    assert fresh == snapshot.read_text(encoding="utf-8"), f"{snapshot.name} is stale: rerun python -m tests.rules.snapshots and read the diff"
