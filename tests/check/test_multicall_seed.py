"""Multi-call checks issue 15 found unpinned, on the seed recurrence ``h_t = 0.5 * h_{t-1} + x_t`` whose every
number is computed by hand below: which call the stale variant first diverges at and by how much, a stream on which
re-initialising changes nothing, h and c swapped completely (not half), NaN against a number, a rank-1 time input."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.compare import max_abs_diff
from rnnir.check.multicall.report import Divergence
from rnnir.check.multicall.variants import HcSwap, apply_swaps

F = TensorProto.FLOAT


def seed_rnn(x_shape=("T", 1, 1), reshape=False) -> onnx.ModelProto:
    """``h_t = 0.5 * h_{t-1} + x_t``: an ONNX RNN with the identity activation (Affine 1, 0), hidden size 1."""
    nodes = []
    x = "x"
    inits = [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R")]
    if reshape:  # a rank-1 stream of samples, one time step each
        nodes.append(helper.make_node("Reshape", ["x", "shape"], ["x3"]))
        inits.append(numpy_helper.from_array(np.array([-1, 1, 1], np.int64), "shape"))
        x = "x3"
    nodes.append(
        helper.make_node("RNN", [x, "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    )
    graph = helper.make_graph(
        nodes,
        "seed",
        [helper.make_tensor_value_info("x", F, list(x_shape)), helper.make_tensor_value_info("h0", F, [1, 1, 1])],
        [helper.make_tensor_value_info("y", F, ["T", 1, 1, 1]), helper.make_tensor_value_info("hn", F, [1, 1, 1])],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def ones(n):
    return np.ones((n, 1, 1), np.float32)


# By hand, x = 1 at every step, one step per call (chunk 1), h starts at 0:
#   persistent h after calls 0..5: 1, 1.5, 1.75, 1.875, 1.9375, 1.96875
#   stale (call k starts from what call k-2 wrote; calls 0 and 1 from the initial 0):
#     call 0: 1 | call 1: 1 (vs 1.5: 0.5) | call 2: from 1 -> 1.5 (vs 1.75: 0.25) | call 3: from 1 -> 1.5 (vs 1.875: 0.375)
#     call 4: from 1.5 -> 1.75 (vs 1.9375: 0.1875) | call 5: from 1.5 -> 1.75 (vs 1.96875: 0.21875)
#   reinit (every call from 0): 1 at every call: differences 0, 0.5, 0.75, 0.875, 0.9375, 0.96875


def test_stale_variant_first_diverges_at_call_1_by_one_half_and_never_by_more():
    report = check_multicall(seed_rnn(), {"x": ones(6)}, chunk_sizes=[1])
    stale = report.variant("stale", 1)
    assert stale.first_divergence == Divergence(call=1, output="y", max_abs_diff=0.5, chunk=1)
    assert stale.max_abs_diff == 0.5
    assert stale.per_output == {"y": 0.5, "hn": 0.5}
    reinit = report.variant("reinit", 1)
    assert reinit.first_divergence == Divergence(call=1, output="y", max_abs_diff=0.5, chunk=1)
    assert reinit.max_abs_diff == 0.96875
    assert report.first_divergence == {"reinit": Divergence(1, "y", 0.5, 1), "stale": Divergence(1, "y", 0.5, 1)}
    assert report.persistent_matches_whole is True and report.status == "pass"
    # exact arithmetic (halves): chunked and whole agree exactly on every output, the final state included
    assert report.variant("persistent", 1).per_output == {"y": 0.0, "hn": 0.0}
    # a lost state shows from call 1: no note about calls before the onset
    assert not any("makes no difference" in n for n in report.notes)


def test_first_divergence_is_the_earliest_over_chunk_sizes():
    # chunk 2 (x = 1): persistent ends calls at 1.5, 1.875, 1.96875; reinit call 1 gives y = (1, 1.5) against
    # (1.75, 1.875): first at call 1, by 0.75. Chunk 1 diverges at call 1 too, by 0.5: the tie goes to the smaller chunk.
    report = check_multicall(seed_rnn(), {"x": ones(6)}, chunk_sizes=[2, 1])
    assert report.variant("reinit", 2).first_divergence == Divergence(1, "y", 0.75, 2)
    assert report.first_divergence["reinit"] == Divergence(1, "y", 0.5, 1)


def test_a_stream_on_which_reinitialising_changes_nothing_is_inconclusive():
    # x = 0 and h starts at 0: h stays 0 whatever happens between calls
    report = check_multicall(seed_rnn(), {"x": np.zeros((6, 1, 1), np.float32)}, chunk_sizes=[1, 2])
    assert report.first_divergence == {"reinit": None, "stale": None}
    assert report.revealing is False and report.status == "inconclusive" and not report.ok
    assert report.verdict.startswith("INCONCLUSIVE")
    assert report.variant("reinit", 1).note.startswith("re-initialised state gives the same outputs")


def test_activity_after_silence_is_revealing_from_the_onset_on():
    # x = 0, 0, 1, 1, ...: reinit equals persistent at calls 0-2 (h = 0, 0, 1), then 1 vs 1.5 at call 3
    x = np.array([0, 0, 1, 1, 1, 1], np.float32).reshape(6, 1, 1)
    report = check_multicall(seed_rnn(), {"x": x}, chunk_sizes=[1])
    assert report.first_divergence["reinit"] == Divergence(3, "y", 0.5, 1)
    assert report.status == "pass"
    assert any("before call 3" in n for n in report.notes)


def test_a_rank_1_time_input_is_split_along_its_only_axis():
    report = check_multicall(seed_rnn(x_shape=("T",), reshape=True), {"x": np.ones(6, np.float32)}, chunk_sizes=[2])
    assert report.mode == "time" and report.time_axes == {"x": 0}
    assert report.persistent_matches_whole is True
    assert report.variant("reinit", 2).first_divergence == Divergence(1, "y", 0.75, 2)


def test_a_time_named_last_axis_of_a_multi_axis_input_is_not_time():
    # x[1, "T"]: the last axis holds samples; with nothing else to go by, each call takes one frame (calls mode)
    m = seed_rnn(x_shape=(1, "T"), reshape=True)
    report = check_multicall(m, {"x": np.ones((4, 1, 3), np.float32)})
    assert report.mode == "calls" and report.time_axes == {"x": None}


# -- h and c swapped ---------------------------------------------------------------------------


def test_a_packed_swap_exchanges_both_slices_and_leaves_the_input_alone():
    state = {"state": np.array([[[1.0, 2.0]], [[3.0, 4.0]]], np.float32)}
    out = apply_swaps(state, [HcSwap(("state", 0), ("state", 1))])
    np.testing.assert_array_equal(out["state"], [[[3.0, 4.0]], [[1.0, 2.0]]])
    np.testing.assert_array_equal(state["state"], [[[1.0, 2.0]], [[3.0, 4.0]]])


def test_a_swap_of_two_slots_exchanges_both_whole_slots():
    state = {"h": np.full((1, 1, 2), 1.0, np.float32), "c": np.full((1, 1, 2), 2.0, np.float32), "other": np.zeros(3, np.float32)}
    out = apply_swaps(state, [HcSwap(("h", None), ("c", None))])
    assert out["h"].tolist() == [[[2.0, 2.0]]] and out["c"].tolist() == [[[1.0, 1.0]]] and out["other"].tolist() == [0.0, 0.0, 0.0]
    assert state["h"].tolist() == [[[1.0, 1.0]]]


def test_a_swap_between_a_slot_and_a_packed_slice_goes_both_ways():
    state = {"h": np.full(2, 5.0, np.float32), "pack": np.array([[0.0, 0.0], [7.0, 8.0]], np.float32)}
    out = apply_swaps(state, [HcSwap(("h", None), ("pack", 1))])
    assert out["h"].tolist() == [7.0, 8.0] and out["pack"].tolist() == [[0.0, 0.0], [5.0, 5.0]]


def test_places_of_different_shapes_are_not_swapped():
    state = {"h": np.ones((1, 2), np.float32), "c": np.zeros((1, 3), np.float32)}
    out = apply_swaps(state, [HcSwap(("h", None), ("c", None))])
    assert out["h"].tolist() == [[1.0, 1.0]] and out["c"].tolist() == [[0.0, 0.0, 0.0]]


# -- differences -------------------------------------------------------------------------------


MAX_DIFF_CASES = (
    ([1.0, 2.0], [1.0, 2.5], 0.5),
    ([np.nan, 1.0], [np.nan, 1.25], 0.25),  # NaN where both have NaN: equal there
    ([np.nan], [1.0], math.inf),  # NaN against a number: as different as can be
    ([1.0], [np.nan], math.inf),
    ([1.0, 2.0, 3.0], [1.0, 2.0], math.inf),  # different sizes
    ([[1.0, 2.0]], [1.0, 3.0], 1.0),  # same size, other shape: compared element by element
    ([], [], 0.0),
    ([np.inf], [np.inf], math.inf),  # inf - inf is no number: never "equal within tolerance"
    ([3], [1], 2.0),
)


def test_max_diff():
    # one test over every case (not parametrized): the mutation tool runs one parametrization per test function
    for a, b, expected in MAX_DIFF_CASES:
        with np.errstate(invalid="ignore"):  # inf - inf
            assert max_abs_diff(np.array(a), np.array(b)) == expected, (a, b)


def test_h_and_c_swapped_between_calls_diverges_from_call_1_on():
    # packed state[2,1,H] = (h, c) of one LSTM: call 0 starts from zeros in both runs, so it is identical; from call 1
    # the swapped run starts from (c, h), which differs (h = o * tanh(c) is not c)
    from tests.passes.test_verdicts_read_by_hand import packed

    x = np.random.default_rng(0).standard_normal((20, 1, 3)).astype(np.float32)  # the model takes 5 steps per call
    report = check_multicall(packed("split", 0), {"x": x}, chunk_sizes=[5], variants=["persistent", "hc-swapped"])
    swapped = report.variant("hc-swapped", 5)
    assert swapped.first_divergence is not None and swapped.first_divergence.call == 1
