"""Call after call on the default (pybind) binding layer, through the prepared steady call and back: one test over
small one-op models built here, so that the mutation tool (which runs only the fastest tests of a line every runtime
test executes, and the fastest of each file) always runs it for the binding's hot lines.  test_pinned_binding.py
holds the same cases one by one and on both layers.  Every expected number is hand-checkable:

``acc``: hn = h0 + x, y = 2 * hn and z = sum(hn); feeding x = 1, 2, 3, ... makes hn the triangular numbers.
``kdef``: hn = h0 + x * k, where k is an input with a default of 1 (an initializer of the same name)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.runtime import FeedError, OnnxRuntimeError, StatefulSession

F = TensorProto.FLOAT
BIG = 4096  # float32: 16 KiB, over the 8 KiB a plain output or a feed may be copied through


def acc(n, with_sum=True):
    nodes = [helper.make_node("Add", ["h0", "x"], ["hn"]), helper.make_node("Add", ["hn", "hn"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", F, [n])]
    if with_sum:
        nodes.append(helper.make_node("ReduceSum", ["hn"], ["z"], keepdims=0))
        outputs.append(helper.make_tensor_value_info("z", F, []))
    g = helper.make_graph(
        nodes,
        "acc",
        [helper.make_tensor_value_info("x", F, [n]), helper.make_tensor_value_info("h0", F, [n])],
        [*outputs, helper.make_tensor_value_info("hn", F, [n])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    return m


def kdef():
    nodes = [helper.make_node("Mul", ["x", "k"], ["xk"]), helper.make_node("Add", ["h0", "xk"], ["hn"])]
    g = helper.make_graph(
        nodes,
        "kdef",
        [helper.make_tensor_value_info(n, F, [2]) for n in ("x", "k", "h0")],
        [helper.make_tensor_value_info("hn", F, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "k")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    return m


def tri(k):
    return k * (k + 1) // 2


def test_steady_calls_on_the_native_binding():
    # feeds given as lists (converted every call: no plan is made from them), then as arrays
    s = StatefulSession(acc(2))
    assert [s.run({"x": [1.0, 1.0]})["z"].item() for _ in range(3)] == [2.0, 4.0, 6.0]
    # a state set from a strided view holds the view's values, not the memory under it
    s.state = {"h0": np.arange(4, dtype=np.float32)[::2]}
    assert s.state["h0"].tolist() == [0.0, 2.0]
    # all outputs, then fewer: each returned array is the output it names
    one = {"x": np.ones(2, np.float32)}
    assert s.run_dict(one)["hn"].tolist() == [1.0, 3.0]
    held = [s.run(["hn", "z"], one) for _ in range(3)]  # copies: the calls after them do not write into them
    assert [(hn.tolist(), z.item()) for hn, z in held] == [([2.0, 4.0], 6.0), ([3.0, 5.0], 8.0), ([4.0, 6.0], 10.0)]
    assert (s.stats.calls, s.stats.python_state_bytes, s.stats.output_copy_bytes) == (7, 0, 8)  # hn: 2 float32 copied
    assert [s.run(["z"], one)[0].item() for _ in range(3)] == [12.0, 14.0, 16.0]
    assert (s.stats.calls, s.stats.output_copy_bytes) == (10, 0)
    assert s.run(["z"], {"x": [1.0, 1.0]})[0].item() == 18.0  # a list where the plan has an array: the general path
    with pytest.raises(OnnxRuntimeError):  # one value where the model takes 2: refused, not broadcast into the plan's buffer
        s.run(["z"], {"x": np.ones(1, np.float32)})
    # one plain output: onnxruntime's signature gives a list, the dict signature a dict, neither counts a copy
    single = StatefulSession(acc(2, with_sum=False))
    single.run_dict(one)
    assert [single.run(None, one)[0].tolist() for _ in range(3)] == [[4.0, 4.0], [6.0, 6.0], [8.0, 8.0]]
    assert single.stats.output_copy_bytes == 0
    assert [single.run(one)["y"].tolist() for _ in range(3)] == [[10.0, 10.0], [12.0, 12.0], [14.0, 14.0]]
    assert [single.run(["y"], one)[0].tolist() for _ in range(2)] == [[16.0, 16.0], [18.0, 18.0]]
    with pytest.raises(FeedError, match="output_names is a list of names, not the string 'y'"):  # not the plan for ["y"]
        single.run("y", one)
    # a fed input with a default overrides it every call; left out, the default is back
    k = StatefulSession(kdef())
    x, ten = np.array([1.0, 2.0], np.float32), np.array([10.0, 100.0], np.float32)
    assert [k.run(["hn"], {"x": x, "k": ten})[0].tolist() for _ in range(3)] == [[10.0, 200.0], [20.0, 400.0], [30.0, 600.0]]
    assert [k.run(["hn"], {"x": x})[0].tolist() for _ in range(3)] == [[31.0, 602.0], [32.0, 604.0], [33.0, 606.0]]
    # a plain output too large to buffer is a new array every call: the ones handed over keep their values
    big = StatefulSession(acc(BIG))
    got = [big.run({"x": np.full(BIG, c, np.float32)}) for c in range(1, 5)]
    assert [(set(o["y"].tolist()), o["z"].item()) for o in got] == [({2.0 * tri(c)}, BIG * tri(c)) for c in range(1, 5)]
    # the same outputs asked for in another order: each is still the one it names
    got = [big.run(["z", "y"], {"x": np.full(BIG, c, np.float32)}) for c in range(5, 9)]
    assert [(z.item(), set(y.tolist())) for z, y in got] == [(BIG * tri(c), {2.0 * tri(c)}) for c in range(5, 9)]
    # aliased state outputs: the slot's own buffer, handed over without a copy
    alias = StatefulSession(acc(2), alias_outputs=True)
    got = [alias.run(["hn", "z"], one) for _ in range(4)]
    assert [(g[0].tolist()[0], g[1].item()) for g in got[-1:]] == [(4.0, 8.0)] and alias.stats.output_copy_bytes == 0
