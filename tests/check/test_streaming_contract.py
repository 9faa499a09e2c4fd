"""check_streaming's documented contract beyond the verdicts: which inputs a perturbation replaces, the stream forms
it accepts, the hints it passes on, what latency and cold start time, the progress it reports, the report's fields.

Oracles: a hand loop of ``h' = 0.5 h + (sum of the inputs)`` in numpy (which inputs a burst zeroes shows in the
departure after it), the requested numbers of calls, and a run slowed by a known sleep (the timings must include it).
"""

from __future__ import annotations

import math
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.check.multicall.stream import StreamError
from rnnir.check.streaming import check_streaming, make_chunks, streaming_to_text
from rnnir.runtime import StatefulSession
from tests.support import streaming_models as sm

W = 4


def _summing(inputs: tuple[str, ...], ints: tuple[str, ...] = ()) -> onnx.ModelProto:
    """h' = 0.5 h + sum of the inputs (each [1, W]; those in ``ints`` int32, cast to float); y = h'."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Mul", ["h_in", "half"], ["acc0"])]
    for i, name in enumerate(inputs):
        if name in ints:
            nodes.append(helper.make_node("Cast", [name], [f"{name}_f"], to=f))
        nodes.append(helper.make_node("Add", [f"acc{i}", f"{name}_f" if name in ints else name], [f"acc{i + 1}"]))
    nodes += [helper.make_node("Identity", [f"acc{len(inputs)}"], ["h_out"]), helper.make_node("Identity", ["h_out"], ["y"])]
    graph = helper.make_graph(
        nodes, "summing",
        [helper.make_tensor_value_info(n, TensorProto.INT32 if n in ints else f, [1, W]) for n in (*inputs, "h_in")],
        [helper.make_tensor_value_info(n, f, [1, W]) for n in ("y", "h_out")],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _departure_after_silence(feeds: list[dict[str, np.ndarray]], zeroed: set[str], at: int) -> float:
    """The largest |diff| of y after a one-call silence burst at ``at`` that zeroes ``zeroed``, by a hand loop."""
    def run(stream):
        h, ys = np.zeros((1, W), np.float64), []
        for feed in stream:
            h = 0.5 * h + sum(feed[n].astype(np.float64) for n in sorted(feed))
            ys.append(h)
        return ys

    burst = [dict(f) for f in feeds]
    burst[at] = {n: (np.zeros_like(a) if n in zeroed else a) for n, a in feeds[at].items()}
    return max(float(np.abs(a - b).max()) for a, b in zip(run(feeds)[at + 1 :], run(burst)[at + 1 :]))


def test_a_burst_replaces_the_inputs_that_change_from_call_to_call_or_the_ones_named():
    """x changes every call; g never (a sample rate): kept; u differs only on the first call, v only on the second:
    both change, so both are replaced; ``streamed=`` names them instead."""
    calls, at = 9, 5
    rng = np.random.default_rng(3)
    feeds = []
    for k in range(calls):
        feeds.append({
            "x": rng.uniform(-1, 1, (1, W)).astype(np.float32),
            "g": np.full((1, W), 1.0, np.float32),
            "u": np.full((1, W), 5.0 if k == 0 else 1.0, np.float32),
            "v": np.full((1, W), 5.0 if k == 1 else 2.0, np.float32),
        })
    session = StatefulSession(_summing(("g", "u", "v", "x")), pairs=sm.PAIRS)
    for streamed, zeroed in ((None, {"x", "u", "v"}), (["g"], {"g"}), (["x", "v"], {"x", "v"})):
        report = check_streaming(session, feeds, burst=(at, 1), burst_kind="silence", streamed=streamed)
        want = _departure_after_silence(feeds, zeroed, at)
        assert report.check("burst").departure["y"] == pytest.approx(want, rel=1e-5), streamed
        if streamed is None:  # a zeroed chunk is the same replacement
            drop = check_streaming(session, feeds, drop=at, drop_mode="zero")
            assert drop.check("drop").departure["y"] == pytest.approx(want, rel=1e-5)
    with pytest.raises(StreamError, match="'X'"):  # a misspelt name would perturb nothing and pass every check
        check_streaming(session, feeds, burst=(at, 1), streamed=["X"])


def test_a_noise_burst_is_noise_on_float_inputs_even_constant_ones_and_zeros_on_integer_inputs():
    calls, at = 10, 4
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.uniform(-1, 1, (1, W)).astype(np.float32), "g": np.ones((1, W), np.float32), "k": np.full((1, W), k + 1, np.int32)}
             for k in range(calls)]
    session = StatefulSession(_summing(("g", "k", "x"), ints=("k",)), pairs=sm.PAIRS)
    # an integer input cannot carry noise: a noise burst zeroes it, as silence does
    ints = check_streaming(session, feeds, burst=(at, 1), burst_kind="noise", streamed=["k"])
    assert ints.check("burst").departure["y"] == pytest.approx(_departure_after_silence(feeds, {"k"}, at), rel=1e-6)
    # a constant float input named streamed has no spread to scale by: its noise is unit-scaled, not silence
    const = check_streaming(session, feeds, burst=(at, 1), burst_kind="noise", streamed=["g"])
    silent = _departure_after_silence(feeds, {"g"}, at)
    assert const.check("burst").departure["y"] != pytest.approx(silent, rel=1e-3)


def _lstm_with_lengths(hidden: int = 3) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((0.3 * rng.standard_normal(s)).astype(np.float32), n) for n, s in (("W", (1, 4 * hidden, 2)), ("R", (1, 4 * hidden, hidden)))]
    node = helper.make_node("LSTM", ["x", "W", "R", "", "lens", "h0", "c0"], ["Y", "hn", "cn"], hidden_size=hidden)
    graph = helper.make_graph(
        [node], "lstm_lens",
        [helper.make_tensor_value_info("x", f, ["T", 1, 2]), helper.make_tensor_value_info("lens", TensorProto.INT32, [1]),
         helper.make_tensor_value_info("h0", f, [1, 1, hidden]), helper.make_tensor_value_info("c0", f, [1, 1, hidden])],
        [helper.make_tensor_value_info("Y", f, ["T", 1, 1, hidden]), helper.make_tensor_value_info("hn", f, [1, 1, hidden]),
         helper.make_tensor_value_info("cn", f, [1, 1, hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_generated_stream_perturbs_only_the_streamed_inputs_and_keeps_the_hints_and_notes():
    mixing = StatefulSession(sm.mixing(), pairs=sm.PAIRS)
    chunks, names = make_chunks(mixing, calls=4, chunk=2, input_values={"g": 0.25})
    assert names == {"x"} and all(float(c["g"]) == 0.25 for c in chunks)  # a fixed value is fed unchanged: not streamed
    chunks, names = make_chunks(mixing, calls=4, chunk=2)
    assert names == {"x", "g"}  # generated anew every call: streamed
    batched = StatefulSession(sm.lstm_b())
    chunks, names = make_chunks(batched, calls=3, chunk=2, input_shapes={"x": [1, 2, 3]})
    assert len(chunks) == 3 and chunks[0]["x"].shape == (2, 2, 3) and names == {"x"}  # batch 2 as asked, 2 steps a call
    chunks, _ = make_chunks(batched, calls=3, chunk=2)
    assert chunks[0]["x"].shape == (2, 1, 3)  # a free batch dimension is one stream: batch 1
    default, _ = make_chunks(batched, calls=2)  # the documented defaults: 16 steps a call, seed 0
    assert default[0]["x"].shape == (16, 1, 3)
    assert all(np.array_equal(a["x"], b["x"]) for a, b in zip(default, make_chunks(batched, calls=2, chunk=16, seed=0)[0]))
    assert not np.array_equal(default[0]["x"], make_chunks(batched, calls=2, seed=1)[0][0]["x"])
    notes: list[str] = []
    chunks, names = make_chunks(StatefulSession(_lstm_with_lengths()), calls=3, chunk=4, notes=notes)
    assert names == {"x"} and all(int(c["lens"][0]) == 4 for c in chunks)  # sequence lengths follow the chunk: not streamed
    assert any("sequence_lens input 'lens'" in n for n in notes)
    report = check_streaming(StatefulSession(_lstm_with_lengths()), calls=3, chunk=4, drop=1, drop_mode="zero")
    assert any("sequence_lens input 'lens'" in n for n in report.notes)  # the notes reach the report, and its text
    assert "note: sequence_lens input 'lens'" in streaming_to_text(report)
    zeroed = check_streaming(StatefulSession(_lstm_with_lengths()), calls=3, chunk=4, drop=1, drop_mode="zero", streamed=["x", "lens"])
    assert zeroed.check("drop").departure != report.check("drop").departure  # naming lens zeroes it too: a zero-length call


def test_the_stream_forms_accepted_and_refused():
    session = StatefulSession(sm.toy("decay"), pairs=sm.PAIRS)
    feed = {"x": np.full((1, W), 0.5, np.float32)}
    two = check_streaming(session, [feed, feed])  # the fewest calls the checks take
    assert (two.model, two.calls, two.tol) == (session.label, 2, 1e-3)
    arrays = check_streaming(session, [np.full((1, W), v, np.float32) for v in (0.1, 0.2, 0.3)], tol=0.0)  # a list of arrays: one input's calls
    assert arrays.calls == 3 and arrays.tol == 0.0
    for stream in ([], [feed]):
        with pytest.raises(StreamError):
            check_streaming(session, stream)
    for tol in (-1.0, math.nan):
        with pytest.raises(StreamError, match="tol"):
            check_streaming(session, [feed, feed], tol=tol)
    with pytest.raises(StreamError, match="at least 2"):  # too short, whatever it names
        check_streaming(session, [feed], streamed=["x"])
    for kwargs, words in (({"burst": (0, 0)}, "at least one call"), ({"streams": 1}, "at least 2 streams"), ({"context": {"x": 2}}, "context=")):
        with pytest.raises(StreamError, match=words):
            check_streaming(session, [feed, feed, feed], **kwargs)
    # a model given as a model (not a session): the cold start builds a new session of it
    proto = check_streaming(sm.toy("decay"), [feed, feed, feed], pairs=sm.PAIRS, reconnect=1)
    assert proto.cold_start is not None and proto.cold_start.new_session_s > 0
    assert proto.check("reconnect").departure == {"y": pytest.approx(0.25)}  # h = 0.5, 0.75 intact; 0.5 restarted at call 1
    with pytest.raises(KeyError):
        proto.check("burst")


def test_comparing_no_calls_says_so_and_recovers_nothing():
    from rnnir.check.streaming.recovery import compare_runs

    rec = compare_runs("burst", 8, 2, "noise", 0.01, [], [], [], [], set())
    assert (rec.compared, rec.recovery, rec.state_recovery, rec.ok) == (0, None, None, False)
    assert rec.note == "no calls after the perturbation: nothing to compare (make the stream longer)"


def test_each_check_reports_where_and_how_long_its_perturbation_was_and_what_it_asked():
    calls = 10
    session = StatefulSession(sm.toy("decay"), pairs=sm.PAIRS)
    feeds = [{"x": np.full((1, W), 0.1 * k, np.float32)} for k in range(calls)]
    report = check_streaming(session, feeds, drop=2, drop_mode="zero", reconnect=calls - 1, burst=(4, 3), burst_kind="silence", tol=0.06)
    got = [{k: c.to_json()[k] for k in ("check", "at", "length", "mode", "compared")} for c in report.checks]
    assert got == [
        {"check": "drop", "at": 2, "length": 1, "mode": "zero", "compared": calls - 3},
        {"check": "reconnect", "at": calls - 1, "length": 0, "mode": "restart", "compared": 1},  # the last call: a restart may be there
        {"check": "burst", "at": 4, "length": 3, "mode": "silence", "compared": calls - 7},
    ]
    for c in report.checks:  # the state is the output here (y = h'): it agrees again exactly when the output does
        assert c.state_recovery == c.recovery and c.note == "", c.check
    assert report.check("drop").recovery == 1  # 0.2 zeroed: 0.1 off on the next call, 0.05 (within 0.06) on the one after
    with pytest.raises(StreamError, match="reconnect"):
        check_streaming(session, feeds, reconnect=calls)
    with pytest.raises(StreamError, match="drop"):  # a lost last chunk leaves nothing to compare
        check_streaming(session, feeds, drop=calls - 1)
    first = check_streaming(session, feeds, drop=0, drop_mode="zero").check("drop")  # the very first chunk may be lost
    assert first.at == 0 and first.compared == calls - 1
    # a cold start is timed when asked, or by default with a reconnect; cold_start=False turns it off
    for kwargs, timed in (({"reconnect": 3}, True), ({"reconnect": 3, "cold_start": False}, False), ({}, False), ({"cold_start": True}, True)):
        assert (check_streaming(session, feeds, **kwargs).cold_start is not None) == timed, kwargs


def test_latency_and_cold_start_time_the_calls_themselves(monkeypatch):
    """Every call slowed by 3 ms: the latency of a call and both cold starts include it (a timer around nothing would not)."""
    real = StatefulSession.run

    def slow(self, feeds, *args, **kwargs):
        time.sleep(0.003)
        return real(self, feeds, *args, **kwargs)

    monkeypatch.setattr(StatefulSession, "run", slow)
    session = StatefulSession(sm.toy("decay"), pairs=sm.PAIRS)
    report = check_streaming(session, [{"x": np.full((1, W), v, np.float32)} for v in range(5)], cold_start=True)
    assert report.latency.calls == 5 and report.latency.p50_us >= 3000 and report.latency.max_us >= report.latency.p50_us
    assert report.cold_start is not None and report.cold_start.new_session_s >= 0.003 and report.cold_start.new_stream_s >= 0.003
    assert check_streaming(session, [{"x": np.zeros((1, W), np.float32)}] * 2).cold_start is None  # not asked, no reconnect


def test_progress_counts_every_call_of_every_run():
    calls, drop, at, length, long, streams = 12, 3, 5, 2, 8, 2
    seen: list[tuple[str, int, int]] = []
    check_streaming(
        StatefulSession(sm.toy("decay"), pairs=sm.PAIRS), [{"x": np.full((1, W), 0.1 * k, np.float32)} for k in range(calls)],
        drop=drop, reconnect=4, burst=(at, length), long=long, streams=streams, progress=lambda what, done, total: seen.append((what, done, total)),
    )
    runs = {
        "latency": calls, "intact stream": calls, f"chunk {drop} dropped": calls - 1, "restart at call 4": calls - 4,
        f"burst at call {at}": calls, "long run": long, f"{streams} streams": calls,
    }
    assert [what for what, _, _ in seen] == [what for what, n in runs.items() for _ in range(n)]
    assert seen == [(what, k, n) for what, n in runs.items() for k in range(1, n + 1)]


def test_the_sessions_a_check_makes_use_the_callers_onnxruntime_options():
    import onnxruntime as ort

    from rnnir.check.streaming.isolation import session_options

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    got = session_options(StatefulSession(sm.toy("decay"), pairs=sm.PAIRS, session_options=opts))
    assert (got.log_severity_level, got.intra_op_num_threads) == (3, 1)


def test_slot_trends_of_a_single_state_and_of_none():
    from rnnir.check.streaming.longrun import slot_trends

    (trend,) = slot_trends([{"h": np.array([3.0, 4.0])}]).values()
    assert (trend.slot, trend.calls, trend.first_norm, trend.last_norm, trend.peak_abs) == ("h", 1, 5.0, 5.0, 4.0)
    assert slot_trends([]) == {}


def test_slot_trends_track_norm_peak_and_saturation_call_by_call():
    """Hand-worked: norms 1, sqrt 2, 2, 0.5; |max| 2; saturated shares 1/4, 1/2, 1/4, 0 (|x| >= 0.999)."""
    from rnnir.check.multicall.health import norm_trend
    from rnnir.check.streaming.longrun import slot_trends

    states = [[0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, -2.0], [0.5, 0.0, 0.0, 0.0]]
    t = slot_trends([{"h": np.array(s, np.float32)} for s in states])["h"]
    norms = [1.0, math.sqrt(2.0), 2.0, 0.5]
    assert (t.calls, t.first_norm, t.last_norm, t.peak_abs, t.saturated, t.peak_saturated) == (4, 1.0, 0.5, 2.0, 0.0, 0.5)
    assert (t.trend, t.growth) == norm_trend(norms)
    # a non-finite state: the peak stays NaN for the rest of the run, whatever comes after
    nan = slot_trends([{"h": np.array([np.nan])}, {"h": np.array([1.0])}])["h"]
    assert math.isnan(nan.peak_abs) and nan.trend == "non-finite"


def test_a_long_run_takes_at_least_four_calls():
    session = StatefulSession(sm.toy("decay"), pairs=sm.PAIRS)
    feeds = [{"x": np.full((1, W), 0.1, np.float32)}] * 2
    assert check_streaming(session, feeds, long=4).long.calls == 4
    with pytest.raises(StreamError, match="at least 4"):
        check_streaming(session, feeds, long=3)


def test_recovery_length_is_the_first_call_from_which_every_diff_stays_within_tol():
    from rnnir.check.streaming.recovery import recovery_length

    cases = [([], None), ([0.0, 0.0], 0), ([1.0, 0.0, 0.0], 1), ([0.0, 1.0, 0.0], 2), ([0.0, 0.0, 1.0], None), ([math.nan, 0.0], 1),
             ([0.0, math.nan], None), ([0.5, 0.5], 0)]
    for diffs, want in cases:
        assert recovery_length(diffs, 0.5) == want, diffs


def test_a_model_whose_only_output_is_its_state_is_compared_on_that_state():
    """h' = h + x with h' the only output: no other output to compare, so the state output is (a skipped chunk
    leaves the lost chunk's 0.75 in it for ever), even when a single call is left to compare."""
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Add", ["h_in", "x"], ["h_out"])], "state_only",
        [helper.make_tensor_value_info(n, f, [1, W]) for n in ("x", "h_in")], [helper.make_tensor_value_info("h_out", f, [1, W])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = StatefulSession(model, pairs=sm.PAIRS)
    feeds = [{"x": np.zeros((1, W), np.float32)} for _ in range(8)]
    feeds[3] = {"x": np.full((1, W), 0.75, np.float32)}
    for drop in (3, 6):
        rec = check_streaming(session, feeds, drop=drop, drop_mode="skip").check("drop")
        lost = 0.75 if drop == 3 else 0.0
        assert rec.departure == {"h_out": pytest.approx(lost)} and rec.per_output == {"h_out": None if lost else 0}, drop
        assert rec.ok == (not lost) and rec.compared == 8 - drop - 1


def test_a_recovery_summary_says_what_happened_to_the_outputs_and_the_state():
    from rnnir.check.streaming import Recovery

    def summary(**kw) -> str:
        base = {"check": "burst", "at": 4, "length": 3, "mode": "noise", "compared": 9, "tol": 0.01}
        return Recovery(**{**base, **kw}).summary()

    assert summary(departure={"y": 0.5, "z": 2.0}, per_output={"y": 1, "z": 2}, recovery=2, state_recovery=3) == (
        "noise burst over calls 4..6: back within 0.01 after 2 call(s); state agrees after 3 (largest departure 2 on 'z')"
    )
    assert summary(departure={"y": 0.5}, per_output={"y": None}) == (
        "noise burst over calls 4..6: FAIL: never back within 0.01 in 9 calls; state never agrees (largest departure 0.5 on 'y')"
    )
    assert summary(check="drop", mode="skip", recovery=0, state_recovery=0) == "chunk 4 dropped (skip): back within 0.01 after 0 call(s); state agrees after 0 (largest departure 0 on '-')"
    assert summary(check="reconnect", recovery=None) == "restart from the initial state at call 4: FAIL: never back within 0.01 in 9 calls (largest departure 0 on '-')"


def test_latency_percentiles_by_hand():
    from rnnir.check.streaming import Latency

    lat = Latency.of([k * 1e-6 for k in range(1, 101)])  # 1..100 µs: linear percentiles 50.5 and 99.01
    assert lat.calls == 100 and lat.p50_us == pytest.approx(50.5) and lat.p99_us == pytest.approx(99.01)
    assert lat.mean_us == pytest.approx(50.5) and lat.max_us == pytest.approx(100.0)
    one = Latency.of([2e-6])
    assert (one.calls, one.p50_us, one.p99_us) == (1, pytest.approx(2.0), pytest.approx(2.0))
    none = Latency.of([])
    assert none.calls == 0 and math.isnan(none.p50_us)
