"""``rnnir cost``: ``lint --cost`` without the rules: the cost table (or the lint JSON document with empty
``diagnostics``), exit 0 or 2.

    rnnir cost PATH... [--format text|json] [--jobs N] [--output FILE]
"""

from __future__ import annotations

from typing import Any

from rnnir.cli.common import add_model_options
from rnnir.cli.lint import LintArgs, run_lint

__all__ = ["add_parser", "cmd_cost"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("cost", help="per-call cost: bytes written to slots and outputs, copies, slot lifetimes")
    p.add_argument("paths", nargs="+", metavar="MODEL", help="ONNX files, or folders searched recursively for *.onnx")
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="analyse in N worker processes (0: one per CPU)")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    add_model_options(p)
    p.set_defaults(func=cmd_cost, args_type=LintArgs)


def cmd_cost(args: LintArgs) -> int:
    """The lint engine with the rules off and the cost on (the arguments ``cost`` does not take keep their defaults)."""
    return run_lint(args, rules=False, cost=True)
