"""``rnnir rules`` (the rule catalogue) and ``rnnir explain CODE-OR-NAME`` (one rule: what it finds, why it
matters, a bad and a fixed example, and its automatic fix).

    rnnir rules [--format text|json]
    rnnir explain CODE-OR-NAME          (SD002, or wrong-slot)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rnnir.cli import common
from rnnir.cli.common import UsageError, emit

__all__ = ["ExplainArgs", "RulesArgs", "add_explain_parser", "add_rules_parser", "cmd_explain", "cmd_rules"]


@dataclass(frozen=True, kw_only=True)
class RulesArgs:
    format: str = "text"


@dataclass(frozen=True, kw_only=True)
class ExplainArgs:
    code: str


def add_rules_parser(sub: Any) -> None:
    p = sub.add_parser("rules", help="list the rule catalogue")
    p.add_argument("--format", choices=("text", "json"), default="text", help="catalogue format (default: text)")
    p.set_defaults(func=cmd_rules, args_type=RulesArgs)


def add_explain_parser(sub: Any) -> None:
    p = sub.add_parser("explain", help="print what a rule finds, why it matters, a bad and a fixed example")
    p.add_argument("code", metavar="RULE", help="a rule code (SD002) or name (wrong-slot), in any case")
    p.set_defaults(func=cmd_explain, args_type=ExplainArgs)


def cmd_rules(args: RulesArgs) -> int:
    rules = common.passes_backend().RULES
    ordered = [rules[c] for c in sorted(rules)]
    if args.format == "json":
        doc = {
            "version": 1,
            "rules": [{"code": r.code, "name": r.name, "severity": r.severity.value, "summary": r.summary} for r in ordered],
        }
        emit(json.dumps(doc, indent=2) + "\n", None)
        return 0
    width = max((len(r.name) for r in ordered), default=0)
    lines = [f"{r.code}  {r.name.ljust(width)}  {r.severity.value.ljust(7)}  {r.summary}" for r in ordered]
    emit("\n".join(lines) + "\n", None)
    return 0


def cmd_explain(args: ExplainArgs) -> int:
    """The rule's code, name, severity and summary first (as ``ruff rule F401`` starts), then its docstring and
    its automatic fix.  Imports neither onnx nor numpy: a question about a rule costs no model machinery."""
    backend = common.passes_backend()
    try:
        rule = backend.rule_for(args.code)  # a code (SD002) or a name (wrong-slot), any case
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from rnnir.cli.fix import explain_fix  # the automatic fix, where the rule has one

    doc = backend.explain(rule.code)
    head = f"{rule.code} {rule.name} ({rule.severity.value})\n{rule.summary}\n\n"
    emit(head + (doc if doc.endswith("\n") else doc + "\n") + explain_fix(rule.code), None)
    return 0
