"""StatefulSession as a drop-in onnxruntime.InferenceSession: run(output_names, input_feed, run_options),
get_inputs()/get_outputs() with the state hidden, and session.state read and set explicitly.

Oracle: the same model on a plain onnxruntime.InferenceSession, with the state fed back by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession

REPO = Path(__file__).resolve().parents[2]
FANOUT = str(REPO / "samples" / "lstm_fanout.onnx")  # x[T,1,3], h0/c0[1,1,5] -> y[T,1,1,5], hn, cn
CHUNKS = [np.random.default_rng(k).standard_normal((4, 1, 3)).astype(np.float32) for k in range(5)]


def hand_loop(chunks, start=None):
    """Every call's (y, hn, cn) with onnxruntime, feeding hn/cn back as h0/c0."""
    sess = ort.InferenceSession(FANOUT, providers=["CPUExecutionProvider"])
    h = np.zeros((1, 1, 5), np.float32) if start is None else start[0]
    c = np.zeros((1, 1, 5), np.float32) if start is None else start[1]
    out = []
    for x in chunks:
        y, h, c = sess.run(None, {"x": x, "h0": h, "c0": c})
        out.append((y, h, c))
    return out


def infer_with_onnxruntime_api(session, x):
    """Code written for onnxruntime.InferenceSession, unchanged."""
    name = session.get_inputs()[0].name
    (first,) = [o.name for o in session.get_outputs()][:1]
    return session.run([first], {name: x})[0]


def test_run_with_onnxruntimes_signature_returns_a_list_and_keeps_the_state():
    s = StatefulSession(FANOUT)
    expected = hand_loop(CHUNKS)
    for x, (y, _, _) in zip(CHUNKS, expected):
        got = s.run(None, {"x": x})
        assert isinstance(got, list) and len(got) == 1  # only y: hn/cn are the session's
        np.testing.assert_allclose(got[0], y, rtol=1e-6, atol=1e-6)
    # named outputs come back in the order asked, state outputs included when named
    s2 = StatefulSession(FANOUT)
    for x, (y, hn, cn) in zip(CHUNKS, expected):
        got_hn, got_y, got_cn = s2.run(["hn", "y", "cn"], {"x": x}, None)
        np.testing.assert_allclose(got_hn, hn, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got_y, y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got_cn, cn, rtol=1e-6, atol=1e-6)


def test_code_written_for_onnxruntime_runs_unchanged():
    plain = ort.InferenceSession(FANOUT, providers=["CPUExecutionProvider"])
    with pytest.raises(ValueError, match=r"Required inputs \(\['h0', 'c0'\]\) are missing"):
        infer_with_onnxruntime_api(plain, CHUNKS[0])  # on onnxruntime itself the caller must carry the state
    s = StatefulSession(FANOUT)
    got = [infer_with_onnxruntime_api(s, x) for x in CHUNKS]
    for g, (y, _, _) in zip(got, hand_loop(CHUNKS)):
        np.testing.assert_allclose(g, y, rtol=1e-6, atol=1e-6)


def test_get_inputs_and_outputs_hide_the_state_and_are_onnxruntimes_nodeargs():
    s = StatefulSession(FANOUT)
    plain = ort.InferenceSession(FANOUT, providers=["CPUExecutionProvider"])
    assert [(a.name, a.shape, a.type) for a in s.get_inputs()] == [("x", ["T", 1, 3], "tensor(float)")]
    assert [(a.name, a.shape, a.type) for a in s.get_outputs()] == [("y", ["T", 1, 1, 5], "tensor(float)")]
    assert type(s.get_inputs()[0]) is type(plain.get_inputs()[0])
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert s.get_modelmeta().graph_name == plain.get_modelmeta().graph_name


def test_dict_calls_keep_working_under_both_names():
    expected = hand_loop(CHUNKS[:3])
    s = StatefulSession(FANOUT)
    out = s.run({"x": CHUNKS[0]})  # run(feeds): a dict of the outputs get_outputs() lists; the state is the session's
    assert list(out) == ["y"]
    np.testing.assert_allclose(out["y"], expected[0][0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.state["h0"], expected[0][1], rtol=1e-6, atol=1e-6)  # kept, and readable
    out = s.run_dict({"x": CHUNKS[1]}, ["hn"])
    assert list(out) == ["hn"]
    np.testing.assert_allclose(out["hn"], expected[1][1], rtol=1e-6, atol=1e-6)
    t = StatefulSession(FANOUT)
    assert list(t.run({"x": CHUNKS[0]}, ["y"])) == ["y"] and list(t.run({"x": CHUNKS[1]}, outputs=["cn"])) == ["cn"]
    out = s.run_dict({"x": CHUNKS[2]})  # run_dict(feeds): every graph output, state included
    assert list(out) == ["y", "hn", "cn"]
    for got, want in zip(out.values(), expected[2]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_default_run_copies_no_state_out_and_survives_the_fast_path():
    """run(feeds) and run(None, feeds) over many calls (the pre-bound steady path after the first):
    the outputs equal the hand loop's, no state byte is copied out, and a returned array is the
    caller's own (the next calls do not overwrite it)."""
    chunks = CHUNKS + [np.random.default_rng(9 + k).standard_normal((4, 1, 3)).astype(np.float32) for k in range(5)]
    expected = hand_loop(chunks)
    for as_list in (False, True):
        s = StatefulSession(FANOUT)
        kept = []
        for x, (y, _, _) in zip(chunks, expected):
            got = s.run(None, {"x": x}) if as_list else s.run({"x": x})
            assert (type(got), len(got)) == ((list, 1) if as_list else (dict, 1))
            value = got[0] if as_list else got["y"]
            np.testing.assert_allclose(value, y, rtol=1e-6, atol=1e-6)
            assert s.stats.output_copy_bytes == 0 and s.stats.python_state_bytes == 0 or s.stats.calls == 1
            kept.append(value)
        for value, (y, _, _) in zip(kept, expected):  # still what each call returned
            np.testing.assert_allclose(value, y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(s.state["c0"], expected[-1][2], rtol=1e-6, atol=1e-6)


def test_run_options_reach_onnxruntime_and_a_terminated_call_leaves_the_state():
    s = StatefulSession(FANOUT)
    s.run(None, {"x": CHUNKS[0]})
    before = s.state
    stop = ort.RunOptions()
    stop.terminate = True  # onnxruntime refuses to run: proof that the options got there
    with pytest.raises(Exception, match="(?i)terminat"):
        s.run(None, {"x": CHUNKS[1]}, stop)
    after = s.state
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])
    ok = ort.RunOptions()
    ok.logid = "rnnir-test"
    (y,) = s.run(None, {"x": CHUNKS[1]}, ok)
    np.testing.assert_allclose(y, hand_loop(CHUNKS[:2])[1][0], rtol=1e-6, atol=1e-6)


def test_state_can_be_read_and_set_explicitly():
    expected = hand_loop(CHUNKS)
    s = StatefulSession(FANOUT)
    _, h2, c2 = expected[2]
    s.state = {"h0": h2.astype(np.float64), "c0": c2}  # float64 is converted to the slot's float32
    assert s.state["h0"].dtype == np.float32
    for x, (y, _, _) in zip(CHUNKS[3:], expected[3:]):  # continues exactly where call 2 left off
        np.testing.assert_allclose(s.run(None, {"x": x})[0], y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.state["h0"], expected[-1][1], rtol=1e-6, atol=1e-6)
    # one slot only: the other keeps its value
    t = StatefulSession(FANOUT)
    t.run(None, {"x": CHUNKS[0]})
    c_before = t.state["c0"]
    t.state = {"h0": np.zeros((1, 1, 5), np.float32)}
    np.testing.assert_array_equal(t.state["c0"], c_before)
    np.testing.assert_array_equal(t.state["h0"], np.zeros((1, 1, 5), np.float32))


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"hn": np.zeros((1, 1, 5), np.float32)}, r"\['hn'\] are not state inputs; the state inputs are \['c0', 'h0'\]"),
        ({"h0": np.zeros((1, 1, 4), np.float32)}, r"'h0' is declared \[1, 1, 5\], got shape \[1, 1, 4\]"),
        ({"h0": np.zeros((1, 5), np.float32)}, r"declared \[1, 1, 5\]"),
        ({"h0": np.array([["a"] * 5]).reshape(1, 1, 5)}, r"'h0' takes float32"),
        ([np.zeros((1, 1, 5))], "dict of state input name"),
    ],
)
def test_setting_a_bad_state_is_a_clear_error(bad, match):
    s = StatefulSession(FANOUT)
    with pytest.raises(StateError, match=match):
        s.state = bad


@pytest.mark.parametrize("warm", [None, ["y"]], ids=["fresh", "after-steady-calls"])
def test_bad_onnxruntime_style_calls_are_clear_errors(warm):
    s = StatefulSession(FANOUT)
    if warm is not None:  # the pre-bound path for run(["y"], feeds) is in place: the bad calls must not slip through it
        for x in CHUNKS[:3]:
            s.run(warm, {"x": x})
    with pytest.raises(FeedError, match="takes a dict of input name -> array as input_feed"):
        s.run(["y"], [CHUNKS[0]])
    with pytest.raises(FeedError, match="not the string 'y'"):
        s.run("y", {"x": CHUNKS[0]})
    with pytest.raises(FeedError, match="no output"):
        s.run(["nope"], {"x": CHUNKS[0]})


@pytest.mark.realmodel
def test_silero_vad_as_its_users_call_onnxruntime(silero_dir):
    """The silero-vad loop written for onnxruntime, minus the state it had to carry by hand."""
    path = str(silero_dir / "silero_vad.onnx")
    rng = np.random.default_rng(0)
    frames = [rng.uniform(-0.5, 0.5, (1, 576)).astype(np.float32) for _ in range(8)]
    sr = np.array(16000, dtype=np.int64)
    plain = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    expected = []
    for x in frames:
        prob, state = plain.run(None, {"input": x, "state": state, "sr": sr})
        expected.append(prob)
    s = StatefulSession(path)
    assert [a.name for a in s.get_inputs()] == ["input", "sr"] and [a.name for a in s.get_outputs()] == ["output"]
    for x, prob in zip(frames, expected):
        (got,) = s.run(None, {"input": x, "sr": sr})
        np.testing.assert_allclose(got, prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s.state["state"], state, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("native", [True, False], ids=["pybind-layer", "public-api"])
def test_the_pre_bound_path_follows_changing_chunk_lengths_and_feed_layouts(native):
    """Chunk lengths change from call to call (a new plan each time the shapes change), a feed arrives
    as a non-contiguous view or as float64, long chunks (over 8 KiB, bound instead of copied) come
    in a row (their output too large to copy: a new allocation each call): every call still equals the hand
    loop, and every array handed over keeps its values."""
    rng = np.random.default_rng(21)
    lengths = [1, 1, 1, 4, 4, 1, 7, 7, 7, 2, 1, 1, 2000, 2000, 2000, 2000, 3]
    chunks = [rng.standard_normal((t, 1, 3)).astype(np.float32) for t in lengths]
    expected = hand_loop(chunks)
    s = StatefulSession(FANOUT, native_binding=native, cast_inputs=True)  # call 10's float64: converted, not refused
    plans, returned = [], []
    for k, (x, (y, _, _)) in enumerate(zip(chunks, expected)):
        if k == 8:
            x = np.asfortranarray(np.broadcast_to(x, (7, 2, 3)))[:, :1, :]  # same values, not C-contiguous
            assert not x.flags.c_contiguous
        if k == 10:
            x = x.astype(np.float64)  # converted by the general path
        (got,) = s.run(None, {"x": x})
        np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-6, err_msg=f"call {k}")
        plans.append(s._steady)
        returned.append(got)
    np.testing.assert_allclose(s.state["h0"], expected[-1][1], rtol=1e-5, atol=1e-6)
    for k, (got, (y, _, _)) in enumerate(zip(returned, expected)):  # no later call wrote into an array handed over
        np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-6, err_msg=f"call {k}, read after the stream")
    # the calls that repeat the last call's shapes took the pre-bound path: the plan was not rebuilt
    assert plans[0] is plans[1] is plans[2] is not None and plans[12] is plans[13] is plans[14] is plans[15] is not None


@pytest.mark.realmodel
def test_silero_default_run_returns_the_probability_and_equals_the_hand_loop(silero_dir):
    """silero_vad.onnx (state [2, B, 128], a 0-d sr input): run(feeds) returns only "output"; the stream
    matches a plain onnxruntime loop feeding stateN back, through a batch change (after reset, as the
    state's batch is the stream's) and a change of rate and chunk length."""
    path = str(silero_dir / "silero_vad.onnx")
    plain = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    plan = [(1, 16000, 512)] * 4 + [(1, 8000, 256)] * 3 + [(2, 16000, 512)] * 3
    s = StatefulSession(path)
    state = None
    for k, (batch, rate, n) in enumerate(plan):
        x = (0.1 * rng.standard_normal((batch, n))).astype(np.float32)
        sr = np.array(rate, np.int64)
        if state is None or state.shape[1] != batch:
            if state is not None:
                s.reset()
            state = np.zeros((2, batch, 128), np.float32)
        want, state = plain.run(None, {"input": x, "state": state, "sr": sr})
        got = s.run({"input": x, "sr": sr})
        assert list(got) == ["output"]
        np.testing.assert_allclose(got["output"], want, rtol=1e-5, atol=1e-6, err_msg=f"call {k}")
        assert s.stats.output_copy_bytes == 0
    np.testing.assert_allclose(s.state["state"], state, rtol=1e-5, atol=1e-6)
