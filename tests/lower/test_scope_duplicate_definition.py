"""A node output that redefines a graph input or an initializer of its own graph is refused with a ModelError, as
onnxruntime refuses it ("Duplicate definition"): lowered anyway, a state input redefined by a node was read with no
load of its slot at all.  Near-miss: a fresh name is fine."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir import ModelError
from rnnir.cli import main
from rnnir.lower import lower, read_model

F = TensorProto.FLOAT


def rnn_plus_identity(out_name: str, *, in_loop: bool = False):
    """RNN(x, h0) -> y, hn, beside Identity(x) -> out_name (in the main graph, or inside a Loop body)."""
    nodes = [helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1)]
    outputs = [helper.make_tensor_value_info("y", F, [1, 1, 1, 1]), helper.make_tensor_value_info("hn", F, [1, 1, 1])]
    if in_loop:
        body = helper.make_graph(
            [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Identity", ["v_in"], [out_name])],
            "body",
            [
                helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("v_in", F, [1, 1, 1]),
            ],
            [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info(out_name, F, [1, 1, 1])],
        )
        nodes.append(helper.make_node("Loop", ["n", "", "x"], ["v_final"], body=body))
        outputs.append(helper.make_tensor_value_info("v_final", F, [1, 1, 1]))
    else:
        nodes.append(helper.make_node("Identity", ["x"], [out_name]))
    g = helper.make_graph(
        nodes,
        "dup",
        [helper.make_tensor_value_info("x", F, [1, 1, 1]), helper.make_tensor_value_info("h0", F, [1, 1, 1])],
        outputs,
        [
            numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"),
            numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R"),
            numpy_helper.from_array(np.array(2, np.int64), "n"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_node_redefining_a_graph_input_or_initializer_is_refused_like_onnxruntime_does():
    cases = [
        (rnn_plus_identity("h0"), r"^dup: value 'h0' is a graph input and is produced again by 'Identity\(h0\)'; ONNX values are SSA \(at main graph\)$"),
        (rnn_plus_identity("W"), r"^dup: value 'W' is an initializer and is produced again by 'Identity\(W\)'; ONNX values are SSA \(at main graph\)$"),
        (rnn_plus_identity("v_in", in_loop=True), r"^dup: value 'v_in' is a graph input and is produced again by 'Identity\(v_in\)'; ONNX values are SSA \(at Loop\(v_final\)\.body\)$"),
    ]
    for model, message in cases:
        with pytest.raises(Exception, match="Duplicate definition|SSA"):  # the oracle: onnxruntime refuses the model too
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        with pytest.raises(ModelError, match=message):
            lower(read_model(model))


def test_a_fresh_name_is_not_a_redefinition_and_the_cli_reports_one_as_an_error(tmp_path, capsys):
    fine = rnn_plus_identity("x_copy")
    ort.InferenceSession(fine.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [p.input for p in lower(read_model(fine)).state_pairs] == ["h0"]
    bad, good = tmp_path / "bad.onnx", tmp_path / "good.onnx"
    bad.write_bytes(rnn_plus_identity("h0").SerializeToString())
    good.write_bytes(fine.SerializeToString())
    # one bad file does not blank the report for the other: the good one is still linted
    assert main(["lint", "--no-config", str(bad), str(good)]) == 2
    out = capsys.readouterr()
    assert "value 'h0' is a graph input and is produced again" in out.out + out.err
    assert "1 of 1 state slice verified" in out.out + out.err
