"""The multi-call report's arithmetic and rendering, pinned with hand-checkable numbers: the state-health trend of
a norm series, a slot's min/max/norm/peak, float16 headroom, which divergence counts as first, the verdict texts,
and the text and JSON forms (JSON has no inf/nan)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rnnir.check.multicall.health import SlotHealth, norm_trend, slot_health
from rnnir.check.multicall.report import Divergence, MulticallReport, VariantResult, report_to_text
from rnnir.check.multicall.text import format_number, json_number

# -- the trend of a norm series ------------------------------------------------------------------
# growth = mean of the last quarter / mean of the first quarter (a quarter is at least one call);
# growing needs growth > 2 and a rising second half (least-squares slope > 0); decaying needs growth < 0.5.


TREND_CASES = (
    ([1.0, math.nan, 1.0, 1.0], "non-finite", math.inf),
    ([1.0, 1.0, 1.0, math.inf], "non-finite", math.inf),
    ([2.0, 2.0, 2.0, 2.0], "constant", 1.0),
    ([0.0, 0.0, 0.0, 0.0], "constant", 1.0),  # 0 / 0: no growth
    ([1.0, 1.0 + 1e-13, 1.0, 1.0], "constant", 1.0),  # within 1e-12 of each other: rounding, not change
    ([0.0, 0.0, 0.0, 1.0], "growing", math.inf),  # from nothing to something
    ([1.0, 1.0, 1.0, 2.5], "growing", 2.5),
    ([1.0, 1.0, 1.0, 2.0], "bounded", 2.0),  # exactly twice: not yet growing
    ([1.0, 1.0, 5.0, 4.9], "bounded", 4.9),  # grew, but the second half (5, 4.9) falls
    ([1.0, 3.0], "bounded", 3.0),  # a second half of one call has no slope
    ([4.0, 3.0, 2.0, 1.0], "decaying", 0.25),
    ([2.0, 1.5, 1.2, 1.0], "bounded", 0.5),  # exactly half: not yet decaying
    ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0], "growing", 3.0),  # 8 calls: quarters of 2, (1 + 5) / 2 over (1 + 1) / 2
    ([3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], "bounded", 0.5),  # (1 + 1) / 2 over (3 + 1) / 2: exactly half
    ([1.0, 1.0, 1.0, 1.0, 1.0, 4.0, 5.0, 5.5], "growing", 5.25),  # a second half that rises ever slower still rises
)


def test_trend_of_a_norm_series():
    # every case in one test: the mutation tool runs one parametrization per test function, and each case is a boundary
    for norms, trend, growth in TREND_CASES:
        assert norm_trend(norms) == (trend, growth), norms


def test_health_of_each_slot_call_by_call():
    states = [
        {"h": np.array([[1.0, -3.0]], np.float32), "empty": np.zeros((0, 2), np.float32)},
        {"h": np.array([[0.0, 4.0]], np.float32), "empty": np.zeros((0, 2), np.float32)},
    ]
    health = slot_health(states)
    h = health["h"]
    assert (h.slot, h.min, h.max) == ("h", [-3.0, 0.0], [1.0, 4.0])
    assert h.norm == pytest.approx([math.sqrt(10.0), 4.0])
    assert h.peak_abs == 4.0  # |-3| < |4|: the largest magnitude over every call, sign dropped
    assert h.trend == "bounded" and h.growth == pytest.approx(4.0 / math.sqrt(10.0))
    e = health["empty"]
    assert (e.min, e.max, e.norm, e.peak_abs, e.trend) == ([0.0, 0.0], [0.0, 0.0], [0.0, 0.0], 0.0, "constant")
    assert slot_health([]) == {}


def test_a_negative_peak_counts_by_its_magnitude():
    health = slot_health([{"h": np.array([-8.0, 1.0])}, {"h": np.array([-2.0, 1.0])}])["h"]
    assert health.peak_abs == 8.0 and health.fp16_headroom == 65504.0 / 8.0


def slot(peak, norms=(1.0, 2.0), trend="bounded", growth=2.0):
    return SlotHealth("h0", [0.0] * len(norms), [peak] * len(norms), list(norms), trend, growth, peak)


def test_float16_headroom_and_the_health_summary():
    assert slot(0.0).fp16_headroom == math.inf
    assert slot(2.0).fp16_headroom == 32752.0
    assert slot(2.0, norms=(0.5, 1.25, 3.0)).summary() == (
        "h0: bounded over 3 calls (norm 0.5 -> 3, growth x2, |max| 2, float16 headroom 3.28e+04x)"
    )
    assert slot(0.0).summary().endswith("float16 headroom inf)")


def test_numbers_in_text_and_json():
    cases = [(0.123456, "0.123", 0.123456), (1234567.0, "1.23e+06", 1234567.0), (math.inf, "inf", "inf"), (-math.inf, "-inf", "-inf"), (math.nan, "nan", "nan")]
    for value, text, json_value in cases:
        assert format_number(value) == text
        got = json_number(value)
        assert got == json_value and type(got) is type(json_value)


def test_an_int_is_written_as_is():
    assert json_number(3) == 3 and format_number(3) == "3"


# -- a report built by hand --------------------------------------------------------------------


def variant(name, chunk, first=None, reference="persistent", note="", max_diff=None, per_output=None):
    d = first.max_abs_diff if first is not None else 0.0
    return VariantResult(name, chunk, 4, reference, first, d if max_diff is None else max_diff, per_output or {}, note)


def report(variants, **kw):
    base = dict(
        model="m.onnx", fingerprint="abc", mode="time", pairs=[("h0", "hn")], time_axes={"x": 0, "c": None}, stream_length=8,
        chunk_sizes=[2, 1], variants=variants, whole_available=True, persistent_matches_whole=True, revealing=True,
        status="pass", verdict="PASS: fine.",
    )
    base.update(kw)
    return MulticallReport(**base)


def test_the_first_divergence_is_the_earliest_call_then_the_smallest_chunk():
    r = report([
        variant("reinit", 4, Divergence(2, "y", 0.5, 4)),
        variant("reinit", 2, Divergence(1, "y", 0.25, 2)),
        variant("reinit", 1, Divergence(1, "hn", 0.125, 1)),
        variant("reinit", 3, Divergence(3, "y", 9.0, 3)),
        variant("stale", 2),
        variant("stale", 1, Divergence(5, "y", 1.0, 1)),
    ])
    assert r.first_divergence == {"reinit": Divergence(1, "hn", 0.125, 1), "stale": Divergence(5, "y", 1.0, 1)}
    # a variant that was not run is absent, not None
    assert "hc-swapped" not in r.first_divergence
    assert report([variant("stale", 2)]).first_divergence == {"stale": None}


def test_a_divergence_without_a_chunk_counts_as_chunk_0():
    r = report([variant("reinit", 1, Divergence(1, "y", 0.5, 1)), variant("reinit", None, Divergence(1, "hn", 0.25, None))])
    assert r.first_divergence == {"reinit": Divergence(1, "hn", 0.25, None)}


def test_looking_up_a_variant_by_name_and_chunk():
    a, b = variant("reinit", 2), variant("reinit", 1)
    r = report([variant("persistent", 2, reference="whole"), a, b])
    assert r.variant("reinit") is a and r.variant("reinit", 1) is b
    with pytest.raises(KeyError):
        r.variant("reinit", 3)
    with pytest.raises(KeyError):
        r.variant("stale")


def test_ok_only_when_the_status_is_pass():
    assert report([]).ok
    assert not report([], status="inconclusive").ok
    assert not report([], status="fail").ok


def test_report_text_line_by_line():
    r = report(
        [
            variant("persistent", 2, reference="whole", max_diff=0.0),
            variant("persistent", 1, reference="none"),
            variant("reinit", 2, Divergence(1, "y", 0.5, 2), max_diff=0.75),
            variant("stale", 2, note="why not"),
        ],
        notes=["first note", "second note"],
        health={"h0": slot(2.0, norms=(0.5, 3.0))},
        tol=1e-3,
    )
    assert report_to_text(r) == "\n".join([
        "m.onnx: PASS: fine.",
        "  state pairs: h0 -> hn",
        "  stream: 8 time steps along x[0]; chunk sizes [2, 1]",
        "  tolerance: max |diff| <= 0.001",
        "  variants:",
        "    persistent  chunk=2       4 calls vs whole      equal (max |diff| 0)",
        "    persistent  chunk=1       4 calls vs none       not compared (no whole-stream oracle)",
        "    reinit      chunk=2       4 calls vs persistent diverges at call 1 on 'y' (|diff| 0.5); max |diff| 0.75",
        "    stale       chunk=2       4 calls vs persistent equal (max |diff| 0)  -- why not",
        "  state health (longest persistent run):",
        "    h0: bounded over 2 calls (norm 0.5 -> 3, growth x2, |max| 2, float16 headroom 3.28e+04x)",
        "  note: first note",
        "  note: second note",
        "",
    ])
    assert str(r) == report_to_text(r)


def test_report_text_in_calls_mode_and_without_pairs_or_health():
    r = report([], mode="calls", pairs=[("h0", None)], time_axes={"x": None}, stream_length=48)
    lines = report_to_text(r).splitlines()
    assert lines[1] == "  state pairs: h0 -> <nothing>"
    assert lines[2] == "  stream: 48 calls, one frame each (no input has a time axis)"
    assert "state health" not in report_to_text(r)
    assert report_to_text(report([], pairs=[])).splitlines()[1] == "  state pairs: none"


def test_report_json():
    r = report(
        [variant("persistent", 2, reference="whole"), variant("reinit", 2, Divergence(1, "y", math.inf, 2), per_output={"y": math.inf, "hn": 0.5})],
        notes=["n"],
        watched="y",
        health={"h0": slot(0.0, norms=(0.0, 0.0), trend="constant", growth=1.0)},
    )
    r.variants[1].trace = [1.0, math.nan]  # a call that did not return the watched output
    doc = json.loads(json.dumps(r.to_json(), allow_nan=False))
    assert doc == {
        "version": 1,
        "model": "m.onnx",
        "fingerprint": "abc",
        "mode": "time",
        "status": "pass",
        "ok": True,
        "verdict": "PASS: fine.",
        "pairs": [{"input": "h0", "output": "hn"}],
        "time_axes": {"x": 0, "c": None},
        "stream_length": 8,
        "chunk_sizes": [2, 1],
        "tol": 1e-5,
        "whole_available": True,
        "persistent_matches_whole": True,
        "revealing": True,
        "first_divergence": {"reinit": {"call": 1, "output": "y", "max_abs_diff": "inf", "chunk": 2}},
        "variants": [
            {"variant": "persistent", "chunk": 2, "calls": 4, "reference": "whole", "diverges": False, "first_divergence": None,
             "max_abs_diff": 0.0, "per_output": {}, "note": "", "trace": []},
            {"variant": "reinit", "chunk": 2, "calls": 4, "reference": "persistent", "diverges": True,
             "first_divergence": {"call": 1, "output": "y", "max_abs_diff": "inf", "chunk": 2},
             "max_abs_diff": "inf", "per_output": {"y": "inf", "hn": 0.5}, "note": "", "trace": [1.0, "nan"]},
        ],
        "health": {"h0": {"slot": "h0", "trend": "constant", "growth": 1.0, "peak_abs": 0.0, "fp16_headroom": "inf",
                          "min": [0.0, 0.0], "max": [0.0, 0.0], "norm": [0.0, 0.0]}},
        "notes": ["n"],
        "watched": "y",
    }
