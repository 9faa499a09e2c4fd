"""Batcher: calls from many threads batched into pool ticks, each caller getting exactly its own answer.

Every wait here is bounded (tests.support.bounded): a call, a close, a thread's join. A broken batcher (a worker
that never answers, never stops or keeps its lock) fails the test in seconds instead of hanging it.
Oracle: one StatefulSession per stream (the pool's code not involved), run in the order the stream's calls ran.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool import Batcher, SessionPool
from tests.support import streaming_models as sm
from tests.support.bounded import WAIT, closing, together, within

TOL = 1e-5


def _x(seed: int, steps: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((steps, 1, 3)).astype(np.float32)


def test_a_negative_delay_is_refused_and_zero_is_allowed():
    pool = SessionPool(sm.lstm_b())
    with pytest.raises(ValueError, match="max_delay"):
        Batcher(pool, max_delay=-0.001)
    with closing(Batcher(pool, max_delay=0.0)) as batcher:
        got = within(lambda: batcher.call("a", {"x": _x(0)}, ["hn"], timeout=WAIT))
    assert np.max(np.abs(got["hn"] - StatefulSession(sm.lstm_b()).run_dict({"x": _x(0)})["hn"])) <= TOL


class HeldPool(SessionPool):
    """A pool whose ticks wait until the test lets them run (a slow model, as a caller sees it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.go = threading.Event()
        self.entered = threading.Event()

    def run(self, requests: Mapping[Hashable, Mapping[str, Any]], outputs: Sequence[str] | None = None, *, open_missing: bool = False) -> Any:
        self.entered.set()
        self.go.wait(2 * WAIT)
        return super().run(requests, outputs, open_missing=open_missing)


def test_a_closed_batcher_refuses_calls_and_answers_the_ones_already_waiting():
    model = sm.lstm_b()
    pool = HeldPool(model)
    batcher = Batcher(pool, max_delay=0.0)
    results: dict[str, Any] = {}

    def call(sid: str, seed: int) -> None:
        results[sid] = batcher.call(sid, {"x": _x(seed)}, ["hn"], timeout=WAIT)

    first = threading.Thread(target=call, args=("a", 1), daemon=True)
    first.start()
    assert pool.entered.wait(WAIT)  # a's tick is running (held): b waits in the queue
    second = threading.Thread(target=call, args=("b", 2), daemon=True)
    second.start()
    time.sleep(0.5)
    closer = threading.Thread(target=batcher.close, daemon=True)
    closer.start()
    time.sleep(0.2)
    pool.go.set()
    for t in (first, second, closer):
        t.join(2 * WAIT)
        assert not t.is_alive(), f"{t.name} still waits after {2 * WAIT} s"
    for sid, seed in (("a", 1), ("b", 2)):  # both queued before the close: both answered
        assert np.max(np.abs(results[sid]["hn"] - StatefulSession(model).run_dict({"x": _x(seed)})["hn"])) <= TOL
    with pytest.raises(StateError, match="closed"):
        within(lambda: batcher.call("a", {"x": _x(3)}, timeout=WAIT))


def test_a_call_that_gets_no_result_within_its_timeout_raises_timeout_error():
    pool = HeldPool(sm.lstm_b())
    with closing(Batcher(pool, max_delay=0.0)) as batcher:
        with pytest.raises(TimeoutError, match="'slow'"):
            within(lambda: batcher.call("slow", {"x": _x(3)}, timeout=0.2))
        pool.go.set()
        assert set(within(lambda: batcher.call("slow", {"x": _x(4)}, ["hn"], timeout=WAIT))) == {"hn"}


def test_two_calls_of_one_stream_run_in_two_ticks_in_order():
    model = sm.lstm_b()
    pool = SessionPool(model)
    with closing(Batcher(pool, max_delay=0.3)) as batcher:
        results = together([lambda k=k: batcher.call("a", {"x": _x(k)}, ["hn"], timeout=WAIT) for k in range(2)]
                            + [lambda: batcher.call("b", {"x": _x(9)}, ["hn"], timeout=WAIT)])
    assert all(isinstance(r, dict) for r in results), results
    # whichever call was queued first ran first: the stream's two results are the solo run in one of the orders
    orders = []
    for first, second in ((0, 1), (1, 0)):
        solo = StatefulSession(model)
        orders.append((solo.run_dict({"x": _x(first)})["hn"], solo.run_dict({"x": _x(second)})["hn"], (first, second)))
    assert any(np.max(np.abs(results[a]["hn"] - h1)) <= TOL and np.max(np.abs(results[b]["hn"] - h2)) <= TOL for h1, h2, (a, b) in orders)
    assert pool.stats.rows == 3 and batcher.ticks >= 2


def test_max_batch_caps_the_streams_of_a_tick_and_every_caller_gets_its_own_outputs():
    model = sm.lstm_b()
    pool = SessionPool(model)
    wanted: list[list[str] | None] = [["hn"], ["Y", "cn"], None, ["hn"], ["cn"]]
    with closing(Batcher(pool, max_delay=0.3, max_batch=2)) as batcher:
        assert batcher.max_batch == 2
        results = together([lambda k=k: batcher.call(k, {"x": _x(k)}, wanted[k], timeout=WAIT) for k in range(5)])
    for k, got in enumerate(results):
        assert isinstance(got, dict), got
        want = StatefulSession(model).run_dict({"x": _x(k)})
        assert sorted(got) == sorted(wanted[k] or want)
        for name, value in got.items():
            assert np.max(np.abs(value - want[name])) <= TOL
    assert pool.stats.largest_batch <= 2 and batcher.ticks >= 3 and pool.stats.rows == 5


def test_the_same_outputs_asked_by_every_caller_of_a_tick_are_what_each_gets():
    model = sm.lstm_b()
    pool = SessionPool(model)
    with closing(Batcher(pool, max_delay=0.3, max_batch=3)) as batcher:
        results = together([lambda k=k: batcher.call(k, {"x": _x(k)}, ["cn", "hn"], timeout=WAIT) for k in range(3)])
    for k, got in enumerate(results):
        assert isinstance(got, dict) and list(got) == ["cn", "hn"], got
        want = StatefulSession(model).run_dict({"x": _x(k)})
        assert np.max(np.abs(got["cn"] - want["cn"])) <= TOL and np.max(np.abs(got["hn"] - want["hn"])) <= TOL
    assert pool.stats.largest_batch == 3


def test_a_bad_feed_is_retried_alone_and_reaches_only_its_caller():
    model = sm.lstm_b()
    pool = SessionPool(model)
    with closing(Batcher(pool, max_delay=0.3, max_batch=3)) as batcher:
        results = together([
            lambda: batcher.call("good", {"x": _x(1)}, ["hn"], timeout=WAIT),
            lambda: batcher.call("bad", {"x": _x(2).astype(np.float64)}, ["hn"], timeout=WAIT),
            lambda: batcher.call("other", {"x": _x(3)}, None, timeout=WAIT),
        ])
    assert isinstance(results[1], FeedError), results[1]
    for k in (0, 2):
        got = results[k]
        assert isinstance(got, dict), got
        want = StatefulSession(model).run_dict({"x": _x(k + 1)})
        assert np.max(np.abs(got["hn"] - want["hn"])) <= TOL
    assert sorted(pool.sessions) == ["good", "other"]


class FailingPool(SessionPool):
    """A tick that fails while running (after part of it may have run)."""

    def run(self, requests: Mapping[Hashable, Mapping[str, Any]], outputs: Sequence[str] | None = None, *, open_missing: bool = False) -> Any:
        if len(requests) > 1:
            raise RuntimeError("onnxruntime failed mid-tick")
        return super().run(requests, outputs, open_missing=open_missing)


def test_an_error_while_a_tick_runs_reaches_every_caller_of_that_tick_and_none_is_retried():
    pool = FailingPool(sm.lstm_b())
    with closing(Batcher(pool, max_delay=0.3, max_batch=2)) as batcher:
        results = together([lambda k=k: batcher.call(k, {"x": _x(k)}, timeout=WAIT) for k in range(2)])
        assert all(isinstance(r, RuntimeError) and "mid-tick" in str(r) for r in results), results
        assert pool.sessions == []  # not retried one by one
        assert set(within(lambda: batcher.call(5, {"x": _x(5)}, ["hn"], timeout=WAIT))) == {"hn"}  # the worker lives on
