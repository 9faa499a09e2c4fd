"""The IOBinding layer and the prepared steady call (rnnir/runtime/binding.py and rnnir/runtime/ort.py) pinned through StatefulSession's public
calls, on both binding layers (onnxruntime's pybind objects and its documented IOBinding API): a plain output too
large to buffer, aliased state outputs, a fed input that overrides a default, and a slot whose spare buffer must be
allocated.  The models are one-op sums, so every expected number is hand-checkable:

``acc``: hn = h0 + x and y = 2 * hn over ``n`` floats (n = 4096: 16 KiB, past the 8 KiB a buffered output may
hold), z = sum(hn) (4 bytes).  Feeding x = 1, 2, 3, ... makes hn after call k the k-th triangular number."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.runtime import StatefulSession

F = TensorProto.FLOAT
BIG = 4096  # float32: 16 KiB, over the 8 KiB a plain output or a feed may be copied through
NATIVE = [pytest.param(True, id="native"), pytest.param(False, id="public")]


def acc(n=BIG, shape=None):
    shape = shape or [n]
    nodes = [
        helper.make_node("Add", ["h0", "x"], ["hn"]),
        helper.make_node("Add", ["hn", "hn"], ["y"]),
        helper.make_node("ReduceSum", ["hn"], ["z"], keepdims=0),
    ]
    g = helper.make_graph(
        nodes,
        "acc",
        [helper.make_tensor_value_info("x", F, shape), helper.make_tensor_value_info("h0", F, shape)],
        [helper.make_tensor_value_info("y", F, shape), helper.make_tensor_value_info("z", F, []), helper.make_tensor_value_info("hn", F, shape)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    return m


def tri(k):
    return k * (k + 1) // 2


@pytest.mark.parametrize("native", NATIVE)
def test_a_large_plain_output_is_a_new_array_every_steady_call(native):
    s = StatefulSession(acc(), native_binding=native)
    got = [s.run({"x": np.full(BIG, k, np.float32)}) for k in range(1, 6)]  # calls 3-5 take the steady path
    for k, out in enumerate(got, 1):  # every array handed over keeps its call's values: never written again
        assert list(out) == ["y", "z"]
        assert out["y"].shape == (BIG,) and set(out["y"].tolist()) == {2.0 * tri(k)}
        assert out["z"].tolist() == BIG * tri(k)
    assert s.state["h0"][0] == tri(5)


@pytest.mark.parametrize("native", NATIVE)
def test_a_large_plain_output_named_with_the_state_output(native):
    s = StatefulSession(acc(), native_binding=native)
    got = [s.run(["y", "hn"], {"x": np.full(BIG, k, np.float32)}) for k in range(1, 6)]
    for k, (y, hn) in enumerate(got, 1):
        assert set(y.tolist()) == {2.0 * tri(k)} and set(hn.tolist()) == {float(tri(k))}


@pytest.mark.parametrize("native", NATIVE)
def test_aliased_state_outputs_in_steady_calls(native):
    # alias_outputs: a state output handed over is the slot's buffer itself (read it before the call after next)
    s = StatefulSession(acc(4), alias_outputs=True, native_binding=native)
    for k in range(1, 6):
        hn, z = s.run(["hn", "z"], {"x": np.full(4, k, np.float32)})
        assert hn.tolist() == [tri(k)] * 4 and z.tolist() == 4 * tri(k)
        assert s.stats.output_copy_bytes == 0


def with_default():
    """hn = h0 + x * k, where k is an input with a default of 1 (an initializer of the same name)."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["xk"]), helper.make_node("Add", ["h0", "xk"], ["hn"])]
    g = helper.make_graph(
        nodes,
        "kdef",
        [helper.make_tensor_value_info(n, F, [2]) for n in ("x", "k", "h0")],
        [helper.make_tensor_value_info("hn", F, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "k")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("native", NATIVE)
def test_a_fed_input_overrides_its_default_on_every_call(native):
    s = StatefulSession(with_default(), native_binding=native)
    assert s.optional_inputs == {"k"}
    x = np.array([1.0, 2.0], np.float32)
    got = [s.run(["hn"], {"x": x, "k": np.array([10.0, 100.0], np.float32)})[0].tolist() for _ in range(4)]
    assert got == [[10.0 * c, 200.0 * c] for c in (1, 2, 3, 4)]
    assert s.run(["hn"], {"x": x})[0].tolist() == [41.0, 802.0]  # left out: the default k = 1


@pytest.mark.parametrize("native", NATIVE)
def test_a_slot_whose_shape_changed_gets_a_spare_buffer_of_the_new_shape(native):
    # h = 0.5 h + x, with batch B: a batch-1 call, then an explicit batch-2 state, then batch-2 calls
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1,
                            activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    g = helper.make_graph(
        [node], "seed",
        [helper.make_tensor_value_info("x", F, [1, "B", 1]), helper.make_tensor_value_info("h0", F, [1, "B", 1])],
        [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("hn", F, [1, "B", 1])],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    s = StatefulSession(m, native_binding=native)
    one, two = np.ones((1, 1, 1), np.float32), np.ones((1, 2, 1), np.float32)
    assert s.run_dict({"x": one})["hn"].ravel().tolist() == [1.0]
    assert s.run_dict({"x": two, "h0": np.full((1, 2, 1), 4.0, np.float32)})["hn"].ravel().tolist() == [3.0, 3.0]
    got = [s.run_dict({"x": two})["hn"].ravel().tolist() for _ in range(3)]
    assert got == [[2.5, 2.5], [2.25, 2.25], [2.125, 2.125]]


@pytest.mark.parametrize("native", NATIVE)
def test_fewer_outputs_than_the_last_call_are_each_what_they_name(native):
    # the last call bound y, z and hn; this one binds hn and z only: y must not linger in z's place
    s = StatefulSession(acc(4), native_binding=native)
    x = {"x": np.ones(4, np.float32)}
    assert list(s.run_dict(x)) == ["y", "z", "hn"]
    hn, z = s.run(["hn", "z"], x)
    assert hn.tolist() == [2.0] * 4 and z.tolist() == 8.0
    (z,) = s.run(["z"], x)
    assert z.tolist() == 12.0


def test_a_fresh_session_has_counted_nothing():
    from tests.support import streaming_models as sm

    s = StatefulSession(sm.lstm_b())
    assert (s.stats.calls, s.stats.python_state_bytes, s.stats.total_python_state_bytes, s.stats.output_copy_bytes,
            s.stats.slot_allocations, s.stats.probe_calls) == (0, 0, 0, 0, 0, 0)
