"""Small ONNX builders shared by the pinned-behaviour tests (tests/test_pinned_*.py)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

H, I, T = 4, 3, 5
F32 = TensorProto.FLOAT


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def weights(kind, directions=1, prefix=""):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    rng = np.random.default_rng(3)
    return [
        numpy_helper.from_array(rng.standard_normal((directions, gates * H, I)).astype(np.float32), prefix + "W"),
        numpy_helper.from_array(rng.standard_normal((directions, gates * H, H)).astype(np.float32), prefix + "R"),
    ]


def model(nodes, inputs, outputs, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits)), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def shadowing_loop_model(mul_output):
    """A Loop whose body declares its own ``hidden`` (the carried value, started from the constant h_start) and starts a
    GRU from it, beside a main-graph input also called ``hidden`` that only feeds ``Mul(hidden, 2) -> mul_output``
    (onnxruntime runs it: the body input shadows the outer name)."""
    body = helper.make_graph(
        [
            helper.make_node("GRU", ["xb", "W", "R", "", "", "hidden"], ["body_Y", "hidden_next"], hidden_size=H, name="body_gru"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [vi("iteration", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("hidden", [1, 1, H])],
        [vi("cond_out", [], TensorProto.BOOL), vi("hidden_next", [1, 1, H])],
    )
    nodes = [helper.make_node("Loop", ["trips", "", "h_start"], ["looped"], body=body), helper.make_node("Mul", ["hidden", "two"], [mul_output])]
    inits = [
        *weights("GRU"),
        numpy_helper.from_array(np.ones((T, 1, I), np.float32), "xb"),
        numpy_helper.from_array(np.array(3, np.int64), "trips"),
        numpy_helper.from_array(np.zeros((1, 1, H), np.float32), "h_start"),
        numpy_helper.from_array(np.float32(2), "two"),
    ]
    return model(nodes, [vi("hidden", [1, 1, H])], [vi("looped", [1, 1, H]), vi(mul_output, [1, 1, H])], inits)


def value_chain(v):
    """What IR value ``v`` is made from, following each producer's first input: op names, 'load <slot>', a
    recurrence's kind and port, or 'external <name>' where the chain leaves the IR."""
    from rnnir.ir import LoadSlot, Recurrent

    out = []
    while v is not None:
        p = v.producer
        if p is None:
            out.append(f"external {v.name}")
            break
        if isinstance(p, LoadSlot):
            out.append(f"load {p.slot.name}")
            break
        if isinstance(p, Recurrent):
            out.append(f"{p.kind}.{p.port_of(v)}")
            break
        out.append(p.op)
        v = p.inputs[0] if p.inputs else None
    return out


def stored_value(prog, dest):
    """The value a program stores into the slot or output called ``dest``."""
    from rnnir.ir import Store

    (st,) = [s for s in prog.nodes_of(Store) if s.dest.name == dest]
    return st.inputs[0]
