"""A model whose inputs or outputs onnxruntime's IOBinding cannot take (strings, sequences, bfloat16) is refused when
the StatefulSession is built, with a ModelError naming the value, instead of a bare RuntimeError at the first call.
Near-misses: the numeric types IOBinding does take run, and a string input backed by an initializer (never bound
unless fed) does not stop the model."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from rnnir import ModelError
from rnnir.cli import main
from rnnir.runtime import StatefulSession


def rnn_with(extra_inputs, extra_nodes, extra_outputs, extra_inits=()):
    """h' = x + 0.5 h (identity activation, one unit) beside whatever extra values are passed through."""
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    g = helper.make_graph(
        [node, *extra_nodes],
        "passthrough",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, 1, 1]), helper.make_tensor_value_info("h0", T.FLOAT, [1, 1, 1]), *extra_inputs],
        [helper.make_tensor_value_info("y", T.FLOAT, [1, 1, 1, 1]), helper.make_tensor_value_info("hn", T.FLOAT, [1, 1, 1]), *extra_outputs],
        [
            numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"),
            numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R"),
            *extra_inits,
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def identity_of(name, elem):
    return (
        [helper.make_tensor_value_info(name, elem, [1])],
        [helper.make_node("Identity", [name], [name + "_out"])],
        [helper.make_tensor_value_info(name + "_out", elem, [1])],
    )


def test_unbindable_inputs_and_outputs_are_refused_when_the_session_is_built():
    cases = [
        (identity_of("s", T.STRING), r"graph input 's' is a string tensor"),
        (identity_of("b", T.BFLOAT16), r"graph input 'b' is a bfloat16 tensor, which numpy cannot hand to onnxruntime"),
        (
            (
                [helper.make_tensor_sequence_value_info("q", T.FLOAT, None)],
                [helper.make_node("SequenceLength", ["q"], ["n"])],
                [helper.make_tensor_value_info("n", T.INT64, [])],
            ),
            r"graph input 'q' is a sequence, not a tensor",
        ),
        (
            ([], [helper.make_node("SequenceConstruct", ["hn"], ["seq"])], [helper.make_tensor_sequence_value_info("seq", T.FLOAT, None)]),
            r"graph output 'seq' is a sequence, not a tensor",
        ),
    ]
    for (ins, nodes, outs), message in cases:
        with pytest.raises(ModelError, match=r"^passthrough: " + message + r"; StatefulSession binds numeric tensors only"):
            StatefulSession(rnn_with(ins, nodes, outs))


def test_numeric_types_iobinding_takes_still_run_and_a_string_initializer_input_is_left_alone():
    # h' = x + 0.5 h from h = 0 with x = 1, 1: the state reads 1 then 1.5 (by hand); the extra values pass through
    for elem, value in [(T.FLOAT16, np.array([1.5], np.float16)), (T.BOOL, np.array([True])), (T.UINT64, np.array([7], np.uint64))]:
        s = StatefulSession(rnn_with(*identity_of("e", elem)))
        x = np.ones((1, 1, 1), np.float32)
        first = s.run_dict({"x": x, "e": value})
        second = s.run_dict({"x": x, "e": value})
        assert first["e_out"].dtype == value.dtype and first["e_out"].tolist() == value.tolist()
        assert first["y"].ravel().tolist() == [1.0] and second["y"].ravel().tolist() == [1.5]
    # a string input with an initializer is optional: it is never bound unless fed, so the model runs
    ins, nodes, _ = identity_of("tag", T.STRING)
    s = StatefulSession(rnn_with(ins, [], [], [numpy_helper.from_array(np.array(["keep"], dtype=object), "tag")]))
    assert s.run_dict({"x": np.ones((1, 1, 1), np.float32)})["y"].ravel().tolist() == [1.0]


def test_rnnir_run_reports_an_unbindable_input_as_an_error(tmp_path, capsys):
    path = tmp_path / "strings.onnx"
    path.write_bytes(rnn_with(*identity_of("s", T.STRING)).SerializeToString())
    assert main(["run", "--no-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "graph input 's' is a string tensor" in err and "Traceback" not in err


def test_an_undefined_element_type_is_left_to_onnxruntime_to_refuse():
    # elem_type 0 says nothing about binding: onnxruntime's own load error is the clearer one
    undefined = helper.make_tensor_value_info("u", T.FLOAT, [1])
    undefined.type.tensor_type.elem_type = 0
    with pytest.raises(ModelError, match=r"^passthrough: onnxruntime cannot load the model: .*Invalid tensor data type 0"):
        StatefulSession(rnn_with([undefined], [], []))
