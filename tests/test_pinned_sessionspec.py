"""What a StatefulSession reads off its model (rnnir/sessionspec.py), pinned with small models built here and
hand-checkable shapes: how declared dims become IOSpec dims, and which axes of a graph input are the time and
batch axes of the recurrent op it feeds."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import ModelError
from rnnir.runtime import StatefulSession
from rnnir.sessionspec import _recurrent_inputs

F = TensorProto.FLOAT
H, I = 2, 3


def gru(x_shape, h_shape, layout=0, perm=None):
    """x -> [Transpose(perm)] -> GRU -> Y, hn."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("GRU", ["xt" if perm else "x", "W", "R", "", "", "h0"], ["Y", "hn"], hidden_size=H, layout=layout)]
    if perm:
        nodes.insert(0, helper.make_node("Transpose", ["x"], ["xt"], perm=perm))
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, x_shape), helper.make_tensor_value_info("h0", F, h_shape)],
        [helper.make_tensor_value_info("Y", F, None), helper.make_tensor_value_info("hn", F, h_shape)],
        [
            numpy_helper.from_array(rng.standard_normal((1, 3 * H, I)).astype(np.float32), "W"),
            numpy_helper.from_array(rng.standard_normal((1, 3 * H, H)).astype(np.float32), "R"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_a_dim_with_neither_value_nor_name_is_unknown_not_a_symbol_it_shares():
    # x [?, ?, 3] and h0 [1, ?, 2]: the blank dims are unknown, each on its own; h0's is the batch, from x's batch
    # axis (1), not from the first blank dim of x (its time axis, 5 steps) as a shared "" symbol would make it
    m = gru(["T", "B", I], [1, "N", H])
    for vi, axis in ((m.graph.input[0], 0), (m.graph.input[0], 1), (m.graph.input[1], 1), (m.graph.output[1], 1)):
        vi.type.tensor_type.shape.dim[axis].Clear()
    s = StatefulSession(m)
    assert s.inputs["x"].shape == (None, None, I)
    assert s.initial_state({"x": np.ones((5, 4, I), np.float32)})["h0"].shape == (1, 4, H)


def test_a_batchwise_op_has_time_on_axis_1_and_batch_on_axis_0():
    # ONNX: layout=1 makes X [batch, seq, input] (onnxruntime's CPU kernels refuse it, so no session here)
    m = gru(["B", "T", I], [1, "B", H], layout=1)
    (ri,) = _recurrent_inputs(m, rnnir.load(m))
    assert (ri.input, ri.time_axis, ri.batch_axis) == ("x", 1, 0)


def test_a_transpose_too_short_for_the_axes_stops_the_trace_and_onnxruntime_refuses_the_model():
    # perm [0] on a rank-3 input is malformed: the trace must not index past it (an IndexError traceback) but
    # stop, and onnxruntime's refusal is the clear error
    with pytest.raises(ModelError, match=r"^g: onnxruntime cannot load the model: .*GRU"):
        StatefulSession(gru(["T", "B", I], [1, "B", H], perm=[0]))


def two_grus(x_names):
    """One GRU per name in x_names (each with its own h0_k -> hn_k), all with the same weights."""
    rng = np.random.default_rng(1)
    nodes, inputs, outputs = [], [], []
    for k, x in enumerate(x_names):
        nodes.append(helper.make_node("GRU", [x, "W", "R", "", "", f"h0_{k}"], [f"Y_{k}", f"hn_{k}"], hidden_size=H))
        inputs.append(helper.make_tensor_value_info(f"h0_{k}", F, [1, "N", H]))
        outputs.append(helper.make_tensor_value_info(f"hn_{k}", F, [1, "N", H]))
    inputs[:0] = [helper.make_tensor_value_info(x, F, ["T", "B", I]) for x in dict.fromkeys(x_names)]
    g = helper.make_graph(nodes, "two", inputs, outputs, [
        numpy_helper.from_array(rng.standard_normal((1, 3 * H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, 3 * H, H)).astype(np.float32), "R"),
    ])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_an_input_feeding_two_recurrent_ops_is_listed_once():
    s = StatefulSession(two_grus(["x", "x"]))
    assert [(r.input, r.time_axis, r.batch_axis) for r in s.recurrent_inputs] == [("x", 0, 1)]


def test_two_inputs_feeding_two_recurrent_ops_are_both_listed():
    s = StatefulSession(two_grus(["a", "b"]))
    assert [r.input for r in s.recurrent_inputs] == ["a", "b"]


def rnn(inputs, inits=()):
    """h = x + 0.5 h (ONNX RNN, identity activation), its inputs as given: y only, no state pair."""
    node = helper.make_node("RNN", inputs, ["y"], hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    g = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("x", F, ["T", 1, 1])], [helper.make_tensor_value_info("y", F, None)], [
        numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"),
        numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R"),
        *inits,
    ])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_a_recurrent_op_with_only_its_required_inputs_has_no_length_input():
    s = StatefulSession(rnn(["x", "W", "R"]))
    assert s.length_inputs == [] and s.slots == []
    assert s.run_dict({"x": np.ones((3, 1, 1), np.float32)})["y"].ravel().tolist() == [1.0, 1.5, 1.75]


def test_a_sequence_lens_from_an_initializer_is_not_a_length_input():
    # lens is an initializer, not a graph input (IR 4+): neither fed nor produced by a node
    lens = numpy_helper.from_array(np.array([2], np.int32), "lens")
    s = StatefulSession(rnn(["x", "W", "R", "", "lens"], [lens]))
    assert s.length_inputs == []
    assert s.run_dict({"x": np.ones((3, 1, 1), np.float32)})["y"].ravel().tolist() == [1.0, 1.5, 0.0]  # 2 of 3 steps counted


def test_a_sequence_lens_input_shared_by_two_recurrent_ops_is_listed_once():
    nodes = [
        helper.make_node("RNN", ["x", "W", "R", "", "lens"], [f"y{k}"], hidden_size=1, activations=["Affine"],
                         activation_alpha=[1.0], activation_beta=[0.0])
        for k in (1, 2)
    ]
    g = helper.make_graph(
        nodes, "lens2",
        [helper.make_tensor_value_info("x", F, ["T", 1, 1]), helper.make_tensor_value_info("lens", TensorProto.INT32, [1])],
        [helper.make_tensor_value_info("y1", F, None), helper.make_tensor_value_info("y2", F, None)],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    assert StatefulSession(m).length_inputs == ["lens"]
