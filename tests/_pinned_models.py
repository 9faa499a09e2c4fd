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
