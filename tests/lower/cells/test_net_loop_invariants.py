"""What the cell recogniser's view of a model (``rnnir.lower.cells.net.Net``) takes for a constant and for a shape.

Constants: a Loop's or Scan's carried body input is the constant outside the loop only while the body hands it back
unchanged (tf2onnx passes a Keras layer's weights into its ``while`` loop so); folding looks at most 64 producers
deep; and ``const`` never converts a tensor to learn that a value computed from a run-time input is no constant.
Shapes: one the model does not declare comes from running its producers on zeros, at most 16 producers deep, before
whole-model shape inference is asked; what zeros cannot tell (run-time slice bounds, ops of another domain) is left
to inference. Oracles: the loop's own arithmetic (a value handed back unchanged is its initial value every step),
the initializers themselves, and onnxruntime's shapes of the same values.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.lower.cells import net as netmod
from rnnir.lower.cells.net import Net
from rnnir.lower.scope import ModelIndex
from tests.lower.cells.loop_models import H, I, model_of, scan_model, tf_loop, vi
from tests.lower.cells.test_undeclared_shapes import _count_inference


def _net(model: onnx.ModelProto) -> tuple[Net, ModelIndex]:
    index = ModelIndex(model, "m")
    return Net(index), index


def _body_const(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    net, index = _net(model)
    owner = next((n for n in model.graph.node if n.op_type in ("Loop", "Scan")), None)
    scope = index.root if owner is None or name.startswith("/") else index.root.children[(id(owner), "body")]
    return net.const(net.key(scope, name.lstrip("/")))


def _scan3() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """scan_model with three carried values (A, B, R, each handed back unchanged) before its scanned input e."""
    model, consts = scan_model()
    scan = model.graph.node[0]
    body = scan.attribute[0].g
    del body.input[:]
    body.input.extend([vi("A", TensorProto.FLOAT, [H, H]), vi("B", TensorProto.FLOAT, [H, H]), vi("R", TensorProto.FLOAT, [H, H]), vi("e", TensorProto.FLOAT, [H])])
    del body.output[:]
    body.output.extend([vi(n, TensorProto.FLOAT, None) for n in ("A_out", "B_out", "R_out", "e_out")])
    body.node.extend([helper.make_node("Identity", ["A"], ["A_out"]), helper.make_node("Identity", ["B"], ["B_out"])])
    consts["A0"] = np.full((H, H), 2.0, np.float32)
    model.graph.initializer.append(numpy_helper.from_array(consts["A0"], "A0"))
    scan.input[:] = ["A0", "R0", "R0", "seq"]
    scan.output[:] = ["A_final", "B_final", "R_final", "ys"]
    return model, consts


def _custom_loop() -> onnx.ModelProto:
    """tf_loop with its Loop in another domain: a node that only looks like ONNX's Loop."""
    model, _ = tf_loop()
    model.graph.node[0].domain = "my.ops"
    model.opset_import.append(helper.make_opsetid("my.ops", 1))
    return model


def _cond_carried() -> onnx.ModelProto:
    """tf_loop whose body yields its condition input into the first carried slot (t's)."""
    model, _ = tf_loop()
    model.graph.node[0].attribute[0].g.output[1].name = "cond_in"
    return model


def test_a_carried_value_is_the_constant_outside_only_while_the_body_hands_it_back_unchanged():
    loop, c = tf_loop()
    scan3, s = _scan3()
    rows = [
        (loop, "R", c["R0"]),
        (tf_loop(r_back="identity")[0], "R", c["R0"]),  # through two Identity ops
        (tf_loop(r_back="identity")[0], "R_b", c["R0"]),  # and a value computed from it
        (tf_loop(r_back="custom_identity")[0], "R", None),  # an Identity of another domain may compute anything
        (tf_loop(r_back="changed")[0], "R", None),  # R + 1 from step 2 on
        (tf_loop(r_back="swapped")[0], "R", None),  # W and R exchanged each step
        (tf_loop(r_back="swapped")[0], "W", None),
        (tf_loop(counter="same")[0], "t", np.array(0)),  # a counter handed back unchanged is its start, 0
        (loop, "t", None),  # counts
        (loop, "cond_in", None),  # the condition, handed back through Identity: not a carried value
        (loop, "iter", None),
        (_cond_carried(), "cond_in", None),  # the condition yielded into a carried slot: still not carried in
        (loop, "h", None),  # starts at a graph input
        (loop, "/h0", None),  # the graph input itself
        (_custom_loop(), "R", None),  # a Loop of another domain need not hand its carried values back
        (scan3, "A", s["A0"]),
        (scan3, "R", s["R0"]),
        (scan3, "e", None),  # one element per step, never the whole scanned input
        (scan_model()[0], "R", s["R0"]),
        (scan_model()[0], "e", None),
    ]
    got = [_body_const(m, name) for m, name, _ in rows]
    for (_, name, want), value in zip(rows, got):
        assert (value is None) == (want is None), name
        if want is not None:
            np.testing.assert_array_equal(value, want, err_msg=name)


def _chain_in_body(n: int, outer_identity: bool = False) -> onnx.ModelProto:
    """tf_loop with R read through n Identity ops inside the body (the last named 'deep'); with outer_identity the
    Loop's initial R is Identity(R0) outside it."""
    model, _ = tf_loop()
    loop = model.graph.node[0]
    body = loop.attribute[0].g
    prev = "R"
    for j in range(n):
        out = "deep" if j == n - 1 else f"r{j}"
        body.node.append(helper.make_node("Identity", [prev], [out]))
        prev = out
    if outer_identity:
        model.graph.node.insert(0, helper.make_node("Identity", ["R0"], ["R0_id"]))
        loop.input[5] = "R0_id"
    return model


def test_folding_reaches_a_carried_weight_at_most_64_producers_deep():
    """const() follows at most 64 producers: a carried weight 63 Identity ops back is folded, 64 back is not; and
    the hops outside the Loop count too (62 inside, the carried input, one outside: 64 in all, still folded)."""
    got = {
        "63 inside": _body_const(_chain_in_body(63), "deep") is not None,
        "64 inside": _body_const(_chain_in_body(64), "deep") is not None,
        "62 inside, 1 outside": _body_const(_chain_in_body(62, outer_identity=True), "deep") is not None,
    }
    assert got == {"63 inside": True, "64 inside": False, "62 inside, 1 outside": True}


def _conversions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = netmod.to_array

    def counting(t: onnx.TensorProto) -> np.ndarray | None:
        seen.append(t.name)
        return real(t)

    monkeypatch.setattr(netmod, "to_array", counting)
    return seen


def _affine(depth: int = 0) -> onnx.ModelProto:
    """y = Add(b, x W) and y2 = Add(b2, x W) over one MatMul; x read through `depth` Identity ops; s = Shape(x)."""
    nodes, x = [], "x"
    for j in range(depth):
        nodes.append(helper.make_node("Identity", [x], [f"x{j}"]))
        x = f"x{j}"
    nodes += [
        helper.make_node("MatMul", [x, "W"], ["xw"]),
        helper.make_node("Add", ["b", "xw"], ["y"]),
        helper.make_node("Add", ["b2", "xw"], ["y2"]),
        helper.make_node("Shape", ["x"], ["s"]),
    ]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), n) for n, shape in (("W", (I, H)), ("b", (H,)), ("b2", (H,)))]
    outs = [vi(n, TensorProto.FLOAT, None) for n in ("y", "y2")] + [vi("s", TensorProto.INT64, None)]
    return model_of(helper.make_graph(nodes, "affine", [vi("x", TensorProto.FLOAT, [1, I])], outs, inits))


def test_a_value_computed_from_a_run_time_input_is_no_constant_and_no_tensor_is_converted_to_learn_it(monkeypatch: pytest.MonkeyPatch):
    seen = _conversions(monkeypatch)
    net, index = _net(_affine())
    assert net.const(net.key(index.root, "y")) is None
    assert net.const(net.key(index.root, "y2")) is None  # shares x W, asked second
    assert seen == []
    np.testing.assert_array_equal(net.const(net.key(index.root, "s")), [1, I])  # a static shape is a constant
    # a Loop body's counter handed back unchanged from a run-time start is no constant either
    model, _ = tf_loop(start=None, counter="same")
    model.graph.node[0].attribute[0].g.node.append(helper.make_node("Add", ["step", "t"], ["t_plus"]))
    assert _body_const(model, "t_plus") is None
    assert seen == []
    # ... told 63 hops back: t_far = Add(step, 61 Identity ops over t), t at 62 hops, its run-time start at 63
    body = model.graph.node[0].attribute[0].g
    prev = "t"
    for j in range(61):
        body.node.append(helper.make_node("Identity", [prev], [f"t{j}"]))
        prev = f"t{j}"
    body.node.append(helper.make_node("Add", ["step", prev], ["t_far"]))
    assert _body_const(model, "t_far") is None
    assert seen == []


def test_no_conversion_is_spared_past_64_producers(monkeypatch: pytest.MonkeyPatch):
    """Deciding from the graph alone that a value is no constant looks 64 producers deep, then leaves it to const():
    x 63 hops back from y (y, the MatMul, 61 Identity ops) is found without converting b, 64 hops back is not."""
    seen = _conversions(monkeypatch)
    got = {}
    for depth in (61, 62):
        seen.clear()
        net, index = _net(_affine(depth))
        assert net.const(net.key(index.root, "y")) is None
        got[depth] = sorted(seen)
    assert got == {61: [], 62: ["b"]}


def _shapes_model() -> onnx.ModelProto:
    """Values whose shapes the model does not declare, each computed from declared inputs."""
    i64 = TensorProto.INT64
    nodes = [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.ones((2, 3), np.float32)))]
    nodes.append(helper.make_node("ConstantOfShape", ["dims"], ["zeros"]))
    nodes.append(helper.make_node("Add", ["x", "y"], ["xy"]))
    prev = "x"
    for j in range(17):
        nodes.append(helper.make_node("Relu", [prev], [f"relu{j + 1}"]))
        prev = f"relu{j + 1}"
    nodes.append(helper.make_node("Shape", ["x"], ["sx"]))
    nodes.append(helper.make_node("Add", ["sx", "one"], ["sx1"]))
    nodes.append(helper.make_node("Slice", ["wide", "start", "end", "axis1"], ["cut"]))
    nodes.append(helper.make_node("Relu", ["x"], ["alien"], domain="my.ops"))
    nodes.append(helper.make_node("Slice", ["wide", "starts2", "ends2", "", "steps2"], ["strided"]))  # axes omitted
    inits = [
        numpy_helper.from_array(np.array([2, 5], np.int64), "dims"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([3], np.int64), "end"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        numpy_helper.from_array(np.array([0, 1], np.int64), "starts2"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "ends2"),
        numpy_helper.from_array(np.array([1, 2], np.int64), "steps2"),
    ]
    inputs = [vi("x", TensorProto.FLOAT, [1, I]), vi("y", TensorProto.FLOAT, [1, I]), vi("wide", TensorProto.FLOAT, [1, 6]), vi("start", i64, [1])]
    outs = [vi(n, TensorProto.FLOAT, None) for n in ("k", "zeros", "xy", "relu16", "relu17", "cut", "strided")] + [vi("sx1", i64, None)]
    g = helper.make_graph(nodes, "shapes", inputs, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("my.ops", 1)])
    m.ir_version = 9
    return m


def test_undeclared_shapes_come_from_zeros_within_16_producers_and_match_onnxruntime(monkeypatch: pytest.MonkeyPatch):
    model = _shapes_model()
    known = ["k", "zeros", "xy", "relu16", "sx1", "strided"]
    calls = _count_inference(monkeypatch)
    net, index = _net(model)
    net.const(net.key(index.root, "zeros"))  # folded first: its shape is the folded value's
    got = {name: net.shape(net.key(index.root, name)) for name in known}
    assert calls["n"] == 0
    # onnxruntime runs the model (without the op of another domain) on batch 1: the shapes it returns are the truth
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    kept = [n for n in plain.graph.node if n.domain != "my.ops"]
    del plain.graph.node[:]
    plain.graph.node.extend(kept)
    del plain.graph.output[:]
    plain.graph.output.extend([vi(n, TensorProto.INT64 if n == "sx1" else TensorProto.FLOAT, None) for n in known])
    sess = ort.InferenceSession(plain.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"x": np.ones((1, I), np.float32), "y": np.ones((1, I), np.float32), "wide": np.ones((1, 6), np.float32), "start": np.array([1], np.int64)}
    assert got == {name: tuple(a.shape) for name, a in zip(known, sess.run(known, feeds))}
    # 17 producers deep, a slice at a run-time start and an op of another domain: zeros cannot tell, inference is asked
    net, index = _net(model)  # afresh: the shapes above are remembered, and relu16's would shorten relu17's way
    assert net.shape(net.key(index.root, "relu17")) == (1, I)
    assert calls["n"] == 1
    # its width depends on where the slice starts: what inference says (a named dim, run at 1), not a zero start's 3
    inferred_graph = onnx.shape_inference.infer_shapes(model).graph
    inferred = {v.name: v for v in (*inferred_graph.value_info, *inferred_graph.output)}
    cut = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in inferred["cut"].type.tensor_type.shape.dim)
    assert net.shape(net.key(index.root, "cut")) == cut == (1, 1)
    assert net.shape(net.key(index.root, "alien")) is None  # what a Relu of another domain makes is unknown
    assert calls["n"] == 1  # inference runs once per model
