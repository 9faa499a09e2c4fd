"""Shim (a documented public path, kept): the multi-call checker moved to rnnir.check.multicall, split by concept.

Each name is imported from the module that defines it.
"""

from rnnir.check.multicall.check import check_multicall  # noqa: F401
from rnnir.check.multicall.health import SlotHealth  # noqa: F401
from rnnir.check.multicall.report import Divergence, MulticallReport, VariantResult, report_to_text  # noqa: F401
from rnnir.check.multicall.stream import ProgressCallback, StreamError, time_axes  # noqa: F401

__all__ = [
    "Divergence",
    "MulticallReport",
    "ProgressCallback",
    "SlotHealth",
    "StreamError",
    "VariantResult",
    "check_multicall",
    "report_to_text",
    "time_axes",
]
