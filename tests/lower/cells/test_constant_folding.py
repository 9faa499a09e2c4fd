"""Constants a cell is built from that take evaluating: Constant nodes of each value attribute, and an op with an
omitted optional input (mutation survivors of rnnir/lower/cells.py's constant shapes and constant folding).

Every model is h' = tanh(x @ WT + h @ RT + b) written here with onnx.helper from weights drawn here, so the cell
and its exact weights are known without the recogniser.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex

I, H = 3, 4
_RNG = np.random.default_rng(51)
WT = (_RNG.standard_normal((I, H)) * 0.5).astype(np.float32)
RT = (_RNG.standard_normal((H, H)) * 0.5).astype(np.float32)
B = (_RNG.standard_normal(H) * 0.3).astype(np.float32)
N = helper.make_node


def _model(nodes: list[onnx.NodeProto], inputs: list[str], inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "rnn",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, I if n == "x" else H]) for n in inputs],
        [helper.make_tensor_value_info("hN", TensorProto.FLOAT, [1, H])],
        [numpy_helper.from_array(a, n) for n, a in {"WT": WT, "b": B, **inits}.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _scan(m: onnx.ModelProto, states: list[str]) -> tuple[CellScan, ModelIndex]:
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, s) for s in states]), index


def _rnn_nodes(h: str, rt: str, pre_to_out: list[onnx.NodeProto] | None = None) -> list[onnx.NodeProto]:
    nodes = [
        N("MatMul", ["x", "WT"], ["xw"], name="mm_x"),
        N("MatMul", [h, rt], ["hr"], name="mm_h"),
        N("Add", ["xw", "hr"], ["s"], name="add"),
        N("Add", ["s", "b"], ["pre"], name="bias"),
    ]
    return nodes + (pre_to_out or [N("Tanh", ["pre"], ["hN"], name="act")])


def _one_rnn(scan: CellScan, h_out: str, R: np.ndarray) -> None:
    assert scan.candidates == []
    (m,) = scan.matches
    assert (m.kind, m.h_out, m.x, m.hidden_size) == ("RNN", h_out, ("x",), H)
    np.testing.assert_allclose(m.weights.W[0], WT.T, atol=1e-6)
    np.testing.assert_allclose(m.weights.R[0], R, atol=1e-6)


def test_a_cell_that_starts_from_a_constant_node_of_zeros_is_found_with_its_zero_start():
    # h = Constant(value=zeros [1, H]): the model keeps no state and always starts its cell from zeros
    zeros = N("Constant", [], ["h_zero"], name="zeros", value=numpy_helper.from_array(np.zeros((1, H), np.float32)))
    scan, index = _scan(_model([zeros, *_rnn_nodes("h_zero", "RT")], ["x"], {"RT": RT}), [])
    _one_rnn(scan, "hN", RT.T)
    assert scan.matches[0].h_source == "h_zero" and scan.is_zero_start(index.root, "h_zero")


def test_a_pre_activation_reshaped_by_the_shapes_of_constant_nodes_is_probed():
    # pre is reshaped to Shape(Constant(value=tensor [1, H])) = [1, H], then to Concat(Shape(Constant(value_floats,
    # H floats)), Shape(Constant(value_float))) = [H] (a scalar's shape is empty): every constant's shape must be
    # known for the targets to be constants
    tail = [
        N("Constant", [], ["tensor"], name="c_tensor", value=numpy_helper.from_array(np.full((1, H), 0.5, np.float32))),
        N("Shape", ["tensor"], ["shape_tensor"], name="shape_tensor"),
        N("Reshape", ["pre", "shape_tensor"], ["pre2"], name="as_row"),
        N("Constant", [], ["floats"], name="c_floats", value_floats=[0.5] * H),
        N("Constant", [], ["scalar"], name="c_scalar", value_float=0.5),
        N("Shape", ["floats"], ["shape_floats"], name="shape_floats"),
        N("Shape", ["scalar"], ["shape_scalar"], name="shape_scalar"),
        N("Concat", ["shape_floats", "shape_scalar"], ["target"], axis=0, name="target"),
        N("Reshape", ["pre2", "target"], ["flat"], name="flatten"),
        N("Tanh", ["flat"], ["t"], name="act"),
        N("Reshape", ["t", "row"], ["hN"], name="out"),
    ]
    m = _model(_rnn_nodes("h0", "RT", tail), ["x", "h0"], {"RT": RT, "row": np.array([1, H], dtype=np.int64)})
    _one_rnn(_scan(m, ["h0"])[0], "t", RT.T)


def test_a_recurrent_weight_sliced_with_an_omitted_optional_input_is_folded():
    # RT = Slice(RT2, starts 0, ends 2H, axes omitted (''), steps 2): every other row of RT2 [2H, H]; an omitted
    # input stays in its place, so steps stay steps
    RT2 = (np.random.default_rng(52).standard_normal((2 * H, H)) * 0.5).astype(np.float32)
    sliced = N("Slice", ["RT2", "starts", "ends", "", "steps"], ["RT"], name="every_other_row")
    ints = {n: np.array([v], dtype=np.int64) for n, v in (("starts", 0), ("ends", 2 * H), ("steps", 2))}
    m = _model([sliced, *_rnn_nodes("h0", "RT")], ["x", "h0"], {"RT2": RT2, **ints})
    _one_rnn(_scan(m, ["h0"])[0], "hN", RT2[::2].T)
