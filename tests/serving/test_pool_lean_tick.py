"""The pool's lean steady tick: outputs handed out as views of the tick's own buffers, and kept input contexts
joined in the bound buffer.

Oracles: every stream mirrored by its own StatefulSession (batch of one, none of the pool's code); a tick's
outputs saved as copies when handed out, compared after later ticks (a buffer written again while a caller
holds a view of it changes them).
"""

from __future__ import annotations

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool.pool import SessionPool
from tests.support import streaming_models as sm

TOL = 1e-5
INP = 3


def _chunk(rng: np.random.Generator, steps: int = 1) -> np.ndarray:
    return (0.8 * rng.standard_normal((steps, 1, INP))).astype(np.float32)


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _pool_and_solos(streams: int, context: dict[str, int] | None, **kw):
    model = sm.lstm_b()
    pool = SessionPool(model, context=context, **kw)
    base = StatefulSession(model, context=context)
    solo = {sid: base.fork(reset=True) for sid in range(streams)}
    for sid in solo:
        pool.open(sid)
    return pool, solo


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("context", [None, {"x": 2}])
@pytest.mark.parametrize("outputs", [["Y"], ["Y", "hn"], None])
def test_outputs_held_by_the_caller_never_change_and_every_stream_equals_its_solo_run(streams, context, outputs):
    pool, solo = _pool_and_solos(streams, context)
    rng = np.random.default_rng(3)
    held = []
    for tick in range(9):
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        got = pool.run(requests, outputs)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            assert list(got[sid]) == (outputs or ["Y", "hn", "cn"])
            for name, value in got[sid].items():
                assert value.shape == want[name].shape
                assert np.max(np.abs(value - want[name])) <= TOL
        if tick % 2 == 0:  # held across every later tick: both bindings' buffers in turn
            held.append((got, {sid: {k: v.copy() for k, v in out.items()} for sid, out in got.items()}))
    for got, saved in held:
        for sid, out in got.items():
            for name, value in out.items():
                assert np.array_equal(value, saved[sid][name])
    assert pool.stats.steady_ticks >= 5
    if outputs == ["Y"]:
        assert pool._steady is not None and pool._steady.lean


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("context", [None, {"x": 2}])
def test_a_dropped_tick_frees_its_buffer_for_the_next_run_of_its_binding(streams, context):
    pool, solo = _pool_and_solos(streams, context)
    rng = np.random.default_rng(4)
    addresses = []
    for _ in range(8):
        got = pool.run({sid: {"x": _chunk(rng)} for sid in solo}, ["Y"])
        addresses.append(_address(got[0]["Y"]))
        del got  # nothing holds this tick's outputs any more
    # two bindings, one buffer each, written again once dropped: no allocation per tick
    assert addresses[4:] == addresses[2:6]
    assert len(set(addresses[2:])) == 2


@pytest.mark.parametrize("streams", [1, 4])
def test_one_held_row_keeps_its_buffer_out_of_every_later_run(streams):
    pool, solo = _pool_and_solos(streams, None)
    rng = np.random.default_rng(5)
    kept = None
    for tick in range(8):
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        got = pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL
        if tick == 2:
            kept = got[streams - 1]["Y"]  # one stream's row alone, the rest of the tick dropped
            saved = kept.copy()
            kept_at = _address(kept)
        elif tick > 2:
            assert kept is not None
            assert np.array_equal(kept, saved)
            assert all(_address(out["Y"]) != kept_at for out in got.values())


@pytest.mark.parametrize("context", [None, {"x": 2}])
def test_writing_into_a_returned_output_touches_neither_state_nor_later_outputs(context):
    pool, solo = _pool_and_solos(3, context)
    rng = np.random.default_rng(6)
    for _ in range(6):
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        got = pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL
            got[sid]["Y"][...] = 1e6  # the caller's to write: the next run's state and outputs are not its business
        before = {sid: pool.state(sid) for sid in solo}
        for sid in solo:
            assert all(np.max(np.abs(v)) < 1e3 for v in before[sid].values())


@pytest.mark.parametrize("streams", [1, 5])
def test_the_kept_context_on_the_lean_tick_is_each_streams_own_and_reset_clears_it(streams):
    pool, solo = _pool_and_solos(streams, {"x": 2})
    base = StatefulSession(sm.lstm_b(), context={"x": 2})
    rng = np.random.default_rng(7)
    for tick in range(10):
        if tick == 5:  # one stream restarts: its state and kept context back to the start, the others untouched
            pool.reset(streams - 1)
            solo[streams - 1] = base.fork(reset=True)
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        got = pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL
    assert pool._steady is not None and pool._steady.lean
    assert pool.stats.steady_ticks >= 6


@pytest.mark.parametrize("streams", [1, 6])
def test_silero_on_the_lean_tick_equals_solo_sessions_with_their_kept_context(silero_dir, streams):
    """silero's layout: [batch, samples], the context along the samples after the batch axis, a shared ``sr``."""
    path = silero_dir / "silero_vad.onnx"
    pool = SessionPool(path, context={"input": 64})
    base = StatefulSession(path, context={"input": 64})
    solo = {sid: base.fork(reset=True) for sid in range(streams)}
    for sid in solo:
        pool.open(sid)
    rng = np.random.default_rng(9)
    sr = np.array(16000, np.int64)
    held = []
    for tick in range(7):
        if tick == 4:
            pool.reset(0)
            solo[0] = base.fork(reset=True)
        requests = {sid: {"input": (0.1 * rng.standard_normal((1, 512))).astype(np.float32), "sr": sr} for sid in solo}
        got = pool.run(requests, ["output"])
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            assert np.max(np.abs(got[sid]["output"] - want["output"])) <= TOL
            assert np.max(np.abs(pool.state(sid)["state"] - want["stateN"])) <= TOL
        held.append((got, {sid: out["output"].copy() for sid, out in got.items()}))
    for got, saved in held:
        assert all(np.array_equal(out["output"], saved[sid]) for sid, out in got.items())
    assert pool._steady is not None and pool._steady.lean
    assert pool.stats.steady_ticks >= 3


@pytest.mark.parametrize("odd", ["dtype", "shape", "extra name"])
def test_a_request_unlike_the_plan_on_the_context_tick_is_refused_as_a_solo_session_refuses_it(odd):
    pool, solo = _pool_and_solos(4, {"x": 2})
    rng = np.random.default_rng(8)
    for _ in range(4):
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        got = pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL
    before = {sid: pool.state(sid) for sid in solo}
    requests = {sid: {"x": _chunk(rng)} for sid in solo}
    if odd == "dtype":
        requests[2] = {"x": _chunk(rng).astype(np.float64)}
    elif odd == "shape":
        requests[2] = {"x": _chunk(rng).reshape(1, INP, 1).copy()}
    else:
        requests[2] = {"x": _chunk(rng), "y": _chunk(rng)}
    with pytest.raises(Exception) as solo_error:
        solo[2].run_dict(requests[2])
    with pytest.raises(Exception) as pool_error:
        pool.run(requests, ["Y"])
    assert type(pool_error.value) is type(solo_error.value)  # a FeedError, or a StateError for a chunk the kept context does not fit
    assert isinstance(pool_error.value, (FeedError, StateError))
    if odd != "shape":  # refused before anything ran
        for sid in solo:
            assert all(np.array_equal(v, before[sid][k]) for k, v in pool.state(sid).items())


def test_an_empty_tick_after_steady_ones_is_an_empty_answer_and_the_next_tick_runs_as_before():
    pool, solo = _pool_and_solos(3, None)
    rng = np.random.default_rng(10)
    for tick in range(6):
        if tick in (3, 4):
            assert pool.run({}, ["Y"]) == {}
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        got = pool.run(requests, ["Y"])
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(feeds)["Y"])) <= TOL
    assert pool.stats.steady_ticks >= 3
