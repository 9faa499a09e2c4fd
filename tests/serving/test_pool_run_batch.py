"""SessionPool.run_batch, the stacked form of run: every way its feeds can be wrong is a clear error with nothing
run, and every fallback (one id, before the probe, a model that cannot batch, a max_batch smaller than the tick)
gives each stream what its own session gives.

Oracle: one StatefulSession per stream (batch of one, none of the pool's code).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool import SessionPool, UnknownSessionError
from tests.serving.test_pool import Clock
from tests.support import streaming_models as sm

TOL = 1e-5
F = TensorProto.FLOAT
INP = 3
AXES = {"Y": 2, "hn": 1, "cn": 1}


def _x(seed: int, rows: int) -> np.ndarray:
    return (0.8 * np.random.default_rng(seed).standard_normal((1, rows, INP))).astype(np.float32)


def _check(out: dict[str, np.ndarray], ids: list[str], x: np.ndarray, solo: dict[str, StatefulSession], outputs: list[str] | None = None) -> None:
    assert sorted(out) == sorted(outputs or AXES)
    for k, sid in enumerate(ids):
        want = solo[sid].run_dict({"x": x[:, k : k + 1]})
        for name, value in out.items():
            assert value.shape[AXES[name]] == len(ids), name
            assert np.max(np.abs(np.take(value, [k], axis=AXES[name]) - want[name])) <= TOL, (sid, name)


def test_run_batch_refuses_every_wrong_feed_with_nothing_run():
    model = sm.lstm_b()
    pool = SessionPool(model)
    ids = ["a", "b", "c"]
    solo = {sid: StatefulSession(model) for sid in ids}
    for seed in range(2):  # the probe, then a checked tick
        x = _x(seed, 3)
        _check(pool.run_batch(ids, {"x": x}, open_missing=True), ids, x, solo)
    before = {sid: pool.state(sid) for sid in ids}
    good = _x(9, 3)
    for feeds, outputs, match in (
        ({"x": good, "h0": np.zeros((1, 3, 5), np.float32)}, None, "'h0', which is not a plain input"),
        ({"x": good, "y": good}, None, "'y', which is not a plain input"),
        ({}, None, r"missing input\(s\) \['x'\]"),
        ({"x": _x(9, 2)}, None, r"batch axis 1 must hold one row per id \(3\)"),
        ({"x": _x(9, 4)}, None, r"batch axis 1 must hold one row per id \(3\)"),
        ({"x": np.zeros(3, np.float32)}, None, r"has shape \(3,\); its batch axis 1 must hold one row per id"),
        ({"x": good}, ["Y", "nope"], r"no output\(s\) \['nope'\]"),
    ):
        with pytest.raises(FeedError, match=match):
            pool.run_batch(ids, feeds, outputs)
    with pytest.raises(UnknownSessionError):
        pool.run_batch(["a", "b", "zed"], {"x": good})
    for sid in ids:
        assert all(np.array_equal(v, before[sid][k]) for k, v in pool.state(sid).items()), sid
    _check(pool.run_batch(ids, {"x": good}, ["hn"]), ids, good, solo, ["hn"])


def test_run_batch_checks_a_converted_feed_every_time_and_its_stacked_outputs_equal_solo_runs():
    model = sm.lstm_b()
    ids = ["a", "b", "c"]
    pool = SessionPool(model)
    solo = {sid: StatefulSession(model) for sid in ids}
    x = _x(0, 3)
    _check(pool.run_batch(ids, {"x": x}, open_missing=True), ids, x, solo)
    for seed in (1, 2):  # a list is converted; the same signature again is converted (and checked) again
        x = _x(seed, 3)
        _check(pool.run_batch(ids, {"x": x.tolist()}), ids, x, solo)
    with pytest.raises(FeedError):
        pool.run_batch(ids, {"x": _x(3, 2).tolist()})
    with pytest.raises(FeedError):
        pool.run_batch(ids, {"x": x.astype(np.float64)})  # no cast_inputs: refused as a solo session refuses it
    cast = SessionPool(model, cast_inputs=True)
    twin = {sid: StatefulSession(model) for sid in ids}
    for seed in range(3):
        x = _x(seed, 3)
        _check(cast.run_batch(ids, {"x": x.astype(np.float64)}, open_missing=True), ids, x, twin)


def test_run_batch_falls_back_for_one_id_a_small_max_batch_and_a_model_that_cannot_batch():
    model = sm.lstm_b()
    # one id, before any probe: split into one request
    one = SessionPool(model)
    solo = {"a": StatefulSession(model)}
    for seed in range(2):
        x = _x(seed, 1)
        _check(one.run_batch(["a"], {"x": x}, open_missing=True), ["a"], x, solo)
    # a max_batch smaller than the tick: split into calls of at most that many rows
    ids = ["a", "b", "c", "d", "e"]
    small = SessionPool(model, max_batch=2)
    solo = {sid: StatefulSession(model) for sid in ids}
    for seed in range(3):
        x = _x(seed, 5)
        calls = small.stats.ort_calls
        _check(small.run_batch(ids, {"x": x}, open_missing=True), ids, x, solo)
        assert small.stats.ort_calls - calls == 3
    # a model with a fixed batch: rows along the leading axis of each feed, one stream per call
    decay = SessionPool(sm.toy("decay"), sm.PAIRS)
    assert decay.layout is None
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert decay.run_batch(["p", "q", "r"], {"x": x}, open_missing=True)["y"].tolist() == x.tolist()
    assert decay.run_batch(["p", "q", "r"], {"x": x})["y"].tolist() == (1.5 * x).tolist()
    assert decay.run_batch(["p"], {"x": x[:1]})["y"].tolist() == (1.75 * x[:1]).tolist()  # one id: the feed is its row
    with pytest.raises(FeedError, match="one row per id"):
        small.run_batch(ids[:3], {"x": _x(7, 2)})  # the fallback checks the rows too
    with pytest.raises(FeedError, match="one row per id"):
        small.run_batch(ids[:3], {"x": np.zeros(3, np.float32)})


def decay_gain() -> onnx.ModelProto:
    """``h' = 0.5 h + g x`` with x[1, 4] and h[1, 4] static (a fixed batch: no layout) and a scalar gain g."""
    nodes = [helper.make_node("Mul", ["h_in", "half"], ["hh"]), helper.make_node("Mul", ["x", "g"], ["gx"]),
             helper.make_node("Add", ["hh", "gx"], ["h_out"]), helper.make_node("Identity", ["h_out"], ["y"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "decay_gain", [vi("x", F, [1, 4]), vi("h_in", F, [1, 4]), vi("g", F, [])],
                              [vi("y", F, [1, 4]), vi("h_out", F, [1, 4])], [numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_run_batch_on_a_fixed_batch_model_splits_rows_along_the_leading_axis_and_shares_the_rest():
    pool = SessionPool(decay_gain(), sm.PAIRS)
    assert pool.layout is None
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    g = np.array(2.0, np.float32)
    assert pool.run_batch(["p", "q"], {"x": x, "g": g}, open_missing=True)["y"].tolist() == (2 * x).tolist()
    assert pool.run_batch(["p", "q"], {"x": x, "g": g})["y"].tolist() == (3 * x).tolist()  # 0.5 * 2x + 2x
    assert pool.run_batch(["q"], {"x": x[1:], "g": g})["y"].tolist() == (3.5 * x[1:]).tolist()


def test_run_batch_shares_an_input_without_a_batch_axis_and_expires_idle_streams():
    from tests.serving.test_pool import gained_lstm

    model = gained_lstm()
    clock = Clock()
    pool = SessionPool(model, idle_timeout=3.0, clock=clock)
    ids = ["a", "b", "c"]
    solo = {sid: StatefulSession(model) for sid in ids}
    gain = np.array(1.5, np.float32)
    for seed in range(3):
        x = _x(seed, 3)
        out = pool.run_batch(ids, {"x": x, "gain": gain}, ["hn"], open_missing=True)
        for k, sid in enumerate(ids):
            want = solo[sid].run_dict({"x": x[:, k : k + 1], "gain": gain})["hn"]
            assert np.max(np.abs(out["hn"][:, k : k + 1] - want)) <= TOL
    clock.now = 3.5  # a, b and c idle for more than the timeout: the next tick, of others, closes them first
    pool.run_batch(["d", "e"], {"x": _x(5, 2), "gain": gain}, ["hn"], open_missing=True)
    assert pool.sessions == ["d", "e"] and pool.stats.expired == 3


def test_run_batch_honours_a_max_batch_lowered_after_its_ticks_were_checked():
    """run's repeated tick checks max_batch again ("max_batch may have been lowered since"); run_batch's must too."""
    model = sm.lstm_b()
    ids = ["a", "b", "c", "d"]
    pool = SessionPool(model)
    solo = {sid: StatefulSession(model) for sid in ids}
    for seed in range(3):  # the same signature every tick: checked once, then only compared
        x = _x(seed, 4)
        _check(pool.run_batch(ids, {"x": x}, open_missing=True), ids, x, solo)
    pool.max_batch = 2
    for seed in range(3, 5):
        x = _x(seed, 4)
        calls = pool.stats.ort_calls
        _check(pool.run_batch(ids, {"x": x}), ids, x, solo)
        assert pool.stats.ort_calls - calls == 2  # at most two rows per call


def test_run_batch_of_no_ids_is_a_clear_error_before_and_after_the_probe_with_nothing_run():
    model = sm.lstm_b()
    pool = SessionPool(model)
    empty = np.zeros((1, 0, INP), np.float32)
    with pytest.raises(FeedError, match=r"run_batch got no session ids"):
        pool.run_batch([], {"x": empty})
    ids = ["a", "b"]
    solo = {sid: StatefulSession(model) for sid in ids}
    x = _x(3, 2)
    _check(pool.run_batch(ids, {"x": x}, open_missing=True), ids, x, solo)  # the probe, then the batched path
    before = {sid: pool.state(sid) for sid in ids}
    for feeds in ({"x": empty}, {}):
        with pytest.raises(FeedError, match=r"run_batch got no session ids"):
            pool.run_batch((), feeds)
    assert pool.run({}) == {}  # the empty tick of the dict form runs nothing either
    for sid in ids:  # nothing ran: every state as it was, and the next tick is the streams' own next call
        assert all(np.array_equal(before[sid][k], v) for k, v in pool.state(sid).items())
    x = _x(4, 2)
    _check(pool.run_batch(ids, {"x": x}), ids, x, solo)
