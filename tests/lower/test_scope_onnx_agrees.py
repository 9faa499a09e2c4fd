"""Models the ONNX checker refuses and rnnir used to read on: a graph output with an empty name, and a SequenceMap
body whose inputs or outputs do not match its node's.  The checker (full_check) is the oracle; near-misses that it
accepts are read."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from rnnir import ModelError
from rnnir.lower import read_model
from rnnir.lower.scope import ModelIndex

F = TensorProto.FLOAT


def make(nodes, inputs, outputs):
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs), opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def sequence_map(body_inputs: int, body_outputs: int):
    """SequenceMap over one sequence (plus a tensor when the body takes two inputs), body = Identity per output."""
    names_in = ["s_el", "t_el"][:body_inputs]
    body = helper.make_graph(
        [helper.make_node("Identity", [names_in[0]], [f"o{k}"]) for k in range(body_outputs)],
        "body",
        [helper.make_tensor_value_info(n, F, [2]) for n in names_in],
        [helper.make_tensor_value_info(f"o{k}", F, [2]) for k in range(body_outputs)],
    )
    node = helper.make_node("SequenceMap", ["seq", "t"], ["out"], body=body)
    return make(
        [node],
        [helper.make_tensor_sequence_value_info("seq", F, [2]), helper.make_tensor_value_info("t", F, [2])],
        [helper.make_tensor_sequence_value_info("out", F, [2])],
    )


def test_a_sequence_map_body_must_match_its_node():
    good = sequence_map(2, 1)
    onnx.checker.check_model(good, full_check=True)
    ModelIndex(read_model(good).model, "m")
    for body_inputs, body_outputs in [(2, 2), (1, 1)]:
        bad = sequence_map(body_inputs, body_outputs)
        with pytest.raises(Exception):  # noqa: B017, PT011 - the oracle: the checker refuses it (its own error type)
            onnx.checker.check_model(bad, full_check=True)
        with pytest.raises(
            ModelError,
            match=rf"^m: SequenceMap body has {body_inputs} input\(s\) and {body_outputs} output\(s\); the node's 2 input\(s\) and 1 output\(s\) need 2 and 1",
        ):
            ModelIndex(read_model(bad).model, "m")


def test_a_graph_output_needs_a_name():
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    named = make(nodes, [helper.make_tensor_value_info("x", F, [1])], [helper.make_tensor_value_info("y", F, [1])])
    onnx.checker.check_model(named, full_check=True)
    ModelIndex(read_model(named).model, "m")
    unnamed = make(nodes, [helper.make_tensor_value_info("x", F, [1])], [helper.make_tensor_value_info("y", F, [1]), helper.make_tensor_value_info("", F, [1])])
    with pytest.raises(Exception):  # noqa: B017, PT011 - the oracle, as above
        onnx.checker.check_model(unnamed, full_check=True)
    with pytest.raises(ModelError, match=r"^m: a graph output has an empty name \(at main graph\)$"):
        ModelIndex(read_model(unnamed).model, "m")
