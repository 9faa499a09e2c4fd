"""The table of automatic fixes: which rule has one, whether it is safe, and what it does.

Each fix declares itself in its planner (:mod:`rnnir.fixes.planners`); this is the table of their declarations,
which imports neither onnx nor numpy, so ``rnnir explain`` can say whether a rule has a fix without paying for the
model-editing machinery.
"""

from __future__ import annotations

from rnnir.fixes.edits import FixInfo
from rnnir.fixes.planners import PLANNERS

__all__ = ["FIXES", "FixInfo"]

#: rule code -> its fix; a code not listed has no automatic fix
FIXES: dict[str, FixInfo] = {code: fix.info for code, fix in PLANNERS.items()}
