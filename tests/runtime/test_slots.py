"""How a StatefulSession keeps each state slot, pinned through its public counters (``stats``) and results on models
whose numbers can be checked by hand: which calls let onnxruntime allocate the state (``slot_allocations``,
``probe_calls``), how many bytes of state came from Python (``python_state_bytes``), and what a failed call leaves.

The module docstring's rules, counted here: a call whose state input is not a buffer of the slot's double pair (the
first call, one after an explicit state, a state of a new shape) lets onnxruntime allocate the state output (one
allocation, a probe call); a state that keeps its shape from then on is double-buffered (the spare costs one
allocation, once); a state whose size changed is handed off for good, until reset() (one allocation every call)."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir import StateError
from rnnir.runtime import OnnxRuntimeError, SessionStats, StatefulSession

F = TensorProto.FLOAT


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def build(nodes, inputs, outputs, inits=(), name="m", opset=14):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def val(a):
    return np.asarray(a).ravel().tolist()


def counted(s):
    return s.stats.slot_allocations, s.stats.probe_calls


def add_state(shape=(2,), name="add"):
    """hn = h0 + x."""
    return build([helper.make_node("Add", ["h0", "x"], ["hn"])], [vi("x", list(shape)), vi("h0", list(shape))], [vi("hn", list(shape))], name=name)


def test_a_fresh_session_has_moved_nothing():
    stats = StatefulSession(add_state()).stats
    assert isinstance(stats, SessionStats)
    assert (stats.calls, stats.python_state_bytes, stats.total_python_state_bytes, stats.output_copy_bytes) == (0, 0, 0, 0)
    assert (stats.slot_allocations, stats.probe_calls) == (0, 0)


def test_a_state_of_a_new_shape_is_probed_then_double_buffered_again():
    # hn = h0 + x, h0 of any length (state_shapes starts it at 2), x one number broadcast
    m = build([helper.make_node("Add", ["h0", "x"], ["hn"])], [vi("x", [1]), vi("h0", ["M"])], [vi("hn", ["M"])], name="grow")
    s = StatefulSession(m, state_shapes={"h0": (2,)})
    one = {"x": np.ones(1, np.float32)}
    assert val(s.run_dict(one)["hn"]) == [1.0, 1.0]
    assert counted(s) == (1, 1)  # the probe: onnxruntime allocated the state, the initial value became the spare
    assert val(s.run_dict({**one, "h0": np.array([10, 20, 30], np.float32)})["hn"]) == [11.0, 21.0, 31.0]
    assert counted(s) == (2, 2)  # a state of another shape: probed again; the old buffer is no spare for it
    assert val(s.run_dict(one)["hn"]) == [12.0, 22.0, 32.0]
    assert counted(s) == (3, 2)  # double-buffered, its spare allocated once
    assert val(s.run_dict(one)["hn"]) == [13.0, 23.0, 33.0]
    assert val(s.run_dict(one)["hn"]) == [14.0, 24.0, 34.0]
    assert counted(s) == (3, 2)


def test_a_state_that_changed_size_is_handed_off_even_when_it_stops_growing():
    # hn = concat(h0, x): a state that grows by x's length, and stays the same with an empty x
    m = build([helper.make_node("Concat", ["h0", "x"], ["hn"], axis=0)], [vi("x", ["K"]), vi("h0", ["M"])], [vi("hn", ["L"])], name="cache")
    s = StatefulSession(m, state_shapes={"h0": (1,)})
    assert val(s.run_dict({"x": np.ones(1, np.float32)})["hn"]) == [0.0, 1.0]
    empty = {"x": np.zeros(0, np.float32)}
    for calls in (2, 3, 4):
        assert val(s.run_dict(empty)["hn"]) == [0.0, 1.0]
        assert counted(s) == (calls, calls)  # one allocation every call, however long it stays the same


def test_a_loaded_state_is_probed_and_counted_as_bytes_from_python(tmp_path):
    s = StatefulSession(add_state())
    one = {"x": np.ones(2, np.float32)}
    s.run_dict(one)
    s.save_state(tmp_path / "one.state")  # h0 = [1, 1]
    s.run_dict(one)
    s.run_dict(one)
    assert counted(s) == (1, 1) and s.stats.python_state_bytes == 0
    s.load_state(tmp_path / "one.state")
    assert val(s.run_dict(one)["hn"]) == [2.0, 2.0]
    assert s.stats.python_state_bytes == 8  # two float32 came from the file
    assert counted(s) == (2, 2)  # the loaded value is no buffer of the pair: a probe
    assert val(s.run_dict(one)["hn"]) == [3.0, 3.0]
    assert s.stats.python_state_bytes == 0 and counted(s) == (2, 2)
    assert s.stats.total_python_state_bytes == 16  # the initial zeros and the loaded state


def test_a_fork_counts_the_state_it_copied_at_its_first_call():
    s = StatefulSession(add_state())
    one = {"x": np.ones(2, np.float32)}
    s.run_dict(one)
    twin = s.fork()
    assert twin.stats.calls == 0 and twin.stats.python_state_bytes == 0
    assert val(twin.run_dict(one)["hn"]) == [2.0, 2.0]
    assert twin.stats.python_state_bytes == 8 and twin.stats.total_python_state_bytes == 8
    assert val(s.run_dict(one)["hn"]) == [2.0, 2.0]
    assert s.stats.python_state_bytes == 0 and s.stats.total_python_state_bytes == 8


def terminating():
    ro = ort.RunOptions()
    ro.terminate = True  # onnxruntime refuses the run
    return ro


def test_a_failure_after_a_guessed_first_call_succeeded_is_onnxruntimes_and_keeps_the_state():
    # hn = h0 + sum(x): h0's M shares no symbol, so the first call guesses it from x's leading dim (3)
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "sx"], ["hn"])]
    m = build(nodes, [vi("x", ["N", 2]), vi("h0", ["M", 2])], [vi("hn", ["M", 2])], name="plain", opset=11)
    s = StatefulSession(m)
    x = {"x": np.ones((3, 2), np.float32)}
    assert val(s.run_dict(x)["hn"]) == [6.0] * 6
    with pytest.raises(OnnxRuntimeError, match=re.escape("plain: onnxruntime refused the call (x float32[3, 2]): ")):
        s.run_dict(x, run_options=terminating())
    assert val(s.run_dict(x)["hn"]) == [12.0] * 6  # the state survived the failed call


def guessing_model():
    # hn = h0 + k + sum(x), k a constant [2, 2]: the state's M must be 2, while x's leading dim may say otherwise
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "k"], ["hk"]),
             helper.make_node("Add", ["hk", "sx"], ["hn"])]
    return build(nodes, [vi("x", ["N", 2]), vi("h0", ["M", 2])], [vi("hn", ["M", 2])],
                 [numpy_helper.from_array(np.ones((2, 2), np.float32), "k")], name="guess", opset=11)


def test_a_wrong_guess_is_guessed_again_at_the_next_call():
    s = StatefulSession(guessing_model())
    with pytest.raises(StateError, match=re.escape("guess: the first call failed with state shapes rnnir had to guess (h0: dim 0 = 3")):
        s.run_dict({"x": np.ones((3, 2), np.float32)})
    # the guessed slot was dropped: this call guesses from its own x, and 2 is right
    assert val(s.run_dict({"x": np.ones((2, 2), np.float32)})["hn"]) == [5.0] * 4  # 0 + 1 + 4


def test_after_a_wrong_guess_a_call_that_guesses_nothing_fails_with_onnxruntimes_error():
    s = StatefulSession(guessing_model())
    with pytest.raises(StateError, match="had to guess"):
        s.run_dict({"x": np.ones((3, 2), np.float32)})
    # the state given explicitly (of the wrong shape): nothing guessed this time, so onnxruntime's error is the answer
    with pytest.raises(OnnxRuntimeError, match=re.escape("guess: onnxruntime refused the call (x float32[2, 2]): ")):
        s.run_dict({"x": np.ones((2, 2), np.float32), "h0": np.zeros((3, 2), np.float32)})
    assert val(s.run_dict({"x": np.ones((2, 2), np.float32), "h0": np.zeros((2, 2), np.float32)})["hn"]) == [5.0] * 4


def test_a_refused_call_without_plain_inputs_says_so():
    # hn = h0 + 1: a model fed nothing but its state
    m = build([helper.make_node("Add", ["h0", "one"], ["hn"])], [vi("h0", [2])], [vi("hn", [2])],
              [numpy_helper.from_array(np.ones(1, np.float32), "one")], name="tick")
    s = StatefulSession(m)
    with pytest.raises(OnnxRuntimeError, match=re.escape("tick: onnxruntime refused the call (no inputs): ")):
        s.run_dict({}, run_options=terminating())
    assert val(s.run_dict({})["hn"]) == [1.0, 1.0]


def test_after_a_reset_a_given_state_of_steady_size_is_double_buffered_again():
    # hn = concat(h0, x): handed off once it grew; after reset() the slot starts over, so a state given explicitly whose
    # size then stays the same (x empty) is double-buffered: one allocation for its spare, then none
    m = build([helper.make_node("Concat", ["h0", "x"], ["hn"], axis=0)], [vi("x", ["K"]), vi("h0", ["M"])], [vi("hn", ["L"])], name="cache")
    s = StatefulSession(m, state_shapes={"h0": (1,)})
    s.run_dict({"x": np.ones(1, np.float32)})
    empty = {"x": np.zeros(0, np.float32)}
    s.run_dict(empty)
    assert counted(s) == (2, 2)  # handed off: an allocation per call
    s.reset()
    assert val(s.run_dict({**empty, "h0": np.array([5, 6], np.float32)})["hn"]) == [5.0, 6.0]
    assert counted(s) == (3, 3)
    for _ in range(3):
        assert val(s.run_dict(empty)["hn"]) == [5.0, 6.0]
    assert counted(s) == (4, 3)  # the spare, once
