"""A streaming report, built by hand, as text line for line, and its verdict: which parts judge and which only measure."""

from __future__ import annotations

from dataclasses import replace

from rnnir.check.streaming import ColdStart, Isolation, Latency, LongRun, Recovery, SlotTrend, StreamingReport, streaming_to_text

LATENCY = Latency(10, 12.0, 30.0, 15.0, 40.0)
BOUNDED = SlotTrend("h", 10, "bounded", 1.0, 2.0, 2.0, 1.0, 0.0, 0.5)
GROWING = SlotTrend("h", 100, "growing", 5.0, 1.0, 5.0, 4.0, 0.25, 0.25)
NONFINITE = SlotTrend("h", 10, "non-finite", float("inf"), 1.0, float("nan"), float("nan"), 0.0, 0.0)


def _report(**kw) -> StreamingReport:
    return StreamingReport("m", 10, 0.01, LATENCY, 64, **kw)


def test_every_part_of_a_streaming_report_as_text():
    drop = Recovery("drop", 2, 1, "skip", 7, 0.01, {"y": 0.5}, {"y": 3}, 3, 3, "")
    burst = Recovery("burst", 4, 2, "noise", 4, 0.01, {"y": 2.0}, {"y": None}, None, None, "short run")
    report = _report(
        checks=[drop, burst], burst_health={"h": BOUNDED}, cold_start=ColdStart(0.25, 0.0015),
        long=LongRun(100, {"h": GROWING}, Latency(100, 11.0, 20.0, 12.0, 25.0), 3.25),
        isolation=Isolation(3, 10, "batched", 10, 0.0, None), notes=["a note"],
    )
    assert streaming_to_text(report).split("\n") == [
        "m: streaming checks FAIL over 10 calls (tolerance 0.01)",
        "  latency per call: p50 12.0 µs, p99 30.0 µs (mean 15.0, max 40.0; 10 calls)",
        "  state per session: 64 bytes",
        "  cold start: new session to first output 250.0 ms; new stream on a loaded model 1.50 ms",
        "  chunk 2 dropped (skip): back within 0.01 after 3 call(s); state agrees after 3 (largest departure 0.5 on 'y')",
        "    y: departs by up to 0.5, back after 3",
        "  noise burst over calls 4..5: FAIL: never back within 0.01 in 4 calls; state never agrees (largest departure 2 on 'y')",
        "    y: departs by up to 2, back never",
        "    note: short run",
        "  state health through the burst:",
        "    " + BOUNDED.summary(judge_growth=False),
        "  pool of 3 streams x 10 calls, batched, 10 onnxruntime calls: every stream equals its solo run (max |diff| 0)",
        "  long run: 100 calls in 3.2 s; latency p50 11.0 µs, p99 20.0 µs",
        "    FAIL: " + GROWING.summary(judge_growth=False),
        "  note: a note",
        "",
    ]


def test_the_head_line_gives_a_verdict_only_when_a_check_ran_and_defers_to_a_failed_persistence_verdict():
    measured = _report()
    assert streaming_to_text(measured).split("\n")[0] == "m: measured over 10 calls"
    passed = _report(checks=[Recovery("drop", 2, 1, "zero", 7, 0.01, {"y": 0.0}, {"y": 0}, 0, 0)])
    assert streaming_to_text(passed).split("\n")[0] == "m: streaming checks PASS over 10 calls (tolerance 0.01)"
    assert streaming_to_text(passed, persistence="fail").split("\n")[0] == (
        "m: streaming checks found no failure of their own over 10 calls (tolerance 0.01); the verdict above (FAIL) stands"
    )
    failed = _report(burst_health={"h": NONFINITE})
    assert streaming_to_text(failed, persistence="fail").split("\n")[0] == "m: streaming checks FAIL over 10 calls (tolerance 0.01)"


def test_which_parts_decide_the_verdict():
    """A check ran (checked) when any of checks, burst health, long run or pool ran; each can fail the report,
    burst health only when non-finite (growth over a burst is reported, judged over a long run)."""
    ok_iso, bad_iso = Isolation(2, 5, "batched", 5, 0.0, None), Isolation(2, 5, "one stream per call", 10, 1.0, 1)
    cases = [
        ({}, False, True),
        ({"checks": [Recovery("drop", 1, 1, "skip", 3, 0.01, recovery=0)]}, True, True),
        ({"checks": [Recovery("drop", 1, 1, "skip", 3, 0.01, recovery=None)]}, True, False),
        ({"burst_health": {"h": GROWING}}, True, True),
        ({"burst_health": {"h": NONFINITE}}, True, False),
        ({"long": LongRun(10, {"h": BOUNDED}, LATENCY, 1.0)}, True, True),
        ({"long": LongRun(10, {"h": GROWING}, LATENCY, 1.0)}, True, False),
        ({"isolation": ok_iso}, True, True),
        ({"isolation": bad_iso}, True, False),
        ({"cold_start": ColdStart(1.0, 1.0)}, False, True),
    ]
    for kw, checked, ok in cases:
        report = _report(**kw)
        assert (report.checked, report.ok, report.status) == (checked, ok, "pass" if ok else "fail"), kw
        assert report.to_json()["ok"] == ok and report.to_json()["status"] == report.status
    assert bad_iso.summary() == (
        "pool of 2 streams x 5 calls, one stream per call (one stream per call), 10 onnxruntime calls: "
        "FAIL: stream 1 differs from its solo run by 1 (> 1e-05): rows leak into each other"
    )
    assert replace(bad_iso, batching="static shape").summary().startswith("pool of 2 streams x 5 calls, one stream per call (static shape),")
