"""rnnir.testing (check_multicall): what the mutation run of testing.py found unpinned about the stream — the
defaults a caller gets (chunk sizes, seed, batch, the element limit), which axis is time, streams and generated
inputs a model leaves open (no declared shape, a scalar, a symbol only a constant input sizes), and the progress
callback, call by call.  Every expected number is worked out by hand on the seed recurrence
``h_t = 0.5 * h_{t-1} + x_t`` (see test_pinned_multicall.py) or read off the model built in the test.

Named for the module, so the mutation tool runs these first for its mutants (defaults and module constants are
mutated at import: only tests of a file named like the module run before the budget is spent)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.stream import StreamError, time_axes
from rnnir.runtime import OnnxRuntimeError, StatefulSession
from tests.check.test_multicall_seed import seed_rnn
from tests.check.test_multicall_stream import HALVES, SEED_INITS, build, extra_input_model, halving_plain, init, ones, rnn_node, shared, vi

F = TensorProto.FLOAT


# -- the defaults ------------------------------------------------------------------------------------


def test_the_default_chunk_sizes_are_1_7_and_64():
    # 65 steps: chunk 1 -> 65 calls; chunk 7 -> 9 full calls and one of 2 (10); chunk 64 -> one of 64 and one of 1 (2)
    report = check_multicall(shared(seed_rnn), {"x": np.zeros((65, 1, 1), np.float32)}, variants=["persistent"])
    assert report.chunk_sizes == [1, 7, 64]
    assert [(v.chunk, v.calls) for v in report.variants] == [(1, 65), (7, 10), (64, 2)]


def generated_means(**kw):
    """The per-call mean of y over a generated 3-step stream: y is h, so it follows the generated x."""
    return check_multicall(shared(seed_rnn), None, chunk_sizes=[1], length=3, variants=["persistent"], **kw).variant("persistent", 1).trace


def test_the_default_seed_is_0():
    default = generated_means()
    assert default == generated_means(seed=0)
    assert default != generated_means(seed=1)  # near miss: the seed does change the generated stream


def shared_batch():
    """The seed RNN with a symbolic batch B that the state shares: the generated x takes ``batch`` rows."""
    return build([rnn_node()], [vi("x", ["T", "B", 1]), vi("h0", [1, "B", 1])], [vi("y", None), vi("hn", [1, "B", 1])], SEED_INITS)


def test_the_default_batch_is_one_row():
    # x = 1 on every row: each row's h is 1, then 1.5; the L2 norm of n equal rows is sqrt(n) times one row's
    def norms(**kw):
        return check_multicall(shared(shared_batch), None, chunk_sizes=[1], length=2, input_values={"x": 1.0}, variants=["persistent"], **kw).health["h0"].norm

    assert norms() == [1.0, 1.5]
    assert norms(batch=4) == [2.0, 3.0]  # near miss: 4 rows


def big_input(elements: int):
    """The seed RNN plus an int8 input of ``elements`` elements that no node reads: generated as zeros, never computed on."""
    return build([rnn_node()], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1]), vi("big", [elements], TensorProto.INT8)],
                 [vi("y", None), vi("hn", [1, 1, 1])], SEED_INITS)


def test_the_default_element_limit_is_fifty_million():
    over = "refusing to generate input 'big' of shape (50000001,) (50000001 elements > max_elements=50000000)"
    with pytest.raises(StreamError, match=re.escape(over)):
        check_multicall(big_input(50_000_001), {"x": ones(2)}, chunk_sizes=[1], variants=["persistent"])
    # exactly at the limit: generated (zeros, noted) and the check runs
    report = check_multicall(big_input(50_000_000), {"x": ones(2)}, chunk_sizes=[1], variants=["persistent"])
    assert report.notes == ["generated input 'big' (int8) as zeros; pass it in stream= if zero is not a meaningful value"]
    assert report.variant("persistent", 1).trace == HALVES[:2]


def test_a_generated_scalar_is_one_element():
    # k is a scalar (rank 0) added to y: one element, so a limit of 1 lets it through, while x is given (not counted)
    report = check_multicall(extra_input_model([]), {"x": ones(2)}, chunk_sizes=[1], max_elements=1, input_values={"k": 2.0}, variants=["persistent"])
    assert report.variant("persistent", 1).trace == [3.0, 3.5]
    with pytest.raises(StreamError, match=re.escape("input 'k' of shape (2,) (2 elements > max_elements=1)")):  # near miss
        check_multicall(extra_input_model([2]), {"x": ones(2)}, chunk_sizes=[1], max_elements=1, variants=["persistent"])


# -- which axis is time --------------------------------------------------------------------------------


def test_the_traced_time_axis_is_kept_when_a_later_dim_is_named_like_time():
    # x feeds the RNN's X directly, so axis 0 is time; axis 1 (the RNN's batch) is called "frames", which no state
    # shares: the name must not move the time axis there
    m = build([rnn_node()], [vi("x", ["n", "frames", 1]), vi("h0", [1, 1, 1])], [vi("y", None), vi("hn", [1, 1, 1])], SEED_INITS)
    assert time_axes(StatefulSession(m)) == {"x": 0}


def echo_with_two_time_names():
    """The seed RNN plus k ["time", "seq", 4], read by no recurrent op: only its dim names can say which axis is time."""
    nodes = [rnn_node(), helper.make_node("ReduceMax", ["k"], ["peak"], axes=[2], keepdims=0)]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("k", ["time", "seq", 4]), vi("h0", [1, 1, 1])],
                 [vi("y", None), vi("peak", ["time", "seq"]), vi("hn", [1, 1, 1])], SEED_INITS)


def test_the_first_dim_named_like_time_is_the_time_axis():
    assert time_axes(StatefulSession(echo_with_two_time_names())) == {"x": 0, "k": 0}


def test_an_int_time_axis_leaves_an_input_without_a_declared_shape_unsplit():
    # k declares no shape: nothing says it has an axis 0 to split, so it is fed unchanged
    assert time_axes(StatefulSession(extra_input_model(None)), 0) == {"x": 0, "k": None}


def test_a_time_axis_beyond_a_shapeless_inputs_stream_is_refused():
    with pytest.raises(StreamError, match=re.escape("stream 'k' has shape (3,); the input has rank None with time axis 2")):
        check_multicall(extra_input_model(None), {"x": ones(3), "k": np.zeros(3, np.float32)}, time_axis={"x": 0, "k": 2})


def test_a_time_axis_declared_zero_is_not_a_static_call_length():
    # a declared 0 is no number of steps per call: the stream is chunked as for a dynamic axis, and onnxruntime's
    # refusal of a call that is not 0 steps long is what the caller gets (as an rnnir error, not an arithmetic one)
    m = build([rnn_node()], [vi("x", [0, 1, 1]), vi("h0", [1, 1, 1])], [vi("y", None), vi("hn", [1, 1, 1])], SEED_INITS)
    with pytest.raises(OnnxRuntimeError, match=re.escape("onnxruntime refused the call (x float32[1, 1, 1])")):
        check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent"])


# -- streams the model leaves open ----------------------------------------------------------------------


def test_a_shapeless_input_streams_in_calls_mode():
    # halving_plain with x declared without a shape: no time axis anywhere, so one frame per call along the stream's
    # first axis; h = 1, 1.5, 1.75
    m = halving_plain()
    m.graph.input[0].type.tensor_type.ClearField("shape")
    report = check_multicall(m, {"x": ones(3, (1,))}, variants=["persistent", "reinit"])
    assert (report.mode, report.stream_length) == ("calls", 3)
    assert report.variant("persistent", 1).trace == HALVES[:3]


def constant_sizes_generated():
    """One frame per call: hn = 0.5 h0 + x; out = g + k, where g ["N"] is given once and k ["N"] is generated."""
    nodes = [helper.make_node("Mul", ["h0", "half"], ["hh"]), helper.make_node("Add", ["hh", "x"], ["hn"]), helper.make_node("Add", ["g", "k"], ["out"])]
    return build(nodes, [vi("x", [1]), vi("g", ["N"]), vi("k", ["N"]), vi("h0", [1])], [vi("out", ["N"]), vi("hn", [1])], [init("half", [0.5])])


def test_in_calls_mode_a_constant_input_sizes_the_symbols_of_a_generated_one():
    # g is given with its own rank (no call axis): fed unchanged every call, and its N = 2 sizes k; out = (1, 3) + 1
    report = check_multicall(constant_sizes_generated(), {"x": ones(3, (1,)), "g": np.array([1.0, 3.0], np.float32)}, input_values={"k": 1.0})
    assert report.mode == "calls"
    assert report.variant("persistent", 1).trace == [3.0, 3.0, 3.0]


def constant_with_time():
    """The seed RNN plus g ["N"] (fed unchanged every call) and k ["N"] generated, g + k an output."""
    nodes = [rnn_node(), helper.make_node("Add", ["g", "k"], ["gk"])]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("g", ["N"]), vi("k", ["N"]), vi("h0", [1, 1, 1])],
                 [vi("y", None), vi("gk", ["N"]), vi("hn", [1, 1, 1])], SEED_INITS)


def test_a_constant_of_another_rank_sizes_no_symbol():
    # g declared ["N"] but given as a 2 x 5 array: its dims are not g's dims, so N stays unknown and k cannot be generated
    with pytest.raises(StreamError, match=re.escape("cannot generate input 'k': dim 0 (N) of [N] is unknown")):
        check_multicall(constant_with_time(), {"x": ones(2), "g": np.zeros((2, 5), np.float32)}, chunk_sizes=[1])
    # near miss: g given with its rank sizes N = 2
    report = check_multicall(constant_with_time(), {"x": ones(2), "g": np.zeros(2, np.float32)}, chunk_sizes=[1], input_values={"k": 1.0})
    assert report.variant("persistent", 1).trace == HALVES[:2]


def test_a_state_without_an_output_gets_no_dtype_note():
    # h0 has no paired output, so there is no state output whose dtype could differ from the input's
    m = build([rnn_node(outs=("y",))], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", ["T", 1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1])
    assert report.pairs == [("h0", None)]
    assert report.notes == []


# -- progress ------------------------------------------------------------------------------------------


def recorded(model, stream, **kw):
    calls: list[tuple[str, int, int]] = []
    check_multicall(model, stream, progress=lambda what, done, total: calls.append((what, done, total)), **kw)
    return calls


def test_progress_counts_every_call_of_every_variant_with_its_chunk():
    # 4 steps in chunks of 2: two calls per variant. The persistent run reports after each call; a broken variant
    # before each call (0 done) and once more after its last. One call over the whole stream is not counted.
    calls = recorded(shared(seed_rnn), {"x": ones(4)}, chunk_sizes=[2], variants=["persistent", "reinit", "stale"])
    assert calls == [
        ("persistent, chunk 2", 1, 2), ("persistent, chunk 2", 2, 2),
        ("reinit, chunk 2", 0, 2), ("reinit, chunk 2", 1, 2), ("reinit, chunk 2", 2, 2),
        ("stale, chunk 2", 0, 2), ("stale, chunk 2", 1, 2), ("stale, chunk 2", 2, 2),
    ]


def test_progress_in_calls_mode_names_no_chunk():
    calls = recorded(shared(halving_plain), {"x": ones(2, (1,))}, variants=["persistent", "stale"])
    assert calls == [("persistent", 1, 2), ("persistent", 2, 2), ("stale", 0, 2), ("stale", 1, 2), ("stale", 2, 2)]


def test_progress_names_the_chunk_size_when_the_last_call_is_shorter():
    # the label was the stream length divided by the number of calls: 10 steps in chunks of 7 said "chunk 5"
    calls = recorded(shared(seed_rnn), {"x": ones(10)}, chunk_sizes=[7], variants=["persistent"])
    assert calls == [("persistent, chunk 7", 1, 2), ("persistent, chunk 7", 2, 2)]

