"""StatefulSession behaviours issue 15 found unpinned: the batch size of a symbolic, unshared state dim comes from
the batch axis of the input that feeds the recurrent op (not its time axis), and a saved state with the model's
fingerprint but another dtype is refused. Oracle: onnxruntime run directly with a hand-made zero state."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir import StateError
from rnnir.runtime import StatefulSession

F = TensorProto.FLOAT
H, I = 4, 3
T, B = 5, 3  # different, so taking the time axis for the batch gives a wrong shape


def gru(x_shape, h_shape, *, layout=0, transpose=None):
    """x -> [Transpose] -> GRU(layout) with h0 -> Y, hn; h0's batch dim is the symbol 'N', shared with nothing."""
    rng = np.random.default_rng(2)
    nodes = []
    x = "x"
    if transpose is not None:
        nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=transpose))
        x = "xt"
    nodes.append(helper.make_node("GRU", [x, "W", "R", "", "", "h0"], ["Y", "hn"], hidden_size=H, layout=layout))
    inits = [
        numpy_helper.from_array((0.5 * rng.standard_normal((1, 3 * H, I))).astype(np.float32), "W"),
        numpy_helper.from_array((0.5 * rng.standard_normal((1, 3 * H, H))).astype(np.float32), "R"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, x_shape), helper.make_tensor_value_info("h0", F, h_shape)],
        [helper.make_tensor_value_info("Y", F, None), helper.make_tensor_value_info("hn", F, h_shape)],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


CASES = {
    # name: (model, x fed, the zero state onnxruntime needs)
    "layout0": (gru(["T", "B", I], [1, "N", H]), (T, B, I), (1, B, H)),
    "transposed": (gru(["B", "T", I], [1, "N", H], transpose=[1, 0, 2]), (B, T, I), (1, B, H)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unshared_symbolic_batch_dim_comes_from_the_batch_axis_of_the_recurrent_input(case):
    m, x_shape, state_shape = CASES[case]
    x = np.random.default_rng(4).standard_normal(x_shape).astype(np.float32)
    s = StatefulSession(m)
    assert s.initial_state({"x": x})["h0"].shape == state_shape
    got = s.run_dict({"x": x})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip(["Y", "hn"], sess.run(None, {"x": x, "h0": np.zeros(state_shape, np.float32)})))
    np.testing.assert_allclose(got["hn"], want["hn"], rtol=1e-6)
    assert s.state["h0"].shape == state_shape


@pytest.mark.parametrize(
    ("layout", "transpose", "axes"),
    [(0, None, (0, 1)), (1, None, (1, 0)), (0, [1, 0, 2], (1, 0)), (1, [1, 0, 2], (0, 1)), (0, [2, 0, 1], (2, 0))],
)
def test_time_and_batch_axes_of_the_input_that_feeds_x(layout, transpose, axes):
    # ONNX: X is [seq, batch, input] with layout 0 and [batch, seq, input] with layout 1; Transpose(perm) maps
    # axis k of its output to axis perm[k] of its input. (onnxruntime runs no layout=1 op, so this is checked
    # where the runtime reads it, without a session.)
    import rnnir
    from rnnir.runtime.spec import _recurrent_inputs

    # with perm [2, 0, 1], X's time axis is x's axis 2 and its batch axis x's axis 0: x is [batch, input, time]
    m = gru(["C", I, "A"] if transpose == [2, 0, 1] else ["A", "C", I], [1, "N", H], layout=layout, transpose=transpose)
    (ri,) = _recurrent_inputs(m, rnnir.load(m))
    assert (ri.input, ri.time_axis, ri.batch_axis) == ("x", *axes)


def saved(tmp_path, s):
    path = s.save_state(tmp_path / "s.state")
    with np.load(path, allow_pickle=False) as z:
        return path, json.loads(str(z["__rnnir_state__"])), {k: z[k] for k in z.files if k.startswith("slot:")}


def rewrite(path, meta, slots):
    with open(path, "wb") as f:
        np.savez(f, __rnnir_state__=np.array(json.dumps(meta)), **slots)


def test_a_state_file_with_the_right_fingerprint_and_another_dtype_is_refused(tmp_path):
    m, x_shape, _ = CASES["layout0"]
    s = StatefulSession(m)
    s.run({"x": np.ones(x_shape, np.float32)})
    path, meta, slots = saved(tmp_path, s)
    assert meta["fingerprint"] == s.fingerprint
    rewrite(path, meta, {k: v.astype(np.float64) for k, v in slots.items()})
    fresh = StatefulSession(m)
    with pytest.raises(StateError, match=r"slot 'h0' was saved as float64, the model's state input is float32"):
        fresh.load_state(path)


def test_the_same_file_with_the_model_dtype_loads_and_the_stream_continues_exactly(tmp_path):
    m, x_shape, _ = CASES["layout0"]
    xs = np.random.default_rng(8).standard_normal((2, *x_shape)).astype(np.float32)
    s = StatefulSession(m)
    s.run({"x": xs[0]})
    path, meta, slots = saved(tmp_path, s)
    rewrite(path, meta, slots)
    fresh = StatefulSession(m)
    fresh.load_state(path)
    np.testing.assert_array_equal(fresh.state["h0"], slots["slot:h0"])
    np.testing.assert_array_equal(fresh.run_dict({"x": xs[1]})["hn"], s.run_dict({"x": xs[1]})["hn"])


@pytest.mark.parametrize("change", ["format", "slots"])
def test_a_state_file_with_another_format_or_other_slots_is_refused(tmp_path, change):
    m, x_shape, _ = CASES["layout0"]
    s = StatefulSession(m)
    s.run({"x": np.ones(x_shape, np.float32)})
    path, meta, slots = saved(tmp_path, s)
    if change == "format":
        meta["format"] = "something-else"
        match = "unknown state format"
    else:
        slots["slot:extra"] = slots["slot:h0"]
        match = r"do not match the model's state inputs \['h0'\]"
    rewrite(path, meta, slots)
    with pytest.raises(StateError, match=match):
        StatefulSession(m).load_state(path)
