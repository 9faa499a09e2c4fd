"""An LSTM cell whose tanh(c') also feeds a gated head placed before h' in node order.

Both `sigmoid(x W2) * tanh(c')` and the real `sigmoid(o) * tanh(c')` pass the execution check (an LSTM whose output
gate ignores h is still an LSTM), so the recogniser must choose: it took the first, and a correct model got SD003 on
h0. The cell's own gates read the state; the head's does not, so the product whose gate reads the state is h'.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes
from tests.support.cell_models import lstm_cell


def lstm_with_gated_head(*, write_back_head: bool = False) -> onnx.ModelProto:
    m, exp = lstm_cell()  # I=5, H=4
    g = m.graph
    nodes = list(g.node)
    mul_h = next(n for n in nodes if exp.h_out in n.output)
    tanh_c = next(n for n in nodes if n.op_type == "Tanh" and n.output[0] in mul_h.input)
    g.initializer.append(numpy_helper.from_array((np.random.default_rng(5).standard_normal((5, 4)) * 0.5).astype(np.float32), "W2"))
    head = [
        helper.make_node("MatMul", ["x", "W2"], ["xw2"]),
        helper.make_node("Sigmoid", ["xw2"], ["o2"]),
        helper.make_node("Mul", ["o2", tanh_c.output[0]], ["y2"], name="head_gate"),
    ]
    at = nodes.index(mul_h)
    nodes[at:at] = head  # before h' in node order
    if write_back_head:  # the bug a reviewer wants caught: the head written back as the state
        out_h = next(n for n in nodes if n.name == "out_hn")
        out_h.input[0] = "y2"
    del g.node[:]
    g.node.extend(nodes)
    g.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, [1, 4]))
    onnx.checker.check_model(m, full_check=True)
    return m


def test_the_product_gated_by_the_state_is_h_not_an_earlier_head():
    m = lstm_with_gated_head()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((1, 5)).astype(np.float32), "h0": rng.standard_normal((1, 4)).astype(np.float32), "c0": rng.standard_normal((1, 4)).astype(np.float32)}
    hn, y2 = sess.run(["hn", "y2"], feeds)
    assert not np.allclose(hn, y2)  # onnxruntime: two different products of tanh(c')
    prog = rnnir.load(m)
    assert [(r.kind, r.recognition.value) for r in prog.recurrents] == [("LSTM", "cell")]
    assert passes.run(prog) == []  # was SD003 on h0


def test_the_head_written_back_as_the_state_is_never_verified():
    # the head is not the cell's h': written back, h0 is reported (unverified, through the head's Mul), not passed
    m = lstm_with_gated_head(write_back_head=True)
    assert sorted((d.code, d.slot) for d in passes.run(rnnir.load(m))) == [("SD009", "h0")]
