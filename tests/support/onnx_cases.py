"""Build and run one-op ONNX recurrent models for the reference tests.

Every present input becomes a graph input (not an initializer), so one model
can be fed with different values; an absent optional input is written as the
empty name, exactly as the ONNX spec encodes "not given".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

#: ONNX input order of each recurrent op.
INPUT_NAMES: dict[str, tuple[str, ...]] = {
    "RNN": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
    "GRU": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
    "LSTM": ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
}

#: ONNX output names of each recurrent op.
OUTPUT_NAMES: dict[str, tuple[str, ...]] = {
    "RNN": ("Y", "Y_h"),
    "GRU": ("Y", "Y_h"),
    "LSTM": ("Y", "Y_h", "Y_c"),
}

#: Opset the test models import; RNN/GRU/LSTM were last changed in opset 22.
OPSET = 22


def build_model(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, Any],
) -> onnx.ModelProto:
    """Return a checked model holding one ``op_type`` node.

    ``inputs`` follow the op's ONNX input order; ``None`` marks an absent
    optional input (trailing ``None`` entries are dropped from the node).
    Outputs are typed like X, with known ranks and unknown dimensions.
    """
    names = INPUT_NAMES[op_type]
    node_inputs: list[str] = []
    graph_inputs: list[onnx.ValueInfoProto] = []
    for name, value in zip(names, inputs):
        if value is None:
            node_inputs.append("")
            continue
        node_inputs.append(name)
        elem_type = helper.np_dtype_to_tensor_dtype(value.dtype)
        graph_inputs.append(helper.make_tensor_value_info(name, elem_type, value.shape))
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    outputs = OUTPUT_NAMES[op_type]
    out_type = helper.np_dtype_to_tensor_dtype(inputs[0].dtype)
    attrs = {k: v for k, v in attributes.items() if v is not None}
    node = helper.make_node(op_type, node_inputs, list(outputs), **attrs)
    graph = helper.make_graph(
        [node],
        f"one_{op_type.lower()}",
        graph_inputs,
        [
            helper.make_tensor_value_info(n, out_type, [None] * (4 if n == "Y" else 3))
            for n in outputs
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def feeds(op_type: str, inputs: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    """The feed dictionary for a model built by :func:`build_model`."""
    return {n: v for n, v in zip(INPUT_NAMES[op_type], inputs) if v is not None}


def run_onnxruntime(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, Any],
) -> list[np.ndarray]:
    """Run the one-op model with onnxruntime's CPU provider."""
    import onnxruntime as ort

    model = build_model(op_type, inputs, attributes)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # a refused model raises; no console noise
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds(op_type, inputs))


def run_onnxruntime_via_layout0(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, Any],
) -> list[np.ndarray]:
    """Run a ``layout=1`` op with onnxruntime as the equivalent ``layout=0`` op.

    onnxruntime rejects ``layout=1`` for RNN/GRU/LSTM, so X and the initial
    states are transposed to the sequence-major layout, the op runs with
    ``layout=0``, and Y / Y_h / Y_c are transposed back (as the spec defines
    layout 1: X ``[batch, seq, input]``, Y ``[batch, seq, dirs, hidden]``,
    states ``[batch, dirs, hidden]``).
    """
    names = INPUT_NAMES[op_type]
    moved = list(inputs)
    for k, name in enumerate(names):
        if moved[k] is None:
            continue
        if name == "X" or name.startswith("initial_"):
            moved[k] = np.ascontiguousarray(np.swapaxes(moved[k], 0, 1))
    outputs = run_onnxruntime(op_type, moved, {**attributes, "layout": 0})
    back = [np.transpose(outputs[0], (2, 0, 1, 3))]
    back += [np.swapaxes(state, 0, 1) for state in outputs[1:]]
    return back


def run_reference_evaluator(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, Any],
) -> list[np.ndarray]:
    """Run the one-op model with ``onnx.reference.ReferenceEvaluator``."""
    from onnx.reference import ReferenceEvaluator

    model = build_model(op_type, inputs, attributes)
    return ReferenceEvaluator(model).run(None, feeds(op_type, inputs))
