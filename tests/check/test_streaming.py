"""Streaming deployment checks (rnnir.streaming): each check flags a model built to misbehave and passes one
that behaves.  Oracles: the hand-worked recurrences of tests/streaming_models.py (h' = 0.5 h + x halves a
perturbation every call; h' = h + x keeps it for ever), and silero-vad on a speech-like WAV file."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from rnnir import cli
from rnnir.check.multicall.stream import StreamError
from rnnir.check.streaming import check_streaming, streaming_to_text
from rnnir.runtime import StatefulSession
from tests.support import speechlike
from tests.support import streaming_models as sm

W = 4


def _stream(calls: int, seed: int = 0, spike: int | None = None, spike_value: float = 1.0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    x = (0.1 * rng.standard_normal((calls, 1, W))).astype(np.float32)
    if spike is not None:
        x[spike] = spike_value
    return [{"x": x[k]} for k in range(calls)]


def _session(kind: str) -> StatefulSession:
    return StatefulSession(sm.toy(kind), pairs=sm.PAIRS)


# -- dropped chunk ------------------------------------------------------------------------------


def test_zeroed_chunk_on_a_decaying_state_recovers_after_the_hand_worked_number_of_calls():
    # chunk 10 is all ones; zeroing it leaves a difference of 1 in h, halved every call:
    # after the lost call, call 10+1+j differs by 0.5^(j+1); within 1e-3 first at j = 9 (0.5^10 = 9.8e-4)
    report = check_streaming(_session("decay"), _stream(40, spike=10), drop=10, drop_mode="zero", tol=1e-3)
    drop = report.check("drop")
    assert drop.ok and drop.recovery == 9 and drop.per_output == {"y": 9}
    assert drop.departure["y"] == pytest.approx(0.5, abs=1e-6)
    assert drop.state_recovery == 9
    assert drop.compared == 40 - 11
    assert report.ok


def test_a_looser_tolerance_recovers_sooner_by_the_same_arithmetic():
    report = check_streaming(_session("decay"), _stream(40, spike=10), drop=10, drop_mode="zero", tol=0.1)
    assert report.check("drop").recovery == 3  # j = 2: 0.5^3 = 0.125 > 0.1; j = 3: 0.5^4 = 0.0625


def test_a_skipped_chunk_never_heals_in_an_integrator():
    chunks = _stream(30, spike=5, spike_value=0.75)
    report = check_streaming(_session("integrator"), chunks, drop=5, drop_mode="skip")
    drop = report.check("drop")
    assert not drop.ok and drop.recovery is None and drop.per_output == {"y": None}
    assert drop.departure["y"] == pytest.approx(0.75, abs=1e-6)  # the lost chunk, for ever
    assert drop.compared == 30 - 6
    assert not report.ok and report.status == "fail"
    assert "never back within 0.001 in 24 calls" in streaming_to_text(report)


def test_a_skipped_chunk_heals_in_a_decaying_state():
    report = check_streaming(_session("decay"), _stream(60, spike=5), drop=5, drop_mode="skip")
    assert report.check("drop").ok


# -- reconnection -------------------------------------------------------------------------------


def test_reconnecting_an_integrator_never_agrees_and_the_offset_is_the_lost_history():
    chunks = _stream(30, seed=3)
    report = check_streaming(_session("integrator"), chunks, reconnect=12)
    rec = report.check("reconnect")
    lost = np.abs(np.sum([c["x"] for c in chunks[:12]], axis=0)).max()
    assert rec.recovery is None and rec.departure["y"] == pytest.approx(float(lost), abs=1e-5)
    assert report.cold_start is not None and report.cold_start.new_session_s > 0 and report.cold_start.new_stream_s > 0


def test_reconnecting_a_decaying_state_agrees_once_the_old_state_has_faded():
    chunks = _stream(60, seed=3)
    report = check_streaming(_session("decay"), chunks, reconnect=12, tol=1e-3)
    rec = report.check("reconnect")
    # the restarted stream misses h_11 (|h| < 1 here): 0.5^(j+1) |h_11| <= 1e-3 within 10 calls
    intact = StatefulSession(sm.toy("decay"), pairs=sm.PAIRS)
    for c in chunks[:12]:
        h11 = intact.run(c)["y"]  # the state the restarted stream lost
    # call 12 + j differs by 0.5^(j+1) h_11
    expected = next(j for j in range(60) if 0.5 ** (j + 1) * float(np.abs(h11).max()) <= 1e-3)
    assert rec.ok and rec.recovery == expected
    assert report.ok


# -- bursts and long runs -----------------------------------------------------------------------


def test_a_noise_burst_heals_in_a_decaying_state_and_never_in_an_integrator():
    good = check_streaming(_session("decay"), _stream(80), burst=(20, 5), burst_kind="noise")
    bad = check_streaming(_session("integrator"), _stream(80), burst=(20, 5), burst_kind="noise")
    assert good.check("burst").ok and good.check("burst").mode == "noise"
    assert not bad.check("burst").ok and not bad.ok
    assert set(good.burst_health) == {"h_in"} and good.burst_health["h_in"].finite


def test_a_silence_burst_is_zeros_so_its_departure_is_what_the_burst_erased():
    chunks = _stream(40, spike=20, spike_value=0.5)
    report = check_streaming(_session("integrator"), chunks, burst=(20, 1), burst_kind="silence")
    assert report.check("burst").departure["y"] == pytest.approx(0.5, abs=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_an_overflowing_state_fails_the_burst_health_even_when_nothing_else_is_asked():
    report = check_streaming(_session("exploding"), _stream(30), burst=(10, 2))
    assert report.burst_health["h_in"].trend == "non-finite"
    assert not report.ok


def test_a_long_run_flags_a_state_growing_without_bound_and_passes_a_bounded_one():
    growing = check_streaming(_session("growing"), _stream(50), long=2000)
    bounded = check_streaming(_session("decay"), _stream(50), long=2000)
    g, b = growing.long.slots["h_in"], bounded.long.slots["h_in"]
    assert g.trend == "growing" and not growing.long.ok and not growing.ok
    # h grows by sum |x| per pass of the stream: after 2000 calls, 40 passes of the 50 chunks
    per_pass = np.sum([np.abs(c["x"]) for c in _stream(50)], axis=0)
    assert g.peak_abs == pytest.approx(float((40 * per_pass).max()), rel=1e-4)
    assert g.fp16_headroom == pytest.approx(65504.0 / g.peak_abs)
    assert b.trend in ("bounded", "decaying", "constant") and bounded.long.ok
    assert growing.long.calls == 2000 and growing.long.latency.calls == 2000
    assert "FAIL: h_in: growing over 2000 calls" in streaming_to_text(growing)


def test_saturation_counts_state_elements_pinned_at_one():
    chunks = [{"x": np.array([[1.0, 0.0, 0.0, 0.0]], np.float32)}] * 10  # h -> (2, 0, 0, 0): one of four elements above 0.999
    report = check_streaming(_session("decay"), chunks, long=20)
    assert report.long.slots["h_in"].saturated == 0.25


# -- always measured ----------------------------------------------------------------------------


def test_latency_and_state_bytes_are_always_reported():
    report = check_streaming(_session("decay"), _stream(25))
    assert report.checks == [] and report.ok
    assert report.state_bytes == W * 4  # one float32 [1, 4] state
    lat = report.latency
    assert lat.calls == 25 and 0 < lat.p50_us <= lat.p99_us <= lat.max_us
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["state_bytes"] == 16 and doc["latency"]["calls"] == 25


@pytest.mark.parametrize(
    "kwargs,match",
    [({"drop": 29}, "no call after it"), ({"drop": -1}, "no call after it"), ({"burst": (28, 5)}, "burst"),
     ({"drop_mode": "lose"}, "drop_mode"), ({"burst_kind": "music"}, "burst_kind"), ({"long": 2}, "at least 4"),
     ({"tol": -1.0}, "tol")],
)
def test_impossible_requests_are_stream_errors(kwargs, match):
    with pytest.raises(StreamError, match=match):
        check_streaming(_session("decay"), _stream(30), **kwargs)


# -- the command line ---------------------------------------------------------------------------


@pytest.fixture
def toys(tmp_path):
    import onnx

    for kind in ("decay", "integrator"):
        onnx.save(sm.toy(kind), str(tmp_path / f"{kind}.onnx"))
    return tmp_path


def test_cli_drop_and_reconnect_fail_on_an_integrator_and_pass_on_a_decaying_state(toys, capsys):
    args = ["--no-config", "--pair", "h_in=h_out", "--calls", "60", "--drop", "10", "--reconnect", "20", "--burst", "30:5"]
    assert cli.main(["run", str(toys / "integrator.onnx"), *args]) == 1
    out = capsys.readouterr().out
    assert "chunk 10 dropped (skip): FAIL: never back within 0.001" in out and "cold start:" in out
    assert cli.main(["run", str(toys / "decay.onnx"), *args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    s = doc["streaming"]
    assert s["ok"] and s["state_bytes"] == 16 and s["latency"]["p50_us"] > 0
    assert [c["check"] for c in s["checks"]] == ["drop", "reconnect", "burst"]
    assert all(isinstance(c["recovery"], int) for c in s["checks"])


@pytest.mark.parametrize(
    "extra,message",
    [(["--burst", "59:5"], "--burst 59:5"), (["--streams", "1"], "--streams"), (["--burst", "a:b"], "K:N"), (["--drop", "59"], "--drop 59"),
     (["--long", "2"], "--long"), (["--wav", "x=missing.wav"], "--audio x=missing.wav: no such file"), (["--context", "nope=4"], "nope")],
)
def test_cli_bad_streaming_flags_exit_2(toys, capsys, extra, message):
    assert cli.main(["run", str(toys / "decay.onnx"), "--no-config", "--pair", "h_in=h_out", "--calls", "60", *extra]) == 2
    assert message in capsys.readouterr().err


# -- silero-vad, which behaves ------------------------------------------------------------------


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory):
    path = tmp_path_factory.mktemp("audio") / "speech.wav"
    return speechlike.write_wav(path, speechlike.speechlike(8.0))


@pytest.mark.realmodel
def test_silero_recovers_from_a_lost_chunk_and_a_burst_on_speech(silero_dir, speech_wav):
    samples, rate = speechlike.read_wav(speech_wav)
    assert rate == 16000
    sr = np.array(16000, np.int64)
    chunks = [{"input": samples[i : i + 512][None], "sr": sr} for i in range(0, len(samples) - 511, 512)]
    session = StatefulSession(silero_dir / "silero_vad.onnx", context={"input": 64})
    report = check_streaming(session, chunks, drop=40, reconnect=60, burst=(100, 10), long=300, tol=0.05)
    assert report.ok, streaming_to_text(report)
    assert report.check("drop").recovery <= 5 and report.check("burst").recovery <= 100
    # its LSTM remembers for long: a reconnecting client differs by far more than 0.05 at first, for seconds
    assert report.check("reconnect").departure["output"] > 0.2 and 20 <= report.check("reconnect").recovery <= 120
    assert report.state_bytes == 2 * 128 * 4 + 64 * 4  # the LSTM's h and c, and the 64 kept samples
    assert report.long.slots["state"].trend != "growing" and math.isfinite(report.long.slots["state"].peak_abs)


@pytest.mark.realmodel
def test_cli_streams_a_wav_file_into_silero(silero_dir, speech_wav, capsys):
    code = cli.main([
        "run", str(silero_dir / "silero_vad.onnx"), "--no-config", "--calls", "120", "--wav", f"input={speech_wav}",
        "--shape", "input=1,512", "--value", "sr=16000", "--context", "input=64", "--drop", "40", "--recovery-tol", "0.05",
        "--format", "json",
    ])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert doc["stream_length"] == 120 and doc["streaming"]["state_bytes"] == 1280
    assert doc["streaming"]["checks"][0]["ok"]


def test_speechlike_wav_round_trips_through_the_wave_module(tmp_path):
    x = speechlike.speechlike(1.0)
    y, rate = speechlike.read_wav(speechlike.write_wav(pathlib.Path(tmp_path) / "a.wav", x))
    assert rate == 16000 and len(y) == len(x)
    assert np.max(np.abs(y - x)) <= 0.5 / 32768 + 1e-9  # 16-bit rounding, nothing else


# -- many streams from one pool -----------------------------------------------------------------


def test_streams_served_by_a_pool_equal_their_solo_runs_batched_or_not():
    batched = check_streaming(StatefulSession(sm.lstm_b()), [{"x": np.full((1, 1, 3), v, np.float32)} for v in np.linspace(-1, 1, 12)], streams=6)
    serial = check_streaming(_session("decay"), _stream(12), streams=3)
    assert batched.isolation.ok and batched.isolation.batching == "batched" and batched.isolation.ort_calls == 12
    assert serial.isolation.ok and "static shape" in serial.isolation.batching and serial.isolation.ort_calls == 36
    assert batched.ok and "every stream equals its solo run" in streaming_to_text(batched)


def test_a_pool_that_leaks_rows_fails_the_isolation_check(monkeypatch):
    from rnnir.serving.pool.pool import SessionPool

    # every stream calls every tick, so the pool binds its state buffers whole (no gather): the leak is each
    # stream's input landing in its neighbour's row
    original = SessionPool._into_rows

    def shifted(self, rows, batch):
        moved, pick = original(self, rows, batch)
        return {name: a if self.layout.inputs[name] is None else np.roll(a, 1, axis=self.layout.inputs[name]) for name, a in moved.items()}, pick

    monkeypatch.setattr(SessionPool, "_into_rows", shifted)
    chunks = [{"x": np.full((1, 1, 3), v, np.float32)} for v in np.linspace(-1, 1, 12)]
    report = check_streaming(StatefulSession(sm.lstm_b()), chunks, streams=4)
    assert not report.isolation.ok and not report.ok
    assert "rows leak into each other" in streaming_to_text(report)
    # however many calls: with 7 or 8, streams started 7 (or 8) chunks apart would be fed the same chunks, and a
    # leak between two equal rows is invisible
    for calls in (7, 8):
        chunks = [{"x": np.full((1, 1, 3), v, np.float32)} for v in np.linspace(-1, 1, calls)]
        report = check_streaming(StatefulSession(sm.lstm_b()), chunks, streams=2)
        assert not report.isolation.ok and (report.isolation.streams, report.isolation.calls) == (2, calls), calls


def test_a_slot_trend_reads_as_the_multicall_health_line_plus_its_saturation():
    from rnnir.check.streaming import SlotTrend

    # |max| 2: float16's 65504 / 2 = 32752 times headroom; a quarter of the elements saturated at the end, half at the peak
    growing = SlotTrend("h", 10, "growing", 3.2, 0.1, 0.5, 2.0, 0.25, 0.5)
    tail = "h: growing over 10 calls (norm 0.1 -> 0.5, growth x3.2, |max| 2, saturated 25.0% (peak 50.0%), float16 headroom 3.28e+04x)"
    assert growing.summary() == "FAIL: " + tail  # growth fails a long run
    assert growing.summary(judge_growth=False) == tail  # ... not a burst, which is too short to tell a rise from a trend
    assert SlotTrend("c", 3, "constant", 1.0, 0.0, 0.0, 0.0, 0.0, 0.0).summary().endswith("saturated 0.0% (peak 0.0%), float16 headroom inf)")
