"""``rnnir.fix(expose_state=True)`` on cells written as plain ops (``rnnir.lower.cells``) that start from zeros.

The models are the committed PyTorch cell exports (tests/data/torch_cells, stateful: ``h0``/``c0`` are inputs) with
their state inputs replaced by zeros, as ``torch.zeros(B, H)`` exports them (``ConstantOfShape`` of
``[batch of x, hidden]``) or as a zero initializer.  The oracle is the original stateful export fed its own state
back, run by onnxruntime: the exposed model fed back its new pairs must give the same ``y`` and state every call.
The near misses (zeros also read by something that is not the cell's state, a state already written back, a cell
inside an If branch) must be left alone, each with its reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.fixes.edits import EXPOSE

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_cells"
HIDDEN = 16


def _zeros_start(name: str, how: str, roles: tuple[str, ...] = ("h0", "c0")) -> onnx.ModelProto:
    """The stateful export with each state input of ``roles`` replaced by zeros ([batch of x, 16] or a [1, 16] initializer)."""
    model = onnx.load(str(DATA / f"{name}.ts.onnx"))
    g = model.graph
    for st in [i for i in g.input if i.name in roles]:
        g.input.remove(st)
        n = st.name
        if how == "initializer":
            g.initializer.append(numpy_helper.from_array(np.zeros([1, HIDDEN], np.float32), n))
            continue
        nodes = [
            helper.make_node("Shape", ["x"], [f"{n}_xs"], name=f"{n}_shape_of_x"),
            helper.make_node("Constant", [], [f"{n}_s"], value=numpy_helper.from_array(np.array([0], np.int64)), name=f"{n}_c0"),
            helper.make_node("Constant", [], [f"{n}_e"], value=numpy_helper.from_array(np.array([1], np.int64)), name=f"{n}_c1"),
            helper.make_node("Slice", [f"{n}_xs", f"{n}_s", f"{n}_e"], [f"{n}_b"], name=f"{n}_batch"),
            helper.make_node("Constant", [], [f"{n}_h"], value=numpy_helper.from_array(np.array([HIDDEN], np.int64)), name=f"{n}_hid"),
            helper.make_node("Concat", [f"{n}_b", f"{n}_h"], [f"{n}_dims"], axis=0, name=f"{n}_dims"),
            helper.make_node("ConstantOfShape", [f"{n}_dims"], [n], value=helper.make_tensor("value", onnx.TensorProto.FLOAT, [1], [0.0]), name=f"{n}_zeros"),
        ]
        for k, node in enumerate(nodes):
            g.node.insert(k, node)
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _calls(model: onnx.ModelProto, xs: list[np.ndarray], pairs: dict[str, str], batch: int) -> list[dict[str, np.ndarray]]:
    """Every call's outputs, each state input fed (zeros first) the output it is paired with on the call before."""
    state = {i: np.zeros((batch, HIDDEN), np.float32) for i in pairs}
    outs = []
    for x in xs:
        out = _run(model, {"x": x, **state})
        outs.append(out)
        state = {i: out[o] for i, o in pairs.items()}
    return outs


def _exposed(state: str, role: str, kind: str, anchor: str, zeros: str, dims: str) -> str:
    final = "Y_h" if role == "h" else "Y_c"
    return (
        f"EXPOSE [safe] exposed the {role} state of {kind} {anchor!r}: {kind} {anchor!r} initial_{role} / {final}: "
        f"initial state zeros ({zeros}), final state returned as '{state}n' but not paired -> graph input '{state}n_prev' "
        f"float32[{dims}] (required: feed zeros on the first call; StatefulSession does), paired with the returned '{state}n'"
    )


def test_zero_start_cells_are_exposed_and_then_stream_like_the_stateful_export() -> None:
    """One row per cell and kind of zeros: the edits' text (by hand) and every call against the stateful export."""
    rng = np.random.default_rng(21)
    xs = [rng.standard_normal((1, 8)).astype(np.float32) for _ in range(4)]
    cases = [
        ("rnn_cell", "const", ["h"], "RNN", {"h": "/cell/Tanh"}, "B,16"),
        ("gru_cell", "const", ["h"], "GRU", {"h": "/cell/Add_3"}, "B,16"),
        ("lstm_cell", "const", ["h", "c"], "LSTM", {"h": "/cell/Mul_2", "c": "/cell/Add_1"}, "B,16"),
        ("lstm_cell", "initializer", ["h", "c"], "LSTM", {"h": "/cell/Mul_2", "c": "/cell/Add_1"}, "B,16"),
    ]
    for name, how, roles, kind, anchors, dims in cases:
        model = _zeros_start(name, how)
        assert rnnir.load(model).state_pairs == ()
        result = rnnir.fix(model, expose_state=True)
        zeros = {r: (f"ConstantOfShape '{r}0_zeros'" if how == "const" else f"initializer '{r}0'") for r in roles}
        want = [_exposed(r, r, kind, anchors[r], zeros[r], dims) for r in roles]
        got = [str(e) for e in result.edits]
        assert got[: len(want)] == want, (name, how)
        if how == "const":  # the zeros' subgraph is gone
            assert [e.target for e in result.edits[len(want):]] == ["former initial states"], (name, how)
            assert "Shape" not in {n.op_type for n in result.model.graph.node}
        else:
            assert len(got) == len(want) and not {r + "0" for r in roles} & {t.name for t in result.model.graph.initializer}
        assert result.skipped == [], (name, how)
        pairs = {p.input: p.output for p in rnnir.load(result.model).state_pairs}
        assert pairs == {f"{r}n_prev": f"{r}n" for r in roles}, (name, how)
        assert [d.code for d in passes.run(rnnir.load(result.model)) if d.severity.value == "error"] == []
        original = onnx.load(str(DATA / f"{name}.ts.onnx"))
        want_calls = _calls(original, xs, {f"{r}0": f"{r}n" for r in roles}, 1)
        got_calls = _calls(result.model, xs, pairs, 1)
        for k, (a, b) in enumerate(zip(got_calls, want_calls)):
            for out in b:
                np.testing.assert_allclose(a[out], b[out], atol=1e-5, err_msg=f"{name} {how} call {k} {out}")
        assert np.abs(want_calls[-1]["y"] - _run(model, {"x": xs[-1]})["y"]).max() > 1e-4  # the zero start forgot


def test_cells_whose_zeros_are_not_only_their_state_are_left_alone() -> None:
    """Near misses: each keeps its graph, and the skipped edit says why."""
    peeked = _zeros_start("gru_cell", "const")  # the zeros also returned on their own: not only the cell's state
    peeked.graph.node.append(helper.make_node("Identity", ["h0"], ["peek"], name="peek_node"))
    peeked.graph.output.append(helper.make_tensor_value_info("peek", onnx.TensorProto.FLOAT, None))
    from tests.support import mutants as mu

    written_back = mu.ignore_state_input(onnx.load(str(DATA / "gru_cell.ts.onnx")), "h0")  # SD007: the pair writes it back
    cases = [
        (peeked, "its zeros 'h0' are also read by 'peek_node', which is not this cell's state"),
        (written_back, "this final state is already written back by a state pair"),
    ]
    for model, reason in cases:
        result = rnnir.fix(model, expose_state=True, codes=[])
        assert result.edits == [], reason
        assert [(e.code, e.applied, e.reason) for e in result.skipped] == [(EXPOSE, False, reason)]
        assert result.model.graph == model.graph
