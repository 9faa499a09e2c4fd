"""The multi-call checker: one input stream run whole, chunked with persistence, and with each persistence bug.

    from rnnir.check.multicall import check_multicall, report_to_text   # also as rnnir.testing
    report = check_multicall("model.onnx", {"x": x}, chunk_sizes=[1, 7, 64])

One module per concept: :mod:`.check` (the check itself), :mod:`.stream` (time axes, generated inputs, the
stream cut into calls), :mod:`.variants` (running persistent, reinit, stale and hc-swapped), :mod:`.compare`,
:mod:`.health` (state health over a run, shared with the streaming checks), :mod:`.verdict`, :mod:`.report`
(the result, as text and JSON) and :mod:`.text` (how the reports write numbers).
"""

from __future__ import annotations

from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.health import SlotHealth
from rnnir.check.multicall.report import Divergence, MulticallReport, VariantResult, report_to_text
from rnnir.check.multicall.stream import ProgressCallback, StreamError, time_axes

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
