"""Small ONNX models built in tests (onnx.helper), shared by the foundation test files."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17, meta=None):
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    for k, v in (meta or {}).items():
        m.metadata_props.add(key=k, value=v)
    return m


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def lstm_weights(prefix="", I=3, H=4, seed=0):
    rng = np.random.default_rng(seed)
    return [
        const(prefix + "W", rng.standard_normal((1, 4 * H, I)).astype(np.float32) * 0.5),
        const(prefix + "R", rng.standard_normal((1, 4 * H, H)).astype(np.float32) * 0.5),
        const(prefix + "B", rng.standard_normal((1, 8 * H)).astype(np.float32) * 0.1),
    ]


def lstm_h0c0(I=3, H=4, names=("h0", "c0", "hn", "cn")):
    """x, h0, c0 -> y, hn, cn with one LSTM: the correct fan-out."""
    h0, c0, hn, cn = names
    n = helper.make_node("LSTM", ["x", "W", "R", "B", "", h0, c0], ["Y", hn, cn], hidden_size=H, name="lstm")
    return model(
        [n],
        [vi("x", ["T", 1, I]), vi(h0, [1, 1, H]), vi(c0, [1, 1, H])],
        [vi("Y", ["T", 1, 1, H]), vi(hn, [1, 1, H]), vi(cn, [1, 1, H])],
        lstm_weights(I=I, H=H),
    )


def packed_lstm_in_if(I=3, H=4, swap=False):
    """state[2,1,H] (h, c) -> LSTM inside both branches of an If on sr == 16000 -> stateN."""
    branches = {}
    for k, br in enumerate(("then_branch", "else_branch")):
        p = f"{br}_"
        ws = lstm_weights(p, I, H, seed=k + 1)
        nodes = [
            helper.make_node("Constant", [], [p + "i0"], value=const(p + "i0v", np.array(0, np.int64))),
            helper.make_node("Constant", [], [p + "i1"], value=const(p + "i1v", np.array(1, np.int64))),
            helper.make_node("Constant", [], [p + "ax"], value=const(p + "axv", np.array([0], np.int64))),
            helper.make_node("Gather", ["state", p + "i0"], [p + "h"], axis=0),
            helper.make_node("Gather", ["state", p + "i1"], [p + "c"], axis=0),
            helper.make_node("Unsqueeze", [p + "h", p + "ax"], [p + "h3"]),
            helper.make_node("Unsqueeze", [p + "c", p + "ax"], [p + "c3"]),
            *[helper.make_node("Constant", [], [w.name], value=w) for w in ws],
            helper.make_node("LSTM", ["x", p + "W", p + "R", p + "B", "", p + "h3", p + "c3"], [p + "Y", p + "Yh", p + "Yc"], hidden_size=H, name=p + "lstm"),
            helper.make_node("Concat", [p + "Yc", p + "Yh"] if swap else [p + "Yh", p + "Yc"], [p + "out"], axis=0),
        ]
        branches[br] = helper.make_graph(nodes, br, [], [vi(p + "out", [2, 1, H])])
    nodes = [
        helper.make_node("Constant", [], ["k16"], value=const("k16v", np.array(16000, np.int64))),
        helper.make_node("Equal", ["sr", "k16"], ["is16"]),
        helper.make_node("If", ["is16"], ["stateN"], name="sr_if", **branches),
    ]
    return model(nodes, [vi("x", ["T", 1, I]), vi("state", [2, 1, H]), vi("sr", [], TensorProto.INT64)], [vi("stateN", [2, 1, H])])
