"""Where a pool finds each batch axis (``pool.layout``), and why it runs one stream per call when it finds none
(``pool.batching``): one row per rule of the module docstring, each with its near miss.

Oracle: the declared shapes themselves (hand-read), and a StatefulSession per stream for the models that run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rnnir import StateError
from rnnir.runtime import StatefulSession
from rnnir.serving.pool import SessionPool
from tests.support import streaming_models as sm

TOL = 1e-5
F = TensorProto.FLOAT


def passthrough(x_shape: list[Any] | None, h_shape: list[Any] | None) -> onnx.ModelProto:
    """``y = x``, ``h_out = h_in``: a model whose only interest is its declared shapes."""
    def vi(name: str, shape: list[Any] | None) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, F, shape)

    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["h_in"], ["h_out"])]
    graph = helper.make_graph(nodes, "passthrough", [vi("x", x_shape), vi("h_in", h_shape)], [vi("y", x_shape), vi("h_out", h_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


PAIRS = {"h_in": "h_out"}


def test_the_batch_axis_of_every_state_and_input_comes_from_the_declared_shapes_by_the_documented_rules():
    cases: list[tuple[list[Any] | None, list[Any] | None, dict[str, int | None], Any]] = [
        # (x shape, h shape, batch_axes, expected (inputs, states) or a reason the pool gives)
        (["B", 4], ["B", 8], {}, ({"x": 0}, {"h_in": 0})),
        ([4, "B"], [1, "B", 8], {}, ({"x": 1}, {"h_in": 1})),  # x's dim that shares the state's symbol
        (["N", 4], [2, "B"], {}, ({"x": 0}, {"h_in": 1})),  # no shared symbol: x's leading dynamic dim
        (["B", 3], ["A", "B"], {}, ({"x": 0}, {"h_in": 1})),  # two dynamic dims: the one a plain input shares
        ([4, 3], ["B", 8], {}, ({"x": None}, {"h_in": 0})),  # a static input is shared by the rows of a call
        ([4, 3], [2, "B"], {"h_in": 1, "x": None}, ({"x": None}, {"h_in": 1})),
        (["B", 4], [2, "B"], {"h_in": 0}, ({"x": 0}, {"h_in": 0})),  # batch_axes wins over the shapes
        (["B", 4], ["B", 8], {"x": None}, ({"x": None}, {"h_in": 0})),
        (["B", 4], [2, 8], {}, "has the static shape [2, 8]: its batch is fixed"),
        (["B", 4], None, {}, "state input 'h_in' declares no shape"),
        (["B", 3], ["A", "C"], {}, "has several dynamic dims [0, 1]"),
        (["A", "B"], ["A", "B"], {}, "has several dynamic dims [0, 1]"),
        (None, ["B", 8], {}, "input 'x' declares no shape"),
        (None, ["A", "B"], {}, "has several dynamic dims [0, 1]"),  # no input shape to share a symbol with
        ([4, "T"], ["B", 8], {}, "input 'x' [4, 'T'] has no leading dynamic dim"),
        (["B", 4], ["B", 8], {"h_in": None}, "batch_axes says state input 'h_in' has no batch axis"),
    ]
    for x_shape, h_shape, axes, want in cases:
        pool = SessionPool(passthrough(x_shape, h_shape), PAIRS, batch_axes=axes)
        where = (x_shape, h_shape, axes)
        if isinstance(want, str):
            assert pool.layout is None and want in pool.batching, (where, pool.batching)
        else:
            assert pool.batching == "", (where, pool.batching)
            assert (pool.layout.inputs, pool.layout.states) == want, (where, pool.layout)
    with pytest.raises(StateError, match=r"batch_axes names \['nope'\], which are not inputs \['h_in', 'x'\]"):
        SessionPool(passthrough(["B", 4], ["B", 8]), PAIRS, batch_axes={"nope": 0})


def test_an_input_that_reaches_a_recurrent_ops_batch_axis_batches_along_it():
    model = sm.lstm_b()
    x = model.graph.input[0]
    for k, d in enumerate(["T", "N", 3]):  # no symbol shared with the state: the LSTM's X says axis 1
        x.type.tensor_type.shape.dim[k].Clear()
        if isinstance(d, str):
            x.type.tensor_type.shape.dim[k].dim_param = d
        else:
            x.type.tensor_type.shape.dim[k].dim_value = d
    pool = SessionPool(model)
    assert pool.layout.inputs == {"x": 1} and pool.layout.states == {"h0": 1, "c0": 1}
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in "abc"}
    rng = np.random.default_rng(0)
    for _ in range(3):
        requests = {sid: {"x": rng.standard_normal((2, 1, 3)).astype(np.float32)} for sid in solo}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["hn"] - solo[sid].run_dict(feeds)["hn"])) <= TOL
    assert pool.stats.largest_batch == 3


def _streams_equal_solo(model: onnx.ModelProto, pool: SessionPool, ids: list[str], shape: tuple[int, ...], ticks: int = 3) -> None:
    base = StatefulSession(model, PAIRS)
    solo = {sid: base.fork(reset=True) for sid in ids}
    rng = np.random.default_rng(1)
    for _ in range(ticks):
        requests = {sid: {"x": rng.standard_normal(shape).astype(np.float32)} for sid in ids}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            for name, value in want.items():
                assert np.max(np.abs(got[sid][name] - value)) <= TOL, (sid, name)


def _summed(h_dim: Any) -> onnx.ModelProto:
    """``h' = h + sum(x)`` and ``total = sum(x)`` over everything: total's shape is the same for one row and three."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=1), helper.make_node("Add", ["h_in", "total"], ["h_out"])]
    graph = helper.make_graph(nodes, "summed", [helper.make_tensor_value_info("x", F, ["B", 2]), helper.make_tensor_value_info("h_in", F, [h_dim, 1])],
                              [helper.make_tensor_value_info("total", F, [1, 1]), helper.make_tensor_value_info("h_out", F, [h_dim, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    return model


def test_a_model_that_fails_the_probe_runs_one_stream_per_call_and_every_stream_stays_right():
    for h_dim, axes, reason in (("B", {}, "output 'total' has shape (1, 1) for one row and (1, 1) for 3: no batch axis to split"),
                                (1, {"h_in": 0}, "a batch of 3 rows failed in onnxruntime")):
        model = _summed(h_dim)
        pool = SessionPool(model, PAIRS, batch_axes=axes)
        assert pool.batching == ""
        _streams_equal_solo(model, pool, ["a", "b", "c"], (1, 2))
        assert reason in pool.batching and pool.stats.largest_batch == 1, pool.batching


def test_a_model_that_mixes_two_rows_fails_the_probe_and_two_streams_stay_right():
    model = sm.mixing()
    pool = SessionPool(model, PAIRS)
    base = StatefulSession(model, PAIRS)
    solo = {sid: base.fork(reset=True) for sid in "ab"}
    rng = np.random.default_rng(2)
    for _ in range(3):  # exactly two streams: the smallest tick that can mix rows
        requests = {sid: {"x": rng.standard_normal((1, 2)).astype(np.float32), "g": np.array(1.0, np.float32)} for sid in solo}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["y"] - solo[sid].run_dict(feeds)["y"])) <= TOL
    assert "mixes batch rows" in pool.batching and pool.stats.largest_batch == 1
