"""Scaffold the automatic fix of an existing rule: its planner file and its line in the fix table.

    python tools/add_fix.py SD005

writes, and touches nothing else:

- ``rnnir/fixes/planners/sd005_state_type_mismatch.py`` (named like the rule's file under ``rnnir/passes/rules/``):
  ``FIX = FixInfo(...)`` (whether the fix is safe and what it does: ``rnnir explain`` prints it) and
  ``plan(ctx, d)``, which plans the repair of a finding from its structured fields (slot, locations, ``data``);
- one line at the end of ``FIX_TABLE`` in ``rnnir/fixes/planners/__init__.py``, so ``rnnir.fix``,
  ``rnnir lint --fix``, the fix catalogue and ``rnnir explain`` take the fix.

The scaffold is an unsafe fix whose edit does nothing yet: ``rnnir lint --fix`` reports it as not applied, and with
``--unsafe-fixes`` its edit is rolled back because it does not clear the finding, until ``apply`` makes the edit.
Exit 0 done, 2 refused (nothing written).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULES = Path("rnnir/passes/rules/__init__.py")
FIX_TABLE = Path("rnnir/fixes/planners/__init__.py")

PLANNER_FILE = '''"""{code} {slug}'s fix: TODO one line: what the fix edits.

Registered in :data:`rnnir.fixes.planners.FIX_TABLE`: ``rnnir explain {code}`` prints ``FIX``; ``rnnir.fix`` and
``rnnir lint --fix`` call ``plan`` for every {code} finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.fixes.edits import Edit, FixContext, FixInfo, Plan, subject
from rnnir.passes.rules.{module} import RULE

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["FIX", "plan"]

#: "unsafe" until the edit is certain: it clears the finding and leaves the first call's other outputs as they were
FIX = FixInfo(RULE.code, "unsafe", "TODO what the fix does, and when it is safe")


def plan(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    """The repair of ``d`` on ``ctx.model``, planned from ``d``'s slot, locations and ``data`` (never its message text);
    ``FIX.refuse(d, reason)`` when there is no certain edit."""
    if d.slot is None:
        return FIX.refuse(d, "the finding names no slot")

    def apply() -> None:
        pass  # TODO: edit ctx.model in place (import onnx and rnnir.fixes.onnx_edit here: `rnnir explain` lists this module)

    return Plan(Edit(RULE.code, subject(d), "TODO before", "TODO after", False, f"{{subject(d)}}: TODO what the fix did"), apply)
'''


class Refused(Exception):
    """The arguments or the checkout do not allow the scaffold; nothing was written."""


def rule_module(rules_table: str, code: str) -> str:
    """The module of rule ``code`` in the rule code table (``sd005_state_type_mismatch``)."""
    start = rules_table.index("CODE_TABLE:")
    found = re.findall(rf'^    \("({code.lower()}_[a-z0-9_]+)", Family\.', rules_table[start:], flags=re.M)
    if not found:
        raise Refused(f"no rule {code} in the code table (scaffold the rule first: python tools/add_rule.py {code} slug family)")
    return str(found[0])


def with_registration(fix_table: str, module: str, code: str) -> str:
    """``fix_table`` (the fix table module's text) with ``module``'s line at the end of ``FIX_TABLE``."""
    start = fix_table.index("FIX_TABLE:")
    end = fix_table.index("\n)\n", start) + 1
    if re.search(rf'^    "{module}",$', fix_table[start:end], flags=re.M):
        raise Refused(f"{code} has a fix already ({FIX_TABLE.parent / module}.py)")
    return fix_table[:end] + f'    "{module}",\n' + fix_table[end:]


def scaffold(root: Path, code: str) -> list[Path]:
    """Write the planner of rule ``code``'s fix and its registration line under ``root``; the paths written."""
    if not re.fullmatch(r"[A-Z]{2}\d{3}", code):
        raise Refused(f"rule code {code!r}: two capital letters and three digits, like SD005")
    rules_path, table_path = root / RULES, root / FIX_TABLE
    if not rules_path.is_file() or not table_path.is_file():
        raise Refused(f"{root}: no rule code table or fix table here (is it an rnnir checkout?)")
    module = rule_module(rules_path.read_text(encoding="utf-8"), code)
    table = with_registration(table_path.read_text(encoding="utf-8"), module, code)
    planner = table_path.parent / f"{module}.py"
    if planner.exists():
        raise Refused(f"{planner} exists already")
    slug = module.split("_", 1)[1].replace("_", "-")
    planner.write_text(PLANNER_FILE.format(code=code, slug=slug, module=module), encoding="utf-8")
    table_path.write_text(table, encoding="utf-8")
    return [planner, table_path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scaffold the automatic fix of an existing rnnir rule: its planner file and its fix-table line.")
    parser.add_argument("code", help="the rule's code, e.g. SD005")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to write into (default: this script's)")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.root, args.code)
    except Refused as exc:
        print(f"add_fix: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(args.root)}")
    print("next: plan the edit in plan() from the finding's slot/locations/data, make it in apply(), and say in FIX whether it is safe")
    return 0


if __name__ == "__main__":
    sys.exit(main())
