"""What a StatefulSession reads off its model (rnnir/runtime/spec.py), pinned with small models built here and
hand-checkable numbers: a malformed Transpose in front of X, and which graph inputs are a recurrent op's
sequence_lens.  (What every session reads, on lines each runtime test executes, is pinned by the single tests of
test_pinned_session_options.py and test_pinned_recurrent_inputs.py.)"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import ModelError, StateError
from rnnir.runtime import StatefulSession

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




def test_a_transpose_too_short_for_the_axes_stops_the_trace_and_onnxruntime_refuses_the_model():
    # perm [0] on a rank-3 input is malformed: the trace must not index past it (an IndexError traceback) but
    # stop, and onnxruntime's refusal is the clear error
    with pytest.raises(ModelError, match=r"^g: onnxruntime cannot load the model: .*GRU"):
        StatefulSession(gru(["T", "B", I], [1, "B", H], perm=[0]))


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


def half_program():
    """The design doc's recurrence h = x + 0.5 h as a Builder program: no ONNX source."""
    b = rnnir.Builder("half")
    h = b.slot("h", "float32", (1, 1, 1))
    x = b.input("x", "float32", (1, 1, 1))
    _, hn = b.recurrent(
        "RNN", x, b.const("W", np.ones((1, 1, 1), np.float32)), b.const("R", np.full((1, 1, 1), 0.5, np.float32)),
        initial_h=b.load(h), hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0],
    )
    b.store(hn, h)
    b.store(hn, b.output("hn", "float32", (1, 1, 1)))
    return b.build()


def test_a_program_without_onnx_source_runs_through_its_export_or_says_what_to_pass(monkeypatch):
    s = StatefulSession(half_program())
    assert [s.run_dict({"x": np.full((1, 1, 1), v, np.float32)})["hn"].item() for v in (1.0, 0.0, 2.0)] == [1.0, 0.5, 2.25]
    monkeypatch.setitem(sys.modules, "rnnir.exporter", None)  # an installation without the exporter
    with pytest.raises(StateError, match=r"^program 'half' was not lowered from ONNX and rnnir\.export is unavailable .*pass the \.onnx model instead$"):
        StatefulSession(half_program())


def test_a_lowered_program_given_pairs_is_lowered_again_with_them():
    # a = b + x names nothing like state: no pair is found, until the caller declares a -> b
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "x"], ["b"])], "ab",
        [helper.make_tensor_value_info("x", F, [1]), helper.make_tensor_value_info("a", F, [1])], [helper.make_tensor_value_info("b", F, [1])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    program = rnnir.load(m)
    assert StatefulSession(program).slots == []
    s = StatefulSession(program, pairs={"a": "b"})
    assert [(p.input, p.output) for p in s.slots] == [("a", "b")]
    assert [s.run_dict({"x": np.ones(1, np.float32)})["b"].item() for _ in range(3)] == [1.0, 2.0, 3.0]


def test_a_slot_lowered_from_a_constant_initial_state_is_not_a_graph_input_and_is_refused():
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0c"], ["y", "hn"], hidden_size=1)
    g = helper.make_graph(
        [node], "const0", [helper.make_tensor_value_info("x", F, ["T", 1, 1])], [helper.make_tensor_value_info("hn", F, [1, 1, 1])],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), n) for n in ("W", "R", "h0c")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    with pytest.raises(StateError, match=r"^const0: state input 'h0c' is not a graph input \(lowered with entry='constant'\?\); export the program"):
        StatefulSession(rnnir.load(m, entry="constant"))
