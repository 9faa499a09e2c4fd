"""The probe's rows: before batching, the pool runs three DISTINCT rows as one batch and one at a time.

A model that mixes batch rows only in a way equal rows hide (a permutation of the rows, a gate that opens on one
row's large value, a state-only leak) is caught only when the three probe rows are distinct and realistic:

* the tick's own rows, as the callers fed them (a large value kept large);
* past the tick's rows (a tick of two streams), a float row perturbed, so it repeats no real row;
* the states: each row its own perturbed copy of the initial state.

Each model below misbehaves exactly in that way; the oracle is a StatefulSession per stream (the pool's code not
involved): a pool that batched such a model anyway hands some stream another stream's rows.

x[B, 3] and h_in[B, 3] -> y, h_out: ``h_out = h_in + x`` unless the model's point is its state.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.runtime import StatefulSession
from rnnir.serving.pool import SessionPool

F = TensorProto.FLOAT
PAIRS = {"h_in": "h_out"}
TOL = 1e-5
W = 3


def _const(name: str, value: Any, dtype: Any = np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _model(name: str, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], h_in: list[Any] | None = None,
           h_out: list[Any] | None = None, y: list[Any] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", F, ["B", W]), helper.make_tensor_value_info("h_in", F, h_in or ["B", W])],
        [helper.make_tensor_value_info("y", F, y or ["B", W]), helper.make_tensor_value_info("h_out", F, h_out or ["B", W])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _swap_tail(src: str, dst: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """``dst = concat(src[:1], src[:0:-1])``: row 0 kept, the other rows in reverse order.  One row and two rows
    come out unchanged; three distinct rows do not (rows 1 and 2 trade places), three rows whose last two are
    equal do."""
    p = f"{dst}_"
    nodes = [
        helper.make_node("Slice", [src, p + "zero", p + "one", p + "axis"], [p + "head"]),
        helper.make_node("Slice", [src, p + "last", p + "zero", p + "axis", p + "back"], [p + "tail"]),
        helper.make_node("Concat", [p + "head", p + "tail"], [dst], axis=0),
    ]
    inits = [_const(p + "zero", [0]), _const(p + "one", [1]), _const(p + "axis", [0]), _const(p + "last", [-1]), _const(p + "back", [-1])]
    return nodes, inits


def swapping_outputs() -> onnx.ModelProto:
    """``y`` = x with rows 1 and 2 traded (in a batch of three); the state does not mix."""
    nodes, inits = _swap_tail("x", "y")
    return _model("swapping_outputs", [*nodes, helper.make_node("Add", ["h_in", "x"], ["h_out"])], inits)


def swapping_states() -> onnx.ModelProto:
    """``h_out`` = (h_in with rows 1 and 2 traded) + x and ``y = h_in + x``: only the state mixes rows, and only
    states that differ show it (every stream starts from the same initial state)."""
    nodes, inits = _swap_tail("h_in", "hs")
    return _model("swapping_states", [*nodes, helper.make_node("Add", ["hs", "x"], ["h_out"]), helper.make_node("Add", ["h_in", "x"], ["y"])], inits)


def gated_on_the_largest_row() -> onnx.ModelProto:
    """``y = x + max over the batch of relu(x - 20)``: rows leak into each other only when some row exceeds 20
    (a gate on the batch maximum); a row scaled down or replaced by noise hides it."""
    nodes = [
        helper.make_node("Sub", ["x", "twenty"], ["over"]),
        helper.make_node("Relu", ["over"], ["gate"]),
        helper.make_node("ReduceMax", ["gate"], ["most"], axes=[0], keepdims=1),
        helper.make_node("Add", ["x", "most"], ["y"]),
        helper.make_node("Add", ["h_in", "x"], ["h_out"]),
    ]
    return _model("gated", nodes, [_const("twenty", 20.0, np.float32)])


def slightly_mixing() -> onnx.ModelProto:
    """``y = x + 10 + 0.01 * sum over the batch of x``: the leak (0.01 of the other rows) is small next to y
    itself (about 10), far above the probe's 1e-5."""
    nodes = [
        helper.make_node("ReduceSum", ["x", "axis0"], ["total"], keepdims=1),
        helper.make_node("Mul", ["total", "hundredth"], ["leak"]),
        helper.make_node("Add", ["x", "ten"], ["x10"]),
        helper.make_node("Add", ["x10", "leak"], ["y"]),
        helper.make_node("Add", ["h_in", "x"], ["h_out"]),
    ]
    return _model("slightly_mixing", nodes, [_const("axis0", [0]), _const("hundredth", 0.01, np.float32), _const("ten", 10.0, np.float32)])


def _x(rng: np.random.Generator, big: bool = False) -> np.ndarray:
    x = rng.standard_normal((1, W)).astype(np.float32)
    return x + np.float32(30.0) if big else x


def _streams_equal_solo(model: onnx.ModelProto, ticks: list[list[tuple[Any, bool]]], seed: int = 0) -> SessionPool:
    """Run ``ticks`` (each a list of (session id, big x?)) through one pool and each stream through its own
    StatefulSession: every output of every stream equal."""
    pool = SessionPool(model, PAIRS)
    base = StatefulSession(model, PAIRS)
    solo: dict[Any, StatefulSession] = {}
    rng = np.random.default_rng(seed)
    for t, tick in enumerate(ticks):
        requests = {sid: {"x": _x(rng, big)} for sid, big in tick}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            want = solo.setdefault(sid, base.fork(reset=True)).run_dict(feeds)
            for name in ("y", "h_out"):
                a, b = got[sid][name], want[name]
                assert a.shape == b.shape and np.allclose(a, b, rtol=0, atol=TOL), (model.graph.name, t, sid, name, pool.batching)
    return pool


def _probed_by(model: Callable[[], onnx.ModelProto], first: list[tuple[Any, bool]]) -> SessionPool:
    """The probe runs on the tick ``first``; then ticks of three streams (one with a large x) that a wrongly
    batched model gets wrong."""
    three = [("a", False), ("b", True), ("c", False)]
    return _streams_equal_solo(model(), [first, three, three, [("a", True), ("b", False), ("c", False)]])


def test_a_probe_of_three_streams_uses_three_distinct_rows_and_catches_a_model_that_trades_two():
    pool = _probed_by(swapping_outputs, [("a", False), ("b", False), ("c", False)])
    assert "mixes batch rows" in pool.batching and pool.stats.largest_batch == 1, pool.batching


def test_a_probe_of_two_streams_perturbs_the_float_row_past_them_and_catches_a_model_that_trades_two():
    pool = _probed_by(swapping_outputs, [("a", False), ("b", False)])
    assert "mixes batch rows" in pool.batching and pool.stats.largest_batch == 1, pool.batching


def test_a_probe_keeps_the_tick_rows_as_fed_and_catches_a_leak_that_only_a_large_value_opens():
    pool = _probed_by(gated_on_the_largest_row, [("a", False), ("b", True), ("c", False)])  # only b's row opens the gate
    assert "mixes batch rows" in pool.batching and pool.stats.largest_batch == 1, pool.batching


def test_a_probe_gives_each_row_its_own_float_state_and_catches_a_model_whose_state_alone_mixes_rows():
    pool = _streams_equal_solo(swapping_states(), [[("a", False), ("b", False), ("c", False)]] * 4)
    assert "mixes batch rows" in pool.batching and "'h_out'" in pool.batching and pool.stats.largest_batch == 1, pool.batching


def test_a_small_leak_next_to_large_outputs_is_caught_and_its_size_reported():
    pool = _probed_by(slightly_mixing, [("a", False), ("b", False), ("c", False)])
    found = re.search(r"row (\d) of a batch of 3 differs from the same row run alone on output 'y' \(max \|diff\| ([^)]*)\)", pool.batching)
    assert found, pool.batching
    diff = float(found.group(2))
    # row k's leak is 0.01 * the sum of the other rows: far above 1e-5, far below 1 for rows of standard normals
    assert 1e-4 < diff < 1.0, pool.batching


def offset_ids() -> onnx.ModelProto:
    """``h_out = h_in + x + table[id - 10]``: integer ids 10 and 11 (an embedding table of two rows behind an offset),
    any other id out of the table (onnxruntime refuses it).  The rows do not mix."""
    nodes = [
        helper.make_node("Sub", ["id", "ten"], ["index"]),
        helper.make_node("Gather", ["table", "index"], ["emb"], axis=0),
        helper.make_node("Add", ["h_in", "x"], ["hx"]),
        helper.make_node("Add", ["hx", "emb"], ["h_out"]),
        helper.make_node("Identity", ["h_out"], ["y"]),
    ]
    model = _model("offset_ids", nodes, [_const("ten", 10), _const("table", [[1, 2, 3], [-1, -2, -3]], np.float32)])
    model.graph.input.append(helper.make_tensor_value_info("id", TensorProto.INT64, ["B"]))
    return model


def test_a_probe_of_two_streams_repeats_a_fed_integer_row_rather_than_make_one_up():
    model = offset_ids()
    pool = SessionPool(model, PAIRS)
    base = StatefulSession(model, PAIRS)
    solo = {sid: base.fork(reset=True) for sid in ("a", "b")}
    rng = np.random.default_rng(3)
    for t in range(3):
        requests = {sid: {"x": _x(rng), "id": np.array([10 + k], np.int64)} for k, sid in enumerate(solo)}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            assert np.max(np.abs(got[sid]["y"] - want["y"])) <= TOL, (t, sid)
    # a made-up id (noise on an integer) would fall out of the table, fail the probe and forbid batching
    assert pool.batching == "" and pool.stats.largest_batch == 2, pool.batching


def stateless() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "stateless", [helper.make_tensor_value_info("x", F, ["B", W])],
                              [helper.make_tensor_value_info("y", F, ["B", W])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_model_without_state_runs_in_a_pool_one_stream_per_call_and_says_why():
    pool = SessionPool(stateless())
    assert pool.layout is None and pool.batching == "the model has no state: nothing to keep per stream"
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    got = pool.run({"a": {"x": x}, "b": {"x": -x}}, open_missing=True)
    assert got["a"]["y"].tolist() == [[0.0, 0.5, 2.0]] and got["b"]["y"].tolist() == [[1.0, 0.0, 0.0]]  # relu by hand
    assert pool.stats.largest_batch == 1


def transposed_state() -> onnx.ModelProto:
    """``h_in[1, B, 3]`` -> ``h_out[B, 1, 3]`` (= h_in + x, transposed): one stream's state keeps its shape (1, 1, 3)
    call after call, but a batch's state comes back along another axis than it went in."""
    nodes = [
        helper.make_node("Unsqueeze", ["x", "axis0"], ["x1"]),
        helper.make_node("Add", ["h_in", "x1"], ["s"]),
        helper.make_node("Transpose", ["s"], ["h_out"], perm=[1, 0, 2]),
        helper.make_node("Identity", ["x"], ["y"]),
    ]
    return _model("transposed_state", nodes, [_const("axis0", [0])], h_in=[1, "B", W], h_out=["B", 1, W])


def test_a_state_output_batched_along_another_axis_than_its_input_runs_one_stream_per_call():
    pool = _streams_equal_solo(transposed_state(), [[("a", False), ("b", False), ("c", False)]] * 3)
    assert pool.batching == "state output 'h_out' batches along axis 0, its input 'h_in' along 1", pool.batching
    assert pool.stats.largest_batch == 1


def test_an_output_whose_rows_are_not_one_per_stream_has_no_batch_axis_to_split():
    def grown(name: str, pieces: list[tuple[int, int]]) -> onnx.ModelProto:
        # y = concat of x[start:end] pieces along the batch: for one row and for three, anything but (1, 3) rows
        nodes = [helper.make_node("Slice", ["x", f"s{k}", f"e{k}", "axis0"], [f"p{k}"]) for k in range(len(pieces))]
        inits = [_const("axis0", [0])] + [c for k, (s, e) in enumerate(pieces) for c in (_const(f"s{k}", [s]), _const(f"e{k}", [e]))]
        nodes += [helper.make_node("Concat", [f"p{k}" for k in range(len(pieces))], ["y"], axis=0), helper.make_node("Add", ["h_in", "x"], ["h_out"])]
        return _model(name, nodes, inits, y=["N", W])

    big = 1 << 20
    for model, rows in ((grown("all_then_tail", [(0, big), (1, big)]), "(1, 3) for one row and (5, 3)"),  # 2B - 1 rows
                        (grown("tails", [(1, big), (2, big)]), "(0, 3) for one row and (3, 3)")):  # 2B - 3 rows: 3 for 3
        pool = _streams_equal_solo(model, [[("a", False), ("b", False), ("c", False)]] * 2)
        assert pool.batching == f"output 'y' has shape {rows} for 3: no batch axis to split", pool.batching


def test_output_shapes_learnt_for_three_streams_bind_the_whole_call_of_the_one_left():
    """The per-row shapes the pool learns from a batched call (batch dim 1) serve a later call of another row count:
    after two of three streams close, the stream left runs bound whole at once, its outputs equal to its solo run."""
    model = _model("plain", [helper.make_node("Add", ["h_in", "x"], ["h_out"]), helper.make_node("Mul", ["h_out", "h_out"], ["y"])], [])
    pool = SessionPool(model, PAIRS)
    base = StatefulSession(model, PAIRS)
    solo = {sid: base.fork(reset=True) for sid in "abc"}
    rng = np.random.default_rng(5)
    for t in range(5):
        if t == 2:
            pool.close("a")
            pool.close("b")
            del solo["a"], solo["b"]
        requests = {sid: {"x": _x(rng)} for sid in solo}
        whole = pool.stats.whole_calls
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            assert np.allclose(got[sid]["y"], want["y"], rtol=0, atol=TOL) and got[sid]["y"].shape == want["y"].shape, (t, sid)
        if t >= 1:  # the first call learns the shapes; every call after it (three streams, then one) is bound whole
            assert pool.stats.whole_calls == whole + 1, (t, pool.stats)
    assert pool.batching == ""
