"""Why a slice is unverified and where (``passes.verify(...).slices``): a cache written back as its own window on
one If branch and as something else on the other is unverified on that path (a near miss, windows on both
branches, is verified); ``where`` names the ONNX node the trace stopped at, or the IR node id when the program was
built without ONNX provenance. The expected words and names are read off each model."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from tests.support.onnx_models import const, lstm_weights, model, vi

I, H = 3, 4


def _window_branch(p):
    """c' = Slice(Concat(c, x * w, axis=1), starts=-3): the newest 3 frames of the [1, 3, 2] cache."""
    nodes = [
        helper.make_node("Mul", ["x", "w"], [p + "new"], name=p + "frames"),
        helper.make_node("Concat", ["c", p + "new"], [p + "cat"], axis=1, name=p + "cat"),
        helper.make_node("Slice", [p + "cat", "s", "e", "a"], [p + "out"], name=p + "window"),
    ]
    return helper.make_graph(nodes, p, [], [vi(p + "out", [1, 3, 2])])


def _other_branch(p, kind):
    if kind == "constant":
        node = helper.make_node("Constant", [], [p + "out"], value=const(p + "zeros", np.zeros((1, 3, 2), np.float32)))
    else:  # the cache handed back as it came in
        node = helper.make_node("Identity", ["c"], [p + "out"], name=p + "keep")
    return helper.make_graph([node], p, [], [vi(p + "out", [1, 3, 2])])


def _cache_model(else_kind):
    other = _window_branch("e_") if else_kind == "window" else _other_branch("e_", else_kind)
    nodes = [
        helper.make_node("If", ["reset"], ["c_new"], then_branch=_window_branch("t_"), else_branch=other, name="choose"),
        helper.make_node("ReduceSum", ["c_new"], ["y"], keepdims=0, name="use"),
    ]
    inits = [const("w", np.float32(2.0)), const("s", np.array([-3], np.int64)), const("e", np.array([2**63 - 1], np.int64)),
             const("a", np.array([1], np.int64))]
    ins = [vi("x", [1, 1, 2]), vi("reset", [], TensorProto.BOOL), vi("c", [1, 3, 2])]
    return model(nodes, ins, [vi("y", []), vi("c_new", [1, 3, 2])], inits)


def test_a_cache_written_back_as_its_window_on_one_branch_only_is_unverified_on_the_other():
    for else_kind, expected in (
        ("window", ("verified", "")),
        ("constant", ("unverified", "'c' is written back as a cache on some call paths only (constant in branch choose.else_branch)")),
        ("passthrough", ("unverified", "'c' is written back as a cache on some call paths only (passthrough in branch choose.else_branch)")),
    ):
        program = rnnir.load(_cache_model(else_kind))
        (s,) = passes.verify(program).slices
        assert (s.verdict.value, s.reason) == expected, else_kind
        assert [d.code for d in passes.run(program)] == ([] if else_kind == "window" else ["SD009"])


def test_where_an_unverified_slice_stops_is_the_onnx_node_or_else_the_ir_node_id():
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (5, 1, I))
    rng = np.random.default_rng(1)
    w = b.const("W", rng.standard_normal((1, H, I)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, H, H)).astype(np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(h, "copy"), hidden_size=H, name="rnn", outputs=["Y", "hn"])
    b.store(b.compute("Mul", [hn, b.const("two", np.float32(2))]), h)  # a value change rnnir cannot follow slice by slice
    (s,) = passes.verify(b.build()).slices
    assert (s.verdict.value, s.reason, s.where) == ("unverified", "write-back of 'h' passes through Mul 'mul0'", "mul0")

    lstm = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["Y", "hn_raw", "cn"], hidden_size=H, name="lstm")
    scale = helper.make_node("Mul", ["hn_raw", "two"], ["hn"], name="scale")
    m = model(
        [lstm, scale],
        [vi("x", ["T", 1, I]), vi("h0", [1, 1, H]), vi("c0", [1, 1, H])],
        [vi("Y", ["T", 1, 1, H]), vi("hn", [1, 1, H]), vi("cn", [1, 1, H])],
        [*lstm_weights(I=I, H=H), const("two", np.float32(2.0))],
    )
    verdicts = {s.input: (s.verdict.value, s.where) for s in passes.verify(rnnir.load(m)).slices}
    assert verdicts == {"h0": ("unverified", "scale"), "c0": ("verified", None)}
