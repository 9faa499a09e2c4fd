"""The pool's lean steady tick: outputs handed out as views of the tick's own buffers, and kept input contexts
joined in the bound buffer.

Oracles: every stream mirrored by its own StatefulSession (batch of one, none of the pool's code); a tick's
outputs saved as copies when handed out, compared after later ticks (a buffer written again while a caller
holds a view of it changes them).  Each case is its own small test (the mutation tool runs one
parametrization of a test, and the fastest tests first).
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, OnnxRuntimeError, StatefulSession
from rnnir.serving.pool.pool import SessionPool
from tests.support import streaming_models as sm

TOL = 1e-5
INP = 3
CONTEXT = {"x": 2}


def two_outputs() -> onnx.ModelProto:
    """lstm_b with a second plain output, ``Yneg = -Y``: two buffers per binding."""
    model = sm.lstm_b()
    g = model.graph
    g.node.append(onnx.helper.make_node("Neg", ["Y"], ["Yneg"]))
    g.output.append(onnx.helper.make_tensor_value_info("Yneg", onnx.TensorProto.FLOAT, ["T", 1, "B", 5]))
    return model


def _chunk(rng: np.random.Generator) -> np.ndarray:
    return (0.8 * rng.standard_normal((1, 1, INP))).astype(np.float32)


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _pool_and_solos(streams: int, context: dict[str, int] | None = None):
    model = two_outputs()
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


def _held_outputs_never_change(streams, context, outputs, lean):
    pool, solo = _pool_and_solos(streams, context)
    rng = np.random.default_rng(3)
    held = []
    for tick in range(6):
        got = _tick(pool, solo, rng, outputs)
        if tick % 2 == 0:  # held across every later tick: both bindings' buffers in turn
            held.append((got, {sid: {k: v.copy() for k, v in out.items()} for sid, out in got.items()}))
    for got, saved in held:
        for sid, out in got.items():
            assert all(np.array_equal(value, saved[sid][name]) for name, value in out.items())
    assert pool.stats.steady_ticks >= 3
    assert pool._steady is not None and pool._steady.lean == lean


def test_held_outputs_never_change_one_stream():
    _held_outputs_never_change(1, None, ("Y",), lean=True)


def test_held_outputs_never_change_two_outputs_of_streams():
    _held_outputs_never_change(4, None, ("Yneg", "Y"), lean=True)


def test_held_outputs_never_change_one_stream_with_a_kept_context():
    _held_outputs_never_change(1, CONTEXT, ("Y", "Yneg"), lean=True)


def test_held_outputs_never_change_streams_with_a_kept_context():
    _held_outputs_never_change(4, CONTEXT, ("Y",), lean=True)


def test_held_outputs_never_change_when_a_state_output_is_asked_for():
    _held_outputs_never_change(3, None, ("Y", "hn"), lean=False)


def test_held_outputs_never_change_when_every_output_is_asked_for_with_a_kept_context():
    _held_outputs_never_change(2, CONTEXT, None, lean=False)


def _dropped_buffers_are_written_again(streams, context, outputs):
    pool, solo = _pool_and_solos(streams, context)
    rng = np.random.default_rng(4)
    addresses = []
    for _ in range(7):
        got = _tick(pool, solo, rng, outputs)
        addresses.append([_address(got[0][name]) for name in outputs])
        del got  # nothing holds this tick's outputs any more
    # two bindings, one buffer per output each, written again once dropped: no allocation per tick
    assert addresses[4:] == addresses[2:5]
    assert len({tuple(a) for a in addresses[2:]}) == 2


def test_a_dropped_tick_frees_its_buffer_one_stream():
    _dropped_buffers_are_written_again(1, None, ("Y",))


def test_a_dropped_tick_frees_its_buffers_streams_with_a_kept_context():
    _dropped_buffers_are_written_again(4, CONTEXT, ("Y", "Yneg"))


def test_a_dropped_tick_frees_its_buffer_when_a_state_output_is_asked_for():
    _dropped_buffers_are_written_again(3, None, ("Y", "hn"))


def _one_held_output_keeps_its_buffer(streams, name):
    pool, solo = _pool_and_solos(streams)
    rng = np.random.default_rng(5)
    for tick in range(6):
        got = _tick(pool, solo, rng, ("Y", "Yneg"))
        if tick == 1:
            kept = got[streams - 1][name]  # one stream's row of one output held alone, the rest dropped
            saved = kept.copy()
            kept_at = _address(kept)
        elif tick > 1:
            assert np.array_equal(kept, saved)
            assert all(_address(out[name]) != kept_at for out in got.values())


def test_one_held_second_output_of_one_stream_keeps_its_buffer():
    _one_held_output_keeps_its_buffer(1, "Yneg")  # not the first buffer the check looks at


def test_one_held_row_of_streams_keeps_its_buffer():
    _one_held_output_keeps_its_buffer(4, "Y")


def test_writing_into_a_returned_output_touches_neither_state_nor_later_outputs():
    pool, solo = _pool_and_solos(3, CONTEXT)
    rng = np.random.default_rng(6)
    for _ in range(5):
        got = _tick(pool, solo, rng, ("Y", "Yneg"))
        for out in got.values():
            for value in out.values():
                value[...] = 1e6  # the caller's to write: the next run's state and outputs are not its business
        for sid in solo:
            assert all(np.max(np.abs(v)) < 1e3 for v in pool.state(sid).values())


def _kept_context_and_reset(streams):
    pool, solo = _pool_and_solos(streams, CONTEXT)
    base = StatefulSession(two_outputs(), context=CONTEXT)
    rng = np.random.default_rng(7)
    for tick in range(7):
        if tick == 4:  # one stream restarts: its state and kept context back to the start, the others untouched
            pool.reset(streams - 1)
            solo[streams - 1] = base.fork(reset=True)
        _tick(pool, solo, rng)
    assert pool._steady is not None and pool._steady.lean
    assert pool.stats.steady_ticks == 5  # every tick after the first two, the one after the reset too


def test_the_kept_context_of_one_stream_on_the_lean_tick_and_reset():
    _kept_context_and_reset(1)


def test_the_kept_context_of_each_stream_on_the_lean_tick_and_reset():
    _kept_context_and_reset(5)


def test_silero_on_the_lean_tick_equals_solo_sessions_with_their_kept_context(silero_dir):
    """silero's layout: [batch, samples], the context along the samples after the batch axis, a shared ``sr``."""
    path = silero_dir / "silero_vad.onnx"
    base = StatefulSession(path, context={"input": 64})
    sr = np.array(16000, np.int64)
    pool = SessionPool(path, context={"input": 64})
    solo = {sid: base.fork(reset=True) for sid in range(5)}
    for sid in solo:
        pool.open(sid)
    rng = np.random.default_rng(9)
    held = []
    for tick in range(5):
        if tick == 3:
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
    assert pool.stats.steady_ticks == 3


ODD = {
    "float64": lambda rng: {"x": _chunk(rng).astype(np.float64)},
    "int32, the same bytes per row": lambda rng: {"x": _chunk(rng).view(np.int32)},
    "an extra name": lambda rng: {"x": _chunk(rng), "y": _chunk(rng)},
    "another name": lambda rng: {"z": _chunk(rng)},
    "transposed": lambda rng: {"x": _chunk(rng).reshape(1, INP, 1).copy()},
}


def _odd_requests_refused_like_solo(streams, context, outputs=("Y",)):
    pool, solo = _pool_and_solos(streams, context)
    rng = np.random.default_rng(8)
    for what, make in ODD.items():
        for _ in range(3):
            _tick(pool, solo, rng, outputs)
        assert pool._steady is not None and pool._steady.lean  # the plan the odd request meets
        before = {sid: pool.state(sid) for sid in solo}
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        requests[streams - 1] = make(rng)
        with pytest.raises(Exception) as solo_error:
            solo[streams - 1].run_dict(requests[streams - 1])
        with pytest.raises(Exception) as pool_error:
            pool.run(requests, list(outputs))
        # a FeedError, a StateError for a chunk the kept context does not fit, or onnxruntime's refusal of the
        # transposed shape, which both wrap in OnnxRuntimeError with onnxruntime's words
        assert type(pool_error.value) is type(solo_error.value), what
        if isinstance(solo_error.value, OnnxRuntimeError):
            assert "dimensions" in str(solo_error.value) and "dimensions" in str(pool_error.value), what
            assert type(pool_error.value.__cause__).__module__.startswith("onnxruntime"), what
            # both name what was fed with its dtype and shape (the odd request runs alone), and not the state
            fed = [re.search(r"refused the call \((.*?)\): ", str(e.value)) for e in (solo_error, pool_error)]
            assert fed[0] and fed[1] and fed[0][1] == fed[1][1] == f"x float32[1, {INP}, 1]", (what, fed)
        if not isinstance(pool_error.value, FeedError):  # a shape refusal comes after the other rows' call
            return
        for sid in solo:  # refused before anything ran
            assert all(np.array_equal(v, before[sid][k]) for k, v in pool.state(sid).items()), what


def test_a_request_unlike_the_plan_of_one_stream_is_refused_as_a_solo_session_refuses_it():
    _odd_requests_refused_like_solo(1, None)


def test_a_request_unlike_the_plan_of_streams_is_refused_as_a_solo_session_refuses_it():
    _odd_requests_refused_like_solo(4, None)


def test_a_request_unlike_the_plan_of_streams_with_a_kept_context_is_refused_as_a_solo_session_refuses_it():
    _odd_requests_refused_like_solo(4, CONTEXT)


def test_a_request_unlike_the_plan_of_one_stream_asking_two_outputs_is_refused_as_a_solo_session_refuses_it():
    _odd_requests_refused_like_solo(1, None, ("Yneg", "Y"))  # the general lean tick of one stream, not its shortcut


def test_a_request_unlike_the_plan_of_streams_asking_two_outputs_is_refused_as_a_solo_session_refuses_it():
    _odd_requests_refused_like_solo(3, None, ("Yneg", "Y"))  # the general lean tick of streams, not its shortcut


# -- the shortcuts: one input and one output, one stream (SteadyTick.one) or many (SteadyTick.single) -----------


def _plan_after_ticks(streams, context, outputs, ticks=4):
    pool, solo = _pool_and_solos(streams, context)
    rng = np.random.default_rng(11)
    for _ in range(ticks):
        _tick(pool, solo, rng, outputs)
    steady = pool._steady
    assert steady is not None and steady.lean
    served = pool.stats.steady_ticks
    _tick(pool, solo, rng, outputs)
    assert pool.stats.steady_ticks == served + 1  # the next tick too, whichever path of the plan serves it
    return steady


def test_one_stream_with_one_input_and_one_output_takes_the_one_stream_shortcut():
    steady = _plan_after_ticks(1, None, ("Y",))
    assert steady.one is not None and steady.single is None
    assert steady.one[0] == 0 and steady.one[1] == "x" and steady.one[5] == "Y"


def test_one_stream_asking_two_outputs_takes_the_general_lean_tick():
    steady = _plan_after_ticks(1, None, ("Y", "Yneg"))
    assert steady.one is None and steady.single is None


def test_one_stream_with_a_kept_context_takes_the_general_lean_tick():
    steady = _plan_after_ticks(1, CONTEXT, ("Y",))
    assert steady.one is None and steady.single is None


def test_streams_with_one_input_and_one_output_take_the_streams_shortcut():
    steady = _plan_after_ticks(4, None, ("Y",))
    assert steady.single is not None and steady.one is None
    assert steady.single[4] == "Y" and steady.single[2] == (1, 1, INP)


def test_streams_asking_two_outputs_take_the_general_lean_tick():
    steady = _plan_after_ticks(4, None, ("Yneg", "Y"))
    assert steady.single is None and steady.one is None


def test_streams_with_a_kept_context_take_the_general_lean_tick():
    steady = _plan_after_ticks(4, CONTEXT, ("Y",))
    assert steady.single is None and steady.one is None


def test_streams_whose_output_rows_need_a_transpose_take_the_general_lean_tick():
    # Y2 = Y twice along time: [2, 1, B, 5], so a stream's row is two slices of the output, not one run of bytes
    model = two_outputs()
    model.graph.node.append(onnx.helper.make_node("Concat", ["Y", "Y"], ["Y2"], axis=0))
    model.graph.output.append(onnx.helper.make_tensor_value_info("Y2", onnx.TensorProto.FLOAT, [2, 1, "B", 5]))
    pool = SessionPool(model)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in range(3)}
    rng = np.random.default_rng(12)
    held = []
    for _ in range(5):
        requests = {sid: {"x": _chunk(rng)} for sid in solo}
        got = pool.run(requests, ["Y2"], open_missing=True)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)["Y2"]
            assert got[sid]["Y2"].shape == want.shape == (2, 1, 1, 5) and np.max(np.abs(got[sid]["Y2"] - want)) <= TOL
        held.append((got, {sid: out["Y2"].copy() for sid, out in got.items()}))
    for got, saved in held:
        assert all(np.array_equal(out["Y2"], saved[sid]) for sid, out in got.items())
    steady = pool._steady
    assert steady is not None and steady.lean and steady.single is None and pool.stats.steady_ticks == 3


def _served_around_the_shortcut(streams, odd_tick):
    """A tick the shortcut passes on (``odd_tick`` makes its requests from usual ones) is served by the general
    path as each stream's solo session serves it; the shortcut serves the usual tick after it."""
    pool, solo = _pool_and_solos(streams)
    rng = np.random.default_rng(13)
    for _ in range(4):
        _tick(pool, solo, rng)
    served = pool.stats.steady_ticks
    requests = odd_tick({sid: {"x": _chunk(rng)} for sid in solo})
    got = pool.run(requests, ["Y"])
    assert list(got) == list(requests)
    for sid, feeds in requests.items():
        want = solo[sid].run_dict(dict(feeds))["Y"]
        assert np.max(np.abs(got[sid]["Y"] - want)) <= TOL, sid
    assert pool.stats.steady_ticks == served  # not the shortcut's tick
    _tick(pool, solo, rng)
    _tick(pool, solo, rng)
    assert pool.stats.steady_ticks >= served + 1 and pool._steady is not None
    return pool._steady


def _strided(requests):
    """Each stream's chunk as a view of every other element: not C-contiguous, so not one run of bytes."""
    return {sid: {"x": np.repeat(f["x"], 2, axis=2)[..., ::2]} for sid, f in requests.items()}


def test_a_request_of_one_stream_that_is_not_a_dict_is_served_by_the_general_path():
    from types import MappingProxyType

    steady = _served_around_the_shortcut(1, lambda r: {sid: MappingProxyType(f) for sid, f in r.items()})
    assert steady.one is not None


def test_a_strided_chunk_of_one_stream_is_served_by_the_shortcut():
    pool, solo = _pool_and_solos(1)
    rng = np.random.default_rng(14)
    for _ in range(4):
        _tick(pool, solo, rng)
    served = pool.stats.steady_ticks
    requests = _strided({0: {"x": _chunk(rng)}})
    assert not requests[0]["x"].flags.c_contiguous
    got = pool.run(requests, ["Y"])
    assert np.max(np.abs(got[0]["Y"] - solo[0].run_dict(requests[0])["Y"])) <= TOL
    assert pool.stats.steady_ticks == served + 1  # copied into the bound buffer as it is


def test_strided_chunks_of_streams_are_served_by_the_general_path():
    steady = _served_around_the_shortcut(3, _strided)
    assert steady.single is not None


def test_streams_in_another_order_are_served_by_the_general_path():
    steady = _served_around_the_shortcut(4, lambda r: dict(reversed(r.items())))
    assert steady.single is not None


def test_a_list_for_a_chunk_of_streams_is_served_by_the_general_path():
    steady = _served_around_the_shortcut(3, lambda r: {sid: ({"x": f["x"].tolist()} if sid == 1 else f) for sid, f in r.items()})
    assert steady.single is not None


def test_a_tick_naming_another_stream_than_the_one_streams_plan_is_refused_and_the_plan_serves_on():
    from rnnir.serving.pool import UnknownSessionError

    pool, solo = _pool_and_solos(1)
    rng = np.random.default_rng(15)
    for _ in range(4):
        _tick(pool, solo, rng)
    before = pool.state(0)
    with pytest.raises(UnknownSessionError):
        pool.run({1: {"x": _chunk(rng)}}, ["Y"])
    assert all(np.array_equal(v, before[k]) for k, v in pool.state(0).items())
    with pytest.raises(UnknownSessionError):
        pool.run({0: {"x": _chunk(rng)}, 1: {"x": _chunk(rng)}}, ["Y"])  # two requests: nor is this the plan's
    served = pool.stats.steady_ticks
    _tick(pool, solo, rng)  # the solo session never saw the refused ticks, nor did stream 0's state
    assert pool.stats.steady_ticks == served + 1


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
    pool, solo = _pool_and_solos(3)
    rng = np.random.default_rng(10)
    for tick in range(6):
        if tick in (3, 4):
            assert pool.run({}, ["Y"]) == {}
        _tick(pool, solo, rng)
    assert pool.stats.steady_ticks >= 3


def two_inputs() -> onnx.ModelProto:
    """lstm_b fed ``x + x2`` (two batched inputs), with ``Ysum``, Y summed over time ([1, 1, B, 5]), as an output."""
    model = two_outputs()
    g = model.graph
    g.node[0].input[0] = "xs"
    g.node.insert(0, onnx.helper.make_node("Add", ["x", "x2"], ["xs"]))
    g.node.append(onnx.helper.make_node("ReduceSum", ["Y", "time"], ["Ysum"], keepdims=1))
    g.initializer.append(onnx.numpy_helper.from_array(np.array([0], np.int64), "time"))
    g.input.insert(1, onnx.helper.make_tensor_value_info("x2", onnx.TensorProto.FLOAT, ["T", "B", INP]))
    g.output.append(onnx.helper.make_tensor_value_info("Ysum", onnx.TensorProto.FLOAT, [1, 1, "B", 5]))
    return model


def _two_inputs_against_solo(streams, context):
    model = two_inputs()
    pool = SessionPool(model, context=context)
    base = StatefulSession(model, context=context)
    solo = {sid: base.fork(reset=True) for sid in range(streams)}
    rng = np.random.default_rng(16)
    for _ in range(5):
        requests = {sid: {"x": _chunk(rng), "x2": _chunk(rng)} for sid in solo}
        got = pool.run(requests, ["Ysum"], open_missing=True)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)["Ysum"]
            assert got[sid]["Ysum"].shape == want.shape and np.max(np.abs(got[sid]["Ysum"] - want)) <= TOL, sid
    steady = pool._steady
    assert steady is not None and steady.lean and pool.stats.steady_ticks == 3
    assert steady.one is None and steady.single is None  # two inputs: the general lean tick
    return steady


def test_one_stream_with_two_inputs_takes_the_general_lean_tick():
    _two_inputs_against_solo(1, None)


def test_streams_with_two_batched_inputs_take_the_general_lean_tick():
    assert len(_two_inputs_against_solo(3, None).rows) == 2


def test_streams_with_one_batched_input_and_one_with_a_kept_context_take_the_general_lean_tick():
    steady = _two_inputs_against_solo(3, {"x2": (1, 0)})  # x2's chunk joined after its context: one row, one join
    assert len(steady.rows) == 1 and len(steady.joins) == 1


def test_a_chunk_of_one_stream_without_its_leading_axes_is_refused_as_a_solo_session_refuses_it():
    # (3,) would broadcast into the plan's (1, 1, 3) buffer: only the shape check keeps it from running
    pool, solo = _pool_and_solos(1)
    rng = np.random.default_rng(17)
    for _ in range(4):
        _tick(pool, solo, rng)
    assert pool._steady is not None and pool._steady.one is not None
    flat = {"x": _chunk(rng).reshape(INP)}
    with pytest.raises(Exception) as solo_error:
        solo[0].run_dict(flat)
    with pytest.raises(Exception) as pool_error:
        pool.run({0: flat}, ["Y"])
    assert type(pool_error.value) is type(solo_error.value)
    _tick(pool, solo, rng)


def test_a_tick_of_one_of_three_streams_after_whole_ticks_runs_that_stream_alone():
    # the steady plan is made only after a tick bound whole: a one-stream plan over the three-row buffers would
    # broadcast the one chunk into every row
    pool, solo = _pool_and_solos(3)
    rng = np.random.default_rng(18)
    for _ in range(4):
        _tick(pool, solo, rng)
    others = {sid: pool.state(sid) for sid in (1, 2)}
    for _ in range(3):
        feeds = {"x": _chunk(rng)}
        got = pool.run({0: feeds}, ["Y"])
        want = solo[0].run_dict(feeds)["Y"]
        assert got[0]["Y"].shape == want.shape and np.max(np.abs(got[0]["Y"] - want)) <= TOL
    for sid, state in others.items():
        assert all(np.array_equal(v, state[k]) for k, v in pool.state(sid).items()), sid
    _tick(pool, solo, rng)
