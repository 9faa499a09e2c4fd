"""Each rule's fixture folder, ``tests/rules/<CODE>/``: IR-text programs the parser reads and the passes judge.

``bad*.rnnir`` must get the folder's rule; ``near_miss*.rnnir`` (a program one step from the bug) must not get it;
``fixed*.rnnir`` must get no error or warning at all.  The rule doc's own ``Bad (IR)``/``Fixed (IR)`` programs are
``tests/test_rule_docs.py``'s; a folder holds the cases beyond them, and ``tools/add_rule.py`` starts one per rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rnnir import passes
from rnnir.irtext import parse_program

FIXTURES = Path(__file__).resolve().parent / "rules"
KINDS = ("bad", "near_miss", "fixed")
CASES = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*.rnnir"))


def _judged(case: str) -> tuple[str, str, list[tuple[str, str]]]:
    """(the folder's rule code, the fixture's kind, every finding's (code, severity))."""
    path = FIXTURES / case
    kind = next(k for k in KINDS if path.name.startswith(k))
    findings = passes.run(parse_program(path.read_text(encoding="utf-8")))
    return path.parent.name, kind, [(d.code, d.severity.value) for d in findings]


def test_every_folder_is_a_rule_and_every_fixture_says_what_it_expects():
    folders = sorted(d.name for d in FIXTURES.iterdir() if d.is_dir())
    assert folders, "no fixture folder at all"
    assert set(folders) <= set(passes.RULES), f"fixture folders naming no rule: {sorted(set(folders) - set(passes.RULES))}"
    unnamed = [c for c in CASES if not Path(c).name.startswith(KINDS)]
    assert unnamed == [], f"a fixture's name starts with one of {KINDS}"


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

