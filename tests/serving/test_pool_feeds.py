"""A tick's requests as callers write them: inputs listed in any order, shared values as numpy scalars or Python
numbers, feeds refused with a message naming what is wrong.  Each stream against its own StatefulSession."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool import SessionPool
from tests.serving.test_pool import gained_lstm
from tests.support import streaming_models as sm

TOL = 1e-5


def _x(seed: int, steps: int = 1) -> np.ndarray:
    return (0.8 * np.random.default_rng(seed).standard_normal((steps, 1, 3))).astype(np.float32)


def test_requests_that_list_their_inputs_in_any_order_or_give_a_shared_value_as_a_scalar_equal_solo_runs():
    model = gained_lstm()
    for cast in (False, True):
        pool = SessionPool(model, cast_inputs=cast)
        base = StatefulSession(model, cast_inputs=cast)
        solo = {sid: base.fork(reset=True) for sid in range(4)}
        gains: list[Any] = [np.array(1.5, np.float32), np.float32(1.5), np.array(1.5, np.float32), np.array(1.5, np.float32)]
        if cast:
            gains[3] = 1.5  # a Python number: converted when cast_inputs, as the stream's own session converts it
        for t in range(4):
            requests: dict[int, dict[str, Any]] = {}
            for sid in solo:
                x = _x(10 * t + sid)
                requests[sid] = {"gain": gains[sid], "x": x} if sid % 2 else {"x": x, "gain": gains[sid]}
            got = pool.run(requests, ["Y"], open_missing=True)
            assert list(got) == list(requests)
            for sid, feeds in requests.items():
                want = solo[sid].run_dict(dict(feeds))["Y"]
                assert np.max(np.abs(got[sid]["Y"] - want)) <= TOL, (cast, t, sid)


def test_a_feed_that_is_no_plain_input_is_refused_with_what_it_is():
    pool = SessionPool(sm.lstm_b())
    x = _x(0)
    pool.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    for feeds, match in (({"x": x, "c0": np.zeros((1, 1, 5), np.float32)}, r"session 'b' feeds 'c0', a state input \(the pool keeps it\)"),
                         ({"x": x, "z": x}, r"session 'b' feeds 'z', not an input; inputs are \['x'\]"),
                         ({"y": x}, r"session 'b' feeds 'y', not an input"),
                         ({}, r"session 'b' is missing input\(s\) \['x'\]")):
        with pytest.raises(FeedError, match=match):
            pool.run({"a": {"x": x}, "b": feeds})


def test_a_shared_input_given_as_two_objects_of_two_values_splits_the_tick():
    model = gained_lstm()
    pool = SessionPool(model)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in range(3)}
    one, other = np.array(1.5, np.float32), np.array(-0.5, np.float32)
    for t in range(4):  # after the first tick the batch is stacked without a Python pass per request
        gains = {0: one, 1: one, 2: other if t % 2 else one}
        requests = {sid: {"x": _x(10 * t + sid), "gain": gains[sid]} for sid in solo}
        got = pool.run(requests, ["Y"], open_missing=True)
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL, (t, sid)


def test_a_tick_whose_requests_differ_in_shape_shared_value_or_order_of_inputs_equals_solo_runs():
    model = gained_lstm()
    pool = SessionPool(model)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in range(4)}
    g, h = np.array(1.5, np.float32), np.array(-0.5, np.float32)
    pool.run({sid: {"x": _x(sid), "gain": g} for sid in solo}, ["Y"], open_missing=True)  # the probe
    for sid in solo:
        pool.reset(sid)
    ticks = [
        {0: (1, g), 1: (2, g), 2: (1, g), 3: (1, g)},  # only the second request differs (two time steps)
        {0: (1, g), 1: (1, h), 2: (1, g), 3: (1, g)},  # only the second differs (another shared value)
        {0: (2, h), 1: (1, g), 2: (1, g), 3: (1, g)},  # only the first differs (both ways)
        {0: (1, g), 1: (1, g), 2: (1, np.array(1.5, np.float32)), 3: (2, h)},  # an equal copy, and one of each
    ]
    for t, plan in enumerate(ticks):
        requests: dict[int, dict[str, Any]] = {}
        for sid, (steps, gain) in plan.items():
            x = _x(100 * t + sid, steps)
            requests[sid] = {"gain": gain, "x": x} if sid == 3 else {"x": x, "gain": gain}
        got = pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(dict(feeds))["Y"]
            assert got[sid]["Y"].shape == want.shape and np.max(np.abs(got[sid]["Y"] - want)) <= TOL, (t, sid)
