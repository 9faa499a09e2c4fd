"""check_multicall: whole / chunked+persistent / re-initialised / one call stale / h-c swapped.

Expected values come from docs/design.md's hand-checkable recurrences, from the models'
construction (a model built to drop or swap its state must fail), and from
silero-vad's sequence model as the whole-stream oracle of the streaming files.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.report import report_to_text
from rnnir.check.multicall.stream import StreamError
from rnnir.runtime import StatefulSession
from tests.support import realmodels as rm

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits, opset=14) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def linear_rnn(wh: float = 0.5) -> onnx.ModelProto:
    """docs/design.md's ``h_t = wh * h_{t-1} + x_t`` as an ONNX RNN with an identity activation."""
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1,
                            activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    return _model(
        [node],
        [helper.make_tensor_value_info("x", F, ["T", "B", 1]), helper.make_tensor_value_info("h0", F, [1, "B", 1])],
        [helper.make_tensor_value_info("y", F, ["T", 1, "B", 1]), helper.make_tensor_value_info("hn", F, [1, "B", 1])],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"),
         numpy_helper.from_array(np.full((1, 1, 1), wh, np.float32), "R")],
    )


def lstm(hidden=4, inputs=3, *, write_back="fanout", seed=0) -> onnx.ModelProto:
    """x, h0, c0 -> y, hn, cn.  ``write_back``: ``fanout`` (correct), ``swapped`` (hn <- Y_c, cn <- Y_h)
    or ``passthrough`` (hn/cn return the incoming state: nothing is ever written back)."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((0.5 * rng.standard_normal((1, 4 * hidden, inputs))).astype(np.float32), "W"),
             numpy_helper.from_array((0.5 * rng.standard_normal((1, 4 * hidden, hidden))).astype(np.float32), "R"),
             numpy_helper.from_array((0.1 * rng.standard_normal((1, 8 * hidden))).astype(np.float32), "B")]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y", "Yh", "Yc"], hidden_size=hidden)]
    h_src, c_src = {"fanout": ("Yh", "Yc"), "swapped": ("Yc", "Yh"), "passthrough": ("h0", "c0")}[write_back]
    nodes += [helper.make_node("Identity", [h_src], ["hn"]), helper.make_node("Identity", [c_src], ["cn"])]
    state = [1, "B", hidden]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", F, ["T", "B", inputs]),
         helper.make_tensor_value_info("h0", F, state), helper.make_tensor_value_info("c0", F, state)],
        [helper.make_tensor_value_info("y", F, ["T", 1, "B", hidden]),
         helper.make_tensor_value_info("hn", F, state), helper.make_tensor_value_info("cn", F, state)],
        inits,
    )


def steps(*xs: float) -> dict[str, np.ndarray]:
    return {"x": np.asarray(xs, np.float32).reshape(-1, 1, 1)}


# -- docs/design.md's seed recurrence -----------------------------------------------------------------


def test_seed_recurrence_persistence_matches_the_whole_call_and_reinit_diverges_at_call_1():
    report = check_multicall(linear_rnn(), steps(1, 0, 2), chunk_sizes=[1])
    assert report.persistent_matches_whole is True
    assert report.status == "pass" and report.ok
    reinit = report.first_divergence["reinit"]
    assert reinit.call == 1  # h = 1, 0.5, 2.25 kept vs 1, 0, 2 restarted
    assert report.variant("reinit", 1).max_abs_diff == pytest.approx(0.5)
    assert report.variant("stale", 1).per_output["hn"] == pytest.approx(0.5)  # 1, 0, 2.5 vs 1, 0.5, 2.25


def test_every_chunk_size_is_compared_with_the_whole_call():
    report = check_multicall(linear_rnn(), steps(*np.linspace(-1, 1, 20)), chunk_sizes=[1, 3, 7])
    assert [v.chunk for v in report.variants if v.variant == "persistent"] == [1, 3, 7]
    assert all(v.reference == "whole" and not v.diverges for v in report.variants if v.variant == "persistent")
    assert all(v.diverges for v in report.variants if v.variant in ("reinit", "stale"))


def test_a_silent_stream_cannot_reveal_a_persistence_bug_and_the_report_says_so():
    report = check_multicall(linear_rnn(), steps(*[0.0] * 12), chunk_sizes=[1, 4])
    assert report.status == "inconclusive" and not report.ok
    assert not report.revealing
    assert "cannot reveal" in report.verdict
    assert all(not v.diverges and v.note for v in report.variants if v.variant in ("reinit", "stale"))


def test_a_stream_that_starts_with_silence_reveals_a_lost_state_only_after_the_onset():
    report = check_multicall(linear_rnn(), steps(0, 0, 0, 0, 1, 0, 0), chunk_sizes=[1])
    assert report.ok
    assert report.first_divergence["reinit"].call == 5  # the onset is call 4; its state is first needed at call 5
    assert any("onset" in n and "call 5" in n for n in report.notes)


def test_a_growing_state_is_reported_as_growing_and_a_contracting_one_as_bounded():
    x = steps(*[1.0] * 40)
    growing = check_multicall(linear_rnn(1.1), x, chunk_sizes=[1]).health["h0"]
    assert growing.trend == "growing" and growing.growth > 2
    assert growing.norm[-1] == pytest.approx(sum(1.1**k for k in range(40)), rel=1e-4)
    bounded = check_multicall(linear_rnn(0.5), x, chunk_sizes=[1]).health["h0"]
    assert bounded.trend == "bounded" and bounded.peak_abs == pytest.approx(2.0, rel=1e-4)  # 1 / (1 - 0.5)
    assert growing.fp16_headroom < bounded.fp16_headroom


# -- models built to be broken fail; correct ones pass -----------------------------------------


def test_a_model_that_never_writes_its_state_back_fails():
    report = check_multicall(lstm(write_back="passthrough"), chunk_sizes=[4])
    assert report.persistent_matches_whole is False and report.status == "fail"
    assert "differ from one call over the whole stream" in report.verdict


def test_a_state_input_without_a_paired_output_fails_and_the_verdict_says_why():
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y"], hidden_size=1)
    model = _model(
        [node],
        [helper.make_tensor_value_info("x", F, ["T", 1, 1]), helper.make_tensor_value_info("h0", F, [1, 1, 1])],
        [helper.make_tensor_value_info("y", F, ["T", 1, 1, 1])],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "R")],
    )
    report = check_multicall(model, chunk_sizes=[2])
    assert report.pairs == [("h0", None)]
    assert report.status == "fail" and "'h0' have no paired output" in report.verdict


def test_a_model_that_swaps_h_and_c_fails():
    report = check_multicall(lstm(write_back="swapped"), chunk_sizes=[4])
    assert report.status == "fail"


def test_a_correct_lstm_passes_and_every_broken_variant_diverges():
    report = check_multicall(lstm(), chunk_sizes=[1, 5])
    assert report.status == "pass"
    assert {v.variant for v in report.variants} == {"persistent", "reinit", "stale", "hc-swapped"}
    assert all(d is not None for d in report.first_divergence.values())


# -- PyTorch exports -----------------------------------------------------------------------------

STATEFUL = [n for n in rm.TORCH_MODELS if rm.TORCH_STATE_PAIRS[n] and n != "bilstm_stream"]
LSTMS = {"lstm_stream", "lstm_packed_state", "lstm_batch_first"}


@pytest.mark.realmodel
@pytest.mark.parametrize("name", STATEFUL)
def test_torch_export_chunked_persistent_equals_whole_and_every_broken_variant_diverges(name):
    calls = rm.torch_calls(name)
    x = calls["full_in_x"]  # PyTorch's own 12-step input
    report = check_multicall(str(rm.torch_models_dir() / f"{name}.ts.onnx"), {"x": x}, chunk_sizes=[1, 4, 5])
    assert report.persistent_matches_whole is True, report_to_text(report)
    assert report.status == "pass"
    broken = {v.variant for v in report.variants} - {"persistent"}
    assert broken == ({"reinit", "stale", "hc-swapped"} if name in LSTMS else {"reinit", "stale"})
    assert all(v.diverges for v in report.variants if v.variant in broken)


@pytest.mark.realmodel
def test_torch_batch_first_lstm_is_chunked_along_axis_1():
    report = check_multicall(str(rm.torch_models_dir() / "lstm_batch_first.ts.onnx"), chunk_sizes=[3])
    assert report.time_axes == {"x": 1}


@pytest.mark.realmodel
def test_packed_state_swap_uses_the_slices_h_at_0_and_c_at_1():
    from rnnir.check.multicall.variants import hc_swaps

    s = StatefulSession(str(rm.torch_models_dir() / "lstm_packed_state.ts.onnx"))
    swaps = hc_swaps(s)
    assert [(sw.a, sw.b) for sw in swaps] == [(("state", 0), ("state", 1))]


@pytest.mark.realmodel
def test_bidirectional_lstm_cannot_be_chunked_and_the_report_names_the_reverse_direction():
    report = check_multicall(str(rm.torch_models_dir() / "bilstm_stream.ts.onnx"), chunk_sizes=[4])
    assert report.status == "fail" and report.persistent_matches_whole is False
    assert "SD006" in report.verdict


@pytest.mark.realmodel
def test_static_time_axis_export_is_chunked_by_its_static_length_without_a_whole_call():
    report = check_multicall(str(rm.torch_models_dir() / "lstm_stream.dynamo.onnx"), chunk_sizes=[1, 7], length=12)
    assert report.chunk_sizes == [4] and not report.whole_available
    assert report.persistent_matches_whole is None and report.status == "pass"
    assert any("static" in n for n in report.notes)


@pytest.mark.realmodel
def test_a_stateless_model_is_reported_as_having_no_state():
    report = check_multicall(str(rm.torch_models_dir() / "gru_encoder_stateless.ts.onnx"), chunk_sizes=[4])
    assert report.status == "no-state" and report.pairs == []
    assert "cannot stream" in report.verdict  # chunking restarts it: chunked != whole


# -- the samples -------------------------------------------------------------------------------

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples"


def _expected_status(name: str) -> str:
    """What onnxruntime can show of a sample, from how it is broken (its expected.json and metadata)."""
    expected = json.loads((SAMPLES / f"{name}.expected.json").read_text())
    if not expected["pairs"]:
        return "no-state"  # nothing for the runtime to persist (sd010_constant_init: SD010, it cannot stream)
    if expected["correct"]:
        return "pass"
    if name == "sd008_last_step_seqlens":
        return "pass"  # needs sequences shorter than the call; a generated stream feeds full lengths (noted)
    return "fail"  # the bug is in the graph onnxruntime runs


@pytest.mark.parametrize("name", sorted(p.stem for p in SAMPLES.glob("*.onnx")))
def test_every_sample_gets_the_verdict_its_construction_implies(name):
    report = check_multicall(str(SAMPLES / f"{name}.onnx"), chunk_sizes=[1, 4])
    assert report.status == _expected_status(name), report_to_text(report)
    if report.status == "pass":
        assert report.persistent_matches_whole in (True, None)
        assert all(v.diverges or v.note for v in report.variants if v.variant != "persistent")
    if name == "sd008_last_step_seqlens":
        assert any("SD008" in n for n in report.notes)
    if name == "sd005_fp16_state":
        assert any("SD005" in n for n in report.notes)


# -- generated streams ---------------------------------------------------------------------------


def test_a_generated_stream_follows_the_model_input_types():
    report = check_multicall(linear_rnn(), None, chunk=4, calls=5)
    assert report.stream_length == 20 and report.chunk_sizes == [4]
    assert report.variant("persistent", 4).calls == 5


def test_generating_a_huge_input_is_refused():
    big = _model(
        [helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1)],
        [helper.make_tensor_value_info("x", F, ["T", 1, 4_000_000]), helper.make_tensor_value_info("h0", F, [1, 1, 1])],
        [helper.make_tensor_value_info("y", F, ["T", 1, 1, 1]), helper.make_tensor_value_info("hn", F, [1, 1, 1])],
        [numpy_helper.from_array(np.zeros((1, 1, 4_000_000), np.float32), "W"),
         numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "R")],
    )
    with pytest.raises(StreamError, match="refusing to generate"):
        check_multicall(big, None, chunk_sizes=[64])


def test_generating_an_input_with_an_unknown_dim_asks_for_the_stream():
    odd = _model(
        [helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1)],
        [helper.make_tensor_value_info("x", F, ["T", 1, "features"]), helper.make_tensor_value_info("h0", F, [1, 1, 1])],
        [helper.make_tensor_value_info("y", F, ["T", 1, 1, 1]), helper.make_tensor_value_info("hn", F, [1, 1, 1])],
        [numpy_helper.from_array(np.zeros((1, 1, 2), np.float32), "W"),
         numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "R")],
    )
    with pytest.raises(StreamError, match="unknown; pass the input in stream="):
        check_multicall(odd, None, chunk_sizes=[2])


def test_a_stream_naming_a_state_input_is_refused():
    with pytest.raises(StreamError, match="state inputs come from the slots"):
        check_multicall(linear_rnn(), {"x": steps(1, 2)["x"], "h0": np.zeros((1, 1, 1), np.float32)})


def test_a_session_that_aliases_its_outputs_is_checked_on_private_copies():
    session = StatefulSession(linear_rnn(), alias_outputs=True)
    report = check_multicall(session, steps(1, 0, 2, 1, 3), chunk_sizes=[1])
    assert report.ok
    assert report.first_divergence["reinit"].call == 1 and report.first_divergence["stale"].call == 1  # never at call 0
    assert report.variant("reinit", 1).per_output["hn"] == pytest.approx(1.125)  # kept 1, .5, 2.25, 2.125 vs 1, 0, 2, 1


def test_a_program_is_checked_like_its_model():
    report = check_multicall(rnnir.load(linear_rnn()), steps(1, 0, 2), chunk_sizes=[1])
    assert report.ok


# -- rendering -----------------------------------------------------------------------------------


def test_report_renders_as_text_and_as_json():
    report = check_multicall(linear_rnn(), steps(*[0.0] * 6), chunk_sizes=[1, 2])
    text = report_to_text(report)
    assert text.splitlines()[0].endswith(report.verdict)
    assert "reinit" in text and "state health" in text
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["status"] == "inconclusive" and doc["ok"] is False
    assert doc["first_divergence"]["reinit"] is None
    assert {v["variant"] for v in doc["variants"]} == {"persistent", "reinit", "stale"}
    assert doc["health"]["h0"]["fp16_headroom"] == "inf"  # JSON has no infinity


# -- silero-vad ----------------------------------------------------------------------------------

STREAMING = ["silero_vad.onnx", "silero_vad_16k_op15.onnx", "silero_vad_op18_ifless.onnx", "silero_vad_openvino_16k.onnx"]


@pytest.fixture(scope="module")
def frames() -> np.ndarray:
    return (0.1 * np.random.default_rng(7).standard_normal((24, 1, 576))).astype(np.float32)


def _sequence_oracle(silero_dir):
    """silero_vad_16k_sequence.onnx over all frames in one call, in the streaming models' output names."""
    seq = StatefulSession(str(silero_dir / "silero_vad_16k_sequence.onnx"))

    def whole(stream):
        out = seq.fork(reset=True).run_dict({"input": stream["input"][:, 0, :]})
        return {"output": out["speech_probs"], "stateN": np.concatenate([out["hn"], out["cn"]])}

    return whole


@pytest.mark.realmodel
@pytest.mark.parametrize("name", STREAMING)
def test_silero_streaming_model_equals_the_sequence_model_and_every_broken_variant_diverges(silero_dir, frames, name):
    stream = {"input": frames}
    if "sr" in StatefulSession(str(silero_dir / name)).inputs:
        stream["sr"] = np.array(16000, np.int64)  # fed unchanged every call
    report = check_multicall(str(silero_dir / name), stream, whole=_sequence_oracle(silero_dir))
    assert report.mode == "calls" and report.stream_length == 24
    assert report.persistent_matches_whole is True, report_to_text(report)
    assert all(v.diverges for v in report.variants if v.variant != "persistent"), report_to_text(report)
    assert report.ok
    run = {v.variant for v in report.variants}
    # op18's LSTM is written as plain ops: recognised as a cell, so its h and c slices are named too
    assert run == {"persistent", "reinit", "stale", "hc-swapped"}


@pytest.mark.realmodel
def test_silero_sequence_model_chunked_equals_whole(silero_dir, frames):
    report = check_multicall(str(silero_dir / "silero_vad_16k_sequence.onnx"), {"input": frames[:, 0, :]}, chunk_sizes=[1, 7])
    assert report.mode == "time" and report.time_axes == {"input": 0}
    assert report.persistent_matches_whole is True and report.ok
    assert all(v.diverges for v in report.variants if v.variant != "persistent")


@pytest.mark.realmodel
def test_silero_with_other_weights_differs_from_the_sequence_oracle(silero_dir, frames):
    """silero_vad_half.onnx has its own weights: the oracle check must be able to say "differs"."""
    report = check_multicall(str(silero_dir / "silero_vad_half.onnx"), {"input": frames}, whole=_sequence_oracle(silero_dir))
    assert report.persistent_matches_whole is False
    alone = check_multicall(str(silero_dir / "silero_vad_half.onnx"), {"input": frames})
    assert alone.persistent_matches_whole is None and alone.ok  # judged by its broken variants only
