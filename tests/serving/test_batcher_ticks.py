"""Batcher: how many ticks, when a tick starts, and what close() waits for.

Every wait is bounded (tests.support.bounded); time limits are wide (seconds against milliseconds) so that a loaded
machine does not fail them.  Oracle for outputs: one StatefulSession per stream.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool import Batcher, SessionPool
from tests.serving.test_batcher_calls import HeldPool
from tests.support import streaming_models as sm
from tests.support.bounded import WAIT, closing, together, within

TOL = 1e-5
LONG = 4.0  # seconds: a max_delay no tick here should ever wait out


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 1, 3)).astype(np.float32)


def test_a_stream_calling_alone_runs_one_tick_per_call_and_the_count_says_so():
    model = sm.lstm_b()
    solo = StatefulSession(model)
    with closing(Batcher(SessionPool(model), max_delay=0.0)) as batcher:
        assert batcher.ticks == 0
        for k in range(3):
            got = within(lambda k=k: batcher.call("a", {"x": _x(k)}, ["hn"], timeout=WAIT))
            assert np.max(np.abs(got["hn"] - solo.run_dict({"x": _x(k)})["hn"])) <= TOL
            assert batcher.ticks == k + 1


def test_the_batcher_as_a_context_manager_is_closed_on_leaving():
    model = sm.lstm_b()

    def use() -> tuple[Batcher, dict[str, np.ndarray]]:
        with Batcher(SessionPool(model), max_delay=0.0) as batcher:
            return batcher, batcher.call("a", {"x": _x(1)}, ["hn"], timeout=WAIT)

    batcher, got = within(use, 2 * WAIT, "the with block")
    assert np.max(np.abs(got["hn"] - StatefulSession(model).run_dict({"x": _x(1)})["hn"])) <= TOL
    with pytest.raises(StateError, match="closed"):
        within(lambda: batcher.call("a", {"x": _x(2)}, timeout=WAIT))


def test_a_full_tick_runs_at_once_without_waiting_out_max_delay():
    model = sm.lstm_b()
    with closing(Batcher(SessionPool(model), max_delay=LONG, max_batch=2)) as batcher:
        start = time.monotonic()
        results = together([lambda k=k: batcher.call(k, {"x": _x(k)}, ["hn"], timeout=WAIT) for k in range(2)])
        took = time.monotonic() - start
    assert took < LONG / 2, f"two calls with max_batch=2 waited {took:.2f} s (max_delay {LONG} s)"
    for k, got in enumerate(results):
        assert isinstance(got, dict), got
        assert np.max(np.abs(got["hn"] - StatefulSession(model).run_dict({"x": _x(k)})["hn"])) <= TOL


def test_close_runs_the_waiting_call_at_once_without_waiting_out_max_delay():
    model = sm.lstm_b()
    batcher = Batcher(SessionPool(model), max_delay=LONG)
    answer: list[Any] = []
    caller = threading.Thread(target=lambda: answer.append(batcher.call("a", {"x": _x(3)}, ["hn"], timeout=2 * LONG)), daemon=True)
    caller.start()
    time.sleep(0.2)  # the worker has taken the call and waits up to max_delay for company
    start = time.monotonic()
    within(batcher.close, 2 * LONG, "close()")
    took = time.monotonic() - start
    caller.join(WAIT)
    assert took < LONG / 2, f"close() took {took:.2f} s: it waited out max_delay ({LONG} s)"
    assert len(answer) == 1 and np.max(np.abs(answer[0]["hn"] - StatefulSession(model).run_dict({"x": _x(3)})["hn"])) <= TOL


def test_close_returns_only_after_the_running_tick_finished():
    pool = HeldPool(sm.lstm_b())
    batcher = Batcher(pool, max_delay=0.0)
    answer: list[Any] = []
    caller = threading.Thread(target=lambda: answer.append(batcher.call("a", {"x": _x(4)}, ["hn"], timeout=2 * WAIT)), daemon=True)
    caller.start()
    assert pool.entered.wait(WAIT)  # the tick runs (held)
    closer = threading.Thread(target=batcher.close, daemon=True)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive(), "close() returned while a tick was still running"
    pool.go.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    caller.join(WAIT)
    assert len(answer) == 1  # the running tick's call was answered


def test_a_tick_whose_every_call_asks_for_an_unknown_output_leaves_the_worker_serving():
    model = sm.lstm_b()
    with closing(Batcher(SessionPool(model), max_delay=0.0)) as batcher:
        with pytest.raises(FeedError, match="no_such_output"):
            within(lambda: batcher.call("a", {"x": _x(5)}, ["no_such_output"], timeout=WAIT))
        got = within(lambda: batcher.call("a", {"x": _x(6)}, ["hn"], timeout=WAIT))
    # the refused call did not run: the stream's first call is the second one
    assert np.max(np.abs(got["hn"] - StatefulSession(model).run_dict({"x": _x(6)})["hn"])) <= TOL
