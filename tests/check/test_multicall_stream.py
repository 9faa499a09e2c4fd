"""check_multicall end to end on models small enough to compute by hand: how the stream is cut (time axis, calls
mode, static steps, sequence_lens), which variants run and why not, what the whole-stream oracle is compared with,
and the exact verdicts and notes.

The seed recurrence ``h_t = 0.5 * h_{t-1} + x_t`` (ONNX RNN, identity activation) with x = 1 at every step:
h = 1, 1.5, 1.75, 1.875, 1.9375, 1.96875 (``HALVES``); restarted every call it is 1, 1.5, ... from each call's start.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.report import Divergence
from rnnir.check.multicall.stream import StreamError
from rnnir.runtime import StatefulSession
from tests.check.test_multicall_seed import seed_rnn

F = TensorProto.FLOAT
HALVES = [1.0, 1.5, 1.75, 1.875, 1.9375, 1.96875]


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def build(nodes, inputs, outputs, inits=(), opset=14):
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def rnn_node(x="x", h0="h0", outs=("y", "hn"), seq="", **attrs):
    return helper.make_node(
        "RNN", [x, "W", "R", "", seq, h0], list(outs), hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0], **attrs
    )


SEED_INITS = (init("W", np.ones((1, 1, 1))), init("R", np.full((1, 1, 1), 0.5)))


def halving_plain():
    """Plain ops, one frame per call: hn = 0.5 * h0 + x, y = hn (x and h are one number)."""
    nodes = [helper.make_node("Mul", ["h0", "half"], ["hh"]), helper.make_node("Add", ["hh", "x"], ["hn"]), helper.make_node("Identity", ["hn"], ["y"])]
    return build(nodes, [vi("x", [1]), vi("h0", [1])], [vi("y", [1]), vi("hn", [1])], [init("half", [0.5])])


def lstm(inputs=("x", "h0", "c0"), outs=("y", "hn", "cn"), hidden=2, x_shape=("T", 1, 1), state=(1, 1, 2), zero=False, c_state=None):
    rng = np.random.default_rng(5)
    w = np.zeros((1, 4 * hidden, 1)) if zero else rng.standard_normal((1, 4 * hidden, 1))
    r = np.zeros((1, 4 * hidden, hidden)) if zero else 0.5 * rng.standard_normal((1, 4 * hidden, hidden))
    names = ["x", "W", "R", "", "", *inputs[1:]]
    node = helper.make_node("LSTM", names, list(outs), hidden_size=hidden)
    shapes = {"c0": c_state or state, "cn": c_state or state}
    graph_inputs = [vi("x", list(x_shape))] + [vi(n, list(shapes.get(n, state))) for n in dict.fromkeys(inputs[1:])]
    graph_outputs = [vi(outs[0], None)] + [vi(n, list(shapes.get(n, state))) for n in outs[1:]]
    return build([node], graph_inputs, graph_outputs, [init("W", w), init("R", r)])


def ones(n, shape=(1, 1)):
    return np.ones((n, *shape), np.float32)


def shared(builder, *args, **kw):
    """One StatefulSession per model for the whole file: check_multicall runs on forks of a session and leaves its
    state alone, and building the onnxruntime session was most of each test's time (the mutation tool runs the
    fastest covering tests first, within a time budget)."""
    key = f"{builder.__name__}{args!r}{sorted(kw.items())!r}"
    if key not in _SESSIONS:
        _SESSIONS[key] = StatefulSession(builder(*args, **kw), cast_state=True)
    return _SESSIONS[key]


_SESSIONS: dict[str, StatefulSession] = {}


def triples(report):
    return [(v.variant, v.chunk, v.calls, v.first_divergence) for v in report.variants]


# -- what is run, and the verdict ------------------------------------------------------------------


def test_a_passing_report_in_full():
    report = check_multicall(shared(seed_rnn), {"x": ones(6)}, chunk_sizes=[3, 1])
    assert triples(report) == [
        ("persistent", 3, 2, None),
        # chunk 3: call 1 restarts at 0: y = 1, 1.5, 1.75 against 1.875, 1.9375, 1.96875
        ("reinit", 3, 2, Divergence(1, "y", 0.875, 3)),
        ("stale", 3, 2, Divergence(1, "y", 0.875, 3)),  # calls 0 and 1 start from the initial state: like reinit
        ("persistent", 1, 6, None),
        ("reinit", 1, 6, Divergence(1, "y", 0.5, 1)),
        ("stale", 1, 6, Divergence(1, "y", 0.5, 1)),
    ]
    assert all(v.note == "" for v in report.variants)  # every broken variant diverges: no excuse needed
    assert report.variant("persistent", 3).reference == "whole"
    assert report.verdict == (
        "PASS: persistence holds: chunked calls equal one call over the whole stream; a lost state shows from call 1 on (output 'y')."
    )
    assert report.notes == []  # the RNN has no c: no hc-swapped note either
    assert (report.mode, report.stream_length, report.chunk_sizes, report.time_axes) == ("time", 6, [3, 1], {"x": 0})
    assert report.pairs == [("h0", "hn")] and report.whole_available and report.watched == "y"
    # health follows the longest persistent run (chunk 1, listed second): h after every call
    assert report.health["h0"].max == HALVES
    assert report.variant("persistent", 1).trace == HALVES  # the mean of y, call by call
    assert report.variant("reinit", 1).per_call == [0.0, 0.5, 0.75, 0.875, 0.9375, 0.96875]


def test_chunk_replaces_chunk_sizes_and_variants_selects_the_runs():
    report = check_multicall(shared(seed_rnn), {"x": ones(4)}, chunk_sizes=[1, 2], chunk=2, variants=["persistent", "reinit"])
    assert triples(report) == [("persistent", 2, 2, None), ("reinit", 2, 2, Divergence(1, "y", 0.75, 2))]


def test_chunk_sizes_must_be_positive():
    for sizes in [[], [0], [2, -1]]:
        with pytest.raises(StreamError, match=re.escape(f"chunk sizes must be positive integers, got {sizes}")):
            check_multicall(shared(seed_rnn), {"x": ones(4)}, chunk_sizes=sizes)


def test_an_unknown_variant_is_refused():
    with pytest.raises(StreamError, match=r"unknown variant\(s\) \['late'\]; known: persistent, reinit, stale, hc-swapped"):
        check_multicall(shared(seed_rnn), {"x": ones(4)}, variants=["persistent", "late"])


def test_a_model_without_state_runs_persistent_only_and_says_so():
    # no initial_h: every call starts the RNN from zero, so chunk 1 is y = 1 at every step against the whole call's HALVES
    m = build([rnn_node(h0="")], [vi("x", ["T", 1, 1])], [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(4)}, chunk_sizes=[1], variants=["persistent", "reinit", "stale"])
    assert triples(report) == [("persistent", 1, 4, Divergence(1, "y", 0.5, 1))]
    assert report.status == "no-state" and report.pairs == []
    assert report.verdict == (
        "NO STATE: the model has no state pairs, so nothing persists across calls. Chunked calls differ from one call over "
        "the whole stream: the model restarts every call, so it cannot stream."
    )
    assert report.health == {}


def test_a_model_without_state_that_streams_anyway():
    m = build([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["T", 2])], [vi("y", ["T", 2])])
    report = check_multicall(m, {"x": np.arange(-3, 3, dtype=np.float32).reshape(3, 2)}, chunk_sizes=[1])
    assert report.status == "no-state" and report.persistent_matches_whole is True
    assert report.verdict == "NO STATE: the model has no state pairs, so nothing persists across calls."


def test_a_state_never_written_back_fails_with_the_first_divergence_over_every_chunk():
    # hn is the incoming h0: every call restarts at 0. chunk 2: call 1 gives (1, 1.5) against (1.75, 1.875): 0.75;
    # chunk 1: call 1 gives 1 against 1.5: 0.5. Both at call 1: the smaller chunk is named.
    m = build([rnn_node(outs=("y",)), helper.make_node("Identity", ["h0"], ["hn"])], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])],
              [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(4)}, chunk_sizes=[2, 1])
    assert report.status == "fail" and report.persistent_matches_whole is False
    assert report.variant("persistent", 2).first_divergence == Divergence(1, "y", 0.75, 2)
    assert report.verdict == (
        "FAIL: chunked calls with persistence differ from one call over the whole stream (chunk 1, call 1, output 'y', "
        "max |diff| 0.5): the state carried between calls is not the state the model needs."
    )


def test_a_state_input_without_an_output_fails_and_every_broken_variant_says_why_it_equals():
    m = build([rnn_node(outs=("y",))], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", ["T", 1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(6)}, chunk_sizes=[1])
    assert report.pairs == [("h0", None)]
    assert report.verdict == (
        "FAIL: chunked calls with persistence differ from one call over the whole stream (chunk 1, call 1, output 'y', "
        "max |diff| 0.5): the state carried between calls is not the state the model needs. State input(s) 'h0' have no "
        "paired output: nothing writes them back, so every call restarts from the initial state (SD001)."
    )
    for name in ("reinit", "stale"):
        v = report.variant(name, 1)
        assert v.first_divergence is None
        assert v.note == "no state is ever written back (no state input has a paired output), so every variant restarts alike"


def test_a_reverse_rnn_fails_and_the_verdict_names_the_direction():
    m = build([rnn_node(direction="reverse")], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(4)}, chunk_sizes=[2])
    assert report.status == "fail"
    assert re.search(r"The model runs '[^']*RNN[^']*' backwards in time \(reverse/bidirectional\): its final state is the "
                     r"state at the chunk's start, which no later call can use \(SD006\)\.$", report.verdict)


def test_a_reverse_rnn_without_a_whole_call_is_noted():
    # a static time axis of 2 steps: no whole-stream call, so nothing shows the reverse direction is wrong
    m = build([rnn_node(direction="reverse")], [vi("x", [2, 1, 1]), vi("h0", [1, 1, 1])], [vi("y", [2, 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(6)}, chunk_sizes=[2])
    assert report.persistent_matches_whole is None
    assert any(re.match(r"the model runs '[^']*RNN[^']*' backwards in time: carrying its state across calls is not equivalent "
                        r"to one call over the whole stream \(SD006\), but no whole-stream oracle is here to show it$", n) for n in report.notes)
    # the broken variants show the state matters, not that the reverse state is the one to carry: never a PASS
    assert report.status == "inconclusive" and report.verdict.startswith(
        "NOT VERIFIED: the state matters (a lost state shows from call 1 on, output 'y'), but no whole-stream oracle is here"
    )
    assert "'h0' violated (slot 'h0': slice h0 (initial_h of RNN 'RNN(y)') persists" in report.verdict


def test_a_forward_rnn_gets_no_reverse_note():
    m = build([rnn_node()], [vi("x", [2, 1, 1]), vi("h0", [1, 1, 1])], [vi("y", [2, 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(6)}, chunk_sizes=[2])
    assert not any("backwards" in n for n in report.notes) and "backwards" not in report.verdict
    # near-miss of the reverse one: its slice is verified, so the broken variants' divergence is enough for a PASS
    assert report.status == "pass" and report.verdict.startswith(
        "PASS: no whole-stream oracle, so persistence is judged by the broken variants only; a lost state shows from call 1 on"
    )


def test_a_silent_stream_is_inconclusive_and_each_variant_says_why():
    report = check_multicall(shared(seed_rnn), {"x": np.zeros((6, 1, 1), np.float32)}, chunk_sizes=[1])
    assert report.status == "inconclusive" and report.revealing is False
    assert report.verdict == (
        "INCONCLUSIVE: re-initialising the state before every call gives the same outputs as keeping it, so this stream "
        "cannot reveal a persistence bug (the state never leaves its initial value, or the outputs do not depend on it: "
        "silent or zero input?). Use a stream with activity from the first chunk."
    )
    assert report.variant("reinit", 1).note == "re-initialised state gives the same outputs: the state never leaves its initial value on this stream"
    assert report.variant("stale", 1).note == (
        "the state one call stale equals the current state at every call: the state does not change between calls on this stream"
    )
    assert report.health["h0"].trend == "constant"


def test_a_stream_that_starts_late_is_noted_from_call_2_on():
    # x = 0 until the onset, then 1: h stays 0 until the onset call; re-initialising shows one call after it
    for onset, noted in [(0, False), (1, True)]:
        x = np.zeros((6, 1, 1), np.float32)
        x[onset:] = 1.0
        report = check_multicall(shared(seed_rnn), {"x": x}, chunk_sizes=[1], variants=["persistent", "reinit"])
        assert report.first_divergence["reinit"] == Divergence(onset + 1, "y", 0.5, 1)
        note = (
            f"chunk 1: re-initialising makes no difference before call {onset + 1}: the state stays at its initial value through "
            f"call {onset}, so a stream that starts with silence shows a lost or stale state only after the onset"
        )
        assert report.notes == ([note] if noted else [])


# -- h and c ---------------------------------------------------------------------------------------


def test_an_lstm_with_h_and_c_in_two_slots_runs_the_swap():
    report = check_multicall(shared(lstm), {"x": ones(4)}, chunk_sizes=[2])
    swapped = report.variant("hc-swapped", 2)
    assert swapped.first_divergence is not None and swapped.first_divergence.call == 1  # call 0 starts from zeros in both
    assert report.notes == []


def test_an_lstm_whose_h_and_c_stay_equal_cannot_show_a_swap():
    # zero weights, no bias, x = 0: every gate is 0.5 and g = 0, so c and h stay 0
    report = check_multicall(shared(lstm, zero=True), {"x": np.zeros((4, 1, 1), np.float32)}, chunk_sizes=[2])
    assert report.variant("hc-swapped", 2).note == "h and c are equal wherever they are swapped on this stream, so a swap is invisible"


def assert_not_swapped_and_noted_once(model):
    report = check_multicall(shared(*model), {"x": ones(4)}, chunk_sizes=[1, 2])
    assert [v.variant for v in report.variants] == ["persistent", "reinit", "stale"] * 2
    assert report.notes == ["hc-swapped not run: no pair's slices place h and c of one op where they could be swapped"]


def test_an_lstm_whose_h_and_c_are_one_state_is_not_swapped():
    # one state feeds both initial_h and initial_c: h and c are one place, a swap changes nothing
    assert_not_swapped_and_noted_once((lstm, ("x", "s", "s"), ("y", "s_out")))


def test_an_lstm_without_c_is_not_swapped():
    assert_not_swapped_and_noted_once((lstm, ("x", "h0"), ("y", "hn")))


def test_an_lstm_whose_h_and_c_are_declared_with_other_shapes_is_not_swapped():
    assert_not_swapped_and_noted_once((lstm, ("x", "h0", "c0"), ("y", "hn", "cn"), 2, ("T", 1, 1), (1, 1, 2), False, (1, "B", 2)))


def test_plain_op_state_is_not_swapped_and_says_why():
    report = check_multicall(shared(halving_plain), {"x": ones(5, (1,))})
    assert report.mode == "calls" and report.time_axes == {"x": None}
    assert [v.variant for v in report.variants] == ["persistent", "reinit", "stale"]
    assert "hc-swapped not run: the state of 'h0' is carried by plain ops, whose h and c the IR does not name" in report.notes


# -- calls mode --------------------------------------------------------------------------------------


def whole_halving(feeds):
    """The oracle of halving_plain over the whole stream: y per call stacked, and the final state."""
    h, ys = 0.0, []
    for x in feeds["x"][:, 0]:
        h = 0.5 * h + float(x)
        ys.append(h)
    return {"y": np.array(ys, np.float32).reshape(-1, 1), "hn": np.array([h], np.float32)}


def test_calls_mode_with_a_whole_stream_oracle_passes():
    report = check_multicall(shared(halving_plain), {"x": ones(6, (1,))}, chunk_sizes=[1], whole=whole_halving)
    assert report.notes == ["hc-swapped not run: the state of 'h0' is carried by plain ops, whose h and c the IR does not name"]
    assert report.persistent_matches_whole is True and report.status == "pass"
    assert report.variant("persistent", 1).per_output == {"y": 0.0, "hn": 0.0}
    assert report.variant("persistent", 1).trace == HALVES
    assert report.first_divergence == {"reinit": Divergence(1, "y", 0.5, 1), "stale": Divergence(1, "y", 0.5, 1)}
    assert report.stream_length == 6 and report.chunk_sizes == [1]


def test_calls_mode_chunk_sizes_do_not_apply_and_no_oracle_is_noted():
    report = check_multicall(shared(halving_plain), {"x": ones(6, (1,))}, chunk_sizes=[1, 7])
    assert report.notes[:2] == [
        "no input has a time axis: every call takes one frame, so chunk sizes [1, 7] do not apply (chunk = 1 frame)",
        "calls mode and no whole= oracle: persistence is judged by the broken variants only",
    ]
    assert report.chunk_sizes == [1] and report.persistent_matches_whole is None
    assert report.variant("persistent", 1).reference == "none"


def test_the_oracle_is_compared_call_by_call_and_the_earliest_divergence_wins():
    def oracle(feeds):
        out = whole_halving(feeds)
        out["y"][4] += 0.25  # wrong at call 4
        out["y"][2] -= 0.5  # and at call 2, by more
        out["hn"] = out["hn"] + 0.125  # the final state: the last call's, checked against it
        out["extra"] = np.zeros(3, np.float32)
        return {"hn": out["hn"], "extra": out["extra"], "y": out["y"]}

    report = check_multicall(shared(halving_plain), {"x": ones(6, (1,))}, whole=oracle)
    p = report.variant("persistent", 1)
    assert p.first_divergence == Divergence(2, "y", 0.5, 1)
    assert p.per_output == {"hn": 0.125, "y": 0.5}
    assert p.note == "oracle output 'extra' is not a model output: ignored"
    assert report.status == "fail" and "(chunk 1, call 2, output 'y', max |diff| 0.5)" in report.verdict


def test_a_final_state_that_differs_is_the_last_calls_divergence():
    def oracle(feeds):
        out = whole_halving(feeds)
        return {"hn": out["hn"] - 0.5, "y": out["y"]}

    p = check_multicall(shared(halving_plain), {"x": ones(3, (1,))}, whole=oracle).variant("persistent", 1)
    assert p.first_divergence == Divergence(2, "hn", 0.5, 1)


def test_an_oracle_output_that_cannot_be_cut_into_calls_is_not_compared():
    def oracle(feeds):
        return {"y": np.zeros(4, np.float32)}  # 4 values for 3 calls of one

    p = check_multicall(shared(halving_plain), {"x": ones(3, (1,))}, whole=oracle).variant("persistent", 1)
    assert p.first_divergence is None and p.per_output == {}
    assert p.note == "output 'y' has no time axis the chunks split: it cannot equal the whole call's, not compared"


def test_a_single_call_is_compared_with_the_oracle():
    report = check_multicall(shared(halving_plain), {"x": ones(1, (1,))}, whole=whole_halving)
    assert triples(report) == [("persistent", 1, 1, None), ("reinit", 1, 1, None), ("stale", 1, 1, None)]
    assert report.persistent_matches_whole is True
    assert report.variant("stale", 1).note == "fewer than 3 calls: a state one call stale cannot differ yet"


def test_a_constant_input_in_calls_mode_is_fed_every_call():
    # two inputs: x streamed (one frame per call), k given without the call axis, fed unchanged: hn = 0.5 h + x * k
    nodes = [helper.make_node("Mul", ["h0", "half"], ["hh"]), helper.make_node("Mul", ["x", "k"], ["xk"]),
             helper.make_node("Add", ["hh", "xk"], ["hn"]), helper.make_node("Identity", ["hn"], ["y"])]
    m = build(nodes, [vi("x", [1]), vi("k", [1]), vi("h0", [1])], [vi("y", [1]), vi("hn", [1])], [init("half", [0.5])])
    report = check_multicall(m, {"x": ones(3, (1,)), "k": np.array([2.0], np.float32)})
    assert report.variant("persistent", 1).trace == [2.0, 3.0, 3.5]
    assert report.stream_length == 3


# -- the stream -----------------------------------------------------------------------------------


def test_a_bare_array_feeds_the_one_streamed_input():
    report = check_multicall(shared(seed_rnn), ones(4), chunk_sizes=[1])
    assert report.variant("persistent", 1).trace == HALVES[:4]


def test_a_bare_array_is_refused_when_two_inputs_stream():
    m = build([helper.make_node("Add", ["x", "z"], ["xz"]), rnn_node(x="xz")], [vi("x", ["T", 1, 1]), vi("z", ["T", 1, 1]), vi("h0", [1, 1, 1])],
              [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    with pytest.raises(StreamError, match=r"a bare array needs exactly one streamed input; this model has \['x', 'z'\]: pass a dict"):
        check_multicall(m, ones(4), chunk_sizes=[1])
    with pytest.raises(StreamError, match=r"stream inputs disagree on the stream length: 'z' has 3, another has 4"):
        check_multicall(m, {"x": ones(4), "z": ones(3)}, chunk_sizes=[1])
    # the two streams add up: x + z = 2 at every step
    report = check_multicall(m, {"x": ones(2), "z": ones(2)}, chunk_sizes=[1])
    assert report.variant("persistent", 1).trace == [2.0, 3.0]


def test_a_stream_naming_something_else_is_refused():
    with pytest.raises(StreamError, match=r"stream names \['nope'\], which are not inputs the caller feeds \['x'\]$"):
        check_multicall(shared(seed_rnn), {"x": ones(4), "nope": ones(4)})


def test_a_time_stream_of_the_wrong_rank_is_refused():
    for shape in [(4, 1), (4, 1, 1, 1)]:
        with pytest.raises(StreamError, match=re.escape(f"stream 'x' has shape {shape}; the input has rank 3 with time axis 0")):
            check_multicall(shared(seed_rnn), {"x": np.ones(shape, np.float32)})


def test_a_calls_stream_of_the_wrong_rank_is_refused():
    for shape in [(4, 1, 1), (4, 1, 1, 1)]:
        with pytest.raises(StreamError, match=re.escape(f"stream 'x' has rank {len(shape)}; in calls mode it needs the input's rank 1 plus a leading call axis")):
            check_multicall(shared(halving_plain), {"x": np.ones(shape, np.float32)})


def test_the_length_of_a_generated_time_stream():
    cases = [
        ({"length": 5}, 5, 3),  # chunk 2: 2, 2, 1
        ({"calls": 4}, 8, 4),  # calls * the largest chunk
        ({}, 6, 3),  # three times the largest chunk
    ]
    for kw, length, calls in cases:
        report = check_multicall(shared(seed_rnn), None, chunk_sizes=[2, 1], **kw)
        assert report.stream_length == length, kw
        assert report.variant("persistent", 2).calls == calls and report.variant("persistent", 1).calls == length


def test_the_number_of_calls_of_a_generated_calls_stream():
    for kw, calls in [({"calls": 5}, 5), ({"length": 4}, 4), ({}, 48), ({"calls": 3, "length": 9}, 3)]:
        report = check_multicall(shared(halving_plain), None, **kw)
        assert report.stream_length == calls and report.variant("persistent", 1).calls == calls, kw


def test_an_empty_stream_is_refused():
    for kw in [{"length": 0}, {"calls": 0, "length": 0}]:
        with pytest.raises(StreamError, match=r"the stream is empty \(length 0\)"):
            check_multicall(shared(seed_rnn), None, **kw)


def test_an_empty_given_stream_is_refused():
    with pytest.raises(StreamError, match=r"the stream is empty \(length 0\)"):
        check_multicall(shared(seed_rnn), {"x": np.zeros((0, 1, 1), np.float32)})


def test_a_generated_stream_is_seeded():
    a = check_multicall(shared(seed_rnn), None, chunk_sizes=[1], length=4, seed=3).variant("persistent", 1).trace
    b = check_multicall(shared(seed_rnn), None, chunk_sizes=[1], length=4, seed=3).variant("persistent", 1).trace
    c = check_multicall(shared(seed_rnn), None, chunk_sizes=[1], length=4, seed=4).variant("persistent", 1).trace
    assert a == b and a != c
    # 0.5 * standard normal, through h = 0.5 h + x
    x = 0.5 * np.random.default_rng(3).standard_normal((4, 1, 1))
    h, want = 0.0, []
    for v in x.astype(np.float32).ravel():
        h = 0.5 * h + float(v)
        want.append(h)
    np.testing.assert_allclose(a, want, rtol=1e-6)


# -- time axes ----------------------------------------------------------------------------------------


def test_an_explicit_time_axis_per_input():
    # x is [1, T, 1] but nothing says so: time_axis={'x': 1} cuts along axis 1 (a Transpose feeds the RNN)
    m = build([helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]), rnn_node(x="xt")], [vi("x", [1, "n", 1]), vi("h0", [1, 1, 1])],
              [vi("y", ["n", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": np.ones((1, 4, 1), np.float32)}, chunk_sizes=[2], time_axis={"x": 1})
    assert report.time_axes == {"x": 1} and report.stream_length == 4
    assert report.variant("persistent", 2).trace == [1.25, 1.8125]  # mean of y: (1 + 1.5) / 2, (1.75 + 1.875) / 2
    report = check_multicall(m, {"x": np.ones((1, 4, 1), np.float32)}, chunk_sizes=[2], time_axis=1)
    assert report.time_axes == {"x": 1}
    with pytest.raises(StreamError, match=r"time_axis names \['h0'\], which are not \(non-state\) inputs \['x'\]"):
        check_multicall(m, None, time_axis={"h0": 0})


def test_an_int_time_axis_beyond_an_inputs_rank_leaves_it_constant():
    # x streams along axis 1, k (rank 1) has no axis 1: fed whole every call
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]), helper.make_node("Mul", ["xt", "k"], ["xk"]), rnn_node(x="xk")]
    m = build(nodes, [vi("x", [1, "n", 1]), vi("k", [1]), vi("h0", [1, 1, 1])], [vi("y", ["n", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": np.ones((1, 2, 1), np.float32), "k": np.array([2.0], np.float32)}, chunk_sizes=[1], time_axis=1)
    assert report.time_axes == {"x": 1, "k": None}
    assert report.variant("persistent", 1).trace == [2.0, 3.0]


def test_a_dim_named_like_time_is_the_time_axis_unless_a_state_shares_it():
    # plain ops, no recurrent op to trace: x ["frames", 1] is cut along "frames"; y = cumulative through hn = h0 + sum(x)
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "sx"], ["hn"]), helper.make_node("Identity", ["hn"], ["y"])]
    m = build(nodes, [vi("x", ["frames", 1]), vi("h0", [1])], [vi("y", [1]), vi("hn", [1])], opset=11)
    report = check_multicall(m, {"x": ones(4, (1,))}, chunk_sizes=[2])
    assert report.time_axes == {"x": 0} and report.mode == "time"
    assert report.variant("persistent", 2).trace == [2.0, 4.0]


def shared_frames():
    return build([helper.make_node("Add", ["h0", "x"], ["hn"]), helper.make_node("Identity", ["hn"], ["y"])],
                 [vi("x", ["frames", 1]), vi("h0", ["frames", 1])], [vi("y", ["frames", 1]), vi("hn", ["frames", 1])])


def test_a_time_name_the_state_shares_is_the_batch():
    # the same name on the state's dim is the batch the state shares, not time: one frame per call
    assert check_multicall(shared(shared_frames), {"x": ones(3, (1, 1))}, chunk_sizes=[1]).time_axes == {"x": None}


# -- static time axes and chunk sizes ---------------------------------------------------------------


def static_rnn(steps=2):
    return build([rnn_node()], [vi("x", [steps, 1, 1]), vi("h0", [1, 1, 1])], [vi("y", [steps, 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)


def test_a_static_time_axis_sets_the_chunk_and_drops_the_remainder():
    report = check_multicall(shared(static_rnn), {"x": ones(5)}, chunk_sizes=[1, 3])
    assert report.chunk_sizes == [2]
    assert report.notes == [
        "the model's time axis is static (2 steps per call): chunk size 2 used instead of [1, 3]",
        "the last 1 steps of the stream do not fill a call of 2 steps: not run",
        "the model's time axis is static, so one call cannot take the whole stream: persistence is judged by the broken variants only",
    ]
    assert report.variant("persistent", 2).calls == 2 and report.variant("persistent", 2).trace == [1.25, 1.8125]


def test_a_static_time_axis_given_its_own_chunk_says_nothing():
    report = check_multicall(shared(static_rnn), {"x": ones(4)}, chunk_sizes=[2])
    assert report.notes == [
        "the model's time axis is static, so one call cannot take the whole stream: persistence is judged by the broken variants only"
    ]


def test_a_stream_shorter_than_a_static_call_is_refused():
    with pytest.raises(StreamError, match=r"the stream has 1 steps, fewer than the 2 every call of this model takes"):
        check_multicall(shared(static_rnn), {"x": ones(1)})


def test_a_static_stream_of_exactly_one_call():
    assert check_multicall(shared(static_rnn), {"x": ones(2)}, chunk_sizes=[2]).variant("persistent", 2).calls == 1


def test_chunks_longer_than_the_stream_are_skipped():
    report = check_multicall(shared(seed_rnn), {"x": ones(3)}, chunk_sizes=[4, 3, 1])
    assert report.chunk_sizes == [3, 1]
    assert report.notes == ["chunk size 4 is longer than the stream (3 steps): skipped"]
    assert report.variant("persistent", 3).calls == 1
    with pytest.raises(StreamError, match=r"every chunk size \[4, 5\] is longer than the stream \(3 steps\)"):
        check_multicall(shared(seed_rnn), {"x": ones(3)}, chunk_sizes=[4, 5])


def test_the_last_chunk_of_a_dynamic_axis_is_shorter():
    report = check_multicall(shared(seed_rnn), {"x": ones(5)}, chunk_sizes=[2])
    p = report.variant("persistent", 2)
    assert p.calls == 3 and p.trace == [1.25, 1.8125, 1.9375] and p.first_divergence is None


# -- sequence_lens ------------------------------------------------------------------------------------


def seq_rnn():
    return build([rnn_node(seq="lens")], [vi("x", ["T", 1, 1]), vi("lens", [1], TensorProto.INT32), vi("h0", [1, 1, 1])],
                 [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)


def test_a_generated_sequence_lens_is_each_calls_length():
    # 5 steps in chunks of 2: lengths 2, 2, 1; a wrong length would stop the RNN early (y = 0 past it) or fail
    report = check_multicall(shared(seq_rnn), {"x": ones(5)}, chunk_sizes=[2])
    assert report.persistent_matches_whole is True
    assert report.variant("persistent", 2).trace == [1.25, 1.8125, 1.9375]
    assert report.notes == [
        "sequence_lens input 'lens' is fed each call's full length: bugs that need shorter sequences (SD008) stay hidden; pass it in stream= to test them"
    ]


def test_a_given_sequence_lens_is_fed_as_is():
    report = check_multicall(shared(seq_rnn), {"x": ones(4), "lens": np.array([1], np.int32)}, chunk_sizes=[2])
    # one step of two per call: y = (h, 0); h = 1, 1.5 -> means 0.5, 0.75; the whole call runs one step only
    assert report.variant("persistent", 2).trace == [0.5, 0.75]
    assert report.notes == []


# -- generated inputs ------------------------------------------------------------------------------


def extra_input_model(k_shape, k_dtype=F):
    """seed RNN plus an input k added to y (k_out = y + k): k is generated by the check."""
    nodes = [rnn_node(), helper.make_node("Cast", ["k"], ["kf"], to=F), helper.make_node("Add", ["y", "kf"], ["yk"])]
    return build(nodes, [vi("x", ["T", "B", 1]), vi("k", k_shape, k_dtype), vi("h0", [1, "B", 1])],
                 [vi("yk", None), vi("hn", [1, "B", 1])], SEED_INITS)


def test_a_generated_input_can_be_given_a_value():
    report = check_multicall(shared(extra_input_model, [1]), {"x": ones(2)}, chunk_sizes=[1], input_values={"k": 3.0})
    assert report.variant("persistent", 1).trace == [4.0, 4.5]


def test_a_generated_int_input_is_zeros_and_noted():
    report = check_multicall(shared(extra_input_model, [1], TensorProto.INT64), {"x": ones(2)}, chunk_sizes=[1])
    assert report.variant("persistent", 1).trace == [1.0, 1.5]
    assert report.notes == ["generated input 'k' (int64) as zeros; pass it in stream= if zero is not a meaningful value"]


def test_a_generated_input_takes_its_symbolic_dims_from_the_given_stream():
    # k [1, B, 1] with B = 3 from x: k + y broadcasts to 3 columns only when k's B is x's (else 1 and y's 3 ... both work),
    # so k is fed into a Concat with hn, which needs equal batches
    nodes = [rnn_node(), helper.make_node("Concat", ["hn", "k"], ["hk"], axis=2)]
    m = build(nodes, [vi("x", ["T", "B", 1]), vi("k", [1, "B", 1]), vi("h0", [1, "B", 1])], [vi("hk", [1, "B", 2]), vi("hn", [1, "B", 1])], SEED_INITS)
    report = check_multicall(m, {"x": np.ones((2, 3, 1), np.float32)}, chunk_sizes=[1], input_values={"k": 0.0})
    assert report.variant("persistent", 1).trace == [0.5, 0.75]  # mean of (h, 0) over 3 rows


def test_a_generated_input_takes_the_batch_option_for_an_unshared_batch_axis():
    # x ["T", "N", 1]: N is the RNN's batch axis and nothing else sizes it: batch=3 rows of ones, so the state keeps
    # 3 rows of h = 1, then 1.5: L2 norms sqrt(3) and 1.5 * sqrt(3)
    m = build([rnn_node()], [vi("x", ["T", "N", 1]), vi("h0", [1, "M", 1])], [vi("y", None), vi("hn", [1, "M", 1])], SEED_INITS)
    report = check_multicall(m, None, chunk_sizes=[1], length=2, batch=3, input_values={"x": 1.0})
    assert report.health["h0"].norm == pytest.approx([np.sqrt(3.0), 1.5 * np.sqrt(3.0)])


def test_input_shapes_size_a_generated_input():
    report = check_multicall(shared(extra_input_model, ["K"]), {"x": ones(2)}, chunk_sizes=[1], input_shapes={"k": [1]}, input_values={"k": 2.0})
    assert report.variant("persistent", 1).trace == [3.0, 3.5]


def test_a_negative_declared_dim_is_refused():
    # (a model declaring one is refused when it is loaded; a shape given for it can still say so)
    with pytest.raises(StreamError, match=r"input 'k' declares a negative dim -2 at axis 0"):
        check_multicall(shared(extra_input_model, ["K"]), {"x": ones(2)}, chunk_sizes=[1], input_shapes={"k": [-2]})


def test_a_shapeless_input_cannot_be_generated():
    with pytest.raises(StreamError, match=r"cannot generate input 'k': it declares no shape; pass it in stream="):
        check_multicall(shared(extra_input_model, None), {"x": ones(2)}, chunk_sizes=[1])


def test_an_unknown_dim_names_the_axis_and_the_shape():
    with pytest.raises(StreamError, match=r"cannot generate input 'k': dim 1 \(K\) of \[1, K\] is unknown; pass the input in stream= or give its shape"):
        check_multicall(shared(extra_input_model, [1, "K"]), {"x": ones(2)}, chunk_sizes=[1])


def test_the_element_limit_counts_every_generated_element():
    # 8 steps of [1, 1] = 8 elements for x: refused at 7, allowed at 8
    with pytest.raises(StreamError, match=r"refusing to generate input 'x' of shape \(8, 1, 1\) \(8 elements > max_elements=7\)"):
        check_multicall(shared(seed_rnn), None, chunk_sizes=[1], length=8, max_elements=7)
    assert check_multicall(shared(seed_rnn), None, chunk_sizes=[1], length=8, max_elements=8).stream_length == 8


# -- state dtype ------------------------------------------------------------------------------------


def test_a_state_output_of_another_dtype_is_converted_and_noted():
    nodes = [rnn_node(outs=("y", "hn32")), helper.make_node("Cast", ["hn32"], ["hn"], to=TensorProto.DOUBLE)]
    m = build(nodes, [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1], TensorProto.DOUBLE)], SEED_INITS)
    report = check_multicall(m, {"x": ones(4)}, chunk_sizes=[1])
    assert report.notes == [
        "state output 'hn' is float64 but state input 'h0' takes float32: every variant converts it between calls, as a caller "
        "would have to (SD005); the rounding shows against the whole call"
    ]
    assert report.status == "pass" and report.variant("persistent", 1).trace == HALVES[:4]


# -- when there is no whole-stream call ---------------------------------------------------------------


def test_a_session_with_input_context_has_no_whole_stream_oracle():
    # one step of context: each call sees the previous call's last x first (a zero before the first call).
    # call 0: x = 0, 1, 1 from h = 0: y = 0, 1, 1.5 (mean 2.5 / 3); call 1: x = 1, 1, 1 from 1.5: 1.75, 1.875, 1.9375
    session = StatefulSession(seed_rnn(), context={"x": 1})
    report = check_multicall(session, {"x": ones(6)}, chunk_sizes=[2], variants=["persistent", "reinit"])
    assert report.notes == [
        "an input context is declared: chunked calls see overlapping input that one whole call does not, so there is no whole-stream oracle"
    ]
    assert report.variant("persistent", 2).reference == "none" and report.persistent_matches_whole is None
    assert report.variant("persistent", 2).trace[:2] == pytest.approx([2.5 / 3, 5.5625 / 3], abs=1e-7)
    # re-initialising clears the context too: every call is call 0 again
    assert report.variant("reinit", 2).trace == pytest.approx([2.5 / 3] * 3, abs=1e-7)


def test_a_whole_stream_call_that_fails_is_noted_and_the_broken_variants_judge():
    # the Reshape takes exactly 2 steps although x's time axis is dynamic: chunks of 2 run, the whole stream cannot
    nodes = [helper.make_node("Reshape", ["x", "two"], ["x2"]), rnn_node(x="x2")]
    m = build(nodes, [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", None), vi("hn", [1, 1, 1])],
              [*SEED_INITS, init("two", [2, 1, 1], np.int64)])
    report = check_multicall(m, {"x": ones(6)}, chunk_sizes=[2])
    (note,) = report.notes
    assert note.startswith("one call over the whole stream failed (") and note.endswith("); persistence judged by the broken variants only")
    assert report.whole_available is False and report.status == "pass"
    assert report.variant("persistent", 2).trace == [1.25, 1.8125, 1.953125]


# -- calls mode: generated inputs -----------------------------------------------------------------------


def test_a_sequence_lens_input_in_calls_mode_is_an_ordinary_generated_input():
    # time_axis={} for every input: one [2, 1, 1] frame per call; lens is generated like any input (here: 2 per call)
    # x = 1: call 0 gives h = 1, 1.5 (mean 1.25); call 1 goes on from 1.5: 1.75, 1.875
    report = check_multicall(shared(seq_rnn), {"x": ones(2, (2, 1, 1))}, chunk_sizes=[1], time_axis={"x": None, "lens": None}, input_values={"lens": 2})
    assert report.mode == "calls"
    assert report.notes == ["calls mode and no whole= oracle: persistence is judged by the broken variants only"]
    assert report.variant("persistent", 1).trace == [1.25, 1.8125]


def test_in_calls_mode_a_generated_input_takes_its_symbols_from_a_frame_of_the_stream():
    # x ["B", 1] streamed as [calls, B, 1] with B = 3; g ["B", 1] is generated, and Concat needs the same B
    nodes = [helper.make_node("Mul", ["h0", "half"], ["hh"]), helper.make_node("Add", ["hh", "x"], ["hn"]),
             helper.make_node("Concat", ["hn", "g"], ["y"], axis=1)]
    m = build(nodes, [vi("x", ["B", 1]), vi("g", ["B", 1]), vi("h0", ["B", 1])], [vi("y", ["B", 2]), vi("hn", ["B", 1])], [init("half", [0.5])])
    report = check_multicall(m, {"x": ones(2, (3, 1))}, input_values={"g": 0.0})
    assert report.variant("persistent", 1).trace == [0.5, 0.75]  # mean of (h, 0) over 3 rows: h = 1, 1.5


def test_a_zero_dim_is_unknown_not_negative():
    # ONNX exporters write dim_value 0 for "unknown": it asks for the input like any unknown dim
    with pytest.raises(StreamError, match=re.escape("cannot generate input 'k': dim 0 (?) of [0] is unknown")):
        check_multicall(shared(extra_input_model, ["K"]), {"x": ones(2)}, chunk_sizes=[1], input_shapes={"k": [0]})


# -- more inputs than the streamed one --------------------------------------------------------------------


def halving_with_default():
    """halving_plain, with ``half`` a graph input whose initializer is its default (an optional input)."""
    m = halving_plain()
    m.graph.input.insert(1, vi("half", [1]))
    return m


def test_an_optional_input_keeps_its_default_and_a_bare_array_skips_it():
    report = check_multicall(shared(halving_with_default), ones(6, (1,)), chunk_sizes=[1])
    assert shared(halving_with_default).optional_inputs == {"half"}
    assert report.variant("persistent", 1).trace == HALVES  # half = 0.5, its default: not generated, not streamed


def test_a_bare_array_feeds_the_input_with_a_time_axis_not_another_one():
    report = check_multicall(shared(extra_input_model, [1]), ones(2), chunk_sizes=[1], input_values={"k": 3.0})
    assert report.time_axes == {"x": 0, "k": None}
    assert report.variant("persistent", 1).trace == [4.0, 4.5]


def shapeless_x():
    m = seed_rnn()
    m.graph.input[0].type.tensor_type.ClearField("shape")
    return m


def test_a_time_input_without_a_declared_shape_is_cut_like_a_dynamic_one():
    report = check_multicall(shared(shapeless_x), {"x": ones(4)}, chunk_sizes=[2])
    assert report.time_axes == {"x": 0} and report.chunk_sizes == [2]
    assert report.variant("persistent", 2).trace == [1.25, 1.8125]


def test_a_static_time_axis_of_one_step():
    report = check_multicall(shared(static_rnn, 1), {"x": ones(3)}, chunk_sizes=[2])
    assert report.chunk_sizes == [1]
    assert report.notes[0] == "the model's time axis is static (1 steps per call): chunk size 1 used instead of [2]"
    assert report.variant("persistent", 1).trace == HALVES[:3]


def test_three_calls_of_a_silent_stream_are_enough_for_stale_to_show():
    report = check_multicall(shared(seed_rnn), {"x": np.zeros((3, 1, 1), np.float32)}, chunk_sizes=[1])
    assert report.variant("stale", 1).note == (
        "the state one call stale equals the current state at every call: the state does not change between calls on this stream"
    )


def test_two_calls_are_too_few_for_stale():
    report = check_multicall(shared(seed_rnn), {"x": np.zeros((2, 1, 1), np.float32)}, chunk_sizes=[1])
    assert report.variant("stale", 1).note == "fewer than 3 calls: a state one call stale cannot differ yet"


def test_the_swapped_run_starts_each_call_from_the_previous_calls_h_and_c_exchanged():
    # oracle: onnxruntime run call by call, h and c fed back in each other's place
    import onnxruntime as ort

    x = np.random.default_rng(2).standard_normal((4, 1, 1)).astype(np.float32)
    sess = ort.InferenceSession(lstm().SerializeToString(), providers=["CPUExecutionProvider"])
    h = c = np.zeros((1, 1, 2), np.float32)
    want = []
    for k in range(4):
        y, hn, cn = sess.run(None, {"x": x[k : k + 1], "h0": h, "c0": c})
        want.append(float(y.astype(np.float64).mean()))
        h, c = cn, hn
    report = check_multicall(shared(lstm), {"x": x}, chunk_sizes=[1], variants=["persistent", "hc-swapped"])
    np.testing.assert_allclose(report.variant("hc-swapped", 1).trace, want, rtol=1e-6)


def test_health_follows_the_first_of_equally_long_runs():
    # 4 steps in chunks of 3 (3 + 1) and of 2 (2 + 2): two calls each; the first listed is kept.
    # chunk 3 ends its calls at h = 1.75 and 1.875 (chunk 2 would give 1.5, 1.875)
    report = check_multicall(shared(seed_rnn), {"x": ones(4)}, chunk_sizes=[3, 2], variants=["persistent"])
    assert report.health["h0"].max == [1.75, 1.875]


def test_the_default_chunk_sizes():
    report = check_multicall(shared(seed_rnn), {"x": np.zeros((64, 1, 1), np.float32)}, variants=["persistent"])
    assert report.chunk_sizes == [1, 7, 64] and [v.calls for v in report.variants] == [64, 10, 1]


def test_the_traced_time_axis_wins_over_a_time_like_name():
    # x ["n", "length", 1] feeds the RNN directly: its time axis is 0 whatever axis 1 is called
    m = build([rnn_node()], [vi("x", ["n", "length", 1]), vi("h0", [1, "length", 1])], [vi("y", None), vi("hn", [1, "length", 1])], SEED_INITS)
    assert check_multicall(m, {"x": ones(2)}, chunk_sizes=[1], variants=["persistent"]).time_axes == {"x": 0}


def seq_rnn_batch():
    return build([rnn_node(seq="lens")], [vi("x", ["T", "B", 1]), vi("lens", ["B"], TensorProto.INT32), vi("h0", [1, "B", 1])],
                 [vi("y", None), vi("hn", [1, "B", 1])], SEED_INITS)


def test_a_generated_sequence_lens_takes_the_batch_of_the_stream():
    report = check_multicall(shared(seq_rnn_batch), {"x": np.ones((3, 2, 1), np.float32)}, chunk_sizes=[2])
    assert report.persistent_matches_whole is True
    assert report.variant("persistent", 2).trace == [1.25, 1.75]


def test_a_state_left_unwritten_beside_a_written_one_does_not_excuse_the_variants():
    # zero LSTM on silence: nothing ever changes; h0 is written back, c0 is not
    report = check_multicall(shared(lstm, ("x", "h0", "c0"), ("y", "hn"), 2, ("T", 1, 1), (1, 1, 2), True),
                             {"x": np.zeros((4, 1, 1), np.float32)}, chunk_sizes=[1], variants=["persistent", "reinit"])
    assert report.pairs == [("h0", "hn"), ("c0", None)]
    assert report.variant("reinit", 1).note == "re-initialised state gives the same outputs: the state never leaves its initial value on this stream"


def test_a_reverse_rnn_that_matches_the_whole_call_gets_no_reverse_note():
    m = build([rnn_node(direction="reverse")], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": np.zeros((4, 1, 1), np.float32)}, chunk_sizes=[2])
    assert report.persistent_matches_whole is True and report.status == "inconclusive"
    assert not any("backwards" in n for n in report.notes)


def test_a_generated_unshared_batch_is_one_row_by_default():
    m = build([rnn_node()], [vi("x", ["T", "N", 1]), vi("h0", [1, "M", 1])], [vi("y", None), vi("hn", [1, "M", 1])], SEED_INITS)
    report = check_multicall(m, None, chunk_sizes=[1], length=2, input_values={"x": 1.0}, variants=["persistent"])
    assert report.health["h0"].norm == [1.0, 1.5]


def shapeless_state():
    m = seed_rnn()
    m.graph.input[1].type.tensor_type.ClearField("shape")
    m.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "h0"))  # its default gives the shape
    return m


def test_a_state_without_a_declared_shape_is_checked_from_its_default():
    report = check_multicall(shared(shapeless_state), {"x": ones(3)}, chunk_sizes=[1], variants=["persistent", "reinit"])
    assert report.status == "pass" and report.variant("persistent", 1).trace == HALVES[:3]
