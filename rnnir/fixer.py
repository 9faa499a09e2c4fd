"""Temporary shim: split into rnnir.fixes (engine, edits, catalogue, state_plan, diff)."""

from rnnir.fixes.catalogue import FIXES  # noqa: F401
from rnnir.fixes.diff import render_diff  # noqa: F401
from rnnir.fixes.edits import Edit, FixError, FixInfo, FixResult  # noqa: F401
from rnnir.fixes.engine import fix  # noqa: F401
from rnnir.fixes.state_plan import StatePlan  # noqa: F401

__all__ = ["FIXES", "Edit", "FixError", "FixInfo", "FixResult", "StatePlan", "fix", "render_diff"]
