"""docs/limits.md's table says the truth: each number in it is the constant it names (issue 26)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "limits.md"
ROW = re.compile(r"^\| (?P<what>[^|]+) \| (?P<number>[0-9,]+)(?: bytes)? \| `(?P<constant>[\w.]+)` \| [^|]+ \|$")


def _rows() -> list[tuple[str, int, str]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            rows.append((m["what"].strip(), int(m["number"].replace(",", "")), m["constant"]))
    return rows


def test_every_limit_in_the_table_equals_its_constant():
    rows = _rows()
    assert len(rows) >= 15  # the table was read, not skipped by a format change
    for what, number, constant in rows:
        module, _, name = constant.rpartition(".")
        assert getattr(importlib.import_module(module), name) == number, f"{what}: the doc says {number}, {constant} is another"


def test_every_table_row_is_read():
    # a row the pattern does not match would escape the check above
    lines = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| ") and not line.startswith("| What")]
    assert len(lines) == len(_rows())


def test_the_readme_lists_every_bound_with_its_number():
    """The README's "Limits and errors" table is the first two columns of this doc's table, row for row."""
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("<!-- limits:") : readme.index("<!-- end of limits -->")]
    shown = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines() if line.startswith("| ")][2:]
    documented = [[c.strip() for c in line.strip("|").split("|")][:2] for line in DOC.read_text(encoding="utf-8").splitlines()
                  if line.startswith("| ") and not line.startswith("| What")]
    assert shown == documented and len(shown) >= 15
