"""Input context kept by the session (context={"input": 64}): hand-checked on a model that shows what it was
given, and on silero-vad against a loop written the way silero's own Python wrapper writes it (zeros before the
first chunk, x = cat(context, chunk), context = x[..., -64:]) on a WAV file made here."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from rnnir import StateError
from rnnir.runtime import StatefulSession
from rnnir.runtime.context import ContextKeeper, InputContext, parse_context
from rnnir.runtime.spec import IOSpec
from tests.support import speechlike
from tests.support import streaming_models as sm

PAIRS = {"h_in": "h_out"}


def _probe(size=2) -> StatefulSession:
    return StatefulSession(sm.context_probe(6), PAIRS, context={"x": size})


def _x(*values: float) -> np.ndarray:
    return np.array([values], np.float32)


def test_the_session_prepends_the_tail_of_the_previous_call():
    s = _probe()
    assert s.context == (InputContext("x", 2, 1),)  # the last axis: the model has no recurrent op to trace
    assert s.inputs["x"].shape == (1, 4)  # the caller feeds 4 steps; the model takes 6
    assert s.run({"x": _x(1, 2, 3, 4)})["seen"].tolist() == [[0, 0, 1, 2, 3, 4]]
    assert s.run({"x": _x(5, 6, 7, 8)})["seen"].tolist() == [[3, 4, 5, 6, 7, 8]]
    assert s.context_state["x"].tolist() == [[7, 8]]
    assert s.state_bytes == 4 + 2 * 4  # the [1, 1] float state and two kept samples


def test_reset_fork_save_and_load_treat_the_context_as_stream_state(tmp_path):
    s = _probe()
    s.run({"x": _x(1, 2, 3, 4)})
    twin = s.fork()
    fresh = s.fork(reset=True)
    assert twin.run({"x": _x(0, 0, 0, 0)})["seen"].tolist() == [[3, 4, 0, 0, 0, 0]]
    assert fresh.run({"x": _x(9, 9, 9, 9)})["seen"].tolist() == [[0, 0, 9, 9, 9, 9]]
    path = s.save_state(tmp_path / "s.state")
    s.reset()
    assert s.context_state == {}
    assert s.run({"x": _x(5, 5, 5, 5)})["seen"].tolist() == [[0, 0, 5, 5, 5, 5]]
    s.load_state(path)
    assert s.run({"x": _x(6, 6, 6, 6)})["seen"].tolist() == [[3, 4, 6, 6, 6, 6]]
    assert s.state["h_in"].tolist() == [[10.0 + 31.0]]  # 0+0+1+2+3+4 saved, then 3+4+6*4


def test_a_failed_call_keeps_the_previous_context():
    s = _probe()
    s.run({"x": _x(1, 2, 3, 4)})
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error for a wrong shape
        s.run({"x": np.ones((1, 5), np.float32)})
    assert s.context_state["x"].tolist() == [[3, 4]]


@pytest.mark.parametrize(
    "context,match",
    [({"nope": 2}, "not an input"), ({"h_in": 1}, "state input"), ({"x": 0}, "positive"), ({"x": 6}, "no room"),
     ({"x": (2, 5)}, "outside"), ({"x": "a"}, "integer")],
)
def test_bad_context_declarations_are_state_errors(context, match):
    with pytest.raises(StateError, match=match):
        StatefulSession(sm.context_probe(6), PAIRS, context=context)


def test_a_chunk_that_changes_shape_across_the_context_axis_is_refused():
    s = StatefulSession(sm.lstm_b(), context={"x": 1})  # along the LSTM's time axis, 0
    assert s.context == (InputContext("x", 1, 0),)
    s.run({"x": np.ones((2, 1, 3), np.float32)})
    with pytest.raises(StateError, match="reset"):
        s.run({"x": np.ones((2, 2, 3), np.float32)})


# -- silero-vad on audio, against its wrapper's loop --------------------------------------------


def _wrapper_way(path, samples: np.ndarray, keep_context: bool = True) -> list[float]:
    """silero_vad.utils_vad.OnnxWrapper.__call__, in numpy: the loop silero's users run."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros((1, 64), np.float32)
    probs = []
    for i in range(0, len(samples) - 511, 512):
        x = np.concatenate([context, samples[None, i : i + 512]], axis=1)
        out, state = sess.run(None, {"input": x, "state": state, "sr": np.array(16000, dtype=np.int64)})
        if keep_context:
            context = x[..., -64:]
        probs.append(float(out[0, 0]))
    return probs


def _audio_sources(tmp_path):
    made = speechlike.write_wav(tmp_path / "speechlike.wav", speechlike.speechlike(5.0))
    spoken = speechlike.espeak_wav(tmp_path / "espeak.wav")
    return [made] + ([spoken] if spoken is not None else [])


@pytest.mark.realmodel
@pytest.mark.parametrize("name", ["silero_vad.onnx", "silero_vad_16k_op15.onnx"])
def test_silero_with_context_equals_its_wrapper_loop_on_a_wav_file_and_differs_without(silero_dir, tmp_path, name):
    path = silero_dir / name
    for wav in _audio_sources(tmp_path):
        samples, rate = speechlike.read_wav(wav)
        assert rate == 16000
        wrapper = _wrapper_way(path, samples)
        s = StatefulSession(path, context={"input": 64})
        mine = [float(s.run({"input": samples[None, i : i + 512], "sr": np.array(16000)})["output"][0, 0])
                for i in range(0, len(samples) - 511, 512)]
        assert len(mine) == len(wrapper) == len(samples) // 512
        assert np.max(np.abs(np.array(mine) - wrapper)) <= 1e-5, wav.name
        dropped = _wrapper_way(path, samples, keep_context=False)  # zeros in place of the context every call
        assert np.max(np.abs(np.array(dropped) - wrapper)) > 0.01, wav.name
        assert max(wrapper) > 0.8 and min(wrapper) < 0.2  # the signal has speech and pauses for the VAD


@pytest.mark.realmodel
def test_a_static_silero_input_shows_the_callers_chunk_size(silero_dir):
    s = StatefulSession(silero_dir / "silero_vad_openvino_16k.onnx", context={"input": 64})
    assert s.inputs["input"].shape == (1, 512)
    out = s.run({"input": np.zeros((1, 512), np.float32)})
    assert out["output"].shape == (1, 1)


# -- parse_context and ContextKeeper on their own: byte bounds, dtypes, axes --------------------------------------


def _io(shape, dtype=np.float32):
    return IOSpec("x", None if dtype is None else np.dtype(dtype), shape)


def test_a_declared_context_is_bounded_by_its_bytes_exactly():
    axes = {"x": 1}
    for shape, dtype, nbytes in [  # one test: each row matters
        ((2, 16, 3), np.float32, 10 * 2 * 3 * 4),  # the context axis's own 16 is not counted: the context replaces it
        ((2, "T", 3), np.float64, 10 * 2 * 3 * 8),
        ((2, 16, 3), None, 10 * 2 * 3),  # no declared dtype: a byte a value
        ((0, 16, -1, None, "B"), np.float32, 10 * 4),  # 0, -1 (exporters' "unknown"), None and symbols count as 1
        (None, np.float32, 10 * 4),  # no declared shape: the size alone
    ]:
        inputs = {"x": _io(shape, dtype)}
        assert parse_context({"x": 10}, inputs, axes, set(), "m.onnx", max_bytes=nbytes) == (InputContext("x", 10, 1),)
        with pytest.raises(StateError, match=rf"^m\.onnx: the context kept for input 'x' would take {nbytes:,} bytes, over the {nbytes - 1:,}-byte"):
            parse_context({"x": 10}, inputs, axes, set(), "m.onnx", max_bytes=nbytes - 1)


def test_a_static_context_axis_of_one_step_leaves_no_room():
    with pytest.raises(StateError, match="takes 1 steps"):
        parse_context({"x": 1}, {"x": _io((4, 1))}, {}, set(), "m.onnx")
    assert parse_context({"x": 1}, {"x": _io((4, 0))}, {}, set(), "m.onnx") == (InputContext("x", 1, 1),)  # 0: unknown


def test_the_keeper_uses_the_declared_dtype_else_the_chunks():
    declared = ContextKeeper((InputContext("x", 2, 1),), {"x": np.dtype(np.float32)})
    feeds, pending = declared.extend({"x": np.ones((1, 3), np.float64)}, "m")
    assert feeds["x"].dtype == np.float32 and pending["x"].dtype == np.float32
    undeclared = ContextKeeper((InputContext("x", 2, 1),), {"x": None})
    feeds, pending = undeclared.extend({"x": np.ones((1, 3), np.int32)}, "m")
    assert feeds["x"].dtype == np.int32 and pending["x"].dtype == np.int32 and feeds["x"].tolist() == [[0, 0, 1, 1, 1]]


def test_the_keeper_without_an_axis_uses_the_chunks_last():
    keeper = ContextKeeper((InputContext("x", 1),), {})
    feeds, pending = keeper.extend({"x": np.arange(6, dtype=np.float32).reshape(2, 3)}, "m")
    assert feeds["x"].tolist() == [[0, 0, 1, 2], [0, 3, 4, 5]] and pending["x"].tolist() == [[2], [5]]


def test_the_keeper_bounds_the_first_zeros_by_the_real_chunk():
    specs = (InputContext("x", 10, 1),)
    chunk = np.ones((3, 4), np.float32)  # zeros of [3, 10] float32: 120 bytes
    ContextKeeper(specs, {"x": np.dtype(np.float32)}, max_bytes=120).extend({"x": chunk}, "m")
    with pytest.raises(StateError, match=r"^m: the context kept for input 'x' would take 120 bytes"):
        ContextKeeper(specs, {"x": np.dtype(np.float32)}, max_bytes=119).extend({"x": chunk}, "m")


def test_the_callers_shape_is_the_models_less_the_context():
    keeper = ContextKeeper((InputContext("x", 2, 1), InputContext("y", 2)), {})
    assert keeper.caller_shape("x", (4, 10, 3)) == (4, 8, 3)
    assert keeper.caller_shape("x", (4, "T", 3)) == (4, "T", 3)
    assert keeper.caller_shape("x", (4, 0, 3)) == (4, 0, 3)  # 0: an exporter's "unknown"
    assert keeper.caller_shape("x", None) is None
    assert keeper.caller_shape("y", (4, 10)) == (4, 10)  # no resolved axis: nothing to subtract from
    assert keeper.caller_shape("z", (4, 10)) == (4, 10)


def test_no_context_declared_is_an_empty_tuple():
    assert parse_context(None, {"x": _io((1, 4))}, {}, set(), "m") == () == parse_context({}, {"x": _io((1, 4))}, {}, set(), "m")


def test_axes_negative_missing_and_beyond_the_chunk():
    assert parse_context({"x": (2, -1)}, {"x": _io((1, 4))}, {}, set(), "m") == (InputContext("x", 2, 1),)
    with pytest.raises(StateError, match=r"declares no shape: give the context axis, e\.g\. context=\{'x': \(2, AXIS\)\}"):
        parse_context({"x": 2}, {"x": _io(None)}, {}, set(), "m")
    keeper = ContextKeeper((InputContext("x", 2, 2),), {})
    with pytest.raises(StateError, match=r"has shape \(1, 4\): no axis 2"):
        keeper.extend({"x": np.ones((1, 4), np.float32)}, "m")
    feeds, pending = keeper.extend({"y": 1}, "m")  # the call itself reports the missing input
    assert feeds == {"y": 1} and pending == {}
