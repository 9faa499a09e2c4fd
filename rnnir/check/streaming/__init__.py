"""Deployment checks for streaming models: lost chunks, reconnection, bursts, very long streams, latency.

    from rnnir.streaming import check_streaming, streaming_to_text
    report = check_streaming("model.onnx", {"x": x}, drop=40, reconnect=100, burst=(60, 10), long=100_000)
    report.ok; print(streaming_to_text(report)); report.to_json()

Every check runs the same stream of chunks twice, intact and perturbed, on
forks of one :class:`~rnnir.runtime.StatefulSession`, and compares them call
by call on the same input chunks:

``drop``
    chunk k is lost: skipped (``drop_mode="skip"``, the stream goes on with
    chunk k+1) or replaced by zeros (``"zero"``).  Reported: how far each
    output departs from the intact stream afterwards, and the **recovery
    length**: the calls after the lost chunk until every output is back within
    ``tol`` of the intact stream and stays there to the end of the run; or
    "never within N calls".
``reconnect``
    a client that lost its session restarts from the initial state at call k.
    Reported: calls until the restarted stream agrees with the continuous one,
    and the **cold start**: creating a session (loading the model) to its first
    output, and opening a stream on a loaded model to its first output.
``burst``
    chunks k .. k+n-1 replaced by loud noise (``burst_kind="noise"``, 4x the
    stream's standard deviation) or silence (``"silence"``): state health over
    the run (a non-finite state fails; growth is only reported, since a short
    run cannot tell a rise from a trend) and the recovery length after the burst.
``long``
    the stream repeated to N calls (``rnnir run --long 100000``; minutes, not
    for CI): per slot the norm trend, the share of saturated elements
    (|x| >= 0.999, pinned at a tanh/sigmoid limit) and the headroom to
    float16's largest value; fails when the state is non-finite or grows
    without bound.

``latency`` (p50/p99 of one call, on a fork with nothing else measured) and
``state_bytes`` (every slot plus any kept input context: the memory one more
concurrent stream costs) are always reported.

A check fails (``ok`` False) when the stream never recovers within the run,
or when the state's health is non-finite or growing.  The tolerance is looser
than the multi-call check's equality (default 1e-3 on every output): after a
perturbation a decaying state only comes back asymptotically.
"""

from __future__ import annotations

from rnnir.check.streaming.check import DEFAULT_TOL, check_streaming, make_chunks
from rnnir.check.streaming.report import ColdStart, Isolation, Latency, LongRun, Recovery, SlotTrend, StreamingReport
from rnnir.check.streaming.text import streaming_to_text

__all__ = [
    "DEFAULT_TOL",
    "ColdStart",
    "Isolation",
    "Latency",
    "LongRun",
    "Recovery",
    "SlotTrend",
    "StreamingReport",
    "check_streaming",
    "make_chunks",
    "streaming_to_text",
]
