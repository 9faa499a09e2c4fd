"""Streams served together by one :class:`~rnnir.pool.SessionPool`, each against the same stream run alone: a
row of one stream that leaks into another's fails."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from rnnir.check.multicall.compare import max_abs_diff
from rnnir.check.multicall.stream import ProgressCallback, StreamError
from rnnir.check.streaming.report import Isolation
from rnnir.runtime.session import StatefulSession

__all__ = ["isolation", "session_options"]


def isolation(session: StatefulSession, chunks: Sequence[Mapping[str, np.ndarray]], streams: int, progress: ProgressCallback | None = None) -> Isolation:
    """``streams`` streams through one pool, stream i fed the chunks from its own offset (:func:`_offset`, so rows
    differ), every call compared with the same stream on its own fork."""
    from rnnir.serving.pool.pool import SessionPool  # imported only when asked

    if streams < 2:
        raise StreamError(f"an isolation check needs at least 2 streams, got {streams}")
    # the caller's onnxruntime options (rnnir run: its log quiet) also for the pool, whose batch probe may fail in onnxruntime
    pool = SessionPool(session.program, context={c.input: c for c in session.context}, session_options=session_options(session))
    solo = [session.fork(reset=True) for _ in range(streams)]
    n = len(chunks)
    worst, who = 0.0, None
    for t in range(n):
        feeds = [chunks[(t + _offset(i, n)) % n] for i in range(streams)]
        requests: dict[Hashable, Mapping[str, Any]] = dict(enumerate(feeds))
        got = pool.run(requests, open_missing=True)
        for i, feed in enumerate(feeds):
            want = solo[i].run_dict(feed)
            d = max((max_abs_diff(got[i][k], v) for k, v in want.items()), default=0.0)
            if not d <= worst:
                worst, who = d, i
        if progress is not None:
            progress(f"{streams} streams", t + 1, n)
    return Isolation(streams, n, pool.batching or "batched", pool.stats.ort_calls, worst, who)


def session_options(session: StatefulSession) -> Any:
    """The onnxruntime SessionOptions ``session`` was made with, for the sessions a check makes beside it."""
    return session.inference_session.get_session_options()


def _offset(stream: int, calls: int) -> int:
    """Where stream i starts in the chunks: 7i, or i when the stream's calls are a multiple of 7 (then 7i would feed
    streams 0 and 1 the same chunks, and a leak between two equal rows is invisible).  Distinct for i < calls."""
    return (7 if calls % 7 else 1) * stream
