"""Both binding layers of rnnir.runtime.ort on what the plain sum of test_ort.py leaves out (an input with a default
initializer, a strided array uploaded, bindings cleared, a missing private name reported once), and what a
StatefulSession does with a feed whose type is not the input's (rnnir.runtime.feeds).  Values are hand-checkable
sums; onnxruntime runs every call."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.runtime import StatefulSession
from rnnir.runtime.feeds import FeedError
from rnnir.runtime.ort import make_binding, missing_private_api

F = TensorProto.FLOAT


def _session(default_b: bool) -> ort.InferenceSession:
    """c = a + b over [2] floats; ``default_b``: b is also an initializer (a default the caller may override)."""
    inits = [numpy_helper.from_array(np.array([5, 6], np.float32), "b")] if default_b else []
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "add",
                          [helper.make_tensor_value_info("a", F, [2]), helper.make_tensor_value_info("b", F, [2])],
                          [helper.make_tensor_value_info("c", F, [2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


def test_both_layers_override_an_input_that_has_a_default_initializer():
    for native in (True, False):
        b = make_binding(_session(True), native)
        assert b.overridable == frozenset({"b"})
        a, bb = np.array([1, 2], np.float32), np.array([10, 20], np.float32)  # kept alive: the native layer does not
        b.bind_array("a", a)
        b.bind_array("b", bb)
        b.bind_output("c")
        b.run()
        assert b.outputs()[0].numpy().tolist() == [11.0, 22.0], native


def test_both_layers_upload_a_strided_array_as_its_values():
    for native in (True, False):
        b = make_binding(_session(False), native)
        strided = np.arange(8, dtype=np.float32).reshape(2, 4)[:, 1]  # [1, 5], not contiguous
        assert not strided.flags.c_contiguous
        bb = np.array([10, 20], np.float32)
        b.bind_value("a", b.upload(strided))
        b.bind_array("b", bb)
        b.bind_output("c")
        b.run()
        assert b.outputs()[0].numpy().tolist() == [11.0, 25.0], native
        assert [v.numpy().tolist() for v in b.output_values()] == [[11.0, 25.0]], native


def test_both_layers_clear_what_was_bound():
    for native in (True, False):
        b = make_binding(_session(False), native)
        a, bb = np.array([1, 2], np.float32), np.array([10, 20], np.float32)
        b.bind_array("a", a)
        b.bind_array("b", bb)
        b.bind_output("c")
        b.run()
        b.clear_outputs()
        b.bind_output("c")
        b.run()
        assert len(b.outputs()) == 1, native  # the cleared output is not listed twice
        b.clear_inputs()
        with pytest.raises(Exception):  # noqa: B017, PT011 - onnxruntime's own error for inputs not bound
            b.run()


def test_a_missing_private_name_is_reported_once():
    import types

    real = _session(False)
    without_sess = types.SimpleNamespace(io_binding=real.io_binding)  # a session object with no private `_sess`
    assert missing_private_api(without_sess) == ["InferenceSession._sess.run_with_iobinding"]  # type: ignore[arg-type]


# -- feeds -----------------------------------------------------------------------------------------------


def _state_model():
    """hn = h0 + x over [2] floats."""
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Add", ["h0", "x"], ["hn"])], "acc", [vi("x", F, [2]), vi("h0", F, [2])], [vi("hn", F, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_a_list_or_a_number_takes_the_inputs_dtype_and_an_array_of_another_dtype_is_refused_unless_cast():
    s = StatefulSession(_state_model())
    assert s.run_dict({"x": [1, 2]})["hn"].tolist() == [1.0, 2.0]  # a list of ints: float32, as onnxruntime converts it
    assert s.run_dict({"x": (0.5, 0.25)})["hn"].tolist() == [1.5, 2.25]
    with pytest.raises(FeedError, match=r"acc: input 'x' takes float32, got a float64 array; onnxruntime refuses it too"):
        s.run_dict({"x": np.array([1.0, 1.0])})
    assert s.state["h0"].tolist() == [1.5, 2.25]  # the refused call changed nothing
    with pytest.raises(FeedError, match="got a int64 array"):
        s.run_dict({"x": np.array([1, 1])})
    cast = StatefulSession(_state_model(), cast_inputs=True)
    assert cast.run_dict({"x": np.array([1.0, 3.0])})["hn"].tolist() == [1.0, 3.0]
    assert cast.run_dict({"x": np.array([1, 1])})["hn"].tolist() == [2.0, 4.0]


def test_a_batch_size_asked_for_sizes_a_state_only_when_the_feeds_do_not():
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "sx"], ["hn"])]
    g = helper.make_graph(nodes, "lead", [vi("x", F, ["N", 2]), vi("h0", F, ["M", 2])], [vi("hn", F, ["M", 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    s = StatefulSession(m)
    assert s.initial_state(batch=3)["h0"].shape == (3, 2)  # nothing fed: the batch asked for
    assert s.initial_state({"x": np.ones((4, 2), np.float32)}, batch=3)["h0"].shape == (4, 2)  # x's leading dim wins
