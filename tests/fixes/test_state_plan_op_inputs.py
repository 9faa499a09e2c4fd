"""``rnnir.fix(expose_state=True)`` on ONNX recurrent ops whose input shape inference cannot type, whose constant
start has no static shape, whose If branches hold ops of different sizes, or that lack ``hidden_size``.

The state tensor of an op is ``[directions, batch, hidden]`` (``[batch, directions, hidden]`` for layout 1) of the
op's own element type (ONNX binds X, W, R and initial_h to one type T): the expected types below follow from the
ONNX operator definitions and the models' declared inputs, written by hand.  Where onnxruntime runs the op, the
fixed model streamed in chunks must equal the original run on the whole sequence.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.errors import ModelError
from rnnir.runtime import StatefulSession

H = 3


def _ort(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _gru(pre: list[onnx.NodeProto], x: onnx.ValueInfoProto, *, inputs: tuple[onnx.ValueInfoProto, ...] = (), I: int = 2,
         dtype: type = np.float32, layout: int = 0, seed: int = 71) -> onnx.ModelProto:
    """A GRU (hidden 3, starting from zeros, final state not returned) reading ``xr``, which ``pre`` makes from ``x``."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(dtype), n) for n, s in (("W", (1, 3 * H, I)), ("R", (1, 3 * H, H)))]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    gru = helper.make_node("GRU", ["xr", "W", "R"], ["y"], name="gru", hidden_size=H, **({"layout": layout} if layout else {}))
    g = helper.make_graph([*pre, gru], "gru", [x, *inputs], [helper.make_tensor_value_info("y", elem, None)], inits)
    domains = {n.domain for n in pre if n.domain}
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), *(helper.make_opsetid(d, 1) for d in sorted(domains))])


def _state_type(result: rnnir.FixResult) -> str:
    """The exposed input's type, as the edit prints it (``float32[1,batch,3]``)."""
    (edit,) = result.edits
    assert edit.after.startswith("graph input 'h0' "), edit.after
    return edit.after.split()[3]


def test_the_state_of_an_op_whose_input_inference_cannot_type() -> None:
    """X made by an op shape inference does not know (a contrib op), or reshaped by a runtime shape: the batch is the
    leading dim of the first graph input when static, else the symbol ``batch``; the type is X's, else W's."""
    contrib_x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 2, 2])
    gelu = helper.make_node("Gelu", ["x"], ["xr"], domain="com.microsoft", name="gelu")
    reshape = helper.make_node("Reshape", ["audio", "shape"], ["xr"], name="reshape")
    shape_in = helper.make_tensor_value_info("shape", TensorProto.INT64, None)
    declared_untyped = _gru([gelu], contrib_x)  # a value_info with a shape but no element type
    declared_untyped.graph.value_info.append(helper.make_tensor_value_info("xr", TensorProto.UNDEFINED, ["T", 2, 2]))
    audio = helper.make_tensor_value_info("audio", TensorProto.FLOAT, [2, 12])
    three = helper.make_tensor_value_info("shape", TensorProto.INT64, [3])  # rank 3 known, every dim invented (unk__)
    stale = _gru([reshape], audio, inputs=(shape_in,))  # a stale value_info of another rank for X
    stale.graph.value_info.append(helper.make_tensor_value_info("xr", TensorProto.FLOAT, [2, 12]))
    all_contrib = _gru([gelu, *(helper.make_node("Gelu", [w], [f"{w}_g"], domain="com.microsoft", name=f"gelu_{w}") for w in "WR")], contrib_x)
    all_contrib.graph.node[-1].input[1:3] = ["W_g", "R_g"]  # X, W and R all made by an op inference does not know
    rows = [
        # (what, model, the state's type by hand, what onnxruntime can do with it: stream it, load it, neither)
        ("contrib op before the GRU", _gru([gelu], contrib_x), "float32[1,batch,3]", "stream"),
        ("X reshaped from a static [2, 12] input", _gru([reshape], helper.make_tensor_value_info("audio", TensorProto.FLOAT, [2, 12]), inputs=(shape_in,)),
         "float32[1,2,3]", "load"),
        ("the same, batch first (layout 1)",
         _gru([reshape], helper.make_tensor_value_info("audio", TensorProto.FLOAT, [2, 12]), inputs=(shape_in,), layout=1), "float32[2,1,3]", ""),
        ("X reshaped by a shape of three values", _gru([reshape], audio, inputs=(three,)), "float32[1,2,3]", "load"),
        ("X with a stale value_info of rank 2", stale, "float32[1,2,3]", ""),  # onnxruntime trusts the value_info
        ("batch first, X typed [2, T, 2]", _gru([helper.make_node("Identity", ["x"], ["xr"], name="ident")], helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "T", 2]),
                                                 layout=1), "float32[2,1,3]", ""),
        ("X, W and R made by contrib ops", all_contrib, "float32[1,batch,3]", "stream"),
        ("X reshaped from an [N, 12] input", _gru([reshape], helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["N", 12]), inputs=(shape_in,)),
         "float32[1,batch,3]", "load"),
        ("X a graph input of unknown shape", _gru([helper.make_node("Identity", ["x"], ["xr"], name="ident")], helper.make_tensor_value_info("x", TensorProto.FLOAT, None)),
         "float32[1,batch,3]", "stream"),
        ("X declared [T, 2, 2] without a type", declared_untyped, "float32[1,2,3]", ""),  # onnxruntime refuses the declaration
        ("float64 weights behind a contrib op",
         _gru([helper.make_node("Inverse", ["x"], ["xr"], domain="com.microsoft", name="inv")], helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["T", 2, 2]),
              dtype=np.float64), "float64[1,batch,3]", "load"),
    ]
    rng = np.random.default_rng(72)
    for what, model, want, runs in rows:
        result = rnnir.fix(model, expose_state=True)
        assert _state_type(result) == want, what
        assert result.skipped == [], what
        if runs:  # onnxruntime has no batch-first GRU
            _ort(result.model)  # the state's type binds to the op's T: a wrong one fails to load
        if runs != "stream":  # nor a float64 one; the reshape's target shape would be one more input to feed
            continue
        x = rng.standard_normal((6, 2, 2)).astype(np.float32)
        whole = _ort(model).run(["y"], {"x": x})[0]
        session = StatefulSession(result.model)
        chunked = np.concatenate([session.run({"x": x[k : k + 2]})["y"] for k in (0, 2, 4)])
        np.testing.assert_allclose(chunked, whole, atol=1e-5, err_msg=what)


def _lstm_from_constants(batch: int | str) -> onnx.ModelProto:
    """An LSTM on x [4, batch, 2] whose h and c start from non-zero constants [1, batch, 3] ([1, 1, 3] for a symbol)."""
    rng = np.random.default_rng(73)
    inits = [
        numpy_helper.from_array((rng.standard_normal((1, 4 * H, 2)) * 0.5).astype(np.float32), "W"),
        numpy_helper.from_array((rng.standard_normal((1, 4 * H, H)) * 0.5).astype(np.float32), "R"),
        numpy_helper.from_array(np.full((1, batch if isinstance(batch, int) else 1, H), 0.25, np.float32), "h_start"),
        numpy_helper.from_array(np.full((1, batch if isinstance(batch, int) else 1, H), -0.5, np.float32), "c_start"),
    ]
    node = helper.make_node("LSTM", ["x", "W", "R", "", "", "h_start", "c_start"], ["y"], name="lstm", hidden_size=H)
    g = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, batch, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1, batch, H])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


def test_a_constant_start_becomes_a_default_only_when_the_state_shape_is_static() -> None:
    """--state-defaults keeps a constant start as the new input's default: that needs a static [1, batch, 3]."""
    symbolic = rnnir.fix(_lstm_from_constants("B"), expose_state=True, state_defaults=True)
    assert symbolic.edits == []
    assert [(e.target, e.reason) for e in symbolic.skipped] == [
        (f"lstm.initial_{r}", f"its initial state is a non-zero constant initializer '{r}_start': a required state input would start from zeros; "
         "its shape is not static, so it cannot be the new input's default")
        for r in ("h", "c")
    ]
    model = _lstm_from_constants(2)
    static = rnnir.fix(model, expose_state=True, state_defaults=True)
    assert static.skipped == []
    defaults = {t.name: numpy_helper.to_array(t) for t in static.model.graph.initializer if t.name in ("h0", "c0")}
    np.testing.assert_array_equal(defaults["h0"], np.full((1, 2, H), 0.25, np.float32))
    np.testing.assert_array_equal(defaults["c0"], np.full((1, 2, H), -0.5, np.float32))
    x = np.random.default_rng(74).standard_normal((4, 2, 2)).astype(np.float32)
    np.testing.assert_array_equal(_ort(static.model).run(["y"], {"x": x})[0], _ort(model).run(["y"], {"x": x})[0])


def _if_of_grus(else_hidden: int) -> onnx.ModelProto:
    """If(flag) with a GRU (hidden 3) in its then branch and one of ``else_hidden`` in its else branch, both on x [T, 1, 2]
    from zeros; the If returns the GRU's Y."""
    rng = np.random.default_rng(75)

    def branch(name: str, hidden: int) -> onnx.GraphProto:
        w = numpy_helper.from_array((rng.standard_normal((1, 3 * hidden, 2)) * 0.5).astype(np.float32), f"{name}_W")
        r = numpy_helper.from_array((rng.standard_normal((1, 3 * hidden, hidden)) * 0.5).astype(np.float32), f"{name}_R")
        node = helper.make_node("GRU", ["x", w.name, r.name], [f"{name}_y"], name=f"{name}_gru", hidden_size=hidden)
        return helper.make_graph([node], name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, ["T", 1, 1, hidden])], [w, r])

    node = helper.make_node("If", ["flag"], ["y"], name="pick", then_branch=branch("then", H), else_branch=branch("else", else_hidden))
    g = helper.make_graph([node], "if_grus", [helper.make_tensor_value_info("flag", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 1, 1, "H"])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    return model


def test_the_ops_of_two_if_branches_share_a_state_only_when_their_sizes_agree() -> None:
    """One runs per call: same size, one state input; different sizes, one input each.  Either way each branch,
    streamed in chunks, computes what it computes on the whole sequence."""
    x = np.random.default_rng(76).standard_normal((6, 1, 2)).astype(np.float32)
    rows = [
        (H, {"h0": "float32[1,1,3]"}, ["exposed the h state of GRU 'then_gru'/'else_gru' in If 'pick'"]),
        (5, {"then_gru_h0": "float32[1,1,3]", "else_gru_h0": "float32[1,1,5]"}, [f"exposed the h state of GRU '{b}_gru'" for b in ("then", "else")]),
    ]
    for else_hidden, want, messages in rows:
        model = _if_of_grus(else_hidden)
        result = rnnir.fix(model, expose_state=True)
        got = {e.after.split()[2].strip("'"): e.after.split()[3] for e in result.edits}
        assert got == want, else_hidden
        assert [e.message for e in result.edits] == messages, else_hidden
        for flag in (True, False):
            whole = _ort(model).run(["y"], {"flag": np.array(flag), "x": x})[0]
            session = StatefulSession(result.model)
            chunked = np.concatenate([session.run({"flag": np.array(flag), "x": x[k : k + 2]})["y"] for k in (0, 2, 4)])
            np.testing.assert_allclose(chunked, whole, atol=1e-6, err_msg=f"{else_hidden} {flag}")


def test_ops_whose_state_cannot_be_exposed_are_left_alone_with_the_reason() -> None:
    """An op in a Loop body (rnnir does not thread its state out), and ops whose initial state is an unpaired graph
    input or computed: no edit, and the skipped entry names the op and why."""
    from tests.support import cell_models

    loop = cell_models.lstm_op_loop()
    body = next(a.g for n in loop.graph.node if n.op_type == "Loop" for a in n.attribute if a.name == "body")
    (lstm,) = [n.name for n in body.node if n.op_type == "LSTM"]
    h_start = helper.make_tensor_value_info("h_start", TensorProto.FLOAT, [1, 1, H])
    from_input = _gru([helper.make_node("Identity", ["x"], ["xr"], name="ident")], helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 2]), inputs=(h_start,))
    from_input.graph.node[-1].input.extend(["", "", "h_start"])
    computed = _gru([helper.make_node("Identity", ["x"], ["xr"], name="ident"), helper.make_node("Relu", ["h_start"], ["h_relu"], name="relu")],
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 2]), inputs=(h_start,))
    computed.graph.node[-1].input.extend(["", "", "h_relu"])
    rows = [
        (loop, [(lstm, "it runs inside a Loop/Scan body, whose state rnnir does not thread out")]),
        (from_input, [("gru.initial_h", "its initial state is graph input 'h_start', not a constant")]),
        (computed, [("gru.initial_h", "its initial state is Relu 'relu', not a constant")]),
    ]
    for model, want in rows:
        result = rnnir.fix(model, expose_state=True, codes=[])
        assert [e for e in result.edits if e.code == "EXPOSE"] == [], want
        assert [(e.target, e.reason) for e in result.skipped] == want


def test_an_op_without_hidden_size_is_a_clear_model_error() -> None:
    model = _gru([helper.make_node("Identity", ["x"], ["xr"], name="ident")], helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 2]))
    del model.graph.node[1].attribute[:]
    with pytest.raises(ModelError, match="GRU node has no hidden_size attribute"):
        rnnir.fix(model, expose_state=True)
