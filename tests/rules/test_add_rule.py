"""``tools/add_rule.py``: adding a rule touches three things (its file, its fixture folder, one code-table line).

The scaffold runs in a copy of the package (``tmp_path``), never in the checkout; the copy's ``rnnir rules`` then
lists the rule and its doc and fixture tests run there, failing on the Bad programs until the rule finds the bug.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from pathlib import Path

import pytest
from tests.support.scaffold import copy_checkout, files, run_in

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("rnnir", "tools/add_rule.py", "tests/__init__.py", "tests/rules")


def _copy(tmp_path: Path) -> Path:
    return copy_checkout(tmp_path, COPIED)


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], dict[str, bytes], subprocess.CompletedProcess[str]]:
    copy = _copy(tmp_path_factory.mktemp("add_rule"))
    before = files(copy)
    done = run_in(copy, "tools/add_rule.py", "SD011", "state-forgotten", "store-destinations")
    return copy, before, files(copy), done


def test_a_new_rule_is_its_file_its_fixture_folder_and_one_registration_line(scaffolded):
    copy, before, after, done = scaffolded
    assert done.returncode == 0, done.stderr
    added = sorted(set(after) - set(before))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    assert set(before) <= set(after)
    assert added == ["rnnir/passes/rules/sd011_state_forgotten.py", "tests/rules/SD011/bad.rnnir", "tests/rules/SD011/near_miss.rnnir"]
    assert changed == ["rnnir/passes/rules/__init__.py"]
    table = "rnnir/passes/rules/__init__.py"
    diff = [d for d in difflib.ndiff(before[table].decode().splitlines(), after[table].decode().splitlines()) if d[:2] in ("+ ", "- ")]
    assert diff == ['+     ("sd011_state_forgotten", Family.STORE_DESTINATIONS),']


def test_the_copy_lists_the_new_rule_and_the_checkout_is_untouched(scaffolded):
    copy, _, _, _ = scaffolded
    listed = run_in(copy, "-m", "rnnir", "rules")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:3] for line in listed.stdout.splitlines() if line.startswith("SD011")] == [["SD011", "state-forgotten", "error"]]
    assert not (ROOT / "rnnir/passes/rules/sd011_state_forgotten.py").exists() and not (ROOT / "tests/rules/SD011").exists()
    assert "SD011" not in (ROOT / "rnnir/passes/rules/__init__.py").read_text(encoding="utf-8").upper()


def test_the_new_rules_doc_and_fixture_tests_run_and_fail_until_the_rule_finds_the_bug(scaffolded):
    copy = scaffolded[0]
    run = run_in(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "-rA", "-k", "SD011", "tests/rules/test_docs.py", "tests/rules/test_fixtures.py")
    outcomes = sorted(line.split(" - ")[0] for line in run.stdout.splitlines() if line.startswith(("PASSED ", "FAILED ")))
    assert outcomes == [
        "FAILED tests/rules/test_docs.py::test_the_bad_example_gets_the_rule[SD011]",
        "FAILED tests/rules/test_fixtures.py::test_the_fixture_gets_what_its_name_says[SD011/bad.rnnir]",
        "FAILED tests/rules/test_fixtures.py::test_the_snapshot_is_current[SD011/bad.rnnir]",
        "FAILED tests/rules/test_fixtures.py::test_the_snapshot_is_current[SD011/near_miss.rnnir]",
        "PASSED tests/rules/test_docs.py::test_the_fixed_example_is_clean[SD011]",
        "PASSED tests/rules/test_fixtures.py::test_every_rule_has_a_bad_and_a_near_miss_or_says_why_not[SD011]",
        "PASSED tests/rules/test_fixtures.py::test_the_fixture_gets_what_its_name_says[SD011/near_miss.rnnir]",
    ], run.stdout + run.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("SD002", "other-name", "store-destinations"), "SD002 is already in the code table"),
        (("SD012", "wrong-slot", "aliasing"), "a rule is already named 'wrong-slot'"),
        (("SD012", "new-thing", "nope"), "unknown family 'nope'"),
        (("sd12", "new-thing", "aliasing"), "two capital letters and three digits"),
        (("SD012", "New_Thing", "aliasing"), "lower-case words joined by '-'"),
    ],
)
def test_a_refused_scaffold_says_why_and_writes_nothing(tmp_path, args, says):
    copy = _copy(tmp_path)
    before = files(copy)
    done = run_in(copy, "tools/add_rule.py", *args)
    assert (done.returncode, done.stdout) == (2, "") and says in done.stderr
    assert files(copy) == before


def test_the_where_things_go_table_names_files_that_exist():
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = design[design.index("## Where things go") :]
    table = table[: table.index("\n## ", 1)]
    named = set(re.findall(r"`((?:rnnir|tests|tools|samples)/[\w./*-]+)`", table))  # <code>_<slug> templates do not match
    assert {"rnnir/passes/rules/__init__.py", "tests/rules/test_fixtures.py"} <= named
    assert "`python tools/add_rule.py CODE slug family`" in table and (ROOT / "tools" / "add_rule.py").is_file()
    missing = sorted(p for p in named if not any(ROOT.glob(p.rstrip("/"))))
    assert missing == []
