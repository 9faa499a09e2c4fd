"""The SessionPool's documented arguments and edges, each with the near miss that must be accepted.

Oracle: one StatefulSession per stream (batch of one, none of the pool's code), or hand-checkable numbers.
"""

from __future__ import annotations

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import StatefulSession
from rnnir.serving.pool import SessionPool
from tests.serving.test_pool import Clock
from tests.support import streaming_models as sm

TOL = 1e-5
INP = 3


def _chunk(rng: np.random.Generator, steps: int = 1) -> np.ndarray:
    return (0.8 * rng.standard_normal((steps, 1, INP))).astype(np.float32)


def _against_solo(pool: SessionPool, ids: list, ticks: int = 3, seed: int = 0) -> None:
    model = sm.lstm_b()
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in ids}
    rng = np.random.default_rng(seed)
    for _ in range(ticks):
        requests = {sid: {"x": _chunk(rng)} for sid in ids}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            for name, value in want.items():
                assert np.max(np.abs(got[sid][name] - value)) <= TOL, (sid, name)


def test_max_batch_below_one_is_refused_and_one_serves_one_row_per_call():
    model = sm.lstm_b()
    with pytest.raises(ValueError, match="max_batch"):
        SessionPool(model, max_batch=0)
    one = SessionPool(model, max_batch=1)  # the smallest batch there is
    x = np.zeros((1, 1, INP), np.float32)
    one.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    assert one.stats.largest_batch == 1 and one.stats.ort_calls == 2


def test_a_timeout_must_be_positive_and_half_a_second_is_one():
    with pytest.raises(ValueError, match="idle_timeout"):
        SessionPool(sm.lstm_b(), idle_timeout=0)
    clock = Clock()
    short = SessionPool(sm.lstm_b(), idle_timeout=0.5, clock=clock)
    short.open("a")
    clock.now = 0.4
    assert short.expire() == []
    clock.now = 0.6
    assert short.expire() == ["a"]


def test_max_batch_one_against_solo_sessions():
    one = SessionPool(sm.lstm_b(), max_batch=1)
    _against_solo(one, ["a", "b", "c"])
    assert one.stats.largest_batch == 1 and one.stats.ort_calls == 9


def test_batch_axes_are_honoured_and_a_name_that_is_no_input_is_refused():
    model = sm.lstm_b()
    with pytest.raises(StateError, match="batch_axes names"):
        SessionPool(model, batch_axes={"nope": 0})
    fixed = SessionPool(model, batch_axes={"h0": None})  # says the state has no batch axis: one stream per call
    assert "no batch axis" in fixed.batching
    _against_solo(fixed, ["a", "b"])
    assert fixed.stats.largest_batch == 1


def test_streams_opened_but_never_run_expire():
    clock = Clock()
    pool = SessionPool(sm.lstm_b(), idle_timeout=5.0, clock=clock)
    pool.open("a")
    clock.now = 1.0
    pool.open("b")
    clock.now = 5.5  # a idle 5.5 s, b 4.5 s: only a goes
    assert pool.expire() == ["a"] and pool.sessions == ["b"]
    clock.now = 20.0
    assert pool.expire() == ["b"] and len(pool) == 0
    assert pool.stats.expired == 2


def test_an_empty_tick_is_an_empty_answer_before_and_after_the_first_call():
    clock = Clock()
    pool = SessionPool(sm.lstm_b(), idle_timeout=5.0, clock=clock)
    assert pool.run({}) == {} and pool.sessions == []
    x = np.zeros((1, 1, INP), np.float32)
    for _ in range(3):
        pool.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    clock.now = 6.0
    assert pool.run({}) == {} and pool.sessions == []  # the quiet tick still expires the idle streams
    plain = SessionPool(sm.lstm_b())
    assert plain.run({}) == {}
    plain.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    assert plain.run({}) == {} and plain.sessions == ["a", "b"]


def test_streams_that_call_every_tick_never_expire_however_long_they_run():
    clock = Clock()
    pool = SessionPool(sm.lstm_b(), idle_timeout=3.0, clock=clock)
    x = np.zeros((1, 1, INP), np.float32)
    for ids in (["a"], ["a", "b", "c"]):  # one stream, several: both shapes of the repeated tick
        for t in range(12):
            clock.now += 2.0
            got = pool.run({sid: {"x": x} for sid in ids}, ["Y"] if t < 6 else None, open_missing=True)  # lean, then not
            assert list(got) == ids, t
        assert pool.sessions == ids if len(ids) == 1 else sorted(pool.sessions) == ids
        assert pool.stats.expired == 0
        pool.close("a")
        ids.remove("a")
        for sid in ids:
            pool.close(sid)
    assert pool.stats.steady_ticks >= 10


def test_a_state_output_whose_type_is_not_declared_is_served():
    model = sm.lstm_b()
    for out in model.graph.output:
        if out.name in ("hn", "cn"):
            out.ClearField("type")  # onnxruntime infers it; the pool must not read "unknown" as "another dtype"
    pool = SessionPool(model)
    _against_solo(pool, ["a", "b"])


def test_the_answer_lists_the_streams_in_the_order_of_the_requests_whatever_calls_the_tick_splits_into():
    model = sm.lstm_b()
    pool = SessionPool(model)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in "abcde"}
    rng = np.random.default_rng(3)
    for order in ("abcde", "edcba", "cadeb"):
        # a and d feed two time steps, the others one: two calls, the first of them not holding the first request
        requests = {sid: {"x": _chunk(rng, 2 if sid in "ad" else 1)} for sid in order}
        got = pool.run(requests, open_missing=True)
        assert list(got) == list(order)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            assert np.max(np.abs(got[sid]["Y"] - want["Y"])) <= TOL


def test_streams_that_call_through_run_batch_every_tick_never_expire():
    clock = Clock()
    pool = SessionPool(sm.lstm_b(), idle_timeout=3.0, clock=clock)
    ids = ["a", "b", "c"]
    x = np.zeros((1, 3, INP), np.float32)
    for t in range(8):  # the first ticks check the feeds, the later ones only compare their signature
        clock.now += 2.0
        pool.run_batch(ids, {"x": x}, ["hn"], open_missing=True)
        assert pool.sessions == ids and pool.stats.expired == 0, t
    clock.now += 3.5
    assert pool.expire() == ids


def test_without_a_timeout_expire_closes_nobody():
    pool = SessionPool(sm.lstm_b())
    assert pool.expire() == []
    x = np.zeros((1, 1, INP), np.float32)
    pool.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    assert pool.expire() == [] and pool.sessions == ["a", "b"]
