"""The repeated tick (the same streams and outputs as the tick before, served by a plan that skips the pool's
bookkeeping), one small case each: what must end the plan, what it must refuse, what it must count.

Each stream against its own StatefulSession (batch of one, none of the pool's code).  Small and fast on purpose:
each test pins one thing the plan must get right.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool import SessionPool
from tests.support import streaming_models as sm

TOL = 1e-5
MODEL = sm.lstm_b()
BASE = StatefulSession(MODEL)


class Streams:
    def __init__(self, n: int, seed: int = 0, **pool: Any) -> None:
        self.pool = SessionPool(MODEL, **pool)
        self.ids = list(range(n))
        self.solo = {sid: BASE.fork(reset=True) for sid in self.ids}
        self.rng = np.random.default_rng(seed)
        for sid in self.ids:
            self.pool.open(sid)

    def tick(self, outputs: list[str] | None = ["Y"], ids: list[int] | None = None, odd: dict[int, Any] | None = None) -> dict[Any, Any]:  # noqa: B006 - never mutated
        ids = self.ids if ids is None else ids
        requests: dict[int, Any] = {sid: {"x": (0.8 * self.rng.standard_normal((1, 1, 3))).astype(np.float32)} for sid in ids}
        requests.update(odd or {})
        got = self.pool.run(requests, outputs)
        assert list(got) == ids
        for sid, feeds in requests.items():
            want = self.solo[sid].run_dict(dict(feeds))
            assert sorted(got[sid]) == sorted(outputs or want)
            for name, value in got[sid].items():
                assert value.shape == want[name].shape and np.max(np.abs(value - want[name])) <= TOL, (sid, name)
        return got


def test_a_stream_that_leaves_and_rejoins_under_the_same_id_ends_the_plan():
    s = Streams(3)
    for _ in range(3):
        s.tick()
    s.pool.close(0)  # rows are now 1, 2, 0; the tick's ids are still 0, 1, 2
    s.pool.open(0)
    s.solo[0] = BASE.fork(reset=True)
    s.tick()
    s.tick()


def test_another_output_list_with_the_same_ids_ends_the_plan():
    for first, then in ((["Y"], None), (["Y"], ["cn", "Y"]), (None, ["Y"])):
        s = Streams(3)
        for _ in range(3):
            s.tick(first)
        s.tick(then)
        s.tick(then)


def test_a_max_batch_lowered_under_the_plan_splits_the_next_tick():
    for outputs in (["Y"], None):
        s = Streams(3)
        for _ in range(3):
            s.tick(outputs)
        s.pool.max_batch = 2
        calls = s.pool.stats.ort_calls
        s.tick(outputs)
        assert s.pool.stats.ort_calls - calls == 2 and s.pool.stats.largest_batch == 3
        s.pool.max_batch = 3  # back within the cap: the plan may serve again
        s.tick(outputs)
        served = s.pool.stats.steady_ticks
        s.tick(outputs)
        assert s.pool.stats.steady_ticks == served + 1, outputs  # a cap the tick fits leaves the plan its tick


def test_the_plan_counts_each_tick_as_one_call_of_every_row():
    for n in (1, 2, 3):
        for outputs in (["Y"], None):
            s = Streams(n)
            for _ in range(5):
                s.tick(outputs)
            st = s.pool.stats
            assert (st.ort_calls, st.rows, st.whole_calls) == (5, 5 * n, 4), (n, outputs, st)
            assert st.steady_ticks >= 2, (n, outputs, st)
            steady = st.steady_ticks
            s.tick(outputs)
            assert st.steady_ticks == steady + 1, (n, outputs, st)  # one repeated tick counts once


def _odd_requests_on_the_plan(n: int) -> None:
    for outputs in (["Y"], None):
        for odd, refused in ((lambda x: {"x": x.astype(np.float64)}, True), (lambda x: {"x": x, "y": x}, True), (lambda x: {}, True),
                             (lambda x: {"x": x.tolist()}, False), (lambda x: {"x": np.concatenate([x, x])}, False)):
            s = Streams(n)
            s.tick(outputs)
            s.tick(outputs)
            feeds = odd(np.ones((1, 1, 3), np.float32))
            if refused:
                before = s.pool.state(n - 1)
                with pytest.raises(FeedError):
                    s.pool.run({sid: feeds if sid == n - 1 else {"x": np.ones((1, 1, 3), np.float32)} for sid in s.ids}, outputs)
                assert all(np.array_equal(v, before[k]) for k, v in s.pool.state(n - 1).items())
            else:
                s.tick(outputs, odd={n - 1: feeds})
            s.tick(outputs)


def test_an_odd_request_on_the_plan_of_one_stream_is_refused_or_served_as_its_own_session_would():
    _odd_requests_on_the_plan(1)


def test_an_odd_request_on_the_plan_of_three_streams_is_refused_or_served_as_its_own_session_would():
    _odd_requests_on_the_plan(3)


def test_repeated_ticks_of_two_time_steps_whose_rows_are_not_contiguous_equal_solo_runs():
    # x[T=2, B, 3]: a stream's row is two slices of the batch, not one run of bytes
    s = Streams(3)
    for _ in range(5):
        requests = {sid: {"x": (0.8 * s.rng.standard_normal((2, 1, 3))).astype(np.float32)} for sid in s.ids}
        got = s.pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - s.solo[sid].run_dict(feeds)["Y"])) <= TOL


def test_repeated_ticks_with_a_kept_context_prepend_it_on_the_plan_too():
    base = StatefulSession(MODEL, context={"x": 1})
    for n in (1, 3):
        pool = SessionPool(MODEL, context={"x": 1})
        solo = {sid: base.fork(reset=True) for sid in range(n)}
        rng = np.random.default_rng(n)
        for _ in range(5):
            requests = {sid: {"x": (0.8 * rng.standard_normal((2, 1, 3))).astype(np.float32)} for sid in solo}
            got = pool.run(requests, ["Y"], open_missing=True)
            for sid, feeds in requests.items():
                assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL, (n, sid)
        assert pool.stats.steady_ticks >= 2


def test_an_output_with_a_dim_before_its_batch_axis_is_split_right_on_the_plan():
    model = sm.lstm_b()
    model.graph.node.append(onnx.helper.make_node("Concat", ["Y", "Y"], ["twice"], axis=0))  # [2T, 1, B, 5]
    model.graph.output.append(onnx.helper.make_tensor_value_info("twice", onnx.TensorProto.FLOAT, None))
    pool = SessionPool(model)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in range(3)}
    rng = np.random.default_rng(5)
    for _ in range(5):
        requests = {sid: {"x": (0.8 * rng.standard_normal((1, 1, 3))).astype(np.float32)} for sid in solo}
        got = pool.run(requests, ["twice", "Y"], open_missing=True)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            for name in ("twice", "Y"):
                assert got[sid][name].shape == want[name].shape and np.max(np.abs(got[sid][name] - want[name])) <= TOL, (sid, name)
    assert pool.layout.outputs["twice"] == 2 and pool.stats.steady_ticks >= 2


def test_repeated_ticks_whose_feeds_are_too_large_for_the_bound_buffers_equal_solo_runs():
    # 3 streams x 30,000 time steps x 3 floats: more than the 1 MiB a tick copies into a buffer bound once
    s = Streams(3)
    for _ in range(3):
        requests = {sid: {"x": (0.8 * s.rng.standard_normal((30_000, 1, 3))).astype(np.float32)} for sid in s.ids}
        got = s.pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - s.solo[sid].run_dict(feeds)["Y"])) <= TOL
    assert s.pool.stats.steady_ticks >= 1


def test_the_plan_returns_every_plain_output_asked_for_with_one_stream_and_several():
    from tests.serving.test_pool_buffers import two_plain_outputs

    model = two_plain_outputs()
    base = StatefulSession(model)
    for n in (1, 3):
        pool = SessionPool(model)
        solo = {sid: base.fork(reset=True) for sid in range(n)}
        rng = np.random.default_rng(n)
        for _ in range(4):
            requests = {sid: {"x": (0.8 * rng.standard_normal((1, 1, 3))).astype(np.float32)} for sid in solo}
            got = pool.run(requests, ["negY", "last"], open_missing=True)
            for sid, feeds in requests.items():
                want = solo[sid].run_dict(feeds)
                assert sorted(got[sid]) == ["last", "negY"], (n, sid)
                for name, value in got[sid].items():
                    assert np.max(np.abs(value - want[name])) <= TOL, (n, sid, name)
        steady = pool.stats.steady_ticks
        pool.run({sid: {"x": np.zeros((1, 1, 3), np.float32)} for sid in solo}, ["negY", "last"])
        assert pool.stats.steady_ticks == steady + 1  # one repeated tick counts once


def test_a_shared_input_that_changes_between_repeated_ticks_reaches_the_model():
    from tests.serving.test_pool import gained_lstm

    model = gained_lstm()
    base = StatefulSession(model)
    for n in (1, 3):
        pool = SessionPool(model)
        solo = {sid: base.fork(reset=True) for sid in range(n)}
        rng = np.random.default_rng(n)
        for gain in (1.5, 1.5, 1.5, -0.5, 2.0):  # the same value for every stream of a tick, another each later tick
            g = np.array(gain, np.float32)
            requests = {sid: {"x": (0.8 * rng.standard_normal((1, 1, 3))).astype(np.float32), "gain": g} for sid in solo}
            got = pool.run(requests, ["Y"], open_missing=True)
            for sid, feeds in requests.items():
                assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL, (n, gain, sid)
        assert pool.stats.steady_ticks >= 2
