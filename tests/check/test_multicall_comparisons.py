"""rnnir.testing (check_multicall): what the mutation run of testing.py found unpinned about the comparisons and the
report — a whole-stream oracle whose outputs cannot be cut into the calls, a final-state difference after an
earlier one, where h and c may be swapped (a partial or two-level packed place, a packed h with a
slot c, two ops reading one h and c), the output a trace follows, and how the text lists the differences.

Expected numbers are worked out by hand on the seed recurrence ``h_t = 0.5 * h_{t-1} + x_t`` (see
test_pinned_multicall.py), or computed by onnxruntime directly, call by call, for the LSTMs.  Named for the module,
so the mutation tool runs these first for its mutants."""

from __future__ import annotations

import math
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.report import Divergence, report_to_text
from tests.check.test_multicall_seed import seed_rnn
from tests.check.test_multicall_stream import SEED_INITS, build, init, ones, rnn_node, shared, static_rnn, vi

H = 2  # hidden size of the LSTMs below
_RNG = np.random.default_rng(5)
LSTM_W = init("W", _RNG.standard_normal((1, 4 * H, 1)))
LSTM_R = init("R", 0.5 * _RNG.standard_normal((1, 4 * H, H)))


def ints(name, value):
    return init(name, value, np.int64)


# -- the whole-stream oracle ----------------------------------------------------------------------------
# seed_rnn on x = 1, 1, 1 in chunks of 1: y = 1, 1.5, 1.75 (shape [T, 1, 1, 1]), final hn = 1.75


def whole_seed(y_steps=(1.0, 1.5, 1.75), hn=1.75, y_shape=None):
    y = np.array(y_steps, np.float32).reshape(y_shape or (len(y_steps), 1, 1, 1))
    return lambda feeds: {"y": y, "hn": np.full((1, 1, 1), hn, np.float32)}


def test_a_final_state_difference_does_not_replace_an_earlier_divergence():
    # y is off by 0.25 at call 1; the final state is off by 1 (the last call's, call 2): the first divergence stays call 1
    report = check_multicall(shared(seed_rnn), {"x": ones(3)}, chunk_sizes=[1], whole=whole_seed((1.0, 1.75, 1.75), hn=2.75), variants=["persistent"])
    p = report.variant("persistent", 1)
    assert p.first_divergence == Divergence(1, "y", 0.25, 1)
    assert p.per_output == {"y": 0.25, "hn": 1.0}
    assert report.status == "fail" and "(chunk 1, call 1, output 'y', max |diff| 0.25)" in report.verdict


NOT_CUT = "output 'y' has no time axis the chunks split: it cannot equal the whole call's, not compared"


def test_an_oracle_output_of_a_higher_rank_is_not_compared():
    # y stacked along a fifth axis: the steps are on an axis the calls' y (rank 4) do not have
    report = check_multicall(shared(seed_rnn), {"x": ones(3)}, chunk_sizes=[1], whole=whole_seed(y_shape=(1, 1, 1, 1, 3)), variants=["persistent"])
    p = report.variant("persistent", 1)
    assert p.note == NOT_CUT and p.per_output == {"hn": 0.0}
    assert report.persistent_matches_whole is True


def test_an_oracle_output_one_step_longer_than_the_stream_is_not_compared():
    # 4 steps of y for a 3-step stream: the calls' 3 steps do not cut it, even though its other dims match
    report = check_multicall(shared(seed_rnn), {"x": ones(3)}, chunk_sizes=[1], whole=whole_seed((1.0, 1.5, 1.75, 9.0)), variants=["persistent"])
    p = report.variant("persistent", 1)
    assert p.note == NOT_CUT and p.per_output == {"hn": 0.0}


def test_an_oracle_output_over_steps_no_call_runs_is_not_compared():
    # static_rnn takes 2 steps per call: a 5-step stream runs 2 calls (4 steps); the oracle's y has all 5 steps,
    # which the 4 steps the calls return cannot cover
    halves5 = (1.0, 1.5, 1.75, 1.875, 1.9375)
    report = check_multicall(shared(static_rnn), {"x": ones(5)}, chunk_sizes=[2], whole=whole_seed(halves5, hn=1.875), variants=["persistent"])
    p = report.variant("persistent", 2)
    assert p.calls == 2 and p.note == NOT_CUT and p.per_output == {"hn": 0.0}


def test_an_oracle_output_whose_other_dims_differ_is_not_compared():
    # y with 2 features per step where the model's y has 1: the steps line up, the values cannot
    y = np.array([[1.0, 0.0], [1.5, 0.0], [1.75, 0.0]], np.float32).reshape(3, 1, 1, 2)
    report = check_multicall(shared(seed_rnn), {"x": ones(3)}, chunk_sizes=[1], whole=lambda feeds: {"y": y, "hn": np.full((1, 1, 1), 1.75, np.float32)},
                             variants=["persistent"])
    p = report.variant("persistent", 1)
    assert p.note == NOT_CUT and p.per_output == {"hn": 0.0}
    assert report.persistent_matches_whole is True


# -- where h and c are swapped --------------------------------------------------------------------------


NOT_SWAPPED = ["hc-swapped not run: no pair's slices place h and c of one op where they could be swapped"]


def swap_not_run(model):
    report = check_multicall(model, {"x": ones(3)}, chunk_sizes=[1])
    return [v.variant for v in report.variants] == ["persistent", "reinit", "stale"] and report.notes == NOT_SWAPPED


def batch_row_of_a_packed_state():
    """state [2, 2, H]: h and c of batch row 0 (state[:, 0:1] split along axis 0) feed the LSTM; row 1 passes through."""
    nodes = [
        helper.make_node("Slice", ["state", "i0", "i1", "i1"], ["row0"]),
        helper.make_node("Split", ["row0", "sizes"], ["h0", "c0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["y", "yh", "yc"], hidden_size=H),
        helper.make_node("Concat", ["yh", "yc"], ["new0"], axis=0),
        helper.make_node("Slice", ["state", "i1", "i2", "i1"], ["row1"]),
        helper.make_node("Concat", ["new0", "row1"], ["stateN"], axis=1),
    ]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("state", [2, 2, H])], [vi("y", None), vi("stateN", [2, 2, H])],
                 [LSTM_W, LSTM_R, ints("sizes", [1, 1]), ints("i0", [0]), ints("i1", [1]), ints("i2", [2])])


def test_h_and_c_that_are_each_a_part_of_a_packed_entry_are_not_swapped():
    # state[0] holds h of both batch rows, and the LSTM reads only row 0 of it (partly): swapping state[0] and
    # state[1] would swap row 1 too, which is no h and c of this op
    assert swap_not_run(batch_row_of_a_packed_state())


def two_level_pack():
    """state [2 (h, c), 2 (layers), 1, 1, H]: the LSTM reads h = state[0][0] and c = state[1][0]; layer 1 passes through."""
    nodes = [
        helper.make_node("Gather", ["state", "zero"], ["sh"], axis=0),
        helper.make_node("Gather", ["sh", "zero"], ["h0"], axis=0),
        helper.make_node("Gather", ["state", "one"], ["sc"], axis=0),
        helper.make_node("Gather", ["sc", "zero"], ["c0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["y", "yh", "yc"], hidden_size=H),
        helper.make_node("Unsqueeze", ["yh", "ax01"], ["uh"]),
        helper.make_node("Unsqueeze", ["yc", "ax01"], ["uc"]),
        helper.make_node("Slice", ["state", "start_h1", "end_h1", "ax01"], ["h1"]),
        helper.make_node("Slice", ["state", "start_c1", "end_c1", "ax01"], ["c1"]),
        helper.make_node("Concat", ["uh", "h1"], ["rowh"], axis=1),
        helper.make_node("Concat", ["uc", "c1"], ["rowc"], axis=1),
        helper.make_node("Concat", ["rowh", "rowc"], ["stateN"], axis=0),
    ]
    inits = [LSTM_W, LSTM_R, ints("zero", 0), ints("one", 1), ints("ax01", [0, 1]), ints("start_h1", [0, 1]), ints("end_h1", [1, 2]),
             ints("start_c1", [1, 1]), ints("end_c1", [2, 2])]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("state", [2, 2, 1, 1, H])], [vi("y", None), vi("stateN", [2, 2, 1, 1, H])], inits)


def test_h_and_c_packed_two_levels_deep_are_not_swapped():
    # h is state[0][0] and c is state[1][0]: a swap of state[0] and state[1] would swap layer 1 as well
    assert swap_not_run(two_level_pack())


def run_swapped(model, steps, written, swap):
    """onnxruntime, one step per call, each call starting from the previous call's state with h and c exchanged
    (``written``: outputs -> the state inputs; ``swap``: the exchange); the mean of y per call."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    state = {i.name: np.zeros(i.shape, np.float32) for i in sess.get_inputs() if i.name != "x"}
    trace = []
    for _ in range(steps):
        out = dict(zip(names, sess.run(None, {"x": np.ones((1, 1, 1), np.float32), **state})))
        trace.append(float(np.mean(out["y"], dtype=np.float64)))
        state = swap(written(out))
    return trace


def packed_h_slot_c():
    """h is hp[0] of a packed hp [2, 1, 1, H] (hp[1] passes through); c is a slot c0 [1, 1, H] of its own."""
    nodes = [
        helper.make_node("Gather", ["hp", "zero"], ["h0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["y", "yh", "cn"], hidden_size=H),
        helper.make_node("Unsqueeze", ["yh", "ax0"], ["uh"]),
        helper.make_node("Slice", ["hp", "one", "two", "ax0"], ["rest"]),
        helper.make_node("Concat", ["uh", "rest"], ["hpN"], axis=0),
    ]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("hp", [2, 1, 1, H]), vi("c0", [1, 1, H])], [vi("y", None), vi("hpN", [2, 1, 1, H]), vi("cn", [1, 1, H])],
                 [LSTM_W, LSTM_R, ints("zero", 0), ints("one", [1]), ints("two", [2]), ints("ax0", [0])])


def test_a_packed_h_is_swapped_with_a_c_slot_of_another_shape():
    m = packed_h_slot_c()
    report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent", "hc-swapped"])
    assert report.pairs == [("hp", "hpN"), ("c0", "cn")]

    def swap(s):
        hp, c0 = s["hp"].copy(), s["c0"].copy()
        hp[0], c0 = s["c0"], s["hp"][0]
        return {"hp": hp, "c0": c0}

    want = run_swapped(m, 3, lambda out: {"hp": out["hpN"], "c0": out["cn"]}, swap)
    swapped = report.variant("hc-swapped", 1)
    assert swapped.trace == pytest.approx(want, rel=1e-6)
    assert swapped.first_divergence is not None and swapped.first_divergence.call == 1


def slot_h_packed_c():
    """h is a slot h0 [1, 1, H] of its own; c is cp[0] of a packed cp [2, 1, 1, H] (cp[1] passes through)."""
    nodes = [
        helper.make_node("Gather", ["cp", "zero"], ["c0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["y", "hn", "yc"], hidden_size=H),
        helper.make_node("Unsqueeze", ["yc", "ax0"], ["uc"]),
        helper.make_node("Slice", ["cp", "one", "two", "ax0"], ["rest"]),
        helper.make_node("Concat", ["uc", "rest"], ["cpN"], axis=0),
    ]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("h0", [1, 1, H]), vi("cp", [2, 1, 1, H])], [vi("y", None), vi("hn", [1, 1, H]), vi("cpN", [2, 1, 1, H])],
                 [LSTM_W, LSTM_R, ints("zero", 0), ints("one", [1]), ints("two", [2]), ints("ax0", [0])])


def test_an_h_slot_is_swapped_with_a_packed_c_of_another_shape():
    m = slot_h_packed_c()
    report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent", "hc-swapped"])
    assert report.pairs == [("h0", "hn"), ("cp", "cpN")]

    def swap(s):
        cp, h0 = s["cp"].copy(), s["h0"].copy()
        cp[0], h0 = s["h0"], s["cp"][0]
        return {"h0": h0, "cp": cp}

    want = run_swapped(m, 3, lambda out: {"h0": out["hn"], "cp": out["cpN"]}, swap)
    swapped = report.variant("hc-swapped", 1)
    assert swapped.trace == pytest.approx(want, rel=1e-6)
    assert swapped.first_divergence is not None and swapped.first_divergence.call == 1


def two_ops_read_one_h_and_c():
    """Two LSTMs read the same h0 and c0; the first writes hn and cn back, the second's y is the output watched."""
    rng = np.random.default_rng(7)
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["y1", "hn", "cn"], hidden_size=H),
        helper.make_node("LSTM", ["x", "W2", "R2", "", "", "h0", "c0"], ["y"], hidden_size=H),
    ]
    inits = [LSTM_W, LSTM_R, init("W2", rng.standard_normal((1, 4 * H, 1))), init("R2", 0.5 * rng.standard_normal((1, 4 * H, H)))]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("h0", [1, 1, H]), vi("c0", [1, 1, H])], [vi("y", None), vi("hn", [1, 1, H]), vi("cn", [1, 1, H])], inits)


def test_h_and_c_that_two_ops_read_are_swapped_once():
    # both ops name the same two places (h0 and c0): the run exchanges them before each call, as for one op
    m = two_ops_read_one_h_and_c()
    report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent", "hc-swapped"])
    want = run_swapped(m, 3, lambda out: {"h0": out["hn"], "c0": out["cn"]}, lambda s: {"h0": s["c0"], "c0": s["h0"]})
    swapped = report.variant("hc-swapped", 1)
    assert swapped.trace == pytest.approx(want, rel=1e-6)
    assert swapped.first_divergence is not None and swapped.first_divergence.call == 1


# -- the trace ------------------------------------------------------------------------------------------


def test_a_model_whose_only_output_is_its_state_traces_the_state():
    m = build([rnn_node(outs=("", "hn"))], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent"])
    assert report.watched == "hn"
    assert report.variant("persistent", 1).trace == [1.0, 1.5, 1.75]


def test_an_empty_watched_output_traces_nan_without_a_warning():
    # e = x[0:0] along axis 0: an empty array every call; numpy's mean of it would warn ("Mean of empty slice")
    nodes = [rnn_node(), helper.make_node("Slice", ["x", "zero", "zero"], ["e"])]
    m = build(nodes, [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("e", None), vi("y", None), vi("hn", [1, 1, 1])], [*SEED_INITS, ints("zero", [0])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent"])
    assert report.watched == "e"
    assert [math.isnan(v) for v in report.variant("persistent", 1).trace] == [True, True, True]


# -- the text ---------------------------------------------------------------------------------------------
# stale, chunk 1, x = 1, 1, 1: call 1 starts from 0 instead of 1: y and hn 1 against 1.5 (0.5); call 2 starts from
# call 0's 1: 1.5 against 1.75 (0.25). So max |diff| 0.5 on y and on hn, and on y * k it is 0.5 * k.


def test_the_text_lists_the_outputs_a_caller_reads_before_the_state():
    # the model lists hn before y; the text puts y first and marks hn as state
    m = build([rnn_node()], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("hn", [1, 1, 1]), vi("y", None)], SEED_INITS)
    report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent", "stale"])
    line = next(t for t in report_to_text(report).splitlines() if t.strip().startswith("stale"))
    assert line.endswith("diverges at call 1 on 'hn' (|diff| 0.5); max |diff| 0.5 on 'y', 0.5 on 'hn' (state)")


def test_the_text_names_three_outputs_and_counts_the_rest():
    nodes = [rnn_node(), helper.make_node("Mul", ["y", "two"], ["y2"]), helper.make_node("Mul", ["y", "three"], ["y3"])]
    m = build(nodes, [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", None), vi("y2", None), vi("y3", None), vi("hn", [1, 1, 1])],
              [*SEED_INITS, init("two", 2.0), init("three", 3.0)])
    report = check_multicall(m, {"x": ones(3)}, chunk_sizes=[1], variants=["persistent", "stale"])
    line = next(t for t in report_to_text(report).splitlines() if t.strip().startswith("stale"))
    assert line.endswith("max |diff| 0.5 on 'y', 1 on 'y2', 1.5 on 'y3' and 1 more output(s)")
