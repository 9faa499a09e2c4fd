"""Which graph inputs feed a recurrent op's X, with their time and batch axes, and which are its sequence_lens
(rnnir/runtime/spec.py): one test over small GRU/RNN models built here, so that the mutation tool (which runs only
the fastest tests of a line every runtime test executes, and the fastest of each file) always runs it."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.runtime import StatefulSession
from rnnir.runtime.spec import _recurrent_inputs

F = TensorProto.FLOAT
H, I = 2, 3


def grus(x_names, layout=0):
    """One GRU per name in x_names (each with its own h0_k -> hn_k), all with the same weights."""
    rng = np.random.default_rng(1)
    nodes, inputs, outputs = [], [], []
    for k, x in enumerate(x_names):
        nodes.append(helper.make_node("GRU", [x, "W", "R", "", "", f"h0_{k}"], [f"Y_{k}", f"hn_{k}"], hidden_size=H, layout=layout))
        inputs.append(helper.make_tensor_value_info(f"h0_{k}", F, [1, "N", H]))
        outputs.append(helper.make_tensor_value_info(f"hn_{k}", F, [1, "N", H]))
    inputs[:0] = [helper.make_tensor_value_info(x, F, ["A", "C", I]) for x in dict.fromkeys(x_names)]
    g = helper.make_graph(nodes, "grus", inputs, outputs, [
        numpy_helper.from_array(rng.standard_normal((1, 3 * H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, 3 * H, H)).astype(np.float32), "R"),
    ])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def bare_rnn():
    """h = x + 0.5 h (ONNX RNN, identity activation) with only its required inputs X, W, R: y only, no state."""
    node = helper.make_node("RNN", ["x", "W", "R"], ["y"], hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    g = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("x", F, ["T", 1, 1])], [helper.make_tensor_value_info("y", F, None)], [
        numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"),
        numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R"),
    ])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_the_inputs_that_feed_recurrent_ops():
    # an input feeding two ops is listed once, with ONNX's X layout: [seq, batch, input] (layout 0)
    shared = StatefulSession(grus(["x", "x"]))
    assert [(r.input, r.time_axis, r.batch_axis) for r in shared.recurrent_inputs] == [("x", 0, 1)]
    # two inputs feeding two ops are both listed
    assert [r.input for r in StatefulSession(grus(["a", "b"])).recurrent_inputs] == ["a", "b"]
    # layout=1 makes X [batch, seq, input] (onnxruntime's CPU kernels refuse it: read without a session)
    m = grus(["x"], layout=1)
    assert [(r.input, r.time_axis, r.batch_axis) for r in _recurrent_inputs(m, rnnir.load(m))] == [("x", 1, 0)]
    # an op with only X, W and R has no sequence_lens to look for (and no state): it runs, 3 steps of x = 1
    bare = StatefulSession(bare_rnn())
    assert bare.length_inputs == [] and bare.slots == []
    assert bare.run_dict({"x": np.ones((3, 1, 1), np.float32)})["y"].ravel().tolist() == [1.0, 1.5, 1.75]
