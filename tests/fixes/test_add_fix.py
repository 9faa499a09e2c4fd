"""``tools/add_fix.py``: adding a fix touches two files (its planner and one fix-table line), and the fix is taken.

The scaffold runs in a copy of the package (``tmp_path``), never in the checkout; the copy's fix catalogue,
``rnnir explain`` and ``rnnir lint --fix`` then have the new fix.  SD005 has no fix in the checkout
(``test_the_scaffold_rule_has_no_fix_yet`` says so, or the test would pick another rule).
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.support.scaffold import copy_checkout, files, run_in

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("rnnir", "tools/add_fix.py")
PLANNER = "rnnir/fixes/planners/sd005_state_type_mismatch.py"
TABLE = "rnnir/fixes/planners/__init__.py"


def _copy(tmp_path: Path) -> Path:
    return copy_checkout(tmp_path, COPIED)


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], dict[str, bytes], subprocess.CompletedProcess[str]]:
    copy = _copy(tmp_path_factory.mktemp("add_fix"))
    before = files(copy)
    done = run_in(copy, "tools/add_fix.py", "SD005")
    return copy, before, files(copy), done


def test_the_scaffold_rule_has_no_fix_yet():
    from rnnir.fixes.catalogue import FIXES

    assert "SD005" not in FIXES and not (ROOT / PLANNER).exists()


def test_a_new_fix_is_its_planner_file_and_one_registration_line(scaffolded):
    _, before, after, done = scaffolded
    assert done.returncode == 0, done.stderr
    added = sorted(set(after) - set(before))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    assert set(before) <= set(after)
    assert (added, changed) == ([PLANNER], [TABLE])
    diff = [d for d in difflib.ndiff(before[TABLE].decode().splitlines(), after[TABLE].decode().splitlines()) if d[:2] in ("+ ", "- ")]
    assert diff == ['+     "sd005_state_type_mismatch",']


def test_the_copy_lists_the_fix_and_explains_it(scaffolded):
    copy = scaffolded[0]
    listed = run_in(copy, "-c", "from rnnir.fixes.catalogue import FIXES; print(FIXES['SD005'].safe, list(FIXES)[-1])")
    assert (listed.returncode, listed.stdout) == (0, "unsafe SD005\n"), listed.stderr
    explained = run_in(copy, "-m", "rnnir", "explain", "SD005")
    assert explained.returncode == 0, explained.stderr
    assert "Fix (unsafe: `rnnir lint --fix`, `--unsafe-fixes` for the unsafe case)\n    TODO what the fix does" in explained.stdout
    assert "SD005" not in (ROOT / TABLE).read_text(encoding="utf-8").upper()  # the checkout is untouched


def test_lint_fix_reaches_the_new_planner(scaffolded, tmp_path):
    copy = scaffolded[0]
    model = tmp_path / "m.onnx"
    shutil.copy2(ROOT / "samples" / "sd005_fp16_state.onnx", model)
    original = model.read_bytes()
    safe = run_in(copy, "-m", "rnnir", "lint", "--fix", str(model))
    assert safe.returncode == 1, safe.stderr  # the finding is left
    assert f"{model}: not fixed: SD005 [unsafe, not applied] slot 'h0': TODO what the fix did: not certain" in safe.stderr
    # applied, the scaffold's edit (nothing yet) does not clear the finding: rolled back, the file is not rewritten
    unsafe = run_in(copy, "-m", "rnnir", "lint", "--fix", "--unsafe-fixes", str(model))
    assert unsafe.returncode == 1 and "fixed:" not in unsafe.stderr, unsafe.stderr
    assert model.read_bytes() == original
    fixed = run_in(copy, "-c", f"import rnnir; r = rnnir.fix({str(model)!r}, codes=['SD005'], unsafe=True); print(*r.skipped, sep='\\n')")
    assert fixed.stdout == "SD005 [no fix] slot 'h0': TODO what the fix did: the edit did not clear the finding; rolled back\n", fixed.stderr


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("SD002", "SD002 has a fix already (rnnir/fixes/planners/sd002_wrong_slot.py)"),
        ("XX999", "no rule XX999 in the code table"),
        ("sd5", "two capital letters and three digits"),
    ],
)
def test_a_refused_scaffold_says_why_and_writes_nothing(tmp_path, code, says):
    copy = _copy(tmp_path)
    before = files(copy)
    done = run_in(copy, "tools/add_fix.py", code)
    assert (done.returncode, done.stdout) == (2, "") and says in done.stderr
    assert files(copy) == before


def test_the_where_things_go_table_says_how_to_add_a_fix():
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = design[design.index("## Where things go") :]
    table = table[: table.index("\n## ", 1)]
    row = next(line for line in table.splitlines() if line.startswith("| a **fix**"))
    assert "`python tools/add_fix.py CODE`" in row and "`FIX_TABLE`" in row and "`rnnir/fixes/planners/__init__.py`" in row
    assert (ROOT / "tools" / "add_fix.py").is_file() and "FIX_TABLE: tuple[str, ...] = (" in (ROOT / TABLE).read_text(encoding="utf-8")
