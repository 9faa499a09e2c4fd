"""The pool's lean steady tick: outputs handed out as views of the tick's own buffers, and kept input contexts
joined in the bound buffer.

Oracles: every stream mirrored by its own StatefulSession (batch of one, none of the pool's code); a tick's
outputs saved as copies when handed out, compared after later ticks (a buffer written again while a caller
holds a view of it changes them).  The cases of one property are a loop in one test (the mutation tool runs
one parametrization of each test).
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool.pool import SessionPool
from tests.support import streaming_models as sm

TOL = 1e-5
INP = 3
CONTEXTS = (None, {"x": 2})


def two_outputs() -> onnx.ModelProto:
    """lstm_b with a second plain output, ``Yneg = -Y``: two buffers per binding."""
    model = sm.lstm_b()
    g = model.graph
    g.node.append(onnx.helper.make_node("Neg", ["Y"], ["Yneg"]))
    g.output.append(onnx.helper.make_tensor_value_info("Yneg", onnx.TensorProto.FLOAT, ["T", 1, "B", 5]))
    return model


def _chunk(rng: np.random.Generator, steps: int = 1) -> np.ndarray:
    return (0.8 * rng.standard_normal((steps, 1, INP))).astype(np.float32)


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _pool_and_solos(streams: int, context: dict[str, int] | None, model: onnx.ModelProto | None = None):
    model = model or two_outputs()
    pool = SessionPool(model, context=context)
    base = StatefulSession(model, context=context)
    solo = {sid: base.fork(reset=True) for sid in range(streams)}
    for sid in solo:
        pool.open(sid)
    return pool, solo


def _tick(pool, solo, rng, outputs=("Y",)):
    """One tick of every stream, each checked against its solo session."""
    requests = {sid: {"x": _chunk(rng)} for sid in solo}
    got = pool.run(requests, None if outputs is None else list(outputs))
    assert list(got) == list(requests)
    for sid, feeds in requests.items():
        want = solo[sid].run_dict(feeds)
        assert list(got[sid]) == (list(outputs) if outputs is not None else ["Y", "hn", "cn", "Yneg"])
        for name, value in got[sid].items():
            assert value.shape == want[name].shape
            assert np.max(np.abs(value - want[name])) <= TOL, (sid, name)
    return got


def test_outputs_held_by_the_caller_never_change_and_every_stream_equals_its_solo_run():
    # lean (plain outputs: one or two buffers per binding) and not (a state output asked for, every output)
    for streams, context, outputs in itertools.product((1, 4), CONTEXTS, (("Y",), ("Yneg", "Y"), ("Y", "hn"), None)):
        pool, solo = _pool_and_solos(streams, context)
        rng = np.random.default_rng(3)
        held = []
        for tick in range(7):
            got = _tick(pool, solo, rng, outputs)
            if tick % 2 == 0:  # held across every later tick: both bindings' buffers in turn
                held.append((got, {sid: {k: v.copy() for k, v in out.items()} for sid, out in got.items()}))
        for got, saved in held:
            for sid, out in got.items():
                assert all(np.array_equal(value, saved[sid][name]) for name, value in out.items()), (streams, context, outputs)
        assert pool.stats.steady_ticks >= 4
        assert pool._steady is not None and pool._steady.lean == (outputs is not None and "hn" not in outputs)


def test_a_dropped_tick_frees_its_buffers_for_the_next_run_of_its_binding():
    for streams, context, outputs in itertools.product((1, 4), CONTEXTS, (("Y",), ("Y", "Yneg"), ("Y", "hn"))):
        pool, solo = _pool_and_solos(streams, context)
        rng = np.random.default_rng(4)
        addresses = []
        for _ in range(8):
            got = _tick(pool, solo, rng, outputs)
            addresses.append(_address(got[0]["Y"]))
            del got  # nothing holds this tick's outputs any more
        # two bindings, one buffer each, written again once dropped: no allocation per tick
        assert addresses[4:] == addresses[2:6], (streams, context, outputs)
        assert len(set(addresses[2:])) == 2


def test_one_held_output_keeps_its_buffer_out_of_every_later_run():
    # one stream's row of one output held alone (the second output: its buffer is not the first one checked)
    for streams, name in itertools.product((1, 4), ("Y", "Yneg")):
        pool, solo = _pool_and_solos(streams, None)
        rng = np.random.default_rng(5)
        kept = None
        for tick in range(8):
            got = _tick(pool, solo, rng, ("Y", "Yneg"))
            if tick == 2:
                kept = got[streams - 1][name]
                saved = kept.copy()
                kept_at = _address(kept)
            elif tick > 2:
                assert kept is not None and np.array_equal(kept, saved), (streams, name)
                assert all(_address(out[name]) != kept_at for out in got.values())


def test_writing_into_a_returned_output_touches_neither_state_nor_later_outputs():
    for context in CONTEXTS:
        pool, solo = _pool_and_solos(3, context)
        rng = np.random.default_rng(6)
        for _ in range(6):
            got = _tick(pool, solo, rng, ("Y", "Yneg"))
            for out in got.values():
                for value in out.values():
                    value[...] = 1e6  # the caller's to write: the next run's state and outputs are not its business
            for sid in solo:
                assert all(np.max(np.abs(v)) < 1e3 for v in pool.state(sid).values())


def test_the_kept_context_on_the_lean_tick_is_each_streams_own_and_reset_clears_it():
    base = StatefulSession(two_outputs(), context={"x": 2})
    for streams in (1, 5):
        pool, solo = _pool_and_solos(streams, {"x": 2})
        rng = np.random.default_rng(7)
        for tick in range(10):
            if tick == 5:  # one stream restarts: its state and kept context back to the start, the others untouched
                pool.reset(streams - 1)
                solo[streams - 1] = base.fork(reset=True)
            _tick(pool, solo, rng, ("Y",))
        assert pool._steady is not None and pool._steady.lean
        assert pool.stats.steady_ticks >= 7  # every tick after the first two, the reset one too


def test_silero_on_the_lean_tick_equals_solo_sessions_with_their_kept_context(silero_dir):
    """silero's layout: [batch, samples], the context along the samples after the batch axis, a shared ``sr``."""
    path = silero_dir / "silero_vad.onnx"
    base = StatefulSession(path, context={"input": 64})
    sr = np.array(16000, np.int64)
    for streams in (1, 6):
        pool = SessionPool(path, context={"input": 64})
        solo = {sid: base.fork(reset=True) for sid in range(streams)}
        for sid in solo:
            pool.open(sid)
        rng = np.random.default_rng(9)
        held = []
        for tick in range(6):
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


def test_a_request_unlike_the_plan_is_refused_as_a_solo_session_refuses_it():
    odd = {
        "float64": lambda rng: {"x": _chunk(rng).astype(np.float64)},
        "int32, the same bytes per row": lambda rng: {"x": _chunk(rng).view(np.int32)},
        "transposed": lambda rng: {"x": _chunk(rng).reshape(1, INP, 1).copy()},
        "an extra name": lambda rng: {"x": _chunk(rng), "y": _chunk(rng)},
    }
    for context, (what, make) in itertools.product(CONTEXTS, odd.items()):
        for streams in (1, 4):
            pool, solo = _pool_and_solos(streams, context)
            rng = np.random.default_rng(8)
            for _ in range(4):
                _tick(pool, solo, rng)
            before = {sid: pool.state(sid) for sid in solo}
            requests = {sid: {"x": _chunk(rng)} for sid in solo}
            requests[streams - 1] = make(rng)
            with pytest.raises(Exception) as solo_error:
                solo[streams - 1].run_dict(requests[streams - 1])
            with pytest.raises(Exception) as pool_error:
                pool.run(requests, ["Y"])
            # a FeedError, a StateError for a chunk the kept context does not fit, or onnxruntime's refusal of the
            # transposed shape (the solo session wraps it in its own error, the pool passes onnxruntime's on)
            if isinstance(solo_error.value, (FeedError, StateError)):
                assert type(pool_error.value) is type(solo_error.value), (context, what, streams)
            else:
                assert "dimensions" in str(solo_error.value) and "dimensions" in str(pool_error.value), (context, what, streams)
            if isinstance(pool_error.value, FeedError):  # refused before anything ran (a shape error: after the other rows' call)
                for sid in solo:
                    assert all(np.array_equal(v, before[sid][k]) for k, v in pool.state(sid).items())


def test_a_chunk_missing_the_context_axis_is_refused_with_a_state_error():
    """context_probe keeps its context along the last axis: a chunk without that axis fits nothing."""
    pool = SessionPool(sm.context_probe(6), context={"x": 2})
    pool.open(0)
    pool.run({0: {"x": np.ones((1, 4), np.float32)}})
    with pytest.raises(StateError, match="kept context"):
        pool.run({0: {"x": np.ones((1,), np.float32)}})
    with pytest.raises(StateError, match="kept context"):
        pool.run({0: {"x": np.ones((2, 4), np.float32)}})


def test_an_empty_tick_after_steady_ones_is_an_empty_answer_and_the_next_tick_runs_as_before():
    pool, solo = _pool_and_solos(3, None)
    rng = np.random.default_rng(10)
    for tick in range(6):
        if tick in (3, 4):
            assert pool.run({}, ["Y"]) == {}
        _tick(pool, solo, rng)
    assert pool.stats.steady_ticks >= 3
