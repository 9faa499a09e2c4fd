"""Who a pool holds and what it keeps for each stream: idle order and expiry, states and contexts waiting for a
row.

Oracle: one StatefulSession per stream (batch of one, none of the pool's code), an injected clock.
"""

from __future__ import annotations

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import StatefulSession
from rnnir.runtime.versioning import VersionOutcome, with_state_version
from rnnir.serving.pool import SessionPool, UnknownSessionError
from tests.serving.test_pool import Clock
from tests.support import streaming_models as sm

TOL = 1e-5
INP = 3


def _chunk(seed: int, steps: int = 1) -> np.ndarray:
    return (0.8 * np.random.default_rng(seed).standard_normal((steps, 1, INP))).astype(np.float32)


def _close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], where: str) -> None:
    for name, value in want.items():
        assert got[name].shape == value.shape, (where, name)
        assert np.max(np.abs(got[name] - value)) <= TOL, (where, name)


# -- idle order and expiry -------------------------------------------------------------------------


def test_sessions_are_least_recently_used_first_with_a_timeout_and_in_joining_order_without():
    clock = Clock()
    pool = SessionPool(sm.lstm_b(), idle_timeout=100.0, clock=clock)
    for t, sid in enumerate(["a", "b", "c"]):
        clock.now = float(t)
        pool.run({sid: {"x": _chunk(t)}}, open_missing=True)
    clock.now = 3.0
    pool.open("d")  # no row yet: its time is the time it joined
    clock.now = 4.0
    pool.run({"a": {"x": _chunk(9)}})
    assert pool.sessions == ["b", "c", "d", "a"]
    assert len(pool) == 4 and "d" in pool and "z" not in pool
    clock.now = 5.0
    pool.run({"b": {"x": _chunk(8)}, "d": {"x": _chunk(7)}})
    assert pool.sessions == ["c", "a", "b", "d"] or pool.sessions == ["c", "a", "d", "b"]
    plain = SessionPool(sm.lstm_b())
    for sid in ["z", "y", "x"]:
        plain.open(sid)
    plain.run({"x": {"x": _chunk(1)}})
    assert plain.sessions == ["z", "y", "x"]


def test_expiry_closes_exactly_the_idle_streams_least_recently_used_first_after_rows_moved():
    clock = Clock()
    model = sm.lstm_b()
    pool = SessionPool(model, idle_timeout=10.0, clock=clock)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in "abcde"}
    last = {sid: 0.0 for sid in solo}
    plan = [(0.0, "abcde"), (2.0, "bd"), (4.0, "ce"), (6.0, "e")]
    for now, ids in plan:
        clock.now = now
        requests = {sid: {"x": _chunk(int(now) + k)} for k, sid in enumerate(ids)}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            _close(got[sid], solo[sid].run_dict(feeds), sid)
            last[sid] = now
    pool.close("b")  # rows move up: every other stream's time must move with it
    clock.now = 14.5  # idle: a (since 0), d (since 2); c (since 4) at 10.5 is idle too
    assert pool.expire() == ["a", "d", "c"]
    assert pool.sessions == ["e"] and pool.stats.expired == 3
    clock.now = 16.0
    assert pool.expire() == []  # e idle exactly 10 s: not more than the timeout
    got = pool.run({"e": {"x": _chunk(50)}})["e"]
    _close(got, solo["e"].run_dict({"x": _chunk(50)}), "e")
    with pytest.raises(UnknownSessionError, match="'a'"):
        pool.run({"a": {"x": _chunk(1)}})
    with pytest.raises(UnknownSessionError, match="'a'"):
        pool.close("a")


# -- states and contexts waiting for a row ------------------------------------------------------------


def test_a_loaded_stream_that_is_reset_or_closed_before_it_runs_starts_from_the_initial_state(tmp_path):
    model = sm.lstm_b()
    donor = SessionPool(model, context={"x": 1})
    donor.run({"a": {"x": _chunk(1, 2)}, "b": {"x": _chunk(2, 2)}}, open_missing=True)
    path = donor.save_state("a", tmp_path / "a.npz")
    for before_first_call in (True, False):
        pool = SessionPool(model, context={"x": 1})
        if not before_first_call:
            pool.run({"other": {"x": _chunk(3, 2)}}, open_missing=True)
        pool.load_state("a", path)
        assert np.array_equal(pool.state("a")["c0"], donor.state("a")["c0"])  # waiting for its row, readable
        pool.reset("a")
        assert all(not v.any() for v in pool.state("a").values())
        got = pool.run({"a": {"x": _chunk(4, 2)}}, open_missing=True)["a"]
        _close(got, StatefulSession(model, context={"x": 1}).run_dict({"x": _chunk(4, 2)}), f"reset, {before_first_call}")
        pool.load_state("c", path, from_session="a")
        pool.close("c")
        pool.open("c")  # the same id again: a new stream, nothing of the state loaded before
        got = pool.run({"c": {"x": _chunk(5, 2)}, "a": {"x": _chunk(6, 2)}})["c"]
        _close(got, StatefulSession(model, context={"x": 1}).run_dict({"x": _chunk(5, 2)}), f"closed, {before_first_call}")


def test_a_stream_that_never_ran_reads_the_initial_state_and_has_nothing_to_save(tmp_path):
    model = sm.lstm_b()
    pool = SessionPool(model)
    pool.open("a")
    state = pool.state("a")
    assert sorted(state) == ["c0", "h0"] and all(v.shape == (1, 1, 5) and not v.any() for v in state.values())
    with pytest.raises(StateError, match="not run yet"):
        pool.save_state("a", tmp_path / "a.npz")
    assert not (tmp_path / "a.npz").exists()
    pool.run({"b": {"x": _chunk(1)}}, open_missing=True)  # the arenas exist now; a still has no row of its own run
    with pytest.raises(UnknownSessionError):
        pool.state("nobody")


def test_an_initial_state_of_several_rows_is_refused_with_a_clear_error():
    model = sm.lstm_b()
    pool = SessionPool(model, state_shapes={"h0": [1, 2, 5], "c0": [1, 2, 5]})
    with pytest.raises(StateError, match="rows along its batch axis 1; feed one row per stream"):
        pool.run({"a": {"x": _chunk(1)}}, open_missing=True)


def test_an_upgrade_keeps_or_clears_each_streams_kept_context_with_its_state(tmp_path):
    """context={"x": 1}: the last time step of x is prepended to the next call.  An upgrade that keeps a stream's
    state keeps that step; one that resets the stream clears it, exactly as a fresh session of the new model."""
    old = with_state_version(sm.lstm_b(seed=0), "1")
    for version, policy, outcome in (("1", "refuse", VersionOutcome.SAME_VERSION), ("2", "reset", VersionOutcome.RESET)):
        new = with_state_version(sm.lstm_b(seed=1), version)
        pool = SessionPool(old, context={"x": 1})
        solo = {sid: StatefulSession(old, context={"x": 1}) for sid in "ab"}
        for k in range(2):
            for sid in "ab":
                x = _chunk(10 * k + ord(sid), 2)
                _close(pool.run({sid: {"x": x}}, open_missing=True)[sid], solo[sid].run_dict({"x": x}), sid)
        pool.open("c")  # never ran: nothing to carry
        outcomes = pool.upgrade(new, policy=policy)
        assert outcomes["a"] is outcome and outcomes["b"] is outcome, outcomes
        for sid in "ab":
            if outcome is VersionOutcome.RESET:
                solo[sid] = StatefulSession(new, context={"x": 1})
            else:  # the state and the kept step carried over to the new weights
                carried = StatefulSession(new, context={"x": 1})
                assert carried.load_state(solo[sid].save_state(tmp_path / f"{sid}.npz")) is VersionOutcome.SAME_VERSION
                solo[sid] = carried
        solo["c"] = StatefulSession(new, context={"x": 1})
        requests = {sid: {"x": _chunk(99 + k, 2)} for k, sid in enumerate("abc")}
        got = pool.run(requests)
        for sid, feeds in requests.items():
            _close(got[sid], solo[sid].run_dict(feeds), f"{policy}: {sid}")


def test_a_closed_stream_is_not_expired_again_and_the_others_are():
    clock = Clock()
    pool = SessionPool(sm.lstm_b(), idle_timeout=5.0, clock=clock)
    pool.run({sid: {"x": _chunk(k)} for k, sid in enumerate("abc")}, open_missing=True)
    pool.close("a")  # its row stays until the next call lays the rows out again
    clock.now = 6.0
    assert pool.expire() == ["b", "c"] and len(pool) == 0 and pool.stats.expired == 2




def test_a_state_loads_into_a_pool_that_cannot_batch_before_its_first_call(tmp_path):
    model = sm.toy("integrator")
    donor = SessionPool(model, sm.PAIRS)
    assert donor.batching  # a fixed batch: one stream per call
    donor.run({"a": {"x": np.full((1, 4), 3.0, np.float32)}}, open_missing=True)
    path = donor.save_state("a", tmp_path / "a.npz")
    pool = SessionPool(model, sm.PAIRS)
    pool.load_state("a", path)
    assert pool.run({"a": {"x": np.ones((1, 4), np.float32)}})["a"]["y"].tolist() == [[4.0] * 4]


def test_errors_name_the_model():
    pool = SessionPool(sm.lstm_b())
    assert pool.label == "lstm_b"
    with pytest.raises(UnknownSessionError, match=r"^lstm_b: no open session 'zed'"):
        pool.close("zed")


def test_a_reset_or_a_load_right_after_an_upgrade_waits_for_the_next_call(tmp_path):
    model = with_state_version(sm.lstm_b(seed=0), "1")
    new = with_state_version(sm.lstm_b(seed=1), "1")
    pool = SessionPool(model)
    pool.run({"a": {"x": _chunk(1)}, "b": {"x": _chunk(2)}}, open_missing=True)
    path = pool.save_state("b", tmp_path / "b.npz")
    kept = pool.state("a")
    pool.upgrade(new)  # the same state version: states carried, buffers made again at the next call
    assert all(np.array_equal(v, kept[k]) for k, v in pool.state("a").items())  # readable while it waits
    pool.reset("a")
    pool.load_state("b", path)
    fresh = StatefulSession(new)
    carried = StatefulSession(new)
    carried.load_state(path)
    got = pool.run({"a": {"x": _chunk(3)}, "b": {"x": _chunk(4)}})
    _close(got["a"], fresh.run_dict({"x": _chunk(3)}), "reset after the upgrade")
    _close(got["b"], carried.run_dict({"x": _chunk(4)}), "loaded after the upgrade")


def test_a_model_whose_input_length_is_fixed_batches_with_its_kept_context():
    # seen = x, h' = h + sum(x) with x[B, 6]: a call brings 4 new samples, the pool prepends the 2 it kept; the
    # probe must feed the model what it takes (6 samples), or it fails and the pool runs one stream per call
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Identity", ["x"], ["seen"]), helper.make_node("ReduceSum", ["x"], ["xs"], axes=[1], keepdims=1),
             helper.make_node("Add", ["h_in", "xs"], ["h_out"])]
    graph = helper.make_graph(nodes, "context_rows", [vi("x", TensorProto.FLOAT, ["B", 6]), vi("h_in", TensorProto.FLOAT, ["B", 1])],
                              [vi("seen", TensorProto.FLOAT, ["B", 6]), vi("h_out", TensorProto.FLOAT, ["B", 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    pool = SessionPool(model, sm.PAIRS, context={"x": 2})
    kept = {sid: [0.0, 0.0] for sid in range(3)}
    total = dict.fromkeys(range(3), 0.0)
    for t in range(3):
        x = {sid: np.array([[sid + 1, t, 2, -sid]], np.float32) for sid in range(3)}
        got = pool.run({sid: {"x": v} for sid, v in x.items()}, open_missing=True)
        for sid, v in x.items():
            seen = kept[sid] + v[0].tolist()
            total[sid] += sum(seen)
            assert got[sid]["seen"].tolist() == [seen] and got[sid]["h_out"].tolist() == [[total[sid]]], (t, sid)
            kept[sid] = seen[-2:]
    assert pool.batching == "" and pool.stats.largest_batch == 3
