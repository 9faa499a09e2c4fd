"""``rnnir.fix(expose_state=True)``: the input name a returned final state is paired with (the naming convention
rnnir's pairing recognises, README/docs), packed state with defaults, and what ``--packed`` refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.fixes.edits import FixError
from rnnir.runtime import StatefulSession

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _ort(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _strip(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.metadata_props[:]
    return m


def test_a_returned_final_state_is_paired_with_the_input_its_name_calls_for() -> None:
    """The GRU starts from zeros and returns its final state under each name; the new input takes the name that
    pairs with it, and the output is not returned twice (an Identity in between is seen through)."""
    rows = [
        ("hn", True, "h0"),  # hn = Identity(Y_h)
        ("new_hidden", False, "hidden"),
        ("next_state", False, "state"),
        ("present_mem", False, "past_mem"),
        ("state_out", False, "state_in"),
        ("cache_final", False, "cache"),
        ("stateN", False, "state"),
    ]
    x = np.random.default_rng(41).standard_normal((6, 1, 3)).astype(np.float32)
    whole = _ort(onnx.load(str(SAMPLES / "sd010_gru_no_initial_state.onnx"))).run(["y"], {"x": x})[0]
    for out, through_identity, want_in in rows:
        m = onnx.load(str(SAMPLES / "sd010_gru_no_initial_state.onnx"))
        g = m.graph
        if through_identity:
            g.node[0].output[1] = "gru_hn"
            g.node.append(helper.make_node("Identity", ["gru_hn"], [out], name="ident"))
        else:
            g.node[0].output[1] = out
            g.output[1].name = out
        result = rnnir.fix(m, expose_state=True)
        assert [e.after for e in result.edits] == [
            f"graph input {want_in!r} float32[1,1,4] (required: feed zeros on the first call; StatefulSession does), paired with the returned {out!r}"
        ], out
        assert [o.name for o in result.model.graph.output] == ["y", out], out
        assert {p.input: p.output for p in rnnir.load(_strip(result.model)).state_pairs} == {want_in: out}, out
        session = StatefulSession(result.model)
        chunked = np.concatenate([session.run({"x": x[k : k + 2]})["y"] for k in (0, 2, 4)])
        np.testing.assert_allclose(chunked, whole, atol=1e-6, err_msg=out)


def _lstm_from_constants(ir_version: int = 8) -> onnx.ModelProto:
    """An LSTM whose h and c start from non-zero constants and whose final states nobody returns."""
    rng = np.random.default_rng(42)
    H, I = 3, 2
    inits = [
        numpy_helper.from_array((rng.standard_normal((1, 4 * H, I)) * 0.5).astype(np.float32), "W"),
        numpy_helper.from_array((rng.standard_normal((1, 4 * H, H)) * 0.5).astype(np.float32), "R"),
        numpy_helper.from_array(np.full((1, 1, H), 0.25, np.float32), "h_start"),
        numpy_helper.from_array(np.full((1, 1, H), -0.5, np.float32), "c_start"),
    ]
    node = helper.make_node("LSTM", ["x", "W", "R", "", "", "h_start", "c_start"], ["y"], name="lstm", hidden_size=H)
    g = helper.make_graph(
        [node], "lstm_const", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1, I])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1, 1, H])], inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = ir_version
    return m


def test_packed_state_keeps_the_constant_starts_as_its_default() -> None:
    model = _lstm_from_constants()
    result = rnnir.fix(model, expose_state=True, packed=True, state_defaults=True)
    (state,) = [t for t in result.model.graph.initializer if t.name == "state"]
    np.testing.assert_array_equal(numpy_helper.to_array(state), np.stack([np.full((1, 3), 0.25), np.full((1, 3), -0.5)]).astype(np.float32))
    assert result.edits[0].message == "exposed packed state float32[2,1,3] (default: the op's former constant initial state)"
    x = np.random.default_rng(43).standard_normal((4, 1, 2)).astype(np.float32)
    # a caller that never feeds the state gets the original model's output
    np.testing.assert_array_equal(_ort(result.model).run(["y"], {"x": x})[0], _ort(model).run(["y"], {"x": x})[0])
    # an old model (IR version 3) has no overridable initializers: the default needs IR version 4
    old = rnnir.fix(_lstm_from_constants(ir_version=3), expose_state=True, state_defaults=True)
    assert old.model.ir_version == 4


def test_packed_refuses_states_that_do_not_stack() -> None:
    cell = onnx.load(str(Path(__file__).resolve().parents[1] / "data" / "torch_cells" / "gru_cell.ts.onnx"))
    g = cell.graph
    g.input.remove(next(i for i in g.input if i.name == "h0"))
    g.initializer.append(numpy_helper.from_array(np.zeros((1, 16), np.float32), "h0"))  # a cell starting from zeros
    with pytest.raises(FixError, match=r"--packed needs every exposed op in layout 0 \(state \[directions, batch, hidden\], not a cell's"):
        rnnir.fix(cell, expose_state=True, packed=True)
    two = _lstm_from_constants()  # a second recurrence of another size after the LSTM
    g = two.graph
    rng = np.random.default_rng(44)
    g.initializer.extend([
        numpy_helper.from_array(np.array([1], np.int64), "ax1"),
        numpy_helper.from_array((rng.standard_normal((1, 5, 3)) * 0.5).astype(np.float32), "W2"),
        numpy_helper.from_array((rng.standard_normal((1, 5, 5)) * 0.5).astype(np.float32), "R2"),
    ])
    g.node.extend([
        helper.make_node("Squeeze", ["y", "ax1"], ["y3"], name="sq"),
        helper.make_node("RNN", ["y3", "W2", "R2"], ["y2"], name="rnn2", hidden_size=5),
    ])
    g.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, [4, 1, 1, 5]))
    onnx.checker.check_model(two, full_check=True)
    with pytest.raises(FixError, match=r"--packed needs every exposed state of one dtype and shape \[1, batch, hidden\]"):
        rnnir.fix(two, expose_state=True, packed=True, state_defaults=True)
