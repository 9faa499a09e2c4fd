"""The stream check_multicall cuts: which axis is time, the symbols a generated input takes from the state, the
dtype a given stream is fed in, and the default limit on a generated input.  Oracles: the models' declared shapes,
and sums computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.stream import StreamError, time_axes
from rnnir.runtime import StatefulSession
from tests.check.test_multicall_stream import build, init, vi


def test_a_time_named_dim_is_the_time_axis_unless_it_is_the_last_of_several():
    nodes = [helper.make_node("ReduceSum", [n], [f"{n}_sum"], keepdims=0) for n in ("a", "b", "c")]
    m = build(nodes, [vi("a", ["T", 3]), vi("b", [3, "T"]), vi("c", ["T"])], [vi(f"{n}_sum", None) for n in ("a", "b", "c")])
    assert time_axes(StatefulSession(m)) == {"a": 0, "b": None, "c": 0}


def accumulator():
    """s [N, 2] += the sum of x [T, N, 2] over time; y = s.  N is a symbol only the state and x share (no recurrent op)."""
    nodes = [helper.make_node("ReduceSum", ["x", "ax0"], ["xs"], keepdims=0), helper.make_node("Add", ["s", "xs"], ["sn"]),
             helper.make_node("Identity", ["sn"], ["y"])]
    return build(nodes, [vi("x", ["T", "N", 2]), vi("s", ["N", 2])], [vi("y", ["N", 2]), vi("sn", ["N", 2])], [init("ax0", [0], np.int64)], opset=13)


def test_a_dim_the_state_shares_is_the_batch():
    # N is known only from the state's shape: a generated x takes batch rows there, and the state grows with it
    report = check_multicall(StatefulSession(accumulator(), pairs={"s": "sn"}), None, chunk_sizes=[2], length=4, batch=3)
    assert report.status == "pass" and len(report.health["s"].norm) == 2  # 4 steps in calls of 2
    assert report.health["s"].max[-1] != 0.0


def doubler():
    """y = 2 x on x [T, 3]: no state, so every cut of the stream gives the same y."""
    return build([helper.make_node("Add", ["x", "x"], ["y"])], [vi("x", ["T", 3])], [vi("y", ["T", 3])])


def test_a_float64_stream_is_fed_as_the_float32_the_input_takes():
    x = np.arange(12, dtype=np.float64).reshape(4, 3) / 10  # float64: the check converts it, as a caller must
    report = check_multicall(doubler(), {"x": x}, chunk_sizes=[1, 2])
    assert report.status == "no-state" and report.persistent_matches_whole is True
    assert report.variant("persistent", 1).trace == pytest.approx([0.2, 0.8, 1.4, 2.0])  # mean of 2 x per row, by hand


def test_a_generated_input_larger_than_fifty_million_elements_is_refused_by_default():
    m = build([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], [vi("x", ["T", 10_000, 10_000])], [vi("y", None)])
    with pytest.raises(StreamError, match=r"\(100000000 elements > max_elements=50000000\)"):
        check_multicall(m, None, chunk_sizes=[1], length=1)

