"""``rnnir.fix(expose_state=True)`` on cells written as plain ops that start from zeros, when the zeros' shape is
typed in other ways: a declared shape with a named or an empty dim, a static or unnamed batch in the cell's input,
no shape inference at all, float64; and the cells it must leave alone (in an If branch, already written back).

The models are the committed PyTorch GRU/LSTM cell exports (tests/data/torch_cells, ``h0``/``c0`` [B, 16] inputs)
with a state input replaced by zeros ``[batch of x, 16]`` (``ConstantOfShape``, as ``torch.zeros(B, H)`` exports)
or a zero initializer.  The state input that replaces the zeros must have the zeros' own shape, ``[batch, 16]``:
the expected types are written by hand from each edit; where the state is exposed the fixed model fed its own
state back must give what the stateful export gives fed its own (onnxruntime).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.fixes import state_plan
from tests.fixes.test_expose_cells import _zeros_start

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_cells"
HIDDEN = 16


def _export(name: str) -> onnx.ModelProto:
    return onnx.load(str(DATA / f"{name}.ts.onnx"))


def _zeros(name: str, roles: tuple[str, ...] = ("h0", "c0"), how: str = "const") -> onnx.ModelProto:
    """The export with the state inputs ``roles`` replaced by zeros [batch of x, 16] (or a [1, 16] initializer)."""
    return _zeros_start(name, how, roles)


def _declare(model: onnx.ModelProto, name: str, shape: list[int | str | None]) -> onnx.ModelProto:
    model.graph.value_info.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    return model


def _zeros_of(model: onnx.ModelProto, shape: tuple[int, ...]) -> onnx.ModelProto:
    """The zero initializer h0 made ``shape``."""
    (h0,) = [t for t in model.graph.initializer if t.name == "h0"]
    h0.CopyFrom(numpy_helper.from_array(np.zeros(shape, np.float32), "h0"))
    return model


def _x_as(model: onnx.ModelProto, shape: list[int | str]) -> onnx.ModelProto:
    model.graph.input[0].type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, shape))
    return model


def _session(model: onnx.ModelProto) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return lambda feeds: dict(zip(names, sess.run(None, feeds)))


def _streams_like_the_export(name: str, fixed: onnx.ModelProto, pairs: dict[str, str], batch: int, dtype: type = np.float32) -> None:
    """Calls of ``fixed`` fed its own state back give the stateful export's ``y`` and states fed back alike."""
    rng = np.random.default_rng(81)
    xs = [rng.standard_normal((batch, 8)).astype(dtype) for _ in range(3)]
    export = _session(_export(name) if dtype is np.float32 else _as_float64(_export(name)))
    run_fixed = _session(fixed)
    own = {"h0": "hn", "c0": "cn"} if name.startswith("lstm") else {"h0": "hn"}
    want_state = {i: np.zeros((batch, HIDDEN), dtype) for i in own}
    got_state = {i: np.zeros((batch, HIDDEN), dtype) for i in pairs}
    got_state.update({i: np.zeros((batch, HIDDEN), dtype) for i in own if any(i == t.name for t in fixed.graph.input)})
    for k, x in enumerate(xs):
        want = export({"x": x, **want_state})
        got = run_fixed({"x": x, **got_state})
        np.testing.assert_allclose(got["y"], want["y"], atol=1e-5, err_msg=f"{name} call {k}")
        want_state = {i: want[o] for i, o in own.items()}
        got_state = {**{i: got[o] for i, o in pairs.items()}, **{i: want_state[i] for i in own if i in got_state}}


def test_the_state_input_takes_the_zeros_shape_however_it_is_typed() -> None:
    """One row per way the zeros' [batch, hidden] is known: the type of the exposed input, by hand (the next test
    streams the kinds of batch)."""
    rows: list[tuple[str, onnx.ModelProto, str]] = [
        ("zeros of x's batch, inferred [?, ?]", _zeros("gru_cell"), "B,16"),
        ("declared [1, H]: a named hidden dim is the cell's", _declare(_zeros("gru_cell", how="initializer"), "h0", [1, "H"]), "B,16"),
        ("declared [N, 16]: its own batch name kept", _declare(_zeros("gru_cell"), "h0", ["N", 16]), "N,16"),
        ("declared [?, 16]: the batch of x", _declare(_zeros("gru_cell"), "h0", [None, 16]), "B,16"),
        ("x of static batch 1", _x_as(_zeros("gru_cell"), [1, 8]), "1,16"),
        ("x of static batch 3", _x_as(_zeros("gru_cell"), [3, 8]), "3,16"),
        ("a zero initializer [3, 16], x of static batch 3", _x_as(_zeros_of(_zeros("gru_cell", how="initializer"), (3, HIDDEN)), [3, 8]), "3,16"),
        ("x of an invented batch name", _x_as(_zeros("gru_cell"), ["unk__0", 8]), "batch,16"),
        ("a zero initializer [1, 16]", _zeros("gru_cell", how="initializer"), "B,16"),
    ]
    for what, model, want in rows:
        result = rnnir.fix(model, expose_state=True)
        assert result.skipped == [], what
        zeros = "initializer 'h0'" if "initializer" in what or "[1, H]" in what else "ConstantOfShape 'h0_zeros'"
        assert str(result.edits[0]) == (
            f"EXPOSE [safe] exposed the h state of GRU '/cell/Add_3': GRU '/cell/Add_3' initial_h / Y_h: initial state zeros ({zeros}), "
            f"final state returned as 'hn' but not paired -> graph input 'hn_prev' float32[{want}] (required: feed zeros on the first call; "
            "StatefulSession does), paired with the returned 'hn'"
        ), what


def test_a_state_of_each_kind_of_batch_streams_like_the_export() -> None:
    """Symbolic, static, and zeros [1, 16] broadcast over a batch of 2: the new state fed back is [batch, 16]."""
    for what, model, batch in (
        ("batch of x", _zeros("gru_cell"), 2),
        ("static batch 3", _x_as(_zeros("gru_cell"), [3, 8]), 3),
        ("zeros [1, 16] at batch 2", _zeros("gru_cell", how="initializer"), 2),
    ):
        result = rnnir.fix(model, expose_state=True)
        assert {p.input: p.output for p in rnnir.load(result.model).state_pairs} == {"hn_prev": "hn"}, what
        _streams_like_the_export("gru_cell", result.model, {"hn_prev": "hn"}, batch)


def _computed_zeros() -> onnx.ModelProto:
    """The GRU export starting from Expand(Relu(zeros)): zeros, but made by an op the initial state is not read through."""
    model = _export("gru_cell")
    g = model.graph
    g.input.remove(next(i for i in g.input if i.name == "h0"))
    g.initializer.extend([numpy_helper.from_array(np.zeros((1, HIDDEN), np.float32), "z"), numpy_helper.from_array(np.array([1, HIDDEN], np.int64), "z_shape")])
    g.node.insert(0, helper.make_node("Relu", ["z"], ["z_relu"], name="relu"))
    g.node.insert(1, helper.make_node("Expand", ["z_relu", "z_shape"], ["h0"], name="expand"))
    return model


def test_zeros_that_are_not_batch_by_hidden_constants_are_left_alone() -> None:
    """A declared [16] or [1, s, 16] is no [batch, hidden] a state input could take; zeros computed by a Relu are no
    constant this fix removes: each reported, the model unchanged."""
    rows = [
        (_declare(_zeros("gru_cell"), "h0", [HIDDEN]), "the shape of its zeros 'h0' is unknown"),
        (_declare(_zeros("gru_cell"), "h0", [1, "s", HIDDEN]), "the shape of its zeros 'h0' is unknown"),
        (_computed_zeros(), "its initial state is Relu 'relu', not a constant"),
    ]
    for model, reason in rows:
        result = rnnir.fix(model, expose_state=True)
        assert result.edits == [], reason
        assert [(e.target, e.reason) for e in result.skipped] == [("GRU '/cell/Tanh'.initial_h", reason)], reason
        assert result.model.graph == model.graph, reason


def test_without_shape_inference_only_zeros_that_hold_their_value_are_exposed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shape inference is a help, never required: with none, zeros held as a tensor have its shape; zeros made at
    run time (ConstantOfShape) have none, and are reported."""

    def no_inference(*args: object, **kwargs: object) -> onnx.ModelProto:
        raise RuntimeError("shape inference unavailable")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", no_inference)
    const = _export("gru_cell")
    const.graph.input.remove(next(i for i in const.graph.input if i.name == "h0"))
    const.graph.node.insert(0, helper.make_node("Constant", [], ["h0"], value=numpy_helper.from_array(np.zeros((1, HIDDEN), np.float32)), name="h0_const"))
    inner_x = _zeros("gru_cell", how="initializer")  # x made inside the graph: untyped without inference
    inner_x.graph.input[0].name = "x_in"
    inner_x.graph.node.insert(0, helper.make_node("Identity", ["x_in"], ["x"], name="x_ident"))
    rows = [
        ("initializer", _zeros("gru_cell", how="initializer"), "B,16"),
        ("Constant", const, "B,16"),
        ("declared [?, 16]", _declare(_zeros("gru_cell"), "h0", [None, HIDDEN]), "B,16"),
        ("x of unknown batch", inner_x, "batch,16"),  # no static batch in the first input either
    ]
    for what, model, want in rows:
        result = rnnir.fix(model, expose_state=True)
        assert result.edits[0].after.startswith(f"graph input 'hn_prev' float32[{want}] "), what
        assert result.skipped == [], what
    made = _zeros("gru_cell")
    result = rnnir.fix(made, expose_state=True)
    assert result.edits == []
    assert [(e.target, e.reason) for e in result.skipped] == [("GRU '/cell/Tanh'.initial_h", "the shape of its zeros 'h0' is unknown")]


def _as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model in float64: weights, graph inputs and outputs, and the zeros' fill value."""
    g = model.graph
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for vi in (*g.input, *g.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "ConstantOfShape" and a.name == "value":
                a.t.CopyFrom(helper.make_tensor("value", TensorProto.DOUBLE, [1], [0.0]))
    return model


def test_a_float64_cell_gets_a_float64_state() -> None:
    for name, roles in (("gru_cell", ("h",)), ("lstm_cell", ("h", "c"))):
        result = rnnir.fix(_as_float64(_zeros(name)), expose_state=True)
        assert [e.after.split()[3] for e in result.edits[: len(roles)]] == ["float64[B,16]"] * len(roles), name
        _streams_like_the_export(name, result.model, {f"{r}n_prev": f"{r}n" for r in roles}, 2, np.float64)


def test_only_the_zero_start_of_an_lstm_cell_is_exposed() -> None:
    """h is a paired state input already, c starts from zeros: c alone is exposed, and h is no skipped state."""
    result = rnnir.fix(_zeros("lstm_cell", roles=("c0",)), expose_state=True)
    assert [e.after for e in result.edits[:1]] == [
        "graph input 'cn_prev' float32[B,16] (required: feed zeros on the first call; StatefulSession does), paired with the returned 'cn'"
    ]
    assert result.skipped == []
    assert {p.input: p.output for p in rnnir.load(result.model).state_pairs} == {"h0": "hn", "cn_prev": "cn"}
    _streams_like_the_export("lstm_cell", result.model, {"cn_prev": "cn"}, 2)


def _in_if_branches(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model's nodes moved into both branches of an If (branch-local names), the graph inputs read from outside."""
    g = model.graph
    outer = {i.name for i in g.input} | {t.name for t in g.initializer}
    branches = []
    for name in ("then", "else"):
        nodes = []
        for n in g.node:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.output[:] = [f"{name}_{o}" for o in n.output]
            c.input[:] = [i if i in outer else f"{name}_{i}" for i in n.input]
            nodes.append(c)
        branches.append(helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_{o.name}", TensorProto.FLOAT, None) for o in g.output]))
    outs = [o.name for o in g.output]
    del g.node[:]
    g.initializer.append(numpy_helper.from_array(np.array(True), "flag"))
    g.node.append(helper.make_node("If", ["flag"], outs, then_branch=branches[0], else_branch=branches[1], name="branch"))
    onnx.checker.check_model(model)
    return model


def test_cells_in_if_branches_are_reported_only_when_their_zero_start_is_lost() -> None:
    """Cells in If branches are not exposed (main graph only); one that reads its state input, or whose new state
    is written back already (its zeros ignore the caller's h0: SD007's repair, not this one), is no such report."""
    ignored = _in_if_branches(_zeros("gru_cell", roles=("h0",)))
    ignored.graph.input.append(helper.make_tensor_value_info("h0_in", TensorProto.FLOAT, ["B", HIDDEN]))  # paired with hn, read by nobody
    one_sided = _in_if_branches(_zeros("gru_cell", roles=("h0",)))  # the else branch hands h0_in back, no cell
    one_sided.graph.input.append(helper.make_tensor_value_info("h0_in", TensorProto.FLOAT, ["B", HIDDEN]))
    other = next(a.g for a in one_sided.graph.node[0].attribute if a.name == "else_branch")
    del other.node[:]
    other.node.extend([helper.make_node("Identity", ["x"], ["else_y"], name="else_y"), helper.make_node("Identity", ["h0_in"], ["else_hn"], name="else_hn")])
    rows = [
        ("reads its state input", _in_if_branches(_export("gru_cell")), None, []),
        ("reads a state input that is never written", _in_if_branches(_export("gru_cell")), {"h0": None}, []),
        ("written back", ignored, {"h0_in": "hn"}, []),
        ("written back, the other branch without a cell", one_sided, {"h0_in": "hn"}, []),
        ("starts from zeros", _in_if_branches(_zeros("gru_cell")), None,
         [("GRU '/cell/Tanh'", "a cell inside an If branch or a Loop body is not exposed yet (main graph only)")] * 2),
    ]
    for what, model, pairs, want in rows:
        result = rnnir.fix(model, expose_state=True, pairs=pairs, codes=[])
        assert [e for e in result.edits if e.code == "EXPOSE"] == [], what
        assert [(e.target, e.reason) for e in result.skipped] == want, what


def test_a_failed_recognition_leaves_the_recurrent_ops_exposed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recognising cells is an addition (as in lowering): when it fails, the ONNX ops are exposed all the same."""

    def failing(*args: object, **kwargs: object) -> object:
        raise ValueError("a shape the checks did not foresee")

    monkeypatch.setattr(state_plan, "recognise", failing)
    rng = np.random.default_rng(82)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), n) for n, s in (("W", (1, 9, 2)), ("R", (1, 9, 3)))]
    gru = helper.make_node("GRU", ["x", "W", "R"], ["y"], name="gru", hidden_size=3)
    g = helper.make_graph([gru], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 1, 1, 3])], inits)
    result = rnnir.fix(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), expose_state=True)
    assert [e.message for e in result.edits] == ["exposed the h state of GRU 'gru'"]
