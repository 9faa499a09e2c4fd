"""What every StatefulSession reads off its model and opens onnxruntime with: rnnir's quiet default options, or the
caller's own options and providers as given; the state outputs hidden from the caller's default outputs; a dim
with neither value nor name read as unknown; and the default 256 MiB bound on a slot.  One test, so that the
mutation tool (which runs only the fastest tests of a line every runtime test executes, and the fastest of each
file) always runs it for the constructor's lines."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rnnir import StateError
from rnnir.runtime import IOSpec, StatefulSession

F = TensorProto.FLOAT


def adder(n=2):
    """hn = h0 + x and y = x + x, over n floats."""
    g = helper.make_graph(
        [helper.make_node("Add", ["h0", "x"], ["hn"]), helper.make_node("Add", ["x", "x"], ["y"])],
        "adder",
        [helper.make_tensor_value_info("x", F, [n]), helper.make_tensor_value_info("h0", F, [n])],
        [helper.make_tensor_value_info("hn", F, [n]), helper.make_tensor_value_info("y", F, [n])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_the_onnxruntime_session_and_what_the_caller_sees_of_it():
    x = {"x": np.array([1.0, 2.0], np.float32)}
    quiet = StatefulSession(adder())
    assert quiet.inference_session.get_session_options().log_severity_level == 3  # errors only: no load-time warnings
    assert [a.name for a in quiet.get_outputs()] == ["y"] and list(quiet.run(x)) == ["y"]  # hn is the session's
    assert quiet.run_dict(x)["hn"].tolist() == [2.0, 4.0]
    opts = ort.SessionOptions()
    opts.log_severity_level, opts.intra_op_num_threads = 2, 1
    mine = StatefulSession(adder(), session_options=opts).inference_session.get_session_options()
    assert (mine.log_severity_level, mine.intra_op_num_threads) == (2, 1)
    with pytest.warns(UserWarning, match="Specified provider 'NoSuchExecutionProvider' is not in available provider names"):
        StatefulSession(adder(), providers=["NoSuchExecutionProvider"])  # onnxruntime got it, and falls back to the CPU
    # a dim with neither a value nor a name is unknown (None), not a symbol "" that every such dim would share
    blank = adder()
    blank.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    assert StatefulSession(blank).inputs == {"x": IOSpec("x", np.dtype(np.float32), (None,))}
    # the default bound on a slot is 256 MiB: 2**26 float32 and one more are refused before anything is allocated
    with pytest.raises(StateError, match=r"'h0' of shape \[67108865\] would take 268,435,460 bytes, over the 268,435,456-byte limit"):
        StatefulSession(adder(2**26 + 1)).initial_state()
