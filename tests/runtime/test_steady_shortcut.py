"""The steady call's shortcut in StatefulSession.run answers only the call its plan was made for: the same form
(dict or list), the same requested outputs, no run options, no input context, and feeds in a plain dict.  Each test
makes a plan with one call and then makes a call the plan was not made for: the answer must be that call's own.

The model: ``hn = h0 + x`` (the state) and ``y = 2 * hn`` (a plain output), so with x = 1 at every call the k-th
call gives hn = k and y = 2k (hand-checkable)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.runtime import FeedError, OnnxRuntimeError, StatefulSession

F = TensorProto.FLOAT


def build(nodes, inputs, outputs, inits=(), name="m"):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def doubler():
    nodes = [helper.make_node("Add", ["h0", "x"], ["hn"]), helper.make_node("Mul", ["hn", "two"], ["y"])]
    vi = helper.make_tensor_value_info
    return build(nodes, [vi("x", F, [2]), vi("h0", F, [2])], [vi("y", F, [2]), vi("hn", F, [2])],
                 [numpy_helper.from_array(np.full(2, 2.0, np.float32), "two")])


def ones():
    return {"x": np.ones(2, np.float32)}


def val(a):
    return np.asarray(a).ravel().tolist()


def terminating() -> ort.RunOptions:
    ro = ort.RunOptions()
    ro.terminate = True  # onnxruntime refuses to run with it: proof that the options reached the run
    return ro


def test_run_options_given_in_steady_state_reach_onnxruntime():
    s = StatefulSession(doubler())
    assert val(s.run(None, ones())[0]) == [2.0, 2.0]
    assert val(s.run(None, ones())[0]) == [4.0, 4.0]  # steady now: the next same call has a plan
    with pytest.raises(OnnxRuntimeError, match="terminate flag"):
        s.run(None, ones(), terminating())
    with pytest.raises(OnnxRuntimeError, match="terminate flag"):
        s.run(ones(), None, terminating())  # the dict form takes run_options third too
    assert val(s.state["h0"]) == [2.0, 2.0]  # the refused calls changed nothing
    assert val(s.run(None, ones())[0]) == [6.0, 6.0]
    assert s.stats.calls == 3


def test_outputs_asked_for_after_a_default_call_are_the_ones_returned():
    s = StatefulSession(doubler())
    assert {k: val(v) for k, v in s.run(ones()).items()} == {"y": [2.0, 2.0]}
    assert {k: val(v) for k, v in s.run(ones()).items()} == {"y": [4.0, 4.0]}
    got = s.run(ones(), outputs=["hn"])
    assert {k: val(v) for k, v in got.items()} == {"hn": [3.0, 3.0]}
    assert {k: val(v) for k, v in s.run(ones()).items()} == {"y": [8.0, 8.0]}


def test_the_default_call_after_run_dict_returns_only_the_plain_outputs():
    s = StatefulSession(doubler())
    assert {k: val(v) for k, v in s.run_dict(ones()).items()} == {"y": [2.0, 2.0], "hn": [1.0, 1.0]}
    assert sorted(s.run_dict(ones())) == ["hn", "y"]
    assert {k: val(v) for k, v in s.run(ones()).items()} == {"y": [6.0, 6.0]}
    assert {k: val(v) for k, v in s.run(ones()).items()} == {"y": [8.0, 8.0]}


def test_the_list_form_after_the_dict_form_returns_a_list():
    s = StatefulSession(doubler())
    s.run(ones())
    s.run(ones())
    got = s.run(None, ones())
    assert isinstance(got, list) and [val(a) for a in got] == [[6.0, 6.0]]
    got = s.run(ones())
    assert isinstance(got, dict) and {k: val(v) for k, v in got.items()} == {"y": [8.0, 8.0]}


def test_the_default_list_after_a_named_list_returns_the_plain_outputs():
    s = StatefulSession(doubler())
    assert [val(a) for a in s.run(["hn"], ones())] == [[1.0, 1.0]]
    assert [val(a) for a in s.run(["hn"], ones())] == [[2.0, 2.0]]
    assert [val(a) for a in s.run(None, ones())] == [[6.0, 6.0]]  # y, not hn
    assert [val(a) for a in s.run(["hn"], ones())] == [[4.0, 4.0]]


def test_a_mapping_first_is_the_feeds_whatever_follows():
    # run(mapping, x) is the dict form with x as the output names: run({}, feeds, ...) is a call without feeds, refused,
    # even right after run([], feeds) made a plan for that very feed dict
    s = StatefulSession(doubler())
    assert s.run([], ones()) == []
    assert s.run([], ones()) == []
    with pytest.raises(FeedError, match=r"missing input\(s\) \['x'\]"):
        s.run({}, ones(), outputs=["y"])
    assert val(s.state["h0"]) == [2.0, 2.0]


def test_input_context_is_kept_in_steady_state_whatever_the_chunk_length():
    # y = sum(x); the session prepends the last 2 samples of the previous call (zeros before the first)
    vi = helper.make_tensor_value_info
    m = build([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], [vi("x", F, ["N"])], [vi("y", F, [])], name="ctx")
    s = StatefulSession(m, context={"x": 2})
    assert float(s.run({"x": np.array([1, 2, 3], np.float32)})["y"]) == 6.0  # [0, 0, 1, 2, 3]
    assert float(s.run({"x": np.array([4, 5, 6], np.float32)})["y"]) == 20.0  # [2, 3, 4, 5, 6]
    # five samples: the length the model saw last call, but the context still goes in front
    assert float(s.run({"x": np.array([1, 1, 1, 1, 1], np.float32)})["y"]) == 16.0  # [5, 6, 1, 1, 1, 1, 1]
    assert [val(v) for v in s.context_state.values()] == [[1.0, 1.0]]
    assert float(s.run({"x": np.array([0, 0, 0], np.float32)})["y"]) == 2.0  # [1, 1, 0, 0, 0]


class Pooled(Mapping):
    """Feeds made on access from a buffer pool: once the array handed out is dropped, its buffer goes back to the
    pool and is overwritten (as a real pool would reuse it).  A session must hold every fed array until its run ends."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self._arrays = arrays
        self._buffers: list[bytearray] = []  # the pool's memory stays valid: only its contents change

    def __getitem__(self, key: str) -> np.ndarray:
        src = self._arrays[key]
        buf = bytearray(src.tobytes())
        self._buffers.append(buf)
        view = np.frombuffer(buf, dtype=src.dtype).reshape(src.shape)
        junk = np.full(src.shape, -1000.0, src.dtype).tobytes()

        def recycle() -> None:
            buf[:] = junk

        weakref.finalize(view, recycle)
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)


def test_feeds_from_any_mapping_are_read_while_they_are_alive():
    # hn = h0 + a + b with two feeds too large to be copied into the plan's buffers (16 KiB each)
    n = 4096
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["a", "b"], ["ab"]), helper.make_node("Add", ["h0", "ab"], ["hn"])]
    m = build(nodes, [vi("a", F, [n]), vi("b", F, [n]), vi("h0", F, [n])], [vi("hn", F, [n])], name="pool")
    s = StatefulSession(m)
    feeds = {"a": np.ones(n, np.float32), "b": np.full(n, 2.0, np.float32)}
    assert np.all(s.run_dict(feeds)["hn"] == 3.0)
    assert np.all(s.run_dict(feeds)["hn"] == 6.0)  # steady: a plan for a dict of these feeds
    got = s.run_dict(Pooled(feeds))["hn"]
    assert np.all(got == 9.0), sorted(set(got.tolist()))
    got = s.run(Pooled(feeds), outputs=["hn"])["hn"]
    assert np.all(got == 12.0), sorted(set(got.tolist()))
    assert np.all(s.run_dict(feeds)["hn"] == 15.0)
