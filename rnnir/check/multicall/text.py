"""How the check reports write numbers: three significant digits in text, inf and nan as strings in JSON.

Shared by the multi-call report, its slot health and the streaming report, so every report of one run
writes a number the same way.
"""

from __future__ import annotations

import math

__all__ = ["format_number", "json_number"]


def format_number(x: float) -> str:
    """``x`` in a sentence: three significant digits; inf and nan as Python writes them."""
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    return f"{x:.3g}"


def json_number(x: float) -> float | str:
    """JSON has no inf/nan: write them as strings."""
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    return x
