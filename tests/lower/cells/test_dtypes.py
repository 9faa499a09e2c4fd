"""Float constants of each float type near a model's outputs: weights are ruled out as zero initial states from the
protobuf alone (no numpy import), and zeros of any float type are found (mutation survivors of
rnnir/lower/cells.py's element-type tables).

The models are written here with onnx.helper; which constant is zeros and which is a weight is known by construction.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir.lower.cells as cells
from rnnir.lower.scope import ModelIndex

#: every module of the recogniser that may reach numpy (through rnnir.util.lazymod): a check "without numpy" blocks them all
_NUMPY_USERS = [m for info in pkgutil.iter_modules(cells.__path__) if hasattr(m := importlib.import_module(f"{cells.__name__}.{info.name}"), "np")]

H = 4


class _NoNumpy:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"numpy.{name} was used")


def _model(elem: int, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], outputs: list[str]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "consts",
        [helper.make_tensor_value_info("x", elem, [2, H]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, H])],
        [helper.make_tensor_value_info(o, elem if o != "hN" else TensorProto.FLOAT, [2 if o != "hN" else 1, H]) for o in outputs],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _scan(m: onnx.ModelProto) -> tuple[cells.CellScan, ModelIndex]:
    index = ModelIndex(m, "test")
    return cells.find_cells(index, [(index.root, "h0")]), index


def test_float_weights_of_every_float_type_are_ruled_out_as_zero_states_without_numpy(monkeypatch: pytest.MonkeyPatch):
    # y = x * W with W [2, H] of non-zero float32, float64, float16 (raw bytes): read by a product with run-time
    # data near an output, W is looked at as a possible zero initial state; its bytes show it is not, so the scan
    # (here of a model with no cell: hN = -h0) never needs numpy, which costs more to import than most lints
    for elem, dtype in ((TensorProto.FLOAT, np.float32), (TensorProto.DOUBLE, np.float64), (TensorProto.FLOAT16, np.float16)):
        weight = numpy_helper.from_array(np.arange(1, 2 * H + 1, dtype=dtype).reshape(2, H) / 8, "W")
        nodes = [helper.make_node("Mul", ["x", "W"], ["y"], name="scale"), helper.make_node("Neg", ["h0"], ["hN"], name="neg")]
        m = _model(elem, nodes, [weight], ["y", "hN"])
        with monkeypatch.context() as patch:
            for module in _NUMPY_USERS:
                patch.setattr(module, "np", _NoNumpy())
            scan, index = _scan(m)
        assert (scan.matches, scan.candidates, scan.is_zero_start(index.root, "W")) == ([], [], False), dtype


def test_a_vector_weight_is_ruled_out_as_a_zero_state_by_its_rank_without_numpy(monkeypatch: pytest.MonkeyPatch):
    # y = x * b with b [H] zeros: zeros, but of rank 1, never a [batch, hidden] state: the dims alone say so
    bias = numpy_helper.from_array(np.zeros(H, dtype=np.float32), "b")
    nodes = [helper.make_node("Mul", ["x", "b"], ["y"], name="scale"), helper.make_node("Neg", ["h0"], ["hN"], name="neg")]
    m = _model(TensorProto.FLOAT, nodes, [bias], ["y", "hN"])
    with monkeypatch.context() as patch:
        for module in _NUMPY_USERS:
            patch.setattr(module, "np", _NoNumpy())
        scan, index = _scan(m)
    assert (scan.matches, scan.candidates, scan.is_zero_start(index.root, "b")) == ([], [], False)


def test_a_zero_fill_of_every_float_type_is_a_zero_initial_state_and_an_integer_one_is_not():
    # y = x * ConstantOfShape([2, H], value=0): zeros read by a product with run-time data near an output are the
    # state a model starts from when it keeps none, whatever their float type; an int64 zero fill pads a signal
    for elem, dtype, is_state in (
        (TensorProto.FLOAT, np.float32, True),
        (TensorProto.DOUBLE, np.float64, True),
        (TensorProto.FLOAT16, np.float16, True),
        (TensorProto.INT64, np.int64, False),
    ):
        shape = numpy_helper.from_array(np.array([2, H], dtype=np.int64), "shape")
        fill = numpy_helper.from_array(np.zeros(1, dtype=dtype), "fill")
        nodes = [
            helper.make_node("ConstantOfShape", ["shape"], ["z"], name="zeros", value=fill),
            helper.make_node("Mul", ["x", "z"], ["y"], name="use"),
            helper.make_node("Neg", ["h0"], ["hN"], name="neg"),
        ]
        scan, index = _scan(_model(elem, nodes, [shape], ["y", "hN"]))
        assert scan.is_zero_start(index.root, "z") is is_state, dtype
