"""Small time loops as tf2onnx writes Keras layers, built by hand for the recogniser's loop-specific rules.

``tf_loop`` is one ``while`` Loop running ``h' = tanh(x_t W + h R + b)``: ``W`` and ``R`` are carried into the body
and handed back (tf2onnx passes a layer's weights this way), the step's input is ``x_t = Gather(seq, t)`` with ``t`` a
carried counter of the body's own (0, +1 per step) and the condition is handed back through ``Identity``. Each
keyword bends one of those conventions into a near-miss. ``scan_model`` is the Scan counterpart: one carried value
and one scanned input, each handed back unchanged.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

I, H, STEPS = 3, 4, 3  # noqa: E741
OPSET = 18


def vi(name: str, elem: int, shape: list[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model_of(graph: onnx.GraphProto, custom: bool = False) -> onnx.ModelProto:
    ops = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid("my.ops", 1)] if custom else [])
    m = helper.make_model(graph, opset_imports=ops)
    m.ir_version = 9
    return m


def tf_loop(
    *,
    start: object = 0,
    step: object = 1,
    counter: str = "add",
    r_back: str = "same",
    gather: str = "gather",
    gather_axis: int = 0,
    seq_from_state: bool = False,
    seed: int = 0,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """counter: how the body yields its counter t -- 'add' (Add(t, step)), 'identity' (that Add through an Identity),
    'custom_identity' (through an Identity of another domain), 'sub' (Sub(t, step)), 'custom_add' (an Add of another
    domain), 'same' (t itself), 'iter' (Add(iter, step): not t's own increment), 'swapped' (Add(step, t)), 'outer' (an Add outside
    the Loop over an outer value also named t, which the body's t shadows: the same value every step).
    start/step: the counter's initial value and increment (arrays allowed); None makes it a graph input (run-time).
    r_back: how the body hands back R -- 'same', 'identity' (two Identities), 'custom_identity', 'changed' (R + 1),
    'swapped' (W's slot and R's slot exchanged).
    gather: 'gather' (Gather(seq, t)), 'custom' (a Gather of another domain), 'slice' (a Slice of seq at t).
    seq_from_state: the sequence the body indexes is x + h0[:, :I], computed outside the Loop from the state (as a
    stacked layer's input is the layer below's output): then x_t is in the state cone, yet still the step's input."""
    rng = np.random.default_rng(seed)
    consts = {
        "W0": (rng.standard_normal((I, H)) * 0.5).astype(np.float32),
        "R0": (rng.standard_normal((H, H)) * 0.5).astype(np.float32),
        "b": (rng.standard_normal(H) * 0.3).astype(np.float32),
    }
    custom = False
    seq_shape = [STEPS, 1, I] if gather_axis == 0 else [1, STEPS, I]
    body: list[onnx.NodeProto] = []
    if gather == "slice":
        body.append(helper.make_node("Unsqueeze", ["t", "axes0"], ["t1"], name="t1"))
        body.append(helper.make_node("Add", ["t1", "one1"], ["t1e"], name="t1e"))
        body.append(helper.make_node("Slice", ["x_seq", "t1", "t1e", "axes0"], ["x_t3"], name="slice_step"))
        body.append(helper.make_node("Squeeze", ["x_t3", "axes0"], ["x_t"], name="squeeze_step"))
    else:
        dom = "my.ops" if gather == "custom" else ""
        custom |= bool(dom)
        body.append(helper.make_node("Gather", ["x_seq", "t"], ["x_t"], axis=gather_axis, name="gather_step", domain=dom))
    body += [
        helper.make_node("MatMul", ["x_t", "W"], ["xw"], name="mm_x"),
        helper.make_node("MatMul", ["h", "R"], ["hr"], name="mm_h"),
        helper.make_node("Add", ["xw", "hr"], ["s"], name="add_s"),
        helper.make_node("Add", ["s", "b"], ["s2"], name="add_b"),
        helper.make_node("Tanh", ["s2"], ["h_next"], name="tanh"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_id"),
    ]
    t_out = "t_next"
    if counter in ("add", "identity", "custom_identity"):
        body.append(helper.make_node("Add", ["t", "step"], ["t_add"], name="count"))
        if counter == "add":
            t_out = "t_add"
        else:
            dom = "my.ops" if counter == "custom_identity" else ""
            custom |= bool(dom)
            body.append(helper.make_node("Identity", ["t_add"], ["t_next"], name="count_id", domain=dom))
    elif counter == "sub":
        body.append(helper.make_node("Sub", ["t", "step"], ["t_next"], name="count"))
    elif counter == "custom_add":
        custom = True
        body.append(helper.make_node("Add", ["t", "step"], ["t_next"], name="count", domain="my.ops"))
    elif counter == "iter":
        body.append(helper.make_node("Add", ["iter", "step"], ["t_next"], name="count"))
    elif counter == "swapped":
        body.append(helper.make_node("Add", ["step", "t"], ["t_next"], name="count"))
    elif counter == "outer":
        t_out = "t_outer"
    else:
        t_out = "t"
    w_out, r_out = "W", "R"
    if r_back == "identity":
        body += [helper.make_node("Identity", ["R"], ["R_a"], name="r_id1"), helper.make_node("Identity", ["R_a"], ["R_b"], name="r_id2")]
        r_out = "R_b"
    elif r_back == "custom_identity":
        custom = True
        body.append(helper.make_node("Identity", ["R"], ["R_b"], name="r_id", domain="my.ops"))
        r_out = "R_b"
    elif r_back == "changed":
        body.append(helper.make_node("Add", ["R", "r_one"], ["R_b"], name="r_inc"))
        r_out = "R_b"
    elif r_back == "swapped":
        w_out, r_out = "R", "W"
    t_shape = [] if np.ndim(start) == 0 else None  # type: ignore[arg-type]
    body_graph = helper.make_graph(
        body,
        "body",
        [vi("iter", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("t", TensorProto.INT64, t_shape),
         vi("h", TensorProto.FLOAT, [1, H]), vi("W", TensorProto.FLOAT, [I, H]), vi("R", TensorProto.FLOAT, [H, H])],
        [vi("cond_out", TensorProto.BOOL, []), vi(t_out, TensorProto.INT64, t_shape), vi("h_next", TensorProto.FLOAT, [1, H]),
         vi(w_out, TensorProto.FLOAT, None), vi(r_out, TensorProto.FLOAT, None)],
    )
    loop = helper.make_node("Loop", ["M", "cond", "t0", "h0", "W0", "R0"], ["t_final", "hN", "W_final", "R_final"], body=body_graph, name="while_loop")
    inputs = [vi("x_seq", TensorProto.FLOAT, seq_shape), vi("h0", TensorProto.FLOAT, [1, H])]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    inits += [
        numpy_helper.from_array(np.array(STEPS, dtype=np.int64), "M"),
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "one1"),
        numpy_helper.from_array(np.float32(1.0), "r_one"),
    ]
    for name, value in (("t0", start), ("step", step)):
        if value is None:
            inputs.append(vi(name, TensorProto.INT64, []))
        else:
            inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.int64), name))
    nodes = [loop]
    if seq_from_state:
        nodes.insert(0, helper.make_node("Slice", ["h0", "zero1", "width", "axes1"], ["h0_cut"], name="h0_cut"))
        nodes.insert(1, helper.make_node("Add", ["x_in", "h0_cut"], ["x_seq"], name="seq_from_state"))
        inputs[0] = vi("x_in", TensorProto.FLOAT, seq_shape)
        inits += [numpy_helper.from_array(np.array([v], dtype=np.int64), n) for n, v in (("zero1", 0), ("width", I), ("axes1", 1))]
    if counter == "outer":
        inits.append(numpy_helper.from_array(np.array(0, dtype=np.int64), "t"))
        nodes.insert(0, helper.make_node("Add", ["t", "step"], ["t_outer"], name="outer_count"))
    graph = helper.make_graph(nodes, "tf_loop", inputs, [vi("hN", TensorProto.FLOAT, [1, H])], inits)
    return model_of(graph, custom), consts


def scan_model(*, seq_const: bool = True) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Scan(R0, seq) with num_scan_inputs 1: the body hands its carried R back unchanged (Identity) and yields each
    scanned element e as it is (a scan output). ``seq`` is an initializer (or a graph input)."""
    rng = np.random.default_rng(1)
    consts = {"R0": rng.standard_normal((H, H)).astype(np.float32), "seq": rng.standard_normal((STEPS, H)).astype(np.float32)}
    body = helper.make_graph(
        [helper.make_node("Identity", ["R"], ["R_out"], name="r_id"), helper.make_node("Identity", ["e"], ["e_out"], name="e_id")],
        "scan_body",
        [vi("R", TensorProto.FLOAT, [H, H]), vi("e", TensorProto.FLOAT, [H])],
        [vi("R_out", TensorProto.FLOAT, [H, H]), vi("e_out", TensorProto.FLOAT, [H])],
    )
    scan = helper.make_node("Scan", ["R0", "seq"], ["R_final", "ys"], body=body, num_scan_inputs=1, name="scan")
    inputs = [] if seq_const else [vi("seq", TensorProto.FLOAT, [STEPS, H])]
    inits = [numpy_helper.from_array(consts["R0"], "R0")] + ([numpy_helper.from_array(consts["seq"], "seq")] if seq_const else [])
    graph = helper.make_graph([scan], "scan", inputs, [vi("ys", TensorProto.FLOAT, [STEPS, H])], inits)
    return model_of(graph), consts
