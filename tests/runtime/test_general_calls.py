"""What the general call path (rnnir/runtime/session.py's _run: every call with run options, and any call the steady plan
does not answer) moves and counts, against SessionStats' documented meaning: one test, so that the mutation tool
(which runs only the fastest tests of a line every runtime test executes, and the fastest of each file) always runs
it.  The model is hn = h0 + x over 2 float32 (8 bytes of state): every number is hand-checkable."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from rnnir.runtime import StatefulSession

F = TensorProto.FLOAT


def adder(out_type=F):
    nodes = [helper.make_node("Add", ["h0", "x"], ["h"])]
    nodes.append(helper.make_node("Cast", ["h"], ["hn"], to=out_type) if out_type != F else helper.make_node("Identity", ["h"], ["hn"]))
    g = helper.make_graph(
        nodes,
        "adder",
        [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("h0", F, [2])],
        [helper.make_tensor_value_info("hn", out_type, [2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def stats(s):
    st = s.stats
    return (st.calls, st.python_state_bytes, st.total_python_state_bytes, st.output_copy_bytes, st.slot_allocations, st.probe_calls)


def test_what_each_general_call_moves_and_counts():
    x = {"x": np.array([1.0, 2.0], np.float32)}
    opts = ort.RunOptions()  # run options: every call takes the general path
    s = StatefulSession(adder())
    # call 1: the zero state uploaded (8 bytes), a probe (onnxruntime allocates the state output), hn copied out
    assert s.run_dict(x, run_options=opts)["hn"].tolist() == [1.0, 2.0]
    assert stats(s) == (1, 8, 8, 8, 1, 1)
    # call 2: double-buffered from now on: nothing uploaded, allocated or probed; hn not asked for, not copied
    assert s.run(x, run_options=opts) == {}
    assert stats(s) == (2, 0, 8, 0, 1, 1)
    assert s.run_dict(x, run_options=opts)["hn"].tolist() == [3.0, 6.0]
    assert stats(s) == (3, 0, 8, 8, 1, 1)
    # a state set explicitly: uploaded once, then probed again
    s.state = {"h0": np.array([10.0, 20.0], np.float32)}
    assert s.run_dict(x, run_options=opts)["hn"].tolist() == [11.0, 22.0]
    assert stats(s) == (4, 8, 16, 8, 2, 2)
    # an explicit state feed for one call: its bytes count, and the call's result is the slot's new value
    got = s.run_dict({**x, "h0": np.array([100.0, 200.0], np.float32)}, run_options=opts)["hn"]
    assert got.tolist() == [101.0, 202.0] and stats(s)[:3] == (5, 8, 24)
    assert s.run_dict(x, run_options=opts)["hn"].tolist() == [102.0, 204.0]
    # aliased outputs: handed over without a copy
    a = StatefulSession(adder(), alias_outputs=True)
    a.run_dict(x, run_options=opts)
    assert a.run_dict(x, run_options=opts)["hn"].tolist() == [2.0, 4.0] and a.stats.output_copy_bytes == 0
    # a float64 state output fed back to a float32 input: converted through numpy every call (cast_state=True)
    c = StatefulSession(adder(TensorProto.DOUBLE), cast_state=True)
    for k in (1, 2, 3):
        got = c.run_dict(x, run_options=opts)["hn"]
        assert got.dtype == np.float64 and got.tolist() == [1.0 * k, 2.0 * k]
    # each call: the converted 8 bytes uploaded, the 16-byte float64 output copied; every call a probe
    assert stats(c) == (3, 8, 8 + 8 + 8 + 8, 16, 0, 3)
