"""StatefulSession: state kept in onnxruntime values across calls, checked against independent oracles.

Oracles: the hand-checkable numbers of docs/design.md, PyTorch's own multi-call outputs
(tests/data/torch/*.calls.npz), silero-vad's sequence model (N frames in one call),
and sequential runs for the threaded test.
"""

from __future__ import annotations

import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import ModelError, StateError
from rnnir.runtime import FeedError, OnnxRuntimeError, SessionBusyError, StatefulSession, StateShapeError
from tests.support import realmodels as rm

F = TensorProto.FLOAT


def linear_rnn(wh: float = 0.5, h0_default: float | None = None) -> onnx.ModelProto:
    """docs/design.md's seed recurrence ``h_t = wh * h_{t-1} + x_t``: an ONNX RNN with an identity (Affine 1, 0) activation."""
    node = helper.make_node(
        "RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1,
        activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0],
    )
    inits = [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"),
             numpy_helper.from_array(np.full((1, 1, 1), wh, np.float32), "R")]
    if h0_default is not None:
        inits.append(numpy_helper.from_array(np.full((1, 1, 1), h0_default, np.float32), "h0"))
    graph = helper.make_graph(
        [node], "seed",
        [helper.make_tensor_value_info("x", F, ["T", "B", 1]), helper.make_tensor_value_info("h0", F, [1, "B", 1])],
        [helper.make_tensor_value_info("y", F, ["T", 1, "B", 1]), helper.make_tensor_value_info("hn", F, [1, "B", 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def tanh_rnn(hidden: int = 4, inputs: int = 3, seed: int = 0) -> onnx.ModelProto:
    """A small tanh RNN with random weights: x[T, B, I], h0[1, B, H] -> y, hn."""
    rng = np.random.default_rng(seed)
    node = helper.make_node("RNN", ["x", "W", "R", "B", "", "h0"], ["y", "hn"], hidden_size=hidden)
    graph = helper.make_graph(
        [node], "tanh_rnn",
        [helper.make_tensor_value_info("x", F, ["T", "B", inputs]), helper.make_tensor_value_info("h0", F, [1, "B", hidden])],
        [helper.make_tensor_value_info("y", F, ["T", 1, "B", hidden]), helper.make_tensor_value_info("hn", F, [1, "B", hidden])],
        [numpy_helper.from_array((0.6 * rng.standard_normal((1, hidden, inputs))).astype(np.float32), "W"),
         numpy_helper.from_array((0.6 * rng.standard_normal((1, hidden, hidden))).astype(np.float32), "R"),
         numpy_helper.from_array((0.1 * rng.standard_normal((1, 2 * hidden))).astype(np.float32), "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def growing_cache() -> onnx.ModelProto:
    """new_cache = Concat(cache, x): a state whose size grows by one row per call."""
    node = helper.make_node("Concat", ["cache", "x"], ["new_cache"], axis=0)
    total = helper.make_node("ReduceSum", ["new_cache"], ["total"], keepdims=0)
    graph = helper.make_graph(
        [node, total], "cache",
        [helper.make_tensor_value_info("cache", F, ["N", 2]), helper.make_tensor_value_info("x", F, [1, 2])],
        [helper.make_tensor_value_info("new_cache", F, ["M", 2]), helper.make_tensor_value_info("total", F, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def input_shaped_state() -> onnx.ModelProto:
    """new_state = x + mean(state): the state takes the shape of this call's input."""
    mean = helper.make_node("ReduceMean", ["state"], ["m"], keepdims=0)
    add = helper.make_node("Add", ["x", "m"], ["new_state"])
    graph = helper.make_graph(
        [mean, add], "follows_x",
        [helper.make_tensor_value_info("state", F, ["N", 2]), helper.make_tensor_value_info("x", F, ["K", 2])],
        [helper.make_tensor_value_info("new_state", F, ["K", 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def half_state_rnn() -> onnx.ModelProto:
    """The seed recurrence, but hn = Cast(Y_h, float16) while h0 is float32 (SD005)."""
    model = linear_rnn()
    rnn = model.graph.node[0]
    rnn.output[1] = "Yh"
    model.graph.node.append(helper.make_node("Cast", ["Yh"], ["hn"], to=TensorProto.FLOAT16))
    model.graph.output[1].type.tensor_type.elem_type = TensorProto.FLOAT16
    return model


def step(v: float) -> dict[str, np.ndarray]:
    return {"x": np.full((1, 1, 1), v, np.float32)}


def scalar(a: np.ndarray) -> float:
    return float(np.asarray(a).ravel()[0])


# -- docs/design.md's seed recurrence -----------------------------------------------------------------


def test_three_one_step_calls_with_persistence_give_2_25():
    s = StatefulSession(linear_rnn())
    hs = [scalar(s.run_dict(step(x))["hn"]) for x in (1, 0, 2)]
    assert hs == pytest.approx([1.0, 0.5, 2.25])


def test_three_one_step_calls_reset_before_each_give_2():
    s = StatefulSession(linear_rnn())
    hs = []
    for x in (1, 0, 2):
        s.reset()
        hs.append(scalar(s.run_dict(step(x))["hn"]))
    assert hs == pytest.approx([1.0, 0.0, 2.0])


def test_doubling_recurrence_persistence_and_reinit_diverge_from_call_2_on():
    """docs/design.md: h_t = 2 h_{t-1} + x_t; persistence and re-initialisation agree at call 1 only."""
    keep, fresh = StatefulSession(linear_rnn(2.0)), StatefulSession(linear_rnn(2.0))
    kept, restarted = [], []
    for x in (1, 1, 1):
        kept.append(scalar(keep.run_dict(step(x))["hn"]))
        fresh.reset()
        restarted.append(scalar(fresh.run_dict(step(x))["hn"]))
    assert kept == [1.0, 3.0, 7.0] and restarted == [1.0, 1.0, 1.0]


def test_an_explicit_state_input_overrides_that_call_and_the_stream_continues_from_its_result():
    s = StatefulSession(linear_rnn())
    s.run(step(1))
    assert scalar(s.run_dict({**step(0), "h0": np.full((1, 1, 1), 10, np.float32)})["hn"]) == 5.0
    assert scalar(s.run_dict(step(0))["hn"]) == 2.5
    assert s.stats.python_state_bytes == 0


def test_a_constant_initial_state_is_where_the_slot_starts():
    s = StatefulSession(linear_rnn(h0_default=4.0))
    assert s.slots[0].init.kind == "constant"
    assert scalar(s.run_dict(step(1))["hn"]) == 3.0  # 0.5 * 4 + 1
    s.reset()
    assert scalar(s.run_dict(step(0))["hn"]) == 2.0


def test_a_program_lowered_from_onnx_runs_like_the_model():
    program = rnnir.load(linear_rnn())
    s = StatefulSession(program)
    assert [scalar(s.run_dict(step(x))["hn"]) for x in (1, 0, 2)] == [1.0, 0.5, 2.25]


# -- PyTorch's own multi-call outputs --------------------------------------------------------------


def _torch_calls_check(session: StatefulSession, calls: dict) -> float:
    """Run PyTorch's three calls (the first with its non-zero initial state) and return the worst |diff|."""
    pairs = [tuple(p) for p in calls["pairs"]]
    worst = 0.0
    for k in range(3):
        feeds = {n[len(f"call{k}_in_"):]: v for n, v in calls.items() if n.startswith(f"call{k}_in_")}
        if k > 0:  # later calls: the state comes from the slots, never from the caller
            for state_in, _ in pairs:
                feeds.pop(state_in)
        got = session.run_dict(feeds)
        for n, v in calls.items():
            if n.startswith(f"call{k}_out_"):
                worst = max(worst, float(np.abs(got[n[len(f"call{k}_out_"):]] - v).max()))
    return worst


@pytest.mark.realmodel
@pytest.mark.parametrize("kind", ["ts", "dynamo"])
@pytest.mark.parametrize("name", rm.TORCH_MODELS)
def test_reproduces_pytorch_three_calls_with_state_fed_back(name, kind):
    path = rm.torch_models_dir() / f"{name}.{kind}.onnx"  # dynamo: weights in external data beside the file
    s = StatefulSession(str(path))
    assert {sl.input: sl.output for sl in s.slots} == rm.TORCH_STATE_PAIRS[name]
    assert _torch_calls_check(s, rm.torch_calls(name)) <= 1e-5


@pytest.mark.realmodel
def test_the_oracle_check_fails_when_the_state_is_not_carried():
    """The check above can fail: re-initialising before each call misses PyTorch's calls 1 and 2."""
    calls = rm.torch_calls("lstm_stream")
    s = StatefulSession(str(rm.torch_models_dir() / "lstm_stream.ts.onnx"))
    original = s.run_dict
    s.run_dict = lambda feeds, outputs=None: (s.reset(), original(feeds, outputs))[1]  # type: ignore[method-assign]
    assert _torch_calls_check(s, calls) > 1e-3


@pytest.mark.realmodel
def test_external_data_model_given_as_bytes_fails_with_a_clear_error():
    data = (rm.torch_models_dir() / "gru_stream.dynamo.onnx").read_bytes()
    with pytest.raises(ModelError, match="external data"):
        StatefulSession(data)


# -- no state through Python; dynamic state shapes ----------------------------------------------


def test_steady_state_moves_no_state_bytes_through_python():
    s = StatefulSession(tanh_rnn())
    x = {"x": np.ones((5, 2, 3), np.float32)}
    s.run(x)
    assert s.stats.python_state_bytes == 1 * 2 * 4 * 4  # the zero initial state, uploaded once
    for _ in range(10):
        s.run(x)
        assert s.stats.python_state_bytes == 0
    s.run(x, outputs=["y"])
    assert s.stats.output_copy_bytes == 0  # no state output asked for: nothing copied out either
    assert s.stats.total_python_state_bytes == 32
    assert s.stats.slot_allocations == 1  # the probe call's output became the second buffer


def test_an_explicit_override_is_counted_as_python_state_bytes():
    s = StatefulSession(tanh_rnn())
    x = {"x": np.ones((1, 1, 3), np.float32)}
    s.run(x)
    s.run({**x, "h0": np.zeros((1, 1, 4), np.float32)})
    assert s.stats.python_state_bytes == 16


def test_a_growing_state_is_handed_from_call_to_call_without_python_copies():
    s = StatefulSession(growing_cache(), pairs={"cache": "new_cache"}, state_shapes={"cache": (0, 2)})
    rows = []
    for k in range(5):
        row = np.array([[k, 10 * k]], np.float32)
        rows.append(row)
        out = s.run_dict({"x": row})
        if k > 0:
            assert s.stats.python_state_bytes == 0
    assert np.array_equal(s.state["cache"], np.concatenate(rows))
    assert scalar(out["total"]) == float(np.concatenate(rows).sum())
    assert s.stats.slot_allocations == 5  # one onnxruntime allocation per call: the documented cost


def test_a_state_whose_shape_follows_the_input_is_reallocated_when_the_input_shape_changes():
    s = StatefulSession(input_shaped_state(), pairs={"state": "new_state"}, state_shapes={"state": (1, 2)})
    s.run({"x": np.ones((1, 2), np.float32)})
    s.run({"x": np.ones((1, 2), np.float32)})  # same shapes: double-buffered
    out = s.run_dict({"x": np.full((3, 2), 2, np.float32)})  # the state's shape changes with x: 2 + mean(2)
    assert out["new_state"].shape == (3, 2) and np.allclose(out["new_state"], 4.0)
    assert np.allclose(s.run_dict({"x": np.zeros((3, 2), np.float32)})["new_state"], 4.0)
    assert s.stats.python_state_bytes == 0


def test_a_state_output_of_another_dtype_is_refused_unless_cast_state():
    s = StatefulSession(half_state_rnn())
    with pytest.raises(StateError, match="SD005"):
        s.run(step(1))
    s = StatefulSession(half_state_rnn(), cast_state=True)
    hs = [s.run_dict(step(x))["hn"] for x in (1, 0, 2)]
    assert hs[-1].dtype == np.float16 and [float(h.ravel()[0]) for h in hs] == [1.0, 0.5, 2.25]
    assert s.state["h0"].dtype == np.float32
    assert s.stats.python_state_bytes == 4  # the documented cost: the converted state goes through numpy every call


def test_a_state_dim_nothing_can_resolve_asks_for_state_shapes():
    s = StatefulSession(growing_cache(), pairs={"cache": "new_cache"})
    with pytest.raises(StateShapeError, match="state_shapes"):  # its own type: a caller (the CLI) can ask for the shape
        s.run({"x": np.zeros((1, 2), np.float32)})
    with pytest.raises(StateError) as other:  # a near miss: a state of the wrong shape is a StateError, not this one
        s.state = {"cache": np.zeros((2, 2, 2), np.float32)}
    assert not isinstance(other.value, StateShapeError)


def test_the_batch_of_a_symbolic_state_dim_comes_from_the_input():
    s = StatefulSession(tanh_rnn())
    s.run({"x": np.ones((2, 3, 3), np.float32)})
    assert s.state["h0"].shape == (1, 3, 4)


def test_a_new_batch_size_after_reset_resizes_the_slots():
    s = StatefulSession(tanh_rnn())
    s.run({"x": np.ones((2, 3, 3), np.float32)})
    s.reset()
    s.run({"x": np.ones((2, 5, 3), np.float32)})
    assert s.state["h0"].shape == (1, 5, 4)


# -- outputs never alias a slot unless asked -----------------------------------------------------


def _hold_outputs(s: StatefulSession, calls: int = 4):
    held, copies = [], []
    x = np.random.default_rng(1).standard_normal((calls + 3, 1, 1, 3)).astype(np.float32)
    for k in range(calls):
        out = s.run_dict({"x": x[k]})
        held.append(out)
        copies.append({n: v.copy() for n, v in out.items()})
    for k in range(calls, calls + 3):
        s.run({"x": x[k]})
    return held, copies


def test_held_outputs_never_change_at_later_calls():
    held, copies = _hold_outputs(StatefulSession(tanh_rnn()))
    for h, c in zip(held, copies):
        for name in c:
            assert np.array_equal(h[name], c[name]), name


def test_with_alias_outputs_a_held_state_output_changes_at_a_later_call():
    held, copies = _hold_outputs(StatefulSession(tanh_rnn(), alias_outputs=True))
    changed = [k for k, (h, c) in enumerate(zip(held, copies)) if not np.array_equal(h["hn"], c["hn"])]
    assert changed  # views of the slot buffers, overwritten two calls later
    assert all(np.array_equal(h["y"], c["y"]) for h, c in zip(held, copies))  # y is no slot: never aliased


def test_with_alias_outputs_the_state_output_is_the_slot_buffer_and_costs_no_copy():
    s = StatefulSession(tanh_rnn(), alias_outputs=True)
    x = {"x": np.ones((1, 1, 3), np.float32)}
    for _ in range(3):
        s.run(x)
    assert s.stats.output_copy_bytes == 0


# -- independent instances -----------------------------------------------------------------------


def test_fork_has_its_own_state_and_shares_the_onnxruntime_session():
    s = StatefulSession(linear_rnn())
    s.run(step(1))
    t = s.fork()
    assert t.inference_session is s.inference_session
    assert scalar(t.run_dict(step(100))["hn"]) == 100.5  # starts from a copy of s's state (1)
    assert scalar(s.run_dict(step(0))["hn"]) == 0.5  # s never saw the fork's call
    assert scalar(s.fork(reset=True).run_dict(step(1))["hn"]) == 1.0


def test_state_is_a_read_only_snapshot():
    s = StatefulSession(linear_rnn())
    s.run(step(1))
    snap = s.state
    with pytest.raises(ValueError):
        snap["h0"][...] = 7
    s.run(step(1))
    assert scalar(snap["h0"]) == 1.0 and scalar(s.state["h0"]) == 1.5


def test_save_and_load_state_round_trip(tmp_path):
    s = StatefulSession(tanh_rnn())
    x = np.random.default_rng(2).standard_normal((6, 1, 1, 3)).astype(np.float32)
    s.run({"x": x[0]})
    s.run({"x": x[1]})
    path = s.save_state(tmp_path / "rnn.state")
    assert path == tmp_path / "rnn.state" and path.is_file()
    expected = s.run({"x": x[2]})["y"]
    s.run({"x": x[3]})
    s.load_state(path)
    assert np.array_equal(s.run({"x": x[2]})["y"], expected)
    other = s.fork(reset=True)
    other.load_state(path)
    assert np.array_equal(other.run({"x": x[2]})["y"], expected)


def test_loading_state_into_another_model_fails_naming_both_fingerprints(tmp_path):
    s = StatefulSession(tanh_rnn(seed=0))
    s.run({"x": np.ones((1, 1, 3), np.float32)})
    path = s.save_state(tmp_path / "a.state")
    other = StatefulSession(tanh_rnn(seed=1))  # same interface, other weights: another graph
    with pytest.raises(StateError, match="fingerprint") as err:
        other.load_state(path)
    assert s.fingerprint[:12] in str(err.value) and other.fingerprint[:12] in str(err.value)


def test_loading_a_file_that_is_no_saved_state_fails_clearly(tmp_path):
    junk = tmp_path / "junk.state"
    junk.write_bytes(b"not a state")
    with pytest.raises(StateError, match="cannot read saved state"):
        StatefulSession(linear_rnn()).load_state(junk)


# -- feeds ---------------------------------------------------------------------------------------


def test_an_unknown_input_or_a_missing_one_is_a_FeedError():
    s = StatefulSession(linear_rnn())
    with pytest.raises(FeedError, match="no input 'z'"):
        s.run({"z": np.zeros(1)})
    with pytest.raises(FeedError, match="missing input"):
        s.run({})


def test_a_scalar_input_keeps_its_rank_and_repeated_calls_take_the_steady_path():
    """silero's ``sr`` is a 0-d input: it must reach onnxruntime as shape (), not (1,)."""
    scaled = linear_rnn()
    scaled.graph.input.append(helper.make_tensor_value_info("gain", F, []))
    scaled.graph.node[0].input[0] = "xg"
    scaled.graph.node.insert(0, helper.make_node("Mul", ["x", "gain"], ["xg"]))
    s = StatefulSession(scaled)
    feed = {**step(1), "gain": np.array(2.0, np.float32)}
    s.run_dict(feed)
    assert s._fed["gain"].shape == ()
    steady = s._steady
    assert steady is not None and steady.feed_specs[1][2] == ()
    assert scalar(s.run_dict(feed)["hn"]) == 3.0  # 0.5 * 2 + 2
    assert s._steady is steady and steady.pingpong.k == 1  # the pre-bound path took the call


def test_a_failed_steady_state_call_is_rerun_on_the_general_path_with_the_state_intact():
    s = StatefulSession(linear_rnn())
    s.run_dict(step(1))
    s.run_dict(step(0))
    steady = s._steady
    assert steady is not None
    k = steady.pingpong.k
    real = steady.pingpong.runs[k]
    failed = []

    def fail_once():
        steady.pingpong.runs[k] = real
        failed.append(k)
        raise RuntimeError("transient")

    steady.pingpong.runs[k] = fail_once
    assert scalar(s.run_dict(step(2))["hn"]) == 2.25
    assert failed == [k]  # the pre-bound call did fail
    assert scalar(s.run_dict(step(0))["hn"]) == 1.125


def test_a_plan_another_thread_dropped_just_before_the_call_took_the_lock_is_not_used():
    """run() looks at the pre-bound plan before taking the lock; a reset() that another thread finished in
    between drops the plan, whose bindings still read the old state: the call must start from the reset."""
    s = StatefulSession(linear_rnn())
    s.run(step(1))
    s.run(step(0))  # h = 0.5, and the pre-bound plan is in place
    assert s._steady is not None
    real = s._lock

    class ResetBeforeAcquire:
        armed = True

        def acquire(self, blocking=True, timeout=-1):
            if ResetBeforeAcquire.armed:
                ResetBeforeAcquire.armed = False
                s._lock = real
                s.reset()  # what another thread did after this call read the plan
                s._lock = self
            return real.acquire(blocking, timeout)

        def release(self):
            real.release()

        def __enter__(self):
            return real.__enter__()

        def __exit__(self, *exc):
            return real.__exit__(*exc)

    s._lock = ResetBeforeAcquire()
    y = s.run(step(2))["y"]  # the request the plan answers
    assert not ResetBeforeAcquire.armed  # the reset did happen in between
    assert scalar(y) == 2.0  # from the reset state (0.5 * 0 + 2), not the dropped plan's (0.5 * 0.5 + 2)
    assert scalar(s.state["h0"]) == 2.0


def test_the_public_binding_api_gives_the_same_results_as_the_native_one():
    x = np.random.default_rng(3).standard_normal((5, 2, 2, 3)).astype(np.float32)
    native, public = StatefulSession(tanh_rnn()), StatefulSession(tanh_rnn(), native_binding=False)
    for k in range(5):
        a, b = native.run_dict({"x": x[k]}), public.run_dict({"x": x[k]})
        assert all(np.array_equal(a[n], b[n]) for n in a)
    assert public.stats.python_state_bytes == 0


# -- threads -------------------------------------------------------------------------------------


def test_one_instance_used_from_two_threads_at_once_is_refused(monkeypatch):
    s = StatefulSession(linear_rnn())
    s.run(step(1))
    inside, release = threading.Event(), threading.Event()
    binding = type(s._binding)
    run = binding.run

    def slow_run(self, *args):
        inside.set()
        release.wait(10)
        run(self, *args)

    # the next call on the general path (run_dict: not the request the pre-bound path was built for) parks
    # inside onnxruntime's run; the refused run() below is on the pre-bound path
    monkeypatch.setattr(binding, "run", slow_run)
    first: list = []
    worker = threading.Thread(target=lambda: first.append(s.run_dict(step(0))))
    worker.start()
    assert inside.wait(10)
    with pytest.raises(SessionBusyError, match="fork"):
        s.run(step(5))
    with pytest.raises(SessionBusyError):
        s.reset()
    release.set()
    worker.join(10)
    assert scalar(first[0]["hn"]) == 0.5  # the refused calls changed nothing
    assert scalar(s.state["h0"]) == 0.5


def test_64_independent_sessions_from_8_threads_end_with_the_states_of_64_sequential_runs():
    sessions, calls = 64, 500
    base = StatefulSession(tanh_rnn())
    xs = np.random.default_rng(4).standard_normal((sessions, calls, 1, 1, 3)).astype(np.float32)

    expected = []
    for i in range(sessions):
        s = base.fork(reset=True)
        for k in range(calls):
            s.run({"x": xs[i, k]}, outputs=["hn"])
        expected.append(s.state["h0"])

    streams = [base.fork(reset=True) for _ in range(sessions)]
    errors: list[BaseException] = []

    def drive(worker: int) -> None:
        mine = range(worker, sessions, 8)
        try:
            for k in range(calls):  # interleave this thread's sessions call by call
                for i in mine:
                    streams[i].run({"x": xs[i, k]}, outputs=["hn"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(np.array_equal(streams[i].state["h0"], expected[i]) for i in range(sessions))
    assert len({id(s.inference_session) for s in streams}) == 1
    assert len({tuple(e.ravel()) for e in expected}) == sessions  # different inputs: the comparison means something


# -- silero-vad ----------------------------------------------------------------------------------


@pytest.mark.realmodel
def test_silero_sequence_model_over_n_frames_equals_n_one_frame_calls_and_the_streaming_model(silero_dir):
    frames = (0.1 * np.random.default_rng(5).standard_normal((24, 576))).astype(np.float32)
    whole = StatefulSession(str(silero_dir / "silero_vad_16k_sequence.onnx")).run_dict({"input": frames})

    seq = StatefulSession(str(silero_dir / "silero_vad_16k_sequence.onnx"))
    one = [seq.run_dict({"input": f[None]}) for f in frames]
    assert np.abs(np.concatenate([o["speech_probs"] for o in one]) - whole["speech_probs"]).max() <= 1e-5
    assert np.abs(one[-1]["hn"] - whole["hn"]).max() <= 1e-5 and np.abs(one[-1]["cn"] - whole["cn"]).max() <= 1e-5

    vad = StatefulSession(str(silero_dir / "silero_vad.onnx"))
    streamed = [vad.run_dict({"input": f[None], "sr": np.array(16000, np.int64)}) for f in frames]
    assert np.abs(np.concatenate([o["output"].ravel() for o in streamed]) - whole["speech_probs"]).max() <= 1e-5
    assert np.abs(vad.state["state"] - np.concatenate([whole["hn"], whole["cn"]])).max() <= 1e-5
    assert vad.stats.python_state_bytes == 0


def test_a_call_onnxruntime_refuses_is_an_rnnir_error_naming_the_feeds_and_the_state_is_kept():
    x = np.ones((1, 2, 3), np.float32)
    s = StatefulSession(tanh_rnn())
    s.run({"x": x})
    before = s.state
    with pytest.raises(OnnxRuntimeError) as refused:
        s.run({"x": np.ones((1, 2, 5), np.float32)})  # 5 input features where W takes 3
    assert isinstance(refused.value, rnnir.RnnirError) and isinstance(refused.value, RuntimeError)  # drop-in code catching RuntimeError still does
    assert "onnxruntime refused the call (x float32[1, 2, 5])" in str(refused.value)
    assert refused.value.__cause__ is not None  # onnxruntime's own exception, for whoever needs its type
    for name, value in s.state.items():
        np.testing.assert_array_equal(value, before[name])  # a refused call leaves the state as it was
    # and the stream goes on as if the refused call never happened: two good calls, as an untouched session makes them
    untouched = StatefulSession(tanh_rnn())
    untouched.run({"x": x})
    np.testing.assert_array_equal(s.run_dict({"x": x})["hn"], untouched.run_dict({"x": x})["hn"])
