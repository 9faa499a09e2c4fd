"""A streaming report as text (``rnnir run``'s streaming section)."""

from __future__ import annotations

from rnnir.check.multicall.text import format_number
from rnnir.check.streaming.report import StreamingReport

__all__ = ["streaming_to_text"]


def streaming_to_text(report: StreamingReport, *, persistence: str = "pass") -> str:
    """The report as text.  ``persistence`` is the status of the multi-call check printed above it (as in
    ``rnnir run``): after a ``fail`` (or ``no-state``, ``inconclusive``) streaming checks that found nothing
    say so without the word PASS, which would read as the run's verdict.  No check asked: no verdict at all."""
    where = f"over {report.calls} calls (tolerance {report.tol:g})"
    if not report.checked:
        head = f"{report.model}: measured over {report.calls} calls"
    elif report.ok and persistence != "pass":
        head = f"{report.model}: streaming checks found no failure of their own {where}; the verdict above ({persistence.upper()}) stands"
    else:
        head = f"{report.model}: streaming checks {report.status.upper()} {where}"
    lines = [head]
    lat = report.latency
    lines.append(f"  latency per call: p50 {lat.p50_us:.1f} µs, p99 {lat.p99_us:.1f} µs (mean {lat.mean_us:.1f}, max {lat.max_us:.1f}; {lat.calls} calls)")
    lines.append(f"  state per session: {report.state_bytes} bytes")
    if report.cold_start is not None:
        cs = report.cold_start
        lines.append(f"  cold start: new session to first output {cs.new_session_s * 1e3:.1f} ms; new stream on a loaded model {cs.new_stream_s * 1e3:.2f} ms")
    for c in report.checks:
        lines.append("  " + c.summary())
        for name, r in c.per_output.items():
            back = "never" if r is None else f"after {r}"
            lines.append(f"    {name}: departs by up to {format_number(c.departure[name])}, back {back}")
        if c.note:
            lines.append(f"    note: {c.note}")
    if report.burst_health:
        lines.append("  state health through the burst:")
        for h in report.burst_health.values():
            lines.append("    " + h.summary(judge_growth=False))
    if report.isolation is not None:
        lines.append("  " + report.isolation.summary())
    if report.long is not None:
        lr = report.long
        lines.append(
            f"  long run: {lr.calls} calls in {lr.seconds:.1f} s; latency p50 {lr.latency.p50_us:.1f} µs, p99 {lr.latency.p99_us:.1f} µs"
        )
        for h in lr.slots.values():
            lines.append("    " + h.summary())
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"
