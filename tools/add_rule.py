"""Scaffold a new rule: its file, its line in the code table and its fixture folder (Ruff's ``scripts/add_rule.py``).

    python tools/add_rule.py SD011 state-forgotten store-destinations
    python tools/add_rule.py SD011 state-forgotten store-destinations --severity warning

writes, and touches nothing else:

- ``rnnir/passes/rules/sd011_state_forgotten.py``: ``RULE = rule(...)`` with a summary, a message and a doc to fill in
  (What it finds / Why it matters / Bad / Fixed, and the ``Bad (IR)``/``Fixed (IR)`` programs ``rnnir explain`` prints
  and ``tests/rules/test_docs.py`` judges);
- one line in ``CODE_TABLE`` of ``rnnir/passes/rules/__init__.py``, after the family's last rule, so the family's
  pass reports the rule, ``rnnir rules`` lists it and every catalogue-driven test covers it;
- ``tests/rules/SD011/{bad,near_miss}.rnnir``, which ``tests/rules/test_fixtures.py`` runs.

Both Bad programs start as the clean program, so the rule's doc and fixture tests fail until the Bad programs show
the bug and the family pass (``rnnir/passes/...``) emits ``RULE.diagnostic("found", slot=...)`` for it.
The README's rule table is generated: ``python tools/rules_table.py --write``.  Exit 0 done, 2 refused (nothing written).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = Path("rnnir/passes/rules/__init__.py")
SEVERITIES = ("error", "warning", "info")

#: a clean one-slot program: the starting point of every Bad/Fixed example and fixture of a new rule
CLEAN_PROGRAM = """\
program @{name} {{
  slot @h : float32[1,1,4] init=zeros
  output hn : float32[1,1,4]
  value %x : float32[T,1,3]
  value %W : float32[1,4,3]
  value %R : float32[1,4,4]
  pair h -> hn declared "the caller feeds hn back as h"

  %h = load_slot<@h, copy>()
  %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
  %sh = store<@h, token>(%hn)
  %oh = store<out:hn, value>(%hn)
  return<by runtime>(%sh, %oh)
}}
"""

RULE_FILE = '''"""{code} {slug}: TODO one line: what the rule finds.

Found by the {family} family (TODO: the module that emits ``RULE.diagnostic``); registered in
:mod:`rnnir.passes.rules` (``rnnir explain {code}`` prints the doc)."""

from __future__ import annotations

from ..diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("{code}", "{slug}", Severity.{severity}, "TODO one line: what the rule finds", """
    What it finds
        TODO: the bug, in the words of a model's author.

    Why it matters
        TODO: what goes wrong from the second call on.

    Bad
        TODO: an ONNX sketch of the bug

    Fixed
        TODO: the same sketch, fixed

    Bad (IR)
{bad}
    Fixed (IR)
{fixed}
    """, messages={{
    "found": Message("slot {{slot!r}}: TODO what is wrong", hint="TODO what to do about it"),
}})
'''


class Refused(Exception):
    """The arguments or the checkout do not allow the scaffold; nothing was written."""


@dataclass(frozen=True)
class NewRule:
    code: str
    slug: str
    family: str
    severity: str

    @property
    def module(self) -> str:
        return f"{self.code.lower()}_{self.slug.replace('-', '_')}"


def _families(table: str) -> dict[str, str]:
    """The code table's ``Family`` members, value -> member name (``store-destinations`` -> ``STORE_DESTINATIONS``)."""
    start = table.index("class Family(enum.Enum):")
    body = table[start : table.index("CODE_TABLE:", start)]
    return {value: name for name, value in re.findall(r'^    ([A-Z_]+) = "([a-z-]+)"$', body, flags=re.M)}


def _registered_line(new: NewRule, member: str) -> str:
    return f'    ("{new.module}", Family.{member}),\n'


def with_registration(table: str, new: NewRule) -> str:
    """``table`` (the code table module's text) with ``new``'s line after its family's last line (or at the end)."""
    families = _families(table)
    if new.family not in families:
        raise Refused(f"unknown family {new.family!r}; the families are {', '.join(sorted(families))}")
    member = families[new.family]
    start = table.index("CODE_TABLE:")
    end = table.index("\n)\n", start) + 1
    lines = table[start:end].splitlines(keepends=True)
    codes = re.findall(r'^    \("([a-z]{2}\d{3})_', table[start:end], flags=re.M)
    if new.code.lower() in codes:
        raise Refused(f"{new.code} is already in the code table")
    if re.search(rf'^    \("[a-z]{{2}}\d{{3}}_{new.slug.replace("-", "_")}"', table[start:end], flags=re.M):
        raise Refused(f"a rule is already named {new.slug!r}")
    same = [i for i, line in enumerate(lines) if f"Family.{member})" in line]
    at = (same[-1] if same else len(lines) - 1) + 1
    lines.insert(at, _registered_line(new, member))
    return table[:start] + "".join(lines) + table[end:]


def _indented(program: str) -> str:
    return "".join(f"        {line}\n" if line else "\n" for line in program.splitlines())


def scaffold(root: Path, new: NewRule) -> list[Path]:
    """Write the rule's file, its registration line and its fixture folder under ``root``; the paths written."""
    if not re.fullmatch(r"[A-Z]{2}\d{3}", new.code):
        raise Refused(f"rule code {new.code!r}: two capital letters and three digits, like SD011")
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", new.slug):
        raise Refused(f"rule name {new.slug!r}: lower-case words joined by '-', like state-forgotten")
    if new.severity not in SEVERITIES:
        raise Refused(f"severity {new.severity!r}: one of {', '.join(SEVERITIES)}")
    table_path = root / TABLE
    if not table_path.is_file():
        raise Refused(f"{table_path}: no code table here (is {root} an rnnir checkout?)")
    rule_path = table_path.parent / f"{new.module}.py"
    fixtures = root / "tests" / "rules" / new.code
    table = with_registration(table_path.read_text(encoding="utf-8"), new)
    for taken in (rule_path, fixtures):
        if taken.exists():
            raise Refused(f"{taken} exists already")
    rule_text = RULE_FILE.format(
        code=new.code,
        slug=new.slug,
        family=new.family,
        severity=new.severity.upper(),
        bad=_indented(CLEAN_PROGRAM.format(name="bad")),
        fixed=_indented(CLEAN_PROGRAM.format(name="fixed")),
    )
    fixtures.mkdir(parents=True)
    bad = fixtures / "bad.rnnir"
    near_miss = fixtures / "near_miss.rnnir"
    bad.write_text(f"// {new.code}: TODO make this program show the bug\n" + CLEAN_PROGRAM.format(name="bad"), encoding="utf-8")
    near_miss.write_text(f"// not {new.code}: TODO one step from the bug, and right\n" + CLEAN_PROGRAM.format(name="near_miss"), encoding="utf-8")
    rule_path.write_text(rule_text, encoding="utf-8")
    table_path.write_text(table, encoding="utf-8")
    return [rule_path, table_path, bad, near_miss]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scaffold a new rnnir rule: its file, its code-table line and its fixture folder.")
    parser.add_argument("code", help="the new rule's code, e.g. SD011")
    parser.add_argument("slug", help="the new rule's name, e.g. state-forgotten")
    parser.add_argument("family", help="the pass that will detect it: store-destinations, aliasing, ordering or state-coverage")
    parser.add_argument("--severity", default="error", choices=SEVERITIES)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to write into (default: this script's)")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.root, NewRule(args.code, args.slug, args.family, args.severity))
    except Refused as exc:
        print(f"add_rule: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(args.root)}")
    print("next: show the bug in the Bad programs, emit RULE.diagnostic(...) from the family pass, run python tools/rules_table.py --write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
