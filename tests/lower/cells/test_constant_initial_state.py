"""Cells written as plain ops that start from zeros the model makes (mutation survivors of rnnir/lower/cells.py):
h' = tanh(W x + R h0 + b) with h0 zeros from a Constant node, a ConstantOfShape or an initializer is an RNN cell
that starts afresh on every call (SD010); h0 a non-zero constant is a bias, no state. The cell is written here by
hand, so what it computes is known."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import rnnir
from rnnir import passes

H, I = 4, 3


def cell(h0_from: str, value: float = 0.0):
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32), "R"),
        numpy_helper.from_array(np.zeros(H, np.float32), "b"),
    ]
    nodes = []
    if h0_from == "Constant":
        nodes.append(helper.make_node("Constant", [], ["h0"], value=numpy_helper.from_array(np.full((1, H), value, np.float32))))
    elif h0_from == "ConstantOfShape":
        inits.append(numpy_helper.from_array(np.array([1, H], np.int64), "shape"))
        nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["h0"], value=numpy_helper.from_array(np.full(1, value, np.float32))))
    else:
        inits.append(numpy_helper.from_array(np.full((1, H), value, np.float32), "h0"))
    nodes += [
        helper.make_node("Gemm", ["x", "W", "b"], ["gx"], transB=1),
        helper.make_node("Gemm", ["h0", "R"], ["gh"], transB=1),
        helper.make_node("Add", ["gx", "gh"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["hn"], name="act"),
    ]
    graph = helper.make_graph(nodes, "c", [helper.make_tensor_value_info("x", 1, [1, I])], [helper.make_tensor_value_info("hn", 1, [1, H])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("h0_from", ["Constant", "ConstantOfShape", "initializer"])
def test_a_cell_starting_from_zeros_the_model_makes_is_recognised_and_starts_afresh(h0_from):
    prog = rnnir.load(cell(h0_from))
    assert [(r.kind, r.hidden_size) for r in prog.recurrents] == [("RNN", H)]
    assert [d.code for d in passes.run(prog)] == ["SD010"]


@pytest.mark.parametrize("h0_from", ["Constant", "ConstantOfShape", "initializer"])
def test_a_non_zero_constant_in_the_place_of_the_state_is_a_bias_not_a_state(h0_from):
    prog = rnnir.load(cell(h0_from, value=0.5))
    assert prog.recurrents == []
    assert [d.code for d in passes.run(prog)] == ["SD009"]  # nothing to verify, said as information


@pytest.mark.parametrize("near_miss", ["tanh_cprev", "gate_tanh", "c_through_matmul"])
@pytest.mark.parametrize("real_first", [True, False])
def test_a_cell_beside_a_near_miss_is_one_recurrence_and_one_candidate(near_miss, real_first):
    # two LSTM-shaped structures on separate states in one graph: each keeps its own verdict whatever the order

    from onnx import compose

    from tests.support import cell_models as cm

    real, _ = cm.lstm_cell()
    fake, _ = cm.lstm_cell(mutant=near_miss)
    first, second = (real, fake) if real_first else (fake, real)
    m = compose.merge_models(compose.add_prefix(first, "a_"), compose.add_prefix(second, "b_"), io_map=[])
    prog = rnnir.load(m)
    real_prefix, fake_prefix = ("a_", "b_") if real_first else ("b_", "a_")
    assert [(r.kind, r.provenance.node[:2]) for r in prog.recurrents] == [("LSTM", real_prefix)]
    (candidate,) = prog.recurrence_candidates
    assert f"node '{fake_prefix}" in candidate.reason


# -----------------------------------------------------------------------------------------------------------------
# Cells built op by op for the recogniser's edge cases (mutation survivors of rnnir/lower/cells.py). find_cells is
# called directly on tiny models, so each case runs in milliseconds; the expected weights are the arrays the test
# put into the model, and bounds (24 ops from the outputs, 3 views before a read) are counted by hand.
# -----------------------------------------------------------------------------------------------------------------

from onnx import TensorProto  # noqa: E402

from rnnir.lower.cells import CellScan, find_cells  # noqa: E402
from rnnir.lower.scope import ModelIndex  # noqa: E402

F = TensorProto.FLOAT


class Net:
    """A graph built node by node: initializers from arrays, inputs and outputs by name."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.inputs: list = []
        self.outputs: list[str] = []
        self.n = 0

    def input(self, name: str, shape, dtype: int = F) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def const(self, arr, name: str | None = None) -> str:
        self.n += 1
        name = name or f"k{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op: str, ins: list[str], out: str | None = None, domain: str = "", n_out: int = 1, **attrs):
        self.n += 1
        outs = [out or f"{op.lower()}{self.n}"] if n_out == 1 else [f"{op.lower()}{self.n}_{j}" for j in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=f"n_{outs[0]}", domain=domain or None, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, outputs: list[str] | None = None):
        outs = [helper.make_tensor_value_info(o, F, None) for o in (outputs or self.outputs)]
        graph = helper.make_graph(self.nodes, "g", self.inputs, outs, self.inits)
        opsets = [helper.make_opsetid("", 18)]
        if any(n.domain for n in self.nodes):
            opsets.append(helper.make_opsetid("custom.test", 1))
        m = helper.make_model(graph, opset_imports=opsets)
        m.ir_version = 9
        return m


def scan(model, sources=()) -> tuple[CellScan, ModelIndex]:
    index = ModelIndex(model, "test")
    return find_cells(index, [(index.root, s) for s in sources]), index


def f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


RNG = np.random.default_rng(11)
W4 = f32(RNG.standard_normal((H, I)) * 0.5)  # h' = tanh(x W4^T + h R4^T + b4)
R4 = f32(RNG.standard_normal((H, H)) * 0.5)
B4 = f32(RNG.standard_normal(H) * 0.3)


def rnn_step(g: Net, x: str, h: str, W=W4, R=R4, b=B4, out: str | None = None, act: str = "Tanh") -> str:
    gx = g.op("Gemm", [x, g.const(f32(W)), g.const(f32(b))], transB=1)
    gh = g.op("MatMul", [h, g.const(f32(R).T.copy())])
    return g.op(act, [g.op("Add", [gx, gh])], out=out)


# -- which constants are the zeros a cell starts from (CellScan.is_zero_start) ------------------------------------


def zero_reader(make, read: str = "matmul", views: int = 0):
    """A model where ``make(g)`` makes the value 'z', read by ``read`` after ``views`` Identity ops; x is run-time data."""
    g = Net()
    x = g.input("x", [1, H])
    z = make(g)
    v = z
    for _ in range(views):
        v = g.op("Identity", [v])
    if read == "matmul":
        y = g.op("MatMul", [v, g.const(f32(R4))])
        y = g.op("Add", [y, x])
    elif read == "matmul_weight":
        y = g.op("MatMul", [x, v])
    elif read == "mul_second":
        y = g.op("Mul", [x, v])
    elif read == "concat_second":
        y = g.op("Concat", [x, v], axis=1)
    elif read == "squeeze_gemm":
        y = g.op("Gemm", [g.op("Squeeze", [v, g.const(np.array([0], np.int64))]), g.const(f32(R4))])
        y = g.op("Add", [y, x])
    elif read == "custom":
        y = g.op("Mul", [v, x], domain="custom.test")
    else:
        y = g.op("Relu", [v])
    return g.model([y])


def initializer(arr):
    return lambda g: g.const(arr, "z")


def zero_start(model) -> bool:
    s, index = scan(model)
    return s.is_zero_start(index.root, "z")


# One test function per case (not a parametrized table): these lines run for every model, and a mutation run tries
# only one parametrization of each covering test function before its time budget is spent.

Z = np.zeros((1, H), np.float32)


def test_zeros_read_as_a_matmuls_data_are_a_zero_start():
    assert zero_start(zero_reader(initializer(Z), "matmul"))


def test_zeros_read_as_a_matmuls_weight_are_not_a_state():
    assert not zero_start(zero_reader(initializer(Z), "matmul_weight"))


def test_zeros_multiplied_as_the_second_operand_are_a_zero_start():
    assert zero_start(zero_reader(initializer(Z), "mul_second"))


def test_zeros_concatenated_after_the_input_are_a_zero_start():
    assert zero_start(zero_reader(initializer(Z), "concat_second"))  # Concat(x, zeros): the joint matmul's h


def test_zeros_read_by_no_product_nor_concatenation_are_not_a_state():
    assert not zero_start(zero_reader(initializer(Z), "relu"))


def test_zeros_read_by_another_domains_mul_are_not_a_state():
    assert not zero_start(zero_reader(initializer(Z), "custom"))


def test_zeros_squeezed_before_a_gemm_are_a_zero_start():
    assert zero_start(zero_reader(initializer(np.zeros((1, 1, H), np.float32)), "squeeze_gemm"))


def test_zeros_read_after_three_views_are_a_zero_start():
    assert zero_start(zero_reader(initializer(Z), "matmul", views=3))  # three views and the read: four hops


def test_zeros_read_after_four_views_are_not_looked_for():
    assert not zero_start(zero_reader(initializer(Z), "matmul", views=4))


def test_negative_zeros_are_zeros():
    assert zero_start(zero_reader(initializer(np.full((1, H), -0.0, np.float32))))


def test_double_zeros_are_a_zero_start():
    assert zero_start(zero_reader(initializer(np.zeros((1, H), np.float64))))


def test_half_zeros_are_a_zero_start():
    assert zero_start(zero_reader(initializer(np.zeros((1, H), np.float16))))


def test_half_with_one_non_zero_is_not_zeros():
    assert not zero_start(zero_reader(initializer(np.array([[0, 0, 0, 1e-3]], np.float16))))


def test_double_with_one_tiny_non_zero_is_not_zeros():
    assert not zero_start(zero_reader(initializer(np.array([[0, 0, 1e-30, 0]], np.float64))))


def test_float_with_one_tiny_non_zero_is_not_zeros():
    assert not zero_start(zero_reader(initializer(np.array([[0, 0, 0, 1e-30]], np.float32))))


def test_float_zeros_given_as_float_data_are_a_zero_start():
    def make(g):
        g.inits.append(helper.make_tensor("z", F, [1, H], [0.0] * H))  # float_data, not raw bytes
        return "z"

    assert zero_start(zero_reader(make))


def test_float_data_with_a_non_zero_is_not_zeros():
    def make(g):
        g.inits.append(helper.make_tensor("z", F, [1, H], [0.0, 0.0, 0.5, 0.0]))
        return "z"

    assert not zero_start(zero_reader(make))


def test_rank_one_zeros_are_a_bias_not_a_state():
    assert not zero_start(zero_reader(initializer(np.zeros(H, np.float32))))


def test_empty_zeros_are_not_a_state():
    assert not zero_start(zero_reader(initializer(np.zeros((0, H), np.float32))))


def test_int64_zeros_concatenated_with_data_pad_a_signal():
    assert not zero_start(zero_reader(initializer(np.zeros((1, H), np.int64)), "concat_second"))


def _constant_node(**attrs):
    return lambda g: g.op("Constant", [], out="z", **attrs)


def _constant_of_shape(shape, value=None, domain=""):
    def make(g):
        attrs = {} if value is None else {"value": numpy_helper.from_array(np.asarray(value))}
        return g.op("ConstantOfShape", [g.const(np.array(shape, np.int64))], out="z", domain=domain, **attrs)

    return make


def _constant_of_shape_from_constant(shape):
    def make(g):
        s = g.op("Constant", [], value=numpy_helper.from_array(np.array(shape, np.int64)))
        return g.op("ConstantOfShape", [s], out="z")

    return make


def test_a_constant_node_of_zeros_is_a_zero_start():
    assert zero_start(zero_reader(_constant_node(value=numpy_helper.from_array(Z))))


def test_a_constant_node_with_a_non_zero_is_not_zeros():
    assert not zero_start(zero_reader(_constant_node(value=numpy_helper.from_array(np.array([[0, 2, 0, 0]], np.float32)))))


def test_a_constant_node_of_int_zeros_is_not_a_state():
    assert not zero_start(zero_reader(_constant_node(value=numpy_helper.from_array(np.zeros((1, H), np.int32)))))


def test_a_constant_node_of_a_float_vector_is_not_a_state():
    assert not zero_start(zero_reader(_constant_node(value_floats=[0.0] * H)))


def test_a_constant_node_of_a_float_scalar_is_not_a_state():
    assert not zero_start(zero_reader(_constant_node(value_float=0.0)))


def test_constant_of_shape_without_a_value_is_float_zeros():
    assert zero_start(zero_reader(_constant_of_shape([1, H])))


def test_constant_of_shape_filled_with_float_zero_is_a_zero_start():
    assert zero_start(zero_reader(_constant_of_shape([1, H], np.zeros(1, np.float32))))


def test_constant_of_shape_filled_with_double_zero_is_a_zero_start():
    assert zero_start(zero_reader(_constant_of_shape([1, H], np.zeros(1, np.float64))))


def test_constant_of_shape_filled_with_one_is_not_zeros():
    assert not zero_start(zero_reader(_constant_of_shape([1, H], np.ones(1, np.float32))))


def test_constant_of_shape_filled_with_int64_zero_is_not_a_state():
    assert not zero_start(zero_reader(_constant_of_shape([1, H], np.zeros(1, np.int64))))


def test_constant_of_shape_of_rank_one_is_not_a_state():
    assert not zero_start(zero_reader(_constant_of_shape([H], np.zeros(1, np.float32))))


def test_constant_of_shape_without_elements_is_not_a_state():
    assert not zero_start(zero_reader(_constant_of_shape([0, H], np.zeros(1, np.float32))))


def test_another_domains_constant_of_shape_is_not_a_state():
    assert not zero_start(zero_reader(_constant_of_shape([1, H], np.zeros(1, np.float32), domain="custom.test")))


def test_constant_of_shape_with_its_shape_from_a_constant_node_is_a_zero_start():
    assert zero_start(zero_reader(_constant_of_shape_from_constant([1, H])))


def test_constant_of_shape_with_a_rank_one_shape_from_a_constant_node_is_not_a_state():
    assert not zero_start(zero_reader(_constant_of_shape_from_constant([H])))


def test_zeros_expanded_to_batch_by_hidden_are_a_zero_start():
    def make(g):
        return g.op("Expand", [g.const(np.zeros((1, 1), np.float32)), g.const(np.array([1, H], np.int64))], out="z")

    assert zero_start(zero_reader(make))


def test_a_scan_without_a_model_has_no_zero_start_and_an_empty_name_is_none():
    model = zero_reader(initializer(np.zeros((1, H), np.float32)))
    s, index = scan(model)
    assert s.is_zero_start(index.root, "z") is True
    assert s.is_zero_start(index.root, "") is False
    assert CellScan().is_zero_start(index.root, "z") is False
    assert CellScan().const(index.root, "z") is None and CellScan().view_source(index.root, "z") is None


# -- how far from the outputs zeros are looked for -----------------------------------------------------------------


def zero_start_rnn(identities: int, second_far: int = 0):
    """h' = tanh(x W^T + b + z R^T) from zeros z, then ``identities`` Identity ops to the output: z is 3 + identities
    ops back. ``second_far``: a second cell on the same zeros whose output is that many Identity ops from its own."""
    g = Net()
    x = g.input("x", [1, I])
    z = g.const(np.zeros((1, H), np.float32), "z")
    v = rnn_step(g, x, z)
    for _ in range(identities):
        v = g.op("Identity", [v])
    outs = [v]
    if second_far:
        w = rnn_step(g, x, z, W=W4 * 2, R=R4 * 2)
        for _ in range(second_far):
            w = g.op("Identity", [w])
        outs.append(w)
    return g.model(outs)


def test_zeros_24_ops_back_from_the_output_start_a_cell():
    near, index = scan(zero_start_rnn(21))  # z is 3 + 21 = 24 ops back
    assert [(m.kind, m.h_source) for m in near.matches] == [("RNN", "z")]
    assert near.is_zero_start(index.root, "z")


def test_zeros_25_ops_back_from_the_output_are_out_of_reach():
    far, index = scan(zero_start_rnn(22))
    assert far.matches == [] and not far.is_zero_start(index.root, "z")


def test_a_cell_on_the_same_zeros_but_far_from_every_output_is_not_scanned():
    # the zeros' cone stays inside the region near the outputs: the second cell, 30 ops from its output, is outside
    (m,) = scan(zero_start_rnn(0, second_far=30))[0].matches
    np.testing.assert_allclose(m.weights.W[0], W4, atol=1e-5)


def test_a_second_cell_on_the_same_zeros_near_an_output_is_scanned():
    both = scan(zero_start_rnn(0, second_far=2))[0].matches
    assert sorted(round(float(m.weights.W[0, 0, 0] / W4[0, 0])) for m in both) == [1, 2]


def test_a_deep_chain_of_diamonds_before_the_output_is_walked_once_per_value():
    # v_{k+1} = v_k + v_k, 40 times: each value is visited once (a walk that revisits would take 2**24 steps)
    g = Net()
    v = g.input("x", [1, H])
    for _ in range(40):
        v = g.op("Add", [v, v])
    s, index = scan(g.model([v]), ["x"])
    assert s.matches == [] and s.candidates == []


# -- the recogniser's role tests are ONNX ops: another domain's op of the same name is not one ------------------------


def test_a_cell_whose_gates_are_another_domains_sigmoid_is_not_an_lstm():
    model, _ = __import__("tests.support.cell_models", fromlist=["lstm_cell"]).lstm_cell()
    for n in model.graph.node:
        if n.op_type == "Sigmoid":
            n.domain = "custom.test"
    model.opset_import.append(helper.make_opsetid("custom.test", 1))
    s, _ = scan(model, ["h0", "c0"])
    assert s.matches == [] and [c.kind for c in s.candidates if c.kind == "LSTM"] == []


# -- GRU cells written by hand: reset before or after the matmul, batch 1 or 2, gate activations ---------------------

GW = {k: f32(RNG.standard_normal((H, I)) * 0.5) for k in "zrn"}
GR = {k: f32(RNG.standard_normal((H, H)) * 0.5) for k in "zrn"}
GBW = {k: f32(RNG.standard_normal(H) * 0.3) for k in "zrn"}
GBR = {k: f32(RNG.standard_normal(H) * 0.3) for k in "zrn"}


def gru(lbr: int = 1, batch: int = 1, gate: str = "Sigmoid", gate_attrs: dict | None = None, reset_operand: str = "matmul"):
    """ONNX GRU semantics, one gate per Gemm: z, r = gate(x Wg^T + bWg + h Rg^T + bRg);
    lbr 1: n = tanh(x Wn^T + bWn + r * (h Rn^T + bRn)); lbr 0: n = tanh(x Wn^T + bWn + (r * h) Rn^T + bRn); h' = (1-z)*n + z*h."""
    g = Net()
    x = g.input("x", [batch, I])
    h = g.input("h0", [batch, H])

    def lin(v, Wm, b):
        return g.op("Gemm", [v, g.const(f32(Wm)), g.const(f32(b))], transB=1)

    acts = {}
    for k in "zr":
        acts[k] = g.op(gate, [g.op("Add", [lin(x, GW[k], GBW[k]), lin(h, GR[k], GBR[k])])], **(gate_attrs or {}))
    if lbr:
        hn = lin(h, GR["n"], GBR["n"])
        gated = g.op("Mul", [acts["r"], hn] if reset_operand == "matmul" else [hn, acts["r"]])
    else:
        gated = lin(g.op("Mul", [acts["r"], h]), GR["n"], GBR["n"])
    n = g.op("Tanh", [g.op("Add", [lin(x, GW["n"], GBW["n"]), gated])])
    one = g.const(np.array(1.0, np.float32))
    h_new = g.op("Add", [g.op("Mul", [g.op("Sub", [one, acts["z"]]), n]), g.op("Mul", [acts["z"], h])], out="hn")
    return g.model([h_new])


def gru_expected_bias() -> np.ndarray:
    """B as ONNX's GRU takes it, [Wb_z Wb_r Wb_n Rb_z Rb_r Rb_n], for linear_before_reset 1: the model fixes only the sum
    of z's and r's two halves (given whole as the input half), and n's two halves apart (Rb_n sits inside the reset product)."""
    return np.concatenate([GBW[k] + GBR[k] for k in "zr"] + [GBW["n"]] + [np.zeros(H)] * 2 + [GBR["n"]])


def check_gru(lbr: int, batch: int) -> None:
    s, _ = scan(gru(lbr=lbr, batch=batch), ["h0"])
    assert not s.candidates
    (m,) = s.matches
    assert (m.kind, m.h_in, m.h_out, m.hidden_size, m.x) == ("GRU", "h0", "hn", H, ("x",))
    w = m.weights
    assert w.linear_before_reset == lbr and w.activations == ("Sigmoid", "Tanh")
    assert w.activation_alpha is None and w.activation_beta is None
    np.testing.assert_allclose(w.W[0], np.concatenate([GW[k] for k in "zrn"]), atol=1e-5)
    np.testing.assert_allclose(w.R[0], np.concatenate([GR[k] for k in "zrn"]), atol=1e-5)
    if lbr:
        np.testing.assert_allclose(w.B[0], gru_expected_bias(), atol=1e-5)
    else:  # r multiplies h before Rn: bWn and bRn add up outside the product, only their sum is fixed
        halves = w.B[0, : 3 * H] + w.B[0, 3 * H :]
        np.testing.assert_allclose(halves, np.concatenate([GBW[k] + GBR[k] for k in "zrn"]), atol=1e-5)


def test_a_gru_resetting_after_the_matmul_gives_back_its_weights():
    check_gru(lbr=1, batch=1)


def test_a_gru_resetting_before_the_matmul_gives_back_its_weights():
    check_gru(lbr=0, batch=1)


def test_a_gru_with_a_fixed_batch_of_two_resetting_after_the_matmul_gives_back_its_weights():
    check_gru(lbr=1, batch=2)


def test_a_gru_with_a_fixed_batch_of_two_resetting_before_the_matmul_gives_back_its_weights():
    check_gru(lbr=0, batch=2)


def test_a_gru_with_the_reset_product_written_the_other_way_round_is_the_same_cell():
    s, _ = scan(gru(reset_operand="other"), ["h0"])
    (m,) = s.matches
    np.testing.assert_allclose(m.weights.B[0], gru_expected_bias(), atol=1e-5)


def test_a_gru_with_hard_sigmoid_gates_keeps_their_alpha_and_beta():
    s, _ = scan(gru(gate="HardSigmoid", gate_attrs={"alpha": 0.25, "beta": 0.45}), ["h0"])
    (m,) = s.matches
    assert m.weights.activations == ("HardSigmoid", "Tanh")
    assert m.weights.activation_alpha == pytest.approx((0.25,)) and m.weights.activation_beta == pytest.approx((0.45,))
    np.testing.assert_allclose(m.weights.R[0], np.concatenate([GR[k] for k in "zrn"]), atol=1e-5)


# -- what the affine walk takes through: divisions by constants, projections of x, and nothing else -----------------


def rnn_model(pre_of=None, x_of=None, x_width: int = I, extra_inputs=()):
    """h' = tanh(pre) with pre = gx + h R^T, gx = Gemm(x_of(g, x)) by default; ``pre_of(g, pre)`` rewrites pre."""
    g = Net()
    x = g.input("x", [1, x_width])
    for name, shape, dtype in extra_inputs:
        g.input(name, shape, dtype)
    h = g.input("h0", [1, H])
    gx = x_of(g, x) if x_of else g.op("Gemm", [x, g.const(W4), g.const(B4)], transB=1)
    pre = g.op("Add", [gx, g.op("MatMul", [h, g.const(R4.T.copy())])])
    if pre_of:
        pre = pre_of(g, pre)
    return g.model([g.op("Tanh", [pre], out="hn")])


def test_a_pre_activation_divided_by_a_constant_is_an_rnn_with_scaled_weights():
    s, _ = scan(rnn_model(pre_of=lambda g, p: g.op("Div", [p, g.const(np.array(2.0, np.float32))])), ["h0"])
    (m,) = s.matches
    np.testing.assert_allclose(m.weights.W[0], W4 / 2, atol=1e-5)
    np.testing.assert_allclose(m.weights.R[0], R4 / 2, atol=1e-5)
    np.testing.assert_allclose(m.weights.B[0, :H], B4 / 2, atol=1e-5)


def test_a_constant_divided_by_the_pre_activation_is_not_affine():
    s, _ = scan(rnn_model(pre_of=lambda g, p: g.op("Div", [g.const(np.array(2.0, np.float32)), p])), ["h0"])
    assert s.matches == []


def test_a_pre_activation_scaled_by_a_constant_is_an_rnn_with_scaled_weights():
    s, _ = scan(rnn_model(pre_of=lambda g, p: g.op("Mul", [g.const(np.array(0.5, np.float32)), p])), ["h0"])
    (m,) = s.matches
    np.testing.assert_allclose(m.weights.R[0], R4 / 2, atol=1e-5)


def test_an_input_plus_a_constant_is_the_cells_input_not_walked_through():
    # only a constant-weight projection of x is walked back to x; x + c is the input itself, W the identity
    c = f32(RNG.standard_normal(H))
    s, _ = scan(rnn_model(x_of=lambda g, x: g.op("Add", [x, g.const(c)], out="xc"), x_width=H), ["h0"])
    (m,) = s.matches
    assert m.x == ("xc",)
    np.testing.assert_allclose(m.weights.W[0], np.eye(H), atol=1e-6)
    np.testing.assert_allclose(m.weights.B[0], 0, atol=1e-6)


def test_a_projection_of_x_plus_a_constant_is_walked_back_to_x():
    c = f32(RNG.standard_normal(H))
    s, _ = scan(rnn_model(x_of=lambda g, x: g.op("Add", [g.op("MatMul", [x, g.const(W4.T.copy())]), g.const(c)])), ["h0"])
    (m,) = s.matches
    assert m.x == ("x",)
    np.testing.assert_allclose(m.weights.W[0], W4, atol=1e-5)
    np.testing.assert_allclose(m.weights.B[0, :H], c, atol=1e-5)


def test_a_projection_with_a_run_time_bias_is_the_cells_input():
    s, _ = scan(rnn_model(x_of=lambda g, x: g.op("Gemm", [x, g.const(W4), "bias"], out="gx", transB=1), extra_inputs=[("bias", [H], F)]), ["h0"])
    (m,) = s.matches
    assert m.x == ("gx",)
    np.testing.assert_allclose(m.weights.W[0], np.eye(H), atol=1e-6)


def test_a_projection_with_a_constant_bias_is_walked_back_to_x():
    s, _ = scan(rnn_model(), ["h0"])
    (m,) = s.matches
    assert m.x == ("x",)
    np.testing.assert_allclose(m.weights.W[0], W4, atol=1e-5)
    np.testing.assert_allclose(m.weights.B[0, :H] + m.weights.B[0, H:], B4, atol=1e-5)


def test_a_projection_gathered_with_a_run_time_index_is_the_cells_input():
    def x_of(g, x):
        wide = g.op("MatMul", [x, g.const(np.concatenate([W4, W4 * 3]).T.copy())])
        return g.op("Gather", [wide, "idx"], out="picked", axis=1)

    s, _ = scan(rnn_model(x_of=x_of, extra_inputs=[("idx", [H], TensorProto.INT64)]), ["h0"])
    (m,) = s.matches
    assert m.x == ("picked",)


def test_a_projection_gathered_with_a_constant_index_is_walked_back_to_x():
    def x_of(g, x):
        wide = g.op("MatMul", [x, g.const(np.concatenate([W4 * 3, W4]).T.copy())])
        return g.op("Gather", [wide, g.const(np.arange(H, 2 * H, dtype=np.int64))], axis=1)

    s, _ = scan(rnn_model(x_of=x_of), ["h0"])
    (m,) = s.matches
    assert m.x == ("x",)
    np.testing.assert_allclose(m.weights.W[0], W4, atol=1e-5)


# -- the steps of an unrolled loop: a cell that reads another cell's output as its state must be the same cell -------


def two_rnn_steps(**second):
    g = Net()
    x1 = g.input("x1", [1, I])
    x2 = g.input("x2", [1, second.pop("I", I)])
    h = g.input("h0", [1, H])
    h1 = rnn_step(g, x1, h, out="h1")
    h2 = rnn_step(g, x2, h1, out="h2", **second)
    return g.model([h2])


def test_two_steps_of_one_rnn_cell_are_two_matches_threaded_h_to_h():
    s, _ = scan(two_rnn_steps(), ["h0"])
    assert [(m.h_in, m.h_out) for m in s.matches] == [("h0", "h1"), ("h1", "h2")]


def only_the_first_step(s) -> None:
    assert [(m.h_in, m.h_out) for m in s.matches] == [("h0", "h1")]
    assert s.candidates == []


def test_a_second_step_with_another_input_weight_is_not_a_step_of_the_first_cell():
    only_the_first_step(scan(two_rnn_steps(W=W4 * 1.5), ["h0"])[0])


def test_a_second_step_with_another_recurrent_weight_is_not_a_step_of_the_first_cell():
    only_the_first_step(scan(two_rnn_steps(R=R4 * 1.5), ["h0"])[0])


def test_a_second_step_with_another_bias_is_not_a_step_of_the_first_cell():
    only_the_first_step(scan(two_rnn_steps(b=B4 + 0.5), ["h0"])[0])


def test_a_second_step_with_a_wider_input_is_not_a_step_of_the_first_cell():
    only_the_first_step(scan(two_rnn_steps(I=I + 2, W=np.ones((H, I + 2), np.float32)), ["h0"])[0])


def bias_behind(depth: int):
    """The RNN of rnn_model with a bias 0.25 added ``depth`` Identity ops after its initializer."""

    def pre_of(g, p):
        b = g.const(f32(np.full(H, 0.25)))
        for _ in range(depth):
            b = g.op("Identity", [b])
        return g.op("Add", [p, b])

    return rnn_model(pre_of=pre_of)


def test_a_bias_folded_through_64_ops_is_a_constant_of_the_cell():
    # constants are folded at most 64 ops deep (a bound against runaway recursion)
    (m,) = scan(bias_behind(64), ["h0"])[0].matches
    assert m.x == ("x",)
    np.testing.assert_allclose(m.weights.B[0, :H] + m.weights.B[0, H:], B4 + 0.25, atol=1e-5)


def test_a_bias_65_ops_after_its_initializer_is_read_as_an_input():
    (far,) = scan(bias_behind(65), ["h0"])[0].matches
    assert len(far.x) == 2 and "x" in far.x


# -- LSTM cells written by hand: the roles of the four gates, and structures that are not an LSTM ---------------------

LW = {k: f32(RNG.standard_normal((H, I)) * 0.5) for k in "iofg"}
LR = {k: f32(RNG.standard_normal((H, H)) * 0.5) for k in "iofg"}
LB = {k: f32(RNG.standard_normal(H) * 0.3) for k in "iofg"}


def lstm_step(g: Net, x: str, h: str | None, c: str, scale: float = 1.0, acts: str = "SSST", peephole: bool = False, same_gate: bool = False, tag: str = ""):
    """c' = f*c + i*g, h' = o*tanh(c') with gate k = act_k(x Wk^T + h Rk^T + bk) (no h term when h is None);
    acts gives i, o, f, g's activations (S Sigmoid, T Tanh); peephole adds c*0.5 to i's pre-activation;
    same_gate uses f's sigmoid as the input gate too. Returns (h', c')."""
    pre = {}
    for k in "iofg":
        p = g.op("Gemm", [x, g.const(LW[k] * scale), g.const(LB[k])], transB=1)
        if h is not None:
            p = g.op("Add", [p, g.op("MatMul", [h, g.const(LR[k].T.copy())])])
        if peephole and k == "i":
            p = g.op("Add", [p, g.op("Mul", [c, g.const(np.float32(0.5))])])
        pre[k] = p
    act = {k: g.op({"S": "Sigmoid", "T": "Tanh"}[a], [pre[k]]) for k, a in zip("iofg", acts)}
    if same_gate:
        act["i"] = act["f"]
    c_new = g.op("Add", [g.op("Mul", [act["f"], c]), g.op("Mul", [act["i"], act["g"]])], out=f"c{tag}")
    h_new = g.op("Mul", [act["o"], g.op("Tanh", [c_new])], out=f"h{tag}")
    return h_new, c_new


def lstm_model(steps: int = 1, second_scale: float = 1.0, with_h: bool = True, **kw):
    g = Net()
    xs = [g.input(f"x{t}", [1, I]) for t in range(steps)]
    h = g.input("h0", [1, H]) if with_h else None
    c = g.input("c0", [1, H])
    for t, x in enumerate(xs):
        h, c = lstm_step(g, x, h, c, scale=second_scale if t else 1.0, tag=str(t + 1), **kw)
    return g.model([h, c])


def test_an_lstm_cell_gives_back_its_weights_in_onnx_gate_order():
    s, _ = scan(lstm_model(), ["h0", "c0"])
    (m,) = s.matches
    assert (m.kind, m.h_in, m.c_in, m.h_out, m.c_out, m.x) == ("LSTM", "h0", "c0", "h1", "c1", ("x0",))
    np.testing.assert_allclose(m.weights.W[0], np.concatenate([LW[k] for k in "iofg"]), atol=1e-5)
    np.testing.assert_allclose(m.weights.R[0], np.concatenate([LR[k] for k in "iofg"]), atol=1e-5)
    np.testing.assert_allclose(m.weights.B[0, : 4 * H], np.concatenate([LB[k] for k in "iofg"]), atol=1e-5)
    assert m.weights.activations == ("Sigmoid", "Tanh", "Tanh")


def test_two_steps_of_one_lstm_cell_thread_h_and_c():
    s, _ = scan(lstm_model(steps=2), ["h0", "c0"])
    assert [(m.h_in, m.c_in, m.h_out, m.c_out) for m in s.matches] == [("h0", "c0", "h1", "c1"), ("h1", "c1", "h2", "c2")]


def test_a_second_lstm_step_with_other_weights_is_a_candidate_that_says_so():
    s, _ = scan(lstm_model(steps=2, second_scale=1.5), ["h0", "c0"])
    assert [(m.h_in, m.h_out) for m in s.matches] == [("h0", "h1")]
    (cand,) = s.candidates
    assert cand.kind == "LSTM" and "reads the output of another cell as its state" in cand.reason


def test_an_lstm_whose_input_gate_is_a_tanh_is_a_candidate_that_names_the_gate():
    s, _ = scan(lstm_model(acts="TSST"), ["h0", "c0"])
    assert s.matches == []
    assert [c.kind for c in s.candidates] == ["LSTM"] and "its input gate Tanh" in s.candidates[0].reason


def test_an_lstm_whose_output_gate_is_a_tanh_has_no_output_product():
    s, _ = scan(lstm_model(acts="STST"), ["h0", "c0"])
    assert s.matches == [] and [c.kind for c in s.candidates] == ["LSTM"]
    assert "has no output h' = o*tanh(c')" in s.candidates[0].reason


def test_one_sigmoid_gating_both_the_old_cell_state_and_the_candidate_is_not_an_lstm():
    s, _ = scan(lstm_model(same_gate=True), ["h0", "c0"])
    assert [m.kind for m in s.matches if m.kind == "LSTM"] == [] and [c.kind for c in s.candidates if c.kind == "LSTM"] == []


def test_an_lstm_with_a_peephole_is_a_candidate():
    s, _ = scan(lstm_model(peephole=True), ["h0", "c0"])
    assert s.matches == []
    assert [c.kind for c in s.candidates] == ["LSTM"] and "(peepholes or a swapped state)" in s.candidates[0].reason


def test_an_lstm_whose_gates_read_only_the_cell_state_is_a_candidate():
    s, _ = scan(lstm_model(with_h=False), ["c0"])
    assert s.matches == []
    assert [c.kind for c in s.candidates] == ["LSTM"] and "read no state input besides the cell state" in s.candidates[0].reason


def test_half_zeros_given_as_typed_values_are_a_zero_start():
    def make(g):
        g.inits.append(helper.make_tensor("z", TensorProto.FLOAT16, [1, H], np.zeros(H, np.float16)))  # int32_data bits
        return "z"

    assert zero_start(zero_reader(make))


def test_the_state_source_of_squeezed_zeros_is_the_zeros_not_the_squeeze():
    # the topmost zeros are the state; Squeeze(zeros), zeros too, is a view of them (docstring of _constant_states)
    g = Net()
    x = g.input("x", [1, I])
    z = g.const(np.zeros((1, 1, H), np.float32), "z")
    h = g.op("Squeeze", [z, g.const(np.array([0], np.int64))], out="h")
    s, index = scan(g.model([rnn_step(g, x, h)]))
    (m,) = s.matches
    assert (m.h_in, m.h_source) == ("h", "z")
    assert s.is_zero_start(index.root, "z") and not s.is_zero_start(index.root, "h")


def test_a_gru_whose_reset_product_meets_two_matrices_is_one_gru_with_their_sum():
    # n = tanh(x Wn^T + bWn + (r*h) A^T + (r*h) B^T + bRn): one reset gate read by two matmuls, Rn = A + B
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])

    def lin(v, Wm, b=None):
        return g.op("Gemm", [v, g.const(f32(Wm))] + ([g.const(f32(b))] if b is not None else []), transB=1)

    acts = {k: g.op("Sigmoid", [g.op("Add", [lin(x, GW[k], GBW[k]), lin(h, GR[k], GBR[k])])]) for k in "zr"}
    rh = g.op("Mul", [acts["r"], h])
    A = GR["n"] * 0.25
    n_pre = g.op("Add", [g.op("Add", [lin(x, GW["n"], GBW["n"]), lin(rh, A, GBR["n"])]), lin(rh, GR["n"] - A)])
    n = g.op("Tanh", [n_pre])
    one = g.const(np.array(1.0, np.float32))
    g.op("Add", [g.op("Mul", [g.op("Sub", [one, acts["z"]]), n]), g.op("Mul", [acts["z"], h])], out="hn")
    s, _ = scan(g.model(["hn"]), ["h0"])
    assert not s.candidates
    (m,) = s.matches
    assert m.weights.linear_before_reset == 0
    np.testing.assert_allclose(m.weights.R[0, 2 * H :], GR["n"], atol=1e-5)


def test_a_sigmoid_added_to_the_candidate_is_an_input_not_a_second_reset_gate():
    # n = tanh(x Wn^T + r*(h Rn^T) + s) with s = sigmoid(2 x Wn^T + bWn) added, not multiplied: one reset product,
    # and s (state-free) is a second input of the GRU whose weight is the identity in n's rows
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])

    def lin(v, Wm, b):
        return g.op("Gemm", [v, g.const(f32(Wm)), g.const(f32(b))], transB=1)

    acts = {k: g.op("Sigmoid", [g.op("Add", [lin(x, GW[k], GBW[k]), lin(h, GR[k], GBR[k])])]) for k in "zr"}
    extra = g.op("Sigmoid", [lin(x, GW["n"] * 2, GBW["n"])], out="s")
    n_pre = g.op("Add", [g.op("Add", [lin(x, GW["n"], GBW["n"]), g.op("Mul", [acts["r"], lin(h, GR["n"], GBR["n"])])]), extra])
    n = g.op("Tanh", [n_pre])
    one = g.const(np.array(1.0, np.float32))
    g.op("Add", [g.op("Mul", [g.op("Sub", [one, acts["z"]]), n]), g.op("Mul", [acts["z"], h])], out="hn")
    s, _ = scan(g.model(["hn"]), ["h0"])
    assert not s.candidates
    (m,) = s.matches
    assert sorted(m.x) == ["s", "x"]
    at = 0 if m.x[0] == "s" else I
    W = m.weights.W[0]
    np.testing.assert_allclose(W[2 * H :, at : at + H], np.eye(H), atol=1e-5)
    np.testing.assert_allclose(W[: 2 * H, at : at + H], 0, atol=1e-5)


# -- cells without a batch axis: x [I], h [H] (probed one vector at a time, since no leaf has a leading 1) ----------


def test_an_rnn_cell_without_a_batch_axis_gives_back_its_weights():
    g = Net()
    x = g.input("x", [I])
    h = g.input("h0", [H])
    gx = g.op("Add", [g.op("MatMul", [x, g.const(W4.T.copy())]), g.const(B4)])
    g.op("Tanh", [g.op("Add", [gx, g.op("MatMul", [h, g.const(R4.T.copy())])])], out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    assert (m.kind, m.x, m.h_in, m.h_out, m.x_shapes) == ("RNN", ("x",), "h0", "hn", ((I,),))
    np.testing.assert_allclose(m.weights.W[0], W4, atol=1e-5)
    np.testing.assert_allclose(m.weights.R[0], R4, atol=1e-5)


def test_an_lstm_cell_without_a_batch_axis_gives_back_its_weights():
    g = Net()
    x = g.input("x", [I])
    h = g.input("h0", [H])
    c = g.input("c0", [H])
    pre = {k: g.op("Add", [g.op("Add", [g.op("MatMul", [x, g.const(LW[k].T.copy())]), g.const(LB[k])]), g.op("MatMul", [h, g.const(LR[k].T.copy())])]) for k in "iofg"}
    act = {k: g.op("Tanh" if k == "g" else "Sigmoid", [pre[k]]) for k in "iofg"}
    c_new = g.op("Add", [g.op("Mul", [act["f"], c]), g.op("Mul", [act["i"], act["g"]])], out="cn")
    g.op("Mul", [act["o"], g.op("Tanh", [c_new])], out="hn")
    (m,) = scan(g.model(["hn", "cn"]), ["h0", "c0"])[0].matches
    assert (m.kind, m.h_out, m.c_out) == ("LSTM", "hn", "cn")
    np.testing.assert_allclose(m.weights.R[0], np.concatenate([LR[k] for k in "iofg"]), atol=1e-5)


def test_an_rnn_whose_new_state_is_scaled_by_a_constant_is_still_an_rnn():
    # a product with a constant is no gate: only a run-time factor makes tanh(...) part of a larger cell
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    hn = rnn_step(g, x, h, out="hn")
    g.op("Mul", [hn, g.const(np.float32(0.5))], out="y")
    (m,) = scan(g.model(["hn", "y"]), ["h0"])[0].matches
    assert (m.kind, m.h_out) == ("RNN", "hn")


def test_an_rnn_whose_new_state_is_gated_by_a_run_time_value_is_not_an_rnn():
    g = Net()
    x = g.input("x", [1, I])
    gate = g.input("gate", [1, H])
    h = g.input("h0", [1, H])
    hn = rnn_step(g, x, h, out="hn")
    g.op("Mul", [hn, gate], out="y")
    s = scan(g.model(["y"]), ["h0"])[0]
    assert s.matches == [] and s.candidates == []


def test_a_pre_activation_rounded_through_an_integer_cast_is_refused_by_execution():
    # Cast is walked as linear, so tanh(round(W x + R h + b)) passes the structure tests; the probes read rounded
    # weights, and only the check on random data shows the cell is not an RNN
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    gx = g.op("Gemm", [x, g.const(W4), g.const(B4)], transB=1)
    pre = g.op("Add", [gx, g.op("MatMul", [h, g.const(R4.T.copy())])])
    rounded = g.op("Cast", [g.op("Cast", [pre], to=TensorProto.INT32)], to=TensorProto.FLOAT)
    g.op("Tanh", [rounded], out="hn")
    s = scan(g.model(["hn"]), ["h0"])[0]
    assert s.matches == []
    (cand,) = s.candidates
    assert cand.kind == "RNN" and "does not compute an RNN cell" in cand.reason


# -- state carried into a Loop or Scan body ------------------------------------------------------------------------

from rnnir.lower.cells import carry_layout  # noqa: E402


def test_carry_layout_of_a_loop_scan_and_other_nodes():
    # (number carried, first carried node input, first carried body input, first carried body output, first node output)
    assert carry_layout(helper.make_node("Loop", ["M", "cond", "a", "b"], ["a2", "b2"])) == (2, 2, 2, 1, 0)
    assert carry_layout(helper.make_node("Loop", ["M", ""], [])) == (0, 2, 2, 1, 0)
    assert carry_layout(helper.make_node("Scan", ["h", "c", "x"], ["h2", "c2", "y"], num_scan_inputs=1)) == (2, 0, 0, 0, 0)
    assert carry_layout(helper.make_node("Scan", ["h", "x", "y"], ["h2", "a", "b"], num_scan_inputs=2)) == (1, 0, 0, 0, 0)
    assert carry_layout(helper.make_node("Loop", ["M", "cond", "a"], ["a2"], domain="custom.test")) is None
    assert carry_layout(helper.make_node("If", ["cond"], ["y"])) is None


def test_a_loop_carrying_h_and_c_maps_each_body_input_to_its_slot():
    from tests.support import cell_models as cm

    model = cm.lstm_loop()
    s, index = scan(model, ["h0", "c0"])
    carried = {name: (node.name, sc is index.root, slot) for (_, name), (node, sc, slot) in s.loop_carried.items()}
    assert carried == {"h_it": ("time_loop", True, 0), "c_it": ("time_loop", True, 1)}
    (m,) = s.matches
    assert (m.kind, m.h_in, m.c_in, m.h_source, m.c_source) == ("LSTM", "h_it", "c_it", "h_it", "c_it")
    assert len(m.scope_path) == 1  # the Loop's body, one level down


def test_a_scan_carrying_h_and_c_maps_each_body_input_to_its_slot():
    from tests.support import cell_models as cm

    s, index = scan(cm.lstm_scan(), ["h0", "c0"])
    carried = {name: (node.name, slot) for (_, name), (node, sc, slot) in s.loop_carried.items()}
    assert carried == {"h_t": ("time_scan", 0), "c_t": ("time_scan", 1)}
    assert [(m.kind, m.h_in, m.c_in) for m in s.matches] == [("LSTM", "h_t", "c_t")]


def test_a_loop_carrying_only_c_maps_only_c():
    from tests.support import cell_models as cm

    s, _ = scan(cm.lstm_loop(), ["c0"])
    assert {name: slot for (_, name), (_, _, slot) in s.loop_carried.items()} == {"c_it": 1}


# -- gate activations and how many state inputs a cell may read ------------------------------------------------------


def hard_lstm(attrs_i: dict, attrs_rest: dict):
    """The hand-built LSTM with HardSigmoid gates: i's attributes ``attrs_i``, f's and o's ``attrs_rest``."""
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    c = g.input("c0", [1, H])
    pre = {k: g.op("Add", [g.op("Gemm", [x, g.const(LW[k]), g.const(LB[k])], transB=1), g.op("MatMul", [h, g.const(LR[k].T.copy())])]) for k in "iofg"}
    act = {k: g.op("HardSigmoid", [pre[k]], **(attrs_i if k == "i" else attrs_rest)) for k in "iof"}
    act["g"] = g.op("Tanh", [pre["g"]])
    c_new = g.op("Add", [g.op("Mul", [act["f"], c]), g.op("Mul", [act["i"], act["g"]])], out="cn")
    g.op("Mul", [act["o"], g.op("Tanh", [c_new])], out="hn")
    return scan(g.model(["hn", "cn"]), ["h0", "c0"])[0]


def test_hard_sigmoid_gates_without_attributes_take_onnx_defaults():
    (m,) = hard_lstm({}, {}).matches
    assert m.weights.activations == ("HardSigmoid", "Tanh", "Tanh")
    assert m.weights.activation_alpha == pytest.approx((0.2,)) and m.weights.activation_beta == pytest.approx((0.5,))


def test_hard_sigmoid_gates_with_different_slopes_are_a_candidate():
    s = hard_lstm({"alpha": 0.3}, {"alpha": 0.2})
    assert s.matches == []
    (cand,) = s.candidates
    assert "its gates use different activations (HardSigmoid, HardSigmoid)" in cand.reason


def test_hard_sigmoid_gates_with_different_offsets_are_a_candidate():
    s = hard_lstm({"beta": 0.4}, {})
    assert s.matches == [] and "different activations" in s.candidates[0].reason


def rnn_reading(n_states: int):
    """tanh(x W^T + b + sum_k h_k R_k^T) over n_states state inputs h_0..h_{n-1}."""
    g = Net()
    x = g.input("x", [1, I])
    pre = g.op("Gemm", [x, g.const(W4), g.const(B4)], transB=1)
    for k in range(n_states):
        hk = g.input(f"h{k}", [1, H])
        pre = g.op("Add", [pre, g.op("MatMul", [hk, g.const((R4 * (k + 1)).T.copy())])])
    g.op("Tanh", [pre], out="hn")
    return scan(g.model(["hn"]), [f"h{k}" for k in range(n_states)])[0]


def test_a_cell_reading_four_state_inputs_is_an_rnn_on_one_with_the_others_as_input():
    # which of the four is h is not fixed (all are state inputs); the weights must follow the choice
    (m,) = rnn_reading(4).matches
    k = int(m.h_in[1:])
    assert m.x[0] == "x" and sorted(m.x[1:]) == sorted(f"h{j}" for j in range(4) if j != k)
    np.testing.assert_allclose(m.weights.R[0], R4 * (k + 1), atol=1e-5)
    for pos, name in enumerate(m.x[1:]):
        np.testing.assert_allclose(m.weights.W[0, :, I + pos * H : I + (pos + 1) * H], R4 * (int(name[1:]) + 1), atol=1e-5)


def test_a_cell_reading_five_state_inputs_is_a_candidate():
    s = rnn_reading(5)
    assert s.matches == []
    (cand,) = s.candidates
    assert cand.kind == "RNN" and "reads 5 different state inputs" in cand.reason


# -- more shapes of the same cells: symbolic batch, shapes computed from Shape, empty optional inputs -----------------


def test_an_rnn_with_a_symbolic_batch_is_probed_with_a_batch_of_one():
    g = Net()
    x = g.input("x", ["N", I])
    h = g.input("h0", ["N", H])
    rnn_step(g, x, h, out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    assert m.x_shapes == ((1, I),) and m.hidden_size == H
    assert m.weights.linear_before_reset == 0 and m.weights.activations == ("Tanh",)
    np.testing.assert_allclose(m.weights.R[0], R4, atol=1e-5)


def test_a_state_reshaped_to_the_shape_of_a_static_value_is_a_view_of_it():
    # Shape(x0) of a declared [1, H] value folds to [1, H]: Reshape(h, Shape(x0)) only relabels h
    g = Net()
    x = g.input("x", [1, I])
    like = g.input("like", [1, H])
    h = g.input("h0", [H])
    hv = g.op("Reshape", [h, g.op("Shape", [like])], out="hv")
    rnn_step(g, x, hv, out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    assert (m.h_in, m.h_source) == ("hv", "h0")


def test_a_state_gathered_with_a_run_time_index_is_not_a_view_and_not_affine():
    g = Net()
    x = g.input("x", [1, I])
    state = g.input("state", [2, 1, H])
    idx = g.input("which", [], TensorProto.INT64)
    h = g.op("Gather", [state, idx], axis=0)
    rnn_step(g, x, h, out="hn")
    s = scan(g.model(["hn"]), ["state"])[0]
    assert s.matches == [] and s.candidates == []


def test_a_gemm_with_an_empty_bias_name_is_read_as_no_bias():
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    gx = g.op("Gemm", [x, g.const(W4), g.const(B4)], transB=1)
    gh = g.op("Gemm", [h, g.const(R4), ""], transB=1)
    g.op("Tanh", [g.op("Add", [gx, gh])], out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    np.testing.assert_allclose(m.weights.R[0], R4, atol=1e-5)
    np.testing.assert_allclose(m.weights.B[0, :H] + m.weights.B[0, H:], B4, atol=1e-5)


def test_a_constant_of_shape_shaped_by_the_shape_of_an_input_is_a_zero_start():
    def make(g):
        like = g.input("like", [1, H])
        return g.op("ConstantOfShape", [g.op("Shape", [like])], out="z")

    assert zero_start(zero_reader(make))


def test_a_gru_blending_as_n_plus_z_times_h_minus_n_is_one_gru_and_no_lstm_candidate():
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])

    def lin(v, Wm, b):
        return g.op("Gemm", [v, g.const(f32(Wm)), g.const(f32(b))], transB=1)

    acts = {k: g.op("Sigmoid", [g.op("Add", [lin(x, GW[k], GBW[k]), lin(h, GR[k], GBR[k])])]) for k in "zr"}
    n = g.op("Tanh", [g.op("Add", [lin(x, GW["n"], GBW["n"]), g.op("Mul", [acts["r"], lin(h, GR["n"], GBR["n"])])])])
    g.op("Add", [n, g.op("Mul", [acts["z"], g.op("Sub", [h, n])])], out="hn")
    s = scan(g.model(["hn"]), ["h0"])[0]
    assert s.candidates == []
    (m,) = s.matches
    assert m.kind == "GRU"
    np.testing.assert_allclose(m.weights.B[0], gru_expected_bias(), atol=1e-5)


def test_tanh_of_an_input_projection_plus_the_state_is_no_rnn():
    # no matmul on h: act(W x + h) keeps h's elements apart, an RNN cell's R mixes them
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    g.op("Tanh", [g.op("Add", [g.op("Gemm", [x, g.const(W4), g.const(B4)], transB=1), h])], out="hn")
    s = scan(g.model(["hn"]), ["h0"])[0]
    assert s.matches == [] and s.candidates == []


def test_an_rnn_with_a_residual_state_term_has_r_plus_the_identity():
    # h read directly first, then again through the matmul: the walk must still see the matmul on h
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    gx = g.op("Gemm", [x, g.const(W4), g.const(B4)], transB=1)
    inner = g.op("Add", [gx, g.op("MatMul", [h, g.const(R4.T.copy())])])
    g.op("Tanh", [g.op("Add", [inner, h])], out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    np.testing.assert_allclose(m.weights.R[0], R4 + np.eye(H), atol=1e-5)


def test_a_product_of_the_state_with_itself_is_no_rnn():
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    gx = g.op("Gemm", [x, g.const(W4), g.const(B4)], transB=1)
    gh = g.op("MatMul", [g.op("Mul", [h, h]), g.const(R4.T.copy())])
    g.op("Tanh", [g.op("Add", [gx, gh])], out="hn")
    s = scan(g.model(["hn"]), ["h0"])[0]
    assert s.matches == [] and s.candidates == []


def test_the_nodes_of_a_match_include_the_input_projection():
    model = rnn_model()
    gemm = next(n.name for n in model.graph.node if n.op_type == "Gemm" and n.input[0] == "x")
    (m,) = scan(model, ["h0"])[0].matches
    assert m.nodes[0] == "n_hn" and gemm in m.nodes


def test_two_projections_added_are_one_input_not_walked_through():
    # only a single state-free operand with constants around it is a projection of x; two added inputs are the input
    g = Net()
    x = g.input("x", [1, I])
    y = g.input("y", [1, I])
    both = g.op("Add", [g.op("MatMul", [x, g.const(W4.T.copy())]), g.op("MatMul", [y, g.const(W4.T.copy())])], out="xy")
    h = g.input("h0", [1, H])
    g.op("Tanh", [g.op("Add", [both, g.op("MatMul", [h, g.const(R4.T.copy())])])], out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    assert m.x == ("xy",)
    np.testing.assert_allclose(m.weights.W[0], np.eye(H), atol=1e-6)


def test_a_pre_activation_written_as_one_sum_is_reported_as_unverified_not_dropped():
    # Sum is affine, so the structure is a cell's; the evaluator has no Sum, so the cell cannot be run: it stays a
    # candidate that says why (an unverified verdict), never silently nothing
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    gx = g.op("MatMul", [x, g.const(W4.T.copy())])
    gh = g.op("MatMul", [h, g.const(R4.T.copy())])
    g.op("Tanh", [g.op("Sum", [gx, gh, g.const(B4)])], out="hn")
    s = scan(g.model(["hn"]), ["h0"])[0]
    assert s.matches == []
    (cand,) = s.candidates
    assert cand.kind == "RNN" and "could not be run" in cand.reason and "Sum" in cand.reason


def test_an_lstm_whose_tanh_of_the_new_cell_state_is_also_returned_is_still_an_lstm():
    # tanh(c') has a second reader (an Identity to an output) before the output gate's product: it is passed over
    g = Net()
    x = g.input("x", [1, I])
    h = g.input("h0", [1, H])
    c = g.input("c0", [1, H])
    pre = {k: g.op("Add", [g.op("Gemm", [x, g.const(LW[k]), g.const(LB[k])], transB=1), g.op("MatMul", [h, g.const(LR[k].T.copy())])]) for k in "iofg"}
    act = {k: g.op("Tanh" if k == "g" else "Sigmoid", [pre[k]]) for k in "iofg"}
    c_new = g.op("Add", [g.op("Mul", [act["f"], c]), g.op("Mul", [act["i"], act["g"]])], out="cn")
    th = g.op("Tanh", [c_new])
    g.op("Identity", [th], out="tanh_c")
    g.op("Mul", [act["o"], th], out="hn")
    s = scan(g.model(["hn", "cn", "tanh_c"]), ["h0", "c0"])[0]
    assert s.candidates == []
    (m,) = s.matches
    assert (m.kind, m.h_out, m.c_out) == ("LSTM", "hn", "cn")


def test_a_projection_of_x_through_200_constant_gemms_is_walked_back_to_x():
    # the affine part of a gate may span up to 512 values; constants are not among them (200 Gemms with their 400
    # constant weights and biases would be 600): the cell is found with x as its input and the biases summed
    def x_of(g, x):
        v = g.op("MatMul", [x, g.const(W4.T.copy())])
        for _ in range(200):
            v = g.op("Gemm", [v, g.const(np.eye(H, dtype=np.float32)), g.const(np.full(H, 0.001, np.float32))])
        return v

    (m,) = scan(rnn_model(x_of=x_of), ["h0"])[0].matches
    assert m.x == ("x",)
    np.testing.assert_allclose(m.weights.W[0], W4, atol=1e-4)
    np.testing.assert_allclose(m.weights.B[0, :H] + m.weights.B[0, H:], 0.2, atol=1e-4)
