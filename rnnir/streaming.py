"""Shim (a documented public path, kept): moved to rnnir.check.streaming."""
import sys
from typing import TYPE_CHECKING

from rnnir.check import streaming as _moved

if TYPE_CHECKING:  # the sys.modules swap below hides these from mypy
    from rnnir.check.streaming import (  # noqa: F401
        DEFAULT_TOL,
        ColdStart,
        Isolation,
        Latency,
        LongRun,
        Recovery,
        SlotTrend,
        StreamingReport,
        check_streaming,
        make_chunks,
        streaming_to_text,
    )

__all__ = ["DEFAULT_TOL", "ColdStart", "Isolation", "Latency", "LongRun", "Recovery", "SlotTrend", "StreamingReport", "check_streaming", "make_chunks", "streaming_to_text"]  # what mypy may see through the shim

sys.modules[__name__] = _moved
