"""Cells written as plain ONNX ops: recognised by role, confirmed by execution, near-misses left unconfirmed.

Oracles, none of them the recogniser's own arithmetic: the weights each builder in ``_cell_models`` put into
the model (reordered into ONNX gate order by the test's own tables), onnxruntime running the model against an
ONNX LSTM/GRU/RNN node built from the extracted weights, ``onnx.reference`` for the numpy evaluator, and the
silero-vad initializers (PyTorch i,f,g,o order) for the real model.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from rnnir.lower.cells import CellMatch, find_cells
from rnnir.lower.scope import ModelIndex
from rnnir.semantics.evaluate import run_op
from tests.support import cell_models as cm


def _scan(model: onnx.ModelProto, sources: list[str]):
    index = ModelIndex(model, "test")
    return find_cells(index, [(index.root, s) for s in sources])


def _only(scan, kind: str) -> CellMatch:
    assert not scan.candidates, scan.candidates
    assert [m.kind for m in scan.matches] == [kind]
    return scan.matches[0]


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _onnx_op_model(m: CellMatch, I: int) -> onnx.ModelProto:  # noqa: E741
    """An ONNX LSTM/GRU/RNN node holding the extracted weights: onnxruntime runs it, not rnnir."""
    w = m.weights
    H = m.hidden_size
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for a, n in ((w.W, "W"), (w.R, "R"), (w.B, "B"))]
    ins = ["X", "W", "R", "B", "", "h0"] + (["c0"] if m.kind == "LSTM" else [])
    outs = ["Y", "Y_h"] + (["Y_c"] if m.kind == "LSTM" else [])
    attrs: dict = {"hidden_size": H, "activations": list(w.activations)}
    if m.kind == "GRU":
        attrs["linear_before_reset"] = w.linear_before_reset
    if w.activation_alpha is not None:
        attrs["activation_alpha"] = list(w.activation_alpha)
        attrs["activation_beta"] = list(w.activation_beta or ())
    node = helper.make_node(m.kind, ins, outs, **attrs)
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, I]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 1, H])]
    if m.kind == "LSTM":
        inputs.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, [1, 1, H]))
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
    model = helper.make_model(helper.make_graph([node], "op", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model


def _assert_same_as_onnx_op(model: onnx.ModelProto, m: CellMatch, exp: cm.Expected, packed: bool, I: int = 5, seed: int = 7) -> None:  # noqa: E741
    rng = np.random.default_rng(seed)
    H = exp.hidden
    x = rng.standard_normal((1, I)).astype(np.float32)
    h = rng.standard_normal((1, H)).astype(np.float32)
    c = rng.standard_normal((1, H)).astype(np.float32)
    if packed:
        n = 2 if len(model.graph.input[1].type.tensor_type.shape.dim) and model.graph.input[1].type.tensor_type.shape.dim[0].dim_value == 2 else 1
        state = np.stack([h, c][:n])
        got = _ort(model, {"x": x, "state": state})[0]
        got_h = got[0]
        got_c = got[1] if exp.kind == "LSTM" else None
    else:
        feeds = {"x": x, "h0": h}
        if exp.kind == "LSTM":
            feeds["c0"] = c
        outs = _ort(model, feeds)
        got_h = outs[0]
        got_c = outs[1] if exp.kind == "LSTM" else None
    op_feeds = {"X": x[None], "h0": h[None]}
    if exp.kind == "LSTM":
        op_feeds["c0"] = c[None]
    want = _ort(_onnx_op_model(m, I), op_feeds)
    np.testing.assert_allclose(got_h, want[1][0], atol=1e-5)
    if got_c is not None:
        np.testing.assert_allclose(got_c, want[2][0], atol=1e-5)


def _check_weights(m: CellMatch, exp: cm.Expected) -> None:
    np.testing.assert_allclose(m.weights.W, exp.W, atol=1e-5)
    np.testing.assert_allclose(m.weights.R, exp.R, atol=1e-5)
    assert m.hidden_size == exp.hidden


# -- LSTM ------------------------------------------------------------------------------------

_LSTM_CASES = [
    (order, proj, split, k % 2 == 1, "B" if k % 3 == 0 else 1, k % 4 >= 2)
    for k, (order, proj, split) in enumerate(itertools.product(cm.LSTM_ORDERS, ["gemm", "gemm_t0", "matmul", "joint"], ["split", "split_sizes", "slice"]))
]


@pytest.mark.parametrize(("order", "proj", "split", "swap", "batch", "packed"), _LSTM_CASES)
def test_lstm_cell_recognised_in_every_form(order, proj, split, swap, batch, packed):
    model, exp = cm.lstm_cell(order=order, proj=proj, split=split, swap=swap, batch=batch, packed=packed)
    m = _only(_scan(model, ["state"] if packed else ["h0", "c0"]), "LSTM")
    _check_weights(m, exp)
    np.testing.assert_allclose(m.weights.B[0, :16] + m.weights.B[0, 16:], exp.Bsum, atol=1e-5)
    assert (m.h_in, m.c_in, m.h_out, m.c_out) == (exp.h_in, exp.c_in, exp.h_out, exp.c_out)
    assert m.x == ("x",) and m.weights.activations == ("Sigmoid", "Tanh", "Tanh")
    assert m.h_source == ("state" if packed else "h0") and m.c_source == ("state" if packed else "c0")
    _assert_same_as_onnx_op(model, m, exp, packed)


def test_lstm_outputs_swapped_on_the_way_out_is_still_the_same_cell():
    # the cell is right; writing h' into c's place is a wiring bug that lowering's rules report, not a non-cell
    model, exp = cm.lstm_cell(mutant="swap_out")
    m = _only(_scan(model, ["h0", "c0"]), "LSTM")
    assert (m.h_out, m.c_out) == (exp.h_out, exp.c_out)


@pytest.mark.parametrize(
    ("mutant", "reason"),
    [
        ("tanh_cprev", "is o*tanh('c0'), not o*tanh(c'); it differs from o*tanh(c') by"),
        ("gate_tanh", "its forget gate Tanh"),
        ("runtime_R", "are not constants ('Rt' is a run-time value)"),
        ("c_through_matmul", "the cell-state operand of the forget product is MatMul"),
    ],
)
def test_lstm_near_misses_are_candidates_with_a_reason(mutant, reason):
    model, _ = cm.lstm_cell(mutant=mutant)
    scan = _scan(model, ["h0", "c0"])
    assert scan.matches == []
    assert len(scan.candidates) == 1 and scan.candidates[0].kind == "LSTM"
    assert reason in scan.candidates[0].reason, scan.candidates[0].reason


# -- GRU -------------------------------------------------------------------------------------

_GRU_CASES = [
    (order, blend, lbr, ["gemm", "matmul", "gemm_t0"][k % 3], ["split", "slice", "split_sizes"][k % 3], k % 2 == 0, k % 5 == 0)
    for k, (order, blend, lbr) in enumerate(itertools.product(cm.GRU_ORDERS, "abcd", (0, 1)))
]


@pytest.mark.parametrize(("order", "blend", "lbr", "proj", "split", "swap", "packed"), _GRU_CASES)
def test_gru_cell_recognised_in_every_form(order, blend, lbr, proj, split, swap, packed):
    model, exp = cm.gru_cell(order=order, blend=blend, lbr=lbr, proj=proj, split=split, swap=swap, packed=packed)
    m = _only(_scan(model, ["state"] if packed else ["h0"]), "GRU")
    # z as the write ratio (blend 'c') is the same cell with the ONNX z gate negated: the expected weights say so
    _check_weights(m, exp)
    assert m.weights.linear_before_reset == lbr
    assert (m.h_in, m.h_out) == (exp.h_in, exp.h_out)
    _assert_same_as_onnx_op(model, m, exp, packed)


def test_gru_reading_h_through_two_layout_paths_has_one_h():
    model, exp = cm.gru_cell(packed=True, blend_view="other_path")
    m = _only(_scan(model, ["state"]), "GRU")
    assert set(m.h_views) == {exp.h_in, exp.extra["h_blend"]} and m.h_in == exp.h_in
    assert m.h_source == "state"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"mutant": "no_reset_mul"}, "has no reset gate"),
        ({"mutant": "z_times_n_only"}, "does not compute a GRU cell"),
        ({"packed": True, "blend_view": "other_slice"}, "a different state slice"),
    ],
)
def test_gru_near_misses_are_candidates_with_a_reason(kwargs, reason):
    model, _ = cm.gru_cell(**kwargs)
    scan = _scan(model, ["state"] if kwargs.get("packed") else ["h0"])
    assert scan.matches == []
    assert [c.kind for c in scan.candidates] == ["GRU"]
    assert reason in scan.candidates[0].reason, scan.candidates[0].reason


# -- RNN -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("act", "proj", "swap", "packed"), list(itertools.product(["Tanh", "Relu"], ["gemm", "matmul"], [False, True], [False, True])))
def test_rnn_cell_recognised(act, proj, swap, packed):
    model, exp = cm.rnn_cell(act=act, proj=proj, swap=swap, packed=packed)
    m = _only(_scan(model, ["state"] if packed else ["h0"]), "RNN")
    _check_weights(m, exp)
    assert m.weights.activations == (act,)
    _assert_same_as_onnx_op(model, m, exp, packed)


@pytest.mark.parametrize("mutant", ["no_matmul", "square"])
def test_rnn_near_misses_are_not_cells(mutant):
    model, _ = cm.rnn_cell(mutant=mutant)
    assert _scan(model, ["h0"]).matches == []


def test_lstm_gates_are_not_mistaken_for_rnn_cells():
    # the candidate g = tanh(Wx + Rh + b) of a broken LSTM is affine in h under a tanh: still no RNN
    model, _ = cm.lstm_cell(mutant="gate_tanh")
    assert [c.kind for c in _scan(model, ["h0", "c0"]).candidates] == ["LSTM"]


# -- cone, unrolled steps --------------------------------------------------------------------


def test_cells_that_do_not_read_state_are_not_scanned():
    model, _ = cm.lstm_cell()
    # sources that reach nothing: the LSTM cell is outside their cone
    index = ModelIndex(model, "t")
    assert find_cells(index, [(index.root, "x")]).matches == []


def test_unrolled_steps_thread_one_cell():
    model = cm.unrolled_lstm(T=3)
    scan = _scan(model, ["h0", "c0"])
    assert [m.kind for m in scan.matches] == ["LSTM"] * 3 and not scan.candidates
    first, second, third = scan.matches
    assert (first.h_in, first.c_in) == ("h0", "c0")
    assert (second.h_in, second.c_in) == (first.h_out, first.c_out)
    assert (third.h_in, third.c_in) == (second.h_out, second.c_out)
    for m in (second, third):
        np.testing.assert_array_equal(m.weights.W, first.weights.W)


def test_unrolled_steps_with_h_and_c_swapped_between_steps_are_recorded_as_read():
    model = cm.unrolled_lstm(T=3, thread="swap_hc")
    first, second, _ = _scan(model, ["h0", "c0"]).matches
    assert (second.h_in, second.c_in) == (first.c_out, first.h_out)


# -- the evaluator against onnx.reference ----------------------------------------------------


def _one_node_case(op, inputs, **attrs):
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return node, model


_R = np.random.default_rng(3)
_A = _R.standard_normal((2, 3)).astype(np.float32)
_B = _R.standard_normal((3, 4)).astype(np.float32)
_EVAL_CASES = [
    ("Gemm", [_A, _B.T.copy(), _R.standard_normal(4).astype(np.float32)], {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ("Gemm", [_A.T.copy(), _B], {"transA": 1}),
    ("MatMul", [_A, _B], {}),
    # unit-vector probes (one nonzero per row, some rows zero) take the evaluator's gather path
    ("MatMul", [(np.eye(7, 3, k=-2) * np.arange(1, 8)[:, None]).astype(np.float32), _B], {}),
    ("Gemm", [(np.eye(6, 4, k=-1) * 3).astype(np.float32), _B, _R.standard_normal(3).astype(np.float32)], {"transB": 1}),
    ("Add", [_A, _R.standard_normal(3).astype(np.float32)], {}),
    ("Sub", [_A, _A[::-1].copy()], {}),
    ("Mul", [_A, _A], {}),
    ("Div", [_A, _A + 3], {}),
    ("Neg", [_A], {}),
    ("Sigmoid", [_A * 30], {}),
    ("Tanh", [_A], {}),
    ("Relu", [_A], {}),
    ("HardSigmoid", [_A], {"alpha": 0.3, "beta": 0.4}),
    ("Squeeze", [_A[None], np.array([0], dtype=np.int64)], {}),
    ("Unsqueeze", [_A, np.array([0, 3], dtype=np.int64)], {}),
    ("Reshape", [_A[None], np.array([0, 3, 2], dtype=np.int64)], {}),
    ("Reshape", [_A, np.array([-1], dtype=np.int64)], {}),
    ("Flatten", [_B[None]], {"axis": 2}),
    ("Transpose", [_B[None]], {"perm": [2, 0, 1]}),
    ("Gather", [_B, np.array([2, 0], dtype=np.int64)], {"axis": 1}),
    ("Gather", [_B, np.array(1, dtype=np.int64)], {}),
    ("Slice", [_B, np.array([1, -3], dtype=np.int64), np.array([3, 10], dtype=np.int64), np.array([0, 1], dtype=np.int64)], {}),
    ("Slice", [_B, np.array([2], dtype=np.int64), np.array([-100], dtype=np.int64), np.array([1], dtype=np.int64), np.array([-1], dtype=np.int64)], {}),
    ("Concat", [_A, _A * 2], {"axis": -1}),
    ("Expand", [_A[:, :1], np.array([2, 5], dtype=np.int64)], {}),
    ("Shape", [_B[None]], {"start": 1}),
    ("Cast", [_A], {"to": TensorProto.INT64}),
]


@pytest.mark.parametrize(("op", "inputs", "attrs"), _EVAL_CASES, ids=[f"{c[0]}{k}" for k, c in enumerate(_EVAL_CASES)])
def test_evaluator_matches_onnx_reference(op, inputs, attrs):
    node, model = _one_node_case(op, inputs, **attrs)
    (want,) = ReferenceEvaluator(model).run(None, {f"i{k}": a for k, a in enumerate(inputs)})
    (got,) = run_op(node, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("sizes", "num"), [(None, 3), (None, 3), ([1, 3], None)])
def test_evaluator_split_matches_onnx_reference(sizes, num):
    x = _R.standard_normal((2, 4 if sizes else 7)).astype(np.float32)
    ins = [x] if sizes is None else [x, np.array(sizes, dtype=np.int64)]
    names = [f"i{k}" for k in range(len(ins))]
    n_out = num or len(sizes)
    attrs = {"axis": 1} | ({"num_outputs": num} if num else {})
    node = helper.make_node("Split", names, [f"y{k}" for k in range(n_out)], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, ins)],
        [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None) for k in range(n_out)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    want = ReferenceEvaluator(model).run(None, dict(zip(names, ins)))
    got = run_op(node, ins)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)


# -- silero-vad op18: an LSTM cell per If branch ---------------------------------------------


@pytest.mark.realmodel
def test_silero_op18_holds_one_lstm_cell_per_branch(silero_dir):
    model = onnx.load(silero_dir / "silero_vad_op18_ifless.onnx")
    scan = _scan(model, ["state"])
    assert not scan.candidates
    assert sorted(m.scope_path[-1] for m in scan.matches) == ["node_cond__1.else_branch", "node_cond__1.then_branch"]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for m in scan.matches:
        assert m.kind == "LSTM" and m.hidden_size == 128 and m.h_source == "state" and m.c_source == "state"
        then = m.scope_path[-1].endswith("then_branch")
        # tests/realmodels.py: state[0] (Gather 0) feeds the weight_hh Gemm, state[1] (Gather 1) the forget product
        assert (m.h_in, m.c_in, m.h_out, m.c_out) == (("select_1", "select_2", "mul_182", "add_177") if then else ("select_1_2", "select_2_2", "mul_182_2", "add_177_2"))
        prefix = "model" if then else "model_8k"
        # PyTorch stores i, f, g, o; ONNX wants i, o, f, g
        to_onnx = np.concatenate([np.arange(0, 128), np.arange(384, 512), np.arange(128, 256), np.arange(256, 384)])
        np.testing.assert_allclose(m.weights.W[0], inits[f"{prefix}.decoder.rnn.weight_ih"][to_onnx], atol=1e-5)
        np.testing.assert_allclose(m.weights.R[0], inits[f"{prefix}.decoder.rnn.weight_hh"][to_onnx], atol=1e-5)
        bias = inits[f"{prefix}.decoder.rnn.bias_ih"] + inits[f"{prefix}.decoder.rnn.bias_hh"]
        np.testing.assert_allclose(m.weights.B[0, :512] + m.weights.B[0, 512:], bias[to_onnx], atol=1e-5)


def test_lstm_with_hard_sigmoid_gates_keeps_their_alpha_and_beta():
    model, exp = cm.lstm_cell(gate_act="HardSigmoid", order="keras", proj="joint")
    m = _only(_scan(model, ["h0", "c0"]), "LSTM")
    _check_weights(m, exp)
    assert m.weights.activations == ("HardSigmoid", "Tanh", "Tanh")
    assert m.weights.activation_alpha == pytest.approx((0.25,)) and m.weights.activation_beta == pytest.approx((0.45,))
    _assert_same_as_onnx_op(model, m, exp, packed=False)


def test_lstm_whose_gates_use_different_activations_is_a_candidate():
    model, _ = cm.lstm_cell(gate_act="HardSigmoid", mutant="mixed_gates")
    scan = _scan(model, ["h0", "c0"])
    assert scan.matches == [] and "different activations" in scan.candidates[0].reason
