"""GRU and LSTM cells written as plain ops, and near-misses of them (mutation survivors of rnnir/lower/cells.py, its
GRU recogniser, reset-gate search, output blends and the reasons an LSTM without h' is refused).

Every model is written here with onnx.helper from weights drawn here, so the expected answer is known without the
recogniser: a GRU in ONNX's semantics (z the keep ratio, linear_before_reset 1) confirmed with exactly the W/R it was
built from, the value that is its new state, and, for a structure that is no cell, the part of it the reason names.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rnnir.lower.cells import CellScan, find_cells
from rnnir.lower.scope import ModelIndex

I, H = 3, 4


class _Graph:
    """Nodes and initializers with names made here (the reasons quote them)."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def const(self, a: np.ndarray, stem: str = "w") -> str:
        self.n += 1
        name = f"{stem}{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(a, dtype=np.float32), name))
        return name

    def ints(self, values: list[int]) -> str:
        self.n += 1
        name = f"i{self.n}"
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def op(self, op: str, ins: list[str], n_out: int = 1, name: str = "", **attrs: object) -> str:
        self.n += 1
        outs = [f"{op.lower()}{self.n}"] if n_out == 1 else [f"{op.lower()}{self.n}_{j}" for j in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=name or f"{op}_{self.n}", **attrs))
        return outs[0] if n_out == 1 else ",".join(outs)

    def split(self, v: str, n: int) -> list[str]:
        return self.op("Split", [v], n, axis=1, num_outputs=n).split(",")

    def model(self, inputs: list[str], outputs: dict[str, str], domains: tuple[str, ...] = ()) -> onnx.ModelProto:
        for name, value in outputs.items():
            self.nodes.append(helper.make_node("Identity", [value], [name], name=f"out_{name}"))
        graph = helper.make_graph(
            self.nodes,
            "cells",
            [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [1, I if n.startswith("x") else H]) for n in inputs],
            [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, ["rows", "cols"]) for n in outputs],
            self.inits,
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), *(helper.make_opsetid(d, 1) for d in domains)])
        m.ir_version = 9
        onnx.checker.check_model(m)
        return m


def _scan(m: onnx.ModelProto, sources: list[str]) -> CellScan:
    index = ModelIndex(m, "test")
    return find_cells(index, [(index.root, s) for s in sources])


def _weights(seed: int, gates: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((gates * H, I)) * 0.5).astype(np.float32)
    R = (rng.standard_normal((gates * H, H)) * 0.5).astype(np.float32)
    return W, R, (rng.standard_normal(gates * H) * 0.3).astype(np.float32), (rng.standard_normal(gates * H) * 0.3).astype(np.float32)


def _gru_gates(g: _Graph, x: str, h: str, W: np.ndarray, R: np.ndarray, bW: np.ndarray, bR: np.ndarray) -> tuple[str, str, str, str]:
    """z, r, the candidate's pre-activation's input part and the reset-gated product of ONNX's GRU (linear_before_reset 1)."""
    xz, xr, xn = g.split(g.op("Gemm", [x, g.const(W), g.const(bW)], transB=1), 3)
    hz, hr, hn = g.split(g.op("Gemm", [h, g.const(R), g.const(bR)], transB=1), 3)
    z = g.op("Sigmoid", [g.op("Add", [xz, hz])], name="z")
    r = g.op("Sigmoid", [g.op("Add", [xr, hr])], name="r")
    return z, r, xn, g.op("Mul", [r, hn], name="reset")


def _blend(g: _Graph, z: str, n: str, h: str) -> str:
    """h' = (1 - z) * n + z * h."""
    one = g.const(np.array(1.0), "one")
    return g.op("Add", [g.op("Mul", [g.op("Sub", [one, z]), n]), g.op("Mul", [z, h])], name="blend")


def _gru(g: _Graph, x: str, h: str, seed: int = 0, name: str = "n") -> tuple[str, np.ndarray, np.ndarray]:
    W, R, bW, bR = _weights(seed, 3)
    z, _r, xn, reset = _gru_gates(g, x, h, W, R, bW, bR)
    n = g.op("Tanh", [g.op("Add", [xn, reset])], name=name)
    return _blend(g, z, n, h), W, R


def _one_gru(scan: CellScan, h_out: str, W: np.ndarray, R: np.ndarray) -> None:
    assert scan.candidates == []
    (m,) = scan.matches
    assert (m.kind, m.h_in, m.h_out, m.hidden_size, m.weights.linear_before_reset) == ("GRU", "h0", h_out, H, 1)
    np.testing.assert_allclose(m.weights.W[0], W, atol=1e-5)
    np.testing.assert_allclose(m.weights.R[0], R, atol=1e-5)


def test_a_gru_whose_input_is_gated_by_a_sigmoid_is_a_gru():
    # x' = sigmoid(U x) * x is an input-side gated product: the reset gate is looked for in the state cone only
    g = _Graph()
    U = np.random.default_rng(9).standard_normal((I, I))
    x_gated = g.op("Mul", [g.op("Sigmoid", [g.op("Gemm", ["x", g.const(U)], transB=1)]), "x"], name="x_gate")
    h_new, W, R = _gru(g, x_gated, "h0")
    scan = _scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"])
    _one_gru(scan, h_new, W, R)
    assert scan.matches[0].x == (x_gated,)


def test_a_gru_candidate_whose_pre_activation_reuses_a_value_is_checked_in_linear_time():
    # n = tanh(v) with v = ((u + u) * 0.5 ... 26 times): the same GRU, every value reached twice; walking a value
    # again instead of once would take 2**26 steps
    g = _Graph()
    W, R, bW, bR = _weights(1, 3)
    z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
    v = g.op("Add", [xn, reset])
    half = g.const(np.array(0.5), "half")
    for _ in range(26):
        v = g.op("Mul", [g.op("Add", [v, v]), half])
    h_new = _blend(g, z, g.op("Tanh", [v], name="n"), "h0")
    _one_gru(_scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"]), h_new, W, R)


def test_a_blend_with_the_reset_gate_is_not_the_new_state():
    # an extra output (1 - r) * n + r * h, made before the real blend: the reset gate is never also the update gate
    g = _Graph()
    W, R, bW, bR = _weights(2, 3)
    z, r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
    n = g.op("Tanh", [g.op("Add", [xn, reset])], name="n")
    by_r = _blend(g, r, n, "h0")
    h_new = _blend(g, z, n, "h0")
    _one_gru(_scan(g.model(["x", "h0"], {"aux": by_r, "hN": h_new}), ["h0"]), h_new, W, R)


def test_a_gru_whose_blend_reads_no_state_is_a_candidate_that_waits_for_one():
    # h' = (1 - z) * n + z * x2 with x2 a plain input: a GRU-like candidate (its n has the reset product) whose blend
    # reads no state input; said so, not dropped
    g = _Graph()
    W, R, bW, bR = _weights(3, 3)
    z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
    n = g.op("Tanh", [g.op("Add", [xn, reset])], name="n")
    scan = _scan(g.model(["x", "h0", "x2"], {"hN": _blend(g, z, n, "x2")}), ["h0"])
    assert scan.matches == []
    assert [(c.kind, c.anchor, c.reason) for c in scan.candidates] == [("GRU", "n", "GRU-like structure at node 'n': its output blend reads no state input")]


def test_gates_wider_than_the_state_are_refused_with_their_sizes():
    # a bias of two rows broadcasts one gate's pre-activation to [2, H]: 2H values where the state has H
    for gate in ("z", "n"):
        g = _Graph()
        W, R, bW, bR = _weights(4, 3)
        xz, xr, xn = g.split(g.op("Gemm", ["x", g.const(W), g.const(bW)], transB=1), 3)
        hz, hr, hn = g.split(g.op("Gemm", ["h0", g.const(R), g.const(bR)], transB=1), 3)
        two_rows = g.const(np.full((2, H), 0.1), "rows")
        pre_z = g.op("Add", [xz, hz])
        z = g.op("Sigmoid", [g.op("Add", [pre_z, two_rows]) if gate == "z" else pre_z])
        r = g.op("Sigmoid", [g.op("Add", [xr, hr])])
        pre_n = g.op("Add", [xn, g.op("Mul", [r, hn])])
        n = g.op("Tanh", [g.op("Add", [pre_n, two_rows]) if gate == "n" else pre_n], name="n")
        scan = _scan(g.model(["x", "h0"], {"hN": _blend(g, z, n, "h0")}), ["h0"])
        assert scan.matches == [], gate
        assert [c.reason for c in scan.candidates] == [f"GRU-like structure at node 'n': gate sizes do not match the state size {H}"], gate


def _near_miss_gru(reset: str) -> onnx.ModelProto:
    """A GRU whose candidate's reset product is written wrong (``reset`` says how); the blend is ONNX's."""
    g = _Graph()
    W, R, bW, bR = _weights(5, 3)
    xz, xr, xn = g.split(g.op("Gemm", ["x", g.const(W), g.const(bW)], transB=1), 3)
    hz, hr, hn = g.split(g.op("Gemm", ["h0", g.const(R), g.const(bR)], transB=1), 3)
    z = g.op("Sigmoid", [g.op("Add", [xz, hz])])
    r = g.op("Sigmoid", [g.op("Add", [xr, hr])])
    if reset == "scaled gate":  # (0.5 r) * (R h): 0.5 r is no gate output
        product = g.op("Mul", [g.op("Mul", [r, g.const(np.array(0.5))]), hn])
    elif reset == "two gates":  # r * (s * R h), s another sigmoid of the state
        s = g.op("Sigmoid", [g.op("Add", [hz, hr])])
        product = g.op("Mul", [r, g.op("Mul", [s, hn])])
    else:  # "constant under the matmul": R (r * c) with c a constant, no state under the gate
        product = g.op("Gemm", [g.op("Mul", [r, g.const(np.full((1, H), 0.3))]), g.const(R[2 * H :])], transB=1)
    n = g.op("Tanh", [g.op("Add", [xn, product])], name="n")
    return g.model(["x", "h0"], {"hN": _blend(g, z, n, "h0")})


def test_a_candidate_needs_exactly_one_sigmoid_gating_a_run_time_value():
    want = {
        "scaled gate": "has no reset gate",
        "two gates": "has 2 gated products, not one reset gate",
        "constant under the matmul": "has no reset gate",
    }
    for reset, what in want.items():
        scan = _scan(_near_miss_gru(reset), ["h0"])
        assert scan.matches == [], reset
        assert [c.reason for c in scan.candidates] == [f"GRU-like structure at node 'n': its candidate n = Tanh(...) {what}"], reset


def test_the_reset_product_is_found_through_a_reshape():
    g = _Graph()
    W, R, bW, bR = _weights(6, 3)
    z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
    pre = g.op("Reshape", [g.op("Unsqueeze", [g.op("Add", [xn, reset]), g.ints([0])]), g.ints([1, H])])
    h_new = _blend(g, z, g.op("Tanh", [pre], name="n"), "h0")
    _one_gru(_scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"]), h_new, W, R)


def test_a_blend_more_than_four_ops_after_the_candidate_is_not_looked_for():
    # h' = z*h - (-(-(-((1 - z) * n)))): the new state is five blend ops after n; four is the reach (a GRU's blend
    # takes two or three), so nothing is confirmed and, no blend reading state at all, nothing is a candidate either
    def model(negations: int) -> tuple[onnx.ModelProto, str]:
        g = _Graph()
        W, R, bW, bR = _weights(7, 3)
        z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
        n = g.op("Tanh", [g.op("Add", [xn, reset])], name="n")
        v = g.op("Mul", [g.op("Sub", [g.const(np.array(1.0)), z]), n])
        for _ in range(negations):
            v = g.op("Neg", [v])
        kept = g.op("Mul", [z, "h0"])
        h_new = g.op("Sub", [kept, v]) if negations % 2 else g.op("Add", [kept, v])
        return g.model(["x", "h0"], {"hN": h_new}), h_new

    m, h_new = model(2)  # four ops after n: found
    assert [(c.kind, c.h_out) for c in _scan(m, ["h0"]).matches] == [("GRU", h_new)]
    scan = _scan(model(3)[0], ["h0"])
    assert (scan.matches, scan.candidates) == ([], [])


def _lstm_gates(g: _Graph, x: str, h: str | None) -> tuple[str, str, str, str]:
    """i, o, f (sigmoids) and g (tanh) of an LSTM reading x and, when given, h."""
    W, R, b, _ = _weights(8, 4)
    pre = g.op("Gemm", [x, g.const(W), g.const(b)], transB=1)
    if h is not None:
        pre = g.op("Add", [pre, g.op("Gemm", [h, g.const(R)], transB=1)])
    i, o, f, cand = g.split(pre, 4)
    return g.op("Sigmoid", [i], name="i"), g.op("Sigmoid", [o], name="o"), g.op("Sigmoid", [f], name="f"), g.op("Tanh", [cand], name="g")


def test_an_lstm_update_without_its_output_names_what_the_output_product_reads():
    # c' = f*c + i*g is there, h' = o*tanh(c') is not: the reason names the product that stands where h' should
    prefix = "LSTM-like structure at node 'c_new'"
    for h_out in ("o*tanh(c)", "o*tanh(2c')", "f*tanh(c)", "o*g", "o*tanh(c), no h"):
        g = _Graph()
        i, o, f, cand = _lstm_gates(g, "x", None if h_out.endswith("no h") else "h0")
        c_new = g.op("Add", [g.op("Mul", [f, "c0"]), g.op("Mul", [i, cand])], name="c_new")
        if h_out == "o*tanh(2c')":
            read = g.op("Mul", [c_new, g.const(np.array(2.0))])
            h_new = g.op("Mul", [o, g.op("Tanh", [read])], name="h_new")
        elif h_out == "o*g":
            h_new = g.op("Mul", [o, cand], name="h_new")
        else:
            read = "c0"
            h_new = g.op("Mul", [f if h_out == "f*tanh(c)" else o, g.op("Tanh", ["c0"])], name="h_new")
        scan = _scan(g.model(["x", "h0", "c0"], {"hN": h_new, "cN": c_new}), ["h0", "c0"])
        assert scan.matches == [], h_out
        (reason,) = [c.reason for c in scan.candidates if c.anchor == "c_new"]
        if h_out in ("f*tanh(c)", "o*g"):  # a product of the forget gate or of the candidate is no output product
            assert reason == f"{prefix} (c' = f*c + i*g) has no output h' = o*tanh(c')", h_out
            continue
        said = f"{prefix} does not compute an LSTM cell: h' at node 'h_new' is o*tanh({read!r}), not o*tanh(c'); it differs from o*tanh(c')"
        if h_out.endswith("no h"):  # without an h state the two cannot be run side by side: no number
            assert reason == said, h_out
            continue
        assert reason.startswith(said + " by "), (h_out, reason)
        assert float(reason.removeprefix(said + " by ")) > 0.01, (h_out, reason)  # tanh(c) and tanh(2c') vs tanh(c'): far apart


def _rnn_weights(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((H, I)) * 0.5).astype(np.float32), (rng.standard_normal((H, H)) * 0.5).astype(np.float32), (rng.standard_normal(H) * 0.3).astype(np.float32)


def _rnn_model(g: _Graph, pre: str, domains: tuple[str, ...] = ()) -> tuple[onnx.ModelProto, str]:
    h_new = g.op("Tanh", [pre], name="act")
    return g.model(["x", "h0"], {"hN": h_new}, domains), h_new


def _one_rnn(m: onnx.ModelProto, h_out: str, W: np.ndarray, R: np.ndarray, x: tuple[str, ...] = ("x",)) -> None:
    scan = _scan(m, ["h0"])
    assert scan.candidates == []
    (c,) = scan.matches
    assert (c.kind, c.h_in, c.h_out, c.x) == ("RNN", "h0", h_out, x)
    np.testing.assert_allclose(c.weights.W[0], W, atol=1e-5)
    np.testing.assert_allclose(c.weights.R[0], R, atol=1e-5)


def test_rnn_cells_written_with_fused_and_optional_inputs():
    W, R, b = _rnn_weights(10)
    # the input projection as the recurrent Gemm's C: tanh(Gemm(h, R, C = Gemm(x, W, b)))
    g = _Graph()
    m, h_new = _rnn_model(g, g.op("Gemm", ["h0", g.const(R), g.op("Gemm", ["x", g.const(W), g.const(b)], transB=1)], transB=1))
    _one_rnn(m, h_new, W, R)
    # an optional input left out by name: Gemm(x, W, '') and Slice(..., axes, steps=''), on either side
    g = _Graph()
    gx = g.op("Add", [g.op("Gemm", ["x", g.const(W), ""], transB=1), g.const(b)])
    gx = g.op("Slice", [gx, g.ints([0]), g.ints([H]), g.ints([1]), ""])
    gh = g.op("Slice", [g.op("Gemm", ["h0", g.const(R)], transB=1), g.ints([0]), g.ints([H]), g.ints([1]), ""])
    m, h_new = _rnn_model(g, g.op("Add", [gx, gh]))
    _one_rnn(m, h_new, W, R)
    # the state divided by a constant is affine in it: R / 2
    g = _Graph()
    gh = g.op("Gemm", [g.op("Div", ["h0", g.const(np.array(2.0))]), g.const(R)], transB=1)
    m, h_new = _rnn_model(g, g.op("Add", [g.op("Gemm", ["x", g.const(W), g.const(b)], transB=1), gh]))
    _one_rnn(m, h_new, W, R / 2)
    # the last row of the state's projection (a batch of one has no other): probes stacked on the batch axis would
    # all read the last probe's row there, so they are checked against the single probe and run one at a time
    g = _Graph()
    gh = g.op("Slice", [g.op("Gemm", ["h0", g.const(R)], transB=1), g.ints([-1]), g.ints([2**62]), g.ints([0])])
    m, h_new = _rnn_model(g, g.op("Add", [g.op("Gemm", ["x", g.const(W), g.const(b)], transB=1), gh]))
    _one_rnn(m, h_new, W, R)
    # an op of another domain is opaque: what it gives is the cell's input
    g = _Graph()
    custom = g.op("MatMul", ["x", g.const(np.eye(I))], domain="my.ops")
    m, h_new = _rnn_model(g, g.op("Add", [g.op("Gemm", [custom, g.const(W), g.const(b)], transB=1), g.op("Gemm", ["h0", g.const(R)], transB=1)]), ("my.ops",))
    m.graph.value_info.append(helper.make_tensor_value_info(custom, onnx.TensorProto.FLOAT, [1, I]))  # no inference for it
    _one_rnn(m, h_new, W, R, x=(custom,))
    # a projection that is not affine in x, or whose weight is a run-time value, is where the cell's input starts
    for what in ("square", "run-time weight"):
        g = _Graph()
        if what == "square":
            x_in = g.op("Pow", [g.op("Gemm", ["x", g.const(np.eye(I)[::-1])], transB=1), g.const(np.array(2.0))])
        else:
            x_in = g.op("MatMul", ["x", "xw"])
        gx = g.op("Gemm", [x_in, g.const(W), g.const(b)], transB=1)
        h_new = g.op("Tanh", [g.op("Add", [gx, g.op("Gemm", ["h0", g.const(R)], transB=1)])], name="act")
        m = g.model(["x", "h0", "xw"], {"hN": h_new})
        m.graph.input[2].type.tensor_type.shape.dim[0].dim_value = I
        m.graph.input[2].type.tensor_type.shape.dim[1].dim_value = I
        _one_rnn(m, h_new, W, R, x=(x_in,))


def test_an_activation_without_a_recurrent_matmul_or_not_affine_in_the_state_is_no_rnn_cell():
    W, R, b = _rnn_weights(11)
    for what in ("x + h + h", "W x + U x + h", "R (1 / h)", "R h + U sigmoid(h)"):
        g = _Graph()
        gx = g.op("Gemm", ["x", g.const(W), g.const(b)], transB=1)
        if what == "x + h + h":  # the state read twice, never through a matmul: act(W x + 2 h) has no recurrent weight
            pre = g.op("Add", [g.op("Add", [gx, "h0"]), "h0"])
        elif what == "W x + U x + h":  # Gemm(x, W, C = Gemm(x, U, C = h)): x twice through a matmul, the state through none
            pre = g.op("Gemm", ["x", g.const(W), g.op("Gemm", ["x", g.const(W[::-1]), "h0"], transB=1)], transB=1)
        elif what == "R (1 / h)":
            pre = g.op("Add", [gx, g.op("Gemm", [g.op("Div", [g.const(np.ones((1, H))), "h0"]), g.const(R)], transB=1)])
        else:
            sig = g.op("Gemm", [g.op("Sigmoid", ["h0"]), g.const(R[::-1])], transB=1)
            pre = g.op("Add", [g.op("Add", [gx, g.op("Gemm", ["h0", g.const(R)], transB=1)]), sig])
        scan = _scan(_rnn_model(g, pre)[0], ["h0"])
        assert (scan.matches, scan.candidates) == ([], []), what


def test_a_stacked_lstm_with_one_weight_everywhere_threads_each_layer_through_its_own_state():
    # two layers, two steps, every cell with W = R (input size = hidden size) and one bias: each cell then also
    # computes an LSTM with x and h taken the other way round; the state it threads is its own layer's (a state
    # input first, then the cell that made its c), never the layer below's output, whichever operand comes first
    rng = np.random.default_rng(12)
    Wt, bt = (rng.standard_normal((4 * H, H)) * 0.5).astype(np.float32), (rng.standard_normal(4 * H) * 0.3).astype(np.float32)

    def step(g: _Graph, x: str, h: str, c: str, name: str, h_first: bool) -> tuple[str, str]:
        terms = [g.op("Gemm", [x, "Wt", "bt"], transB=1), g.op("Gemm", [h, "Wt"], transB=1)]
        i, o, f, cand = g.split(g.op("Add", terms[::-1] if h_first else terms), 4)
        i, o, f, cand = g.op("Sigmoid", [i]), g.op("Sigmoid", [o]), g.op("Sigmoid", [f]), g.op("Tanh", [cand])
        c_new = g.op("Add", [g.op("Mul", [f, c]), g.op("Mul", [i, cand])], name=f"c_{name}")
        return g.op("Mul", [o, g.op("Tanh", [c_new])], name=f"h_{name}"), c_new

    for h_first in (False, True):
        g = _Graph()
        g.inits += [numpy_helper.from_array(Wt, "Wt"), numpy_helper.from_array(bt, "bt")]
        h1a, c1a = step(g, "x1", "h0a", "c0a", "1a", h_first)
        h2a, c2a = step(g, "x2", h1a, c1a, "2a", h_first)
        h1b, c1b = step(g, h1a, "h0b", "c0b", "1b", h_first)
        h2b, c2b = step(g, h2a, h1b, c1b, "2b", h_first)
        m = g.model(["x1", "x2", "h0a", "c0a", "h0b", "c0b"], {"ha": h2a, "ca": c2a, "hb": h2b, "cb": c2b})
        for vi in m.graph.input[:2]:
            vi.type.tensor_type.shape.dim[1].dim_value = H
        scan = _scan(m, ["h0a", "c0a", "h0b", "c0b"])
        assert scan.candidates == [], h_first
        got = sorted((c.x, c.h_in, c.c_in, c.h_out, c.c_out) for c in scan.matches)
        want = [(("x1",), "h0a", "c0a", h1a, c1a), (("x2",), h1a, c1a, h2a, c2a), ((h1a,), "h0b", "c0b", h1b, c1b), ((h2a,), h1b, c1b, h2b, c2b)]
        assert got == sorted(want), h_first


def test_a_gate_of_one_value_is_a_cell_of_hidden_size_one_and_a_scalar_gate_is_refused():
    rng = np.random.default_rng(13)
    W, R = rng.standard_normal((1, I)).astype(np.float32), rng.standard_normal((1, 1)).astype(np.float32)
    for scalar in (False, True):
        g = _Graph()
        pre = g.op("Add", [g.op("Gemm", ["x", g.const(W)], transB=1), g.op("Gemm", ["h0", g.const(R)], transB=1)])
        if scalar:
            pre = g.op("Squeeze", [pre])
        h_new = g.op("Tanh", [pre], name="act")
        m = g.model(["x", "h0"], {"hN": h_new})
        m.graph.input[1].type.tensor_type.shape.dim[1].dim_value = 1
        scan = _scan(m, ["h0"])
        if not scalar:
            _one_rnn(m, h_new, W, R)
            assert scan.matches[0].hidden_size == 1
        else:
            assert scan.matches == []
            assert [c.reason for c in scan.candidates] == [f"cell-like structure at node 'act': its gate {pre!r} is a scalar"]


def test_the_reset_product_is_looked_for_within_64_values_of_the_candidate():
    # n = tanh(Identity^k(xn + r * hn [+ h * zeros_like(h)])): the search for the reset gate walks at most 64 values back from n's
    # input (state views and constants it passes over do not count); 62 identities reach it, 63 do not
    for identities, plus_h_times_zero, found in ((62, False, True), (63, False, False), (60, True, True)):
        g = _Graph()
        W, R, bW, bR = _weights(14, 3)
        z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
        v = g.op("Add", [xn, reset])
        if plus_h_times_zero:  # two values more (the Add and the Mul); h and zeros_like(h) are a state view and a constant
            zeros = g.op("ConstantOfShape", [g.op("Shape", ["h0"])])
            v = g.op("Add", [v, g.op("Mul", ["h0", zeros])])
        for _ in range(identities):
            v = g.op("Identity", [v])
        h_new = _blend(g, z, g.op("Tanh", [v], name="n"), "h0")
        scan = _scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"])
        case = (identities, plus_h_times_zero)
        if found:
            _one_gru(scan, h_new, W, R)
        else:
            assert scan.matches == [], case
            assert [c.reason for c in scan.candidates] == ["GRU-like structure at node 'n': its candidate n = Tanh(...) has no reset gate"], case


def test_an_output_blend_spans_at_most_32_values():
    # h' = (1 - z) * n + Neg^k(z * h), Sub for odd k: the blend's expression has 8 + k values; 24 negations make 32
    for negations, found in ((24, True), (25, False)):
        g = _Graph()
        W, R, bW, bR = _weights(15, 3)
        z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
        n = g.op("Tanh", [g.op("Add", [xn, reset])], name="n")
        kept = g.op("Mul", [z, "h0"])
        for _ in range(negations):
            kept = g.op("Neg", [kept])
        written = g.op("Mul", [g.op("Sub", [g.const(np.array(1.0)), z]), n])
        h_new = g.op("Sub" if negations % 2 else "Add", [written, kept])
        scan = _scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"])
        if found:
            _one_gru(scan, h_new, W, R)
        else:
            assert scan.matches == []
            assert [(c.kind, c.anchor) for c in scan.candidates] == [("GRU", "n")]


def test_a_state_that_is_no_batch_of_gate_rows_is_refused_with_its_size():
    rng = np.random.default_rng(16)
    # an RNN-like act(W x + R h) with h of 6 values and gates of 4
    g = _Graph()
    pre = g.op("Add", [g.op("Gemm", ["x", g.const(rng.standard_normal((H, I)))], transB=1), g.op("Gemm", ["h0", g.const(rng.standard_normal((H, 6)))], transB=1)])
    m = g.model(["x", "h0"], {"hN": g.op("Tanh", [pre], name="act")})
    m.graph.input[1].type.tensor_type.shape.dim[1].dim_value = 6
    scan = _scan(m, ["h0"])
    assert scan.matches == []
    assert [c.reason for c in scan.candidates] == [f"cell-like structure at node 'act': its state (6 elements) is not a batch of gates {H} wide"]
    # an LSTM whose c holds two rows of H where h holds one: c' = f*c + i*g broadcasts, but it is no cell's state
    g = _Graph()
    i, o, f, cand = _lstm_gates(g, "x", "h0")
    c_new = g.op("Add", [g.op("Mul", [f, "c0"]), g.op("Mul", [i, cand])], name="c_new")
    m = g.model(["x", "h0", "c0"], {"hN": g.op("Mul", [o, g.op("Tanh", [c_new])]), "cN": c_new})
    m.graph.input[2].type.tensor_type.shape.dim[0].dim_value = 2
    scan = _scan(m, ["h0", "c0"])
    assert scan.matches == []
    assert [c.reason for c in scan.candidates] == [f"cell-like structure at node 'c_new': its state ({H} elements) is not a batch of gates {H} wide"]


def test_a_gru_whose_reset_gate_is_a_vector_is_a_gru():
    # r = sigmoid(Reshape(xr + hr, [H])) has no batch axis: the probes cannot stack it on one, and run one at a time
    g = _Graph()
    W, R, bW, bR = _weights(17, 3)
    xz, xr, xn = g.split(g.op("Gemm", ["x", g.const(W), g.const(bW)], transB=1), 3)
    hz, hr, hn = g.split(g.op("Gemm", ["h0", g.const(R), g.const(bR)], transB=1), 3)
    z = g.op("Sigmoid", [g.op("Add", [xz, hz])])
    r = g.op("Sigmoid", [g.op("Reshape", [g.op("Add", [xr, hr]), g.ints([H])])])
    n = g.op("Tanh", [g.op("Add", [xn, g.op("Mul", [r, hn])])], name="n")
    h_new = _blend(g, z, n, "h0")
    _one_gru(_scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"]), h_new, W, R)


def test_an_rnn_reading_a_scalar_input_is_an_rnn():
    # pre = R h + b + x with x a scalar (a time step, a gain) added to every unit: one input column of ones, and the
    # probes cannot stack on an input without a batch axis
    _, R, b = _rnn_weights(18)
    g = _Graph()
    m, h_new = _rnn_model(g, g.op("Add", [g.op("Gemm", ["h0", g.const(R), g.const(b)], transB=1), "x"]))
    del m.graph.input[0].type.tensor_type.shape.dim[:]  # x: rank 0
    _one_rnn(m, h_new, np.ones((H, 1)), R)


def test_carry_layout_counts_the_values_a_loop_or_scan_carries():
    from rnnir.lower.cells import carry_layout

    loop = helper.make_node("Loop", ["M", "cond", "a", "b", "c"], ["a2", "b2", "c2", "scan"], body=helper.make_graph([], "body", [], []))
    assert carry_layout(loop) == (3, 2, 2, 1, 0)
    for inputs, scanned, carried in ((["s1", "s2", "x"], 1, 2), (["x", "y"], 2, 0)):
        scan = helper.make_node("Scan", inputs, ["o"], num_scan_inputs=scanned, body=helper.make_graph([], "body", [], []))
        assert carry_layout(scan) == (carried, 0, 0, 0, 0), inputs
    assert carry_layout(helper.make_node("Add", ["a", "b"], ["c"])) is None
    assert carry_layout(helper.make_node("Loop", ["M", "cond", "a"], ["a2"], domain="my.ops")) is None


def test_a_cell_with_more_inputs_than_can_be_probed_could_not_be_run():
    # input + hidden above 8192 unit-vector probes: the LSTM and the GRU are candidates that could not be run
    wide = 8192
    rng = np.random.default_rng(19)
    for kind in ("LSTM", "GRU"):
        g = _Graph()
        gates = 4 if kind == "LSTM" else 3
        W = rng.standard_normal((gates * H, wide)).astype(np.float32) * 0.01
        R = rng.standard_normal((gates * H, H)).astype(np.float32)
        parts = g.split(g.op("Add", [g.op("Gemm", ["x", g.const(W)], transB=1), g.op("Gemm", ["h0", g.const(R)], transB=1)]), gates)
        if kind == "LSTM":
            i, o, f, cand = g.op("Sigmoid", [parts[0]]), g.op("Sigmoid", [parts[1]]), g.op("Sigmoid", [parts[2]]), g.op("Tanh", [parts[3]])
            c_new = g.op("Add", [g.op("Mul", [f, "c0"]), g.op("Mul", [i, cand])], name="anchor")
            outputs = {"hN": g.op("Mul", [o, g.op("Tanh", [c_new])]), "cN": c_new}
        else:
            z, r = g.op("Sigmoid", [parts[0]]), g.op("Sigmoid", [parts[1]])
            n = g.op("Tanh", [g.op("Add", [parts[2], g.op("Mul", [r, g.op("Gemm", ["h0", g.const(R[:H])], transB=1)])])], name="anchor")
            outputs = {"hN": _blend(g, z, n, "h0")}
        m = g.model(["x", "h0", "c0"] if kind == "LSTM" else ["x", "h0"], outputs)
        m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = wide
        scan = _scan(m, ["h0", "c0"] if kind == "LSTM" else ["h0"])
        assert scan.matches == [], kind
        assert [c.reason for c in scan.candidates] == [f"{kind}-like structure at node 'anchor' could not be run: input {wide} + hidden {H} is too large to probe"], kind


def test_a_new_state_wider_than_the_gates_is_no_cell():
    # a constant of two rows added in the cell: the new state has 2H values where the reference cell has H
    W, R, b = _rnn_weights(20)
    g = _Graph()
    pre = g.op("Add", [g.op("Add", [g.op("Gemm", ["x", g.const(W), g.const(b)], transB=1), g.op("Gemm", ["h0", g.const(R)], transB=1)]), g.const(np.zeros((2, H)))])
    scan = _scan(_rnn_model(g, pre)[0], ["h0"])
    assert scan.matches == []
    assert [c.reason for c in scan.candidates] == [f"RNN-like structure at node 'act': its output has {2 * H} elements, the state {H}"]
    g = _Graph()
    Wg, Rg, bW, bR = _weights(21, 3)
    z, _r, xn, reset = _gru_gates(g, "x", "h0", Wg, Rg, bW, bR)
    n = g.op("Tanh", [g.op("Add", [xn, reset])], name="n")
    kept = g.op("Mul", [z, g.op("Add", ["h0", g.const(np.zeros((2, H)))])])  # z * h, broadcast to two rows
    h_new = g.op("Add", [g.op("Mul", [g.op("Sub", [g.const(np.array(1.0)), z]), n]), kept])
    scan = _scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"])
    assert scan.matches == []
    assert [c.reason for c in scan.candidates] == [f"GRU-like structure at node 'n' does not compute a GRU cell: the new state at {h_new!r} differs from (1-z)*n + z*h with the extracted weights by inf"]


def test_a_gru_blend_keeping_two_states_is_refused():
    # h' = (1 - z) * n + z * (h0 + 0 * h1): the blend keeps two state inputs, a GRU keeps one
    g = _Graph()
    W, R, bW, bR = _weights(22, 3)
    z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
    n = g.op("Tanh", [g.op("Add", [xn, reset])], name="n")
    both = g.op("Add", ["h0", g.op("Mul", ["h1", g.const(np.array(0.0))])])
    h_new = g.op("Add", [g.op("Mul", [g.op("Sub", [g.const(np.array(1.0)), z]), n]), g.op("Mul", [z, both])])
    scan = _scan(g.model(["x", "h0", "h1"], {"hN": h_new, "h1N": g.op("Identity", ["h1"])}), ["h0", "h1"])
    assert scan.matches == []
    assert [c.reason for c in scan.candidates] == ["GRU-like structure at node 'n': its output blend reads two different state slices"]


def test_a_gru_step_reading_another_grus_output_as_its_state_is_not_that_cell():
    # two GRU steps with different weights: the second keeps the first's output as its state, so it is not one
    # recurrence threaded through both (the first is confirmed, the second is said to read another cell's output)
    g = _Graph()
    h1, W1, R1 = _gru(g, "x", "h0", seed=23)
    h2, _W2, _R2 = _gru(g, "x2", h1, seed=24, name="n2")
    scan = _scan(g.model(["x", "x2", "h0"], {"hN": h2}), ["h0"])
    assert [(c.kind, c.h_in, c.h_out) for c in scan.matches] == [("GRU", "h0", h1)]
    np.testing.assert_allclose(scan.matches[0].weights.W[0], W1, atol=1e-5)
    assert [c.reason for c in scan.candidates] == ["GRU-like structure at node 'n2' reads the output of another cell as its state"]


def test_an_rnn_whose_affine_part_spans_more_than_512_values_is_no_cell():
    # act(W x + Identity^k(R h)): the gate's affine part is walked over at most 512 values (a cell's has tens)
    W, R, b = _rnn_weights(25)
    for identities, found in ((500, True), (520, False)):
        g = _Graph()
        gh = g.op("Gemm", ["h0", g.const(R)], transB=1)
        for _ in range(identities):
            gh = g.op("Identity", [gh])
        m, h_new = _rnn_model(g, g.op("Add", [g.op("Gemm", ["x", g.const(W), g.const(b)], transB=1), gh]))
        scan = _scan(m, ["h0"])
        assert [c.h_out for c in scan.matches] == ([h_new] if found else []), identities
        assert scan.candidates == [], identities


def test_an_rnn_whose_shapes_are_unknown_or_no_batch_is_refused_with_why():
    W, R, b = _rnn_weights(26)
    cases = {
        "h0": "cell-like structure at node 'act': the shape of state view 'h0' is unknown",
        "x": "cell-like structure at node 'act': the shape of its input 'x' is unknown",
        "batch": "cell-like structure at node 'act': its inputs are not a batch of 2 rows like its state",
    }
    for what, reason in cases.items():
        g = _Graph()
        m, _h = _rnn_model(g, g.op("Add", [g.op("Gemm", ["x", g.const(W), g.const(b)], transB=1), g.op("Gemm", ["h0", g.const(R)], transB=1)]))
        if what == "batch":  # a state of two rows, an input of one
            m.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 2
        else:
            vi = next(v for v in m.graph.input if v.name == what)
            vi.type.tensor_type.ClearField("shape")
            del m.graph.output[:]
            m.graph.output.append(helper.make_tensor_value_info("hN", onnx.TensorProto.FLOAT, None))
        scan = _scan(m, ["h0"])
        assert scan.matches == [], what
        assert [c.reason for c in scan.candidates] == [reason], what


def test_a_blend_of_n_with_only_gates_and_constants_is_nothing_to_wait_for():
    # h' = (1 - z) * n + z, or + 0.5: no term could become a state input later, so no candidate waits for one
    for extra in ("z", "constant"):
        g = _Graph()
        W, R, bW, bR = _weights(27, 3)
        z, _r, xn, reset = _gru_gates(g, "x", "h0", W, R, bW, bR)
        n = g.op("Tanh", [g.op("Add", [xn, reset])], name="n")
        written = g.op("Mul", [g.op("Sub", [g.const(np.array(1.0)), z]), n])
        h_new = g.op("Add", [written, z if extra == "z" else g.const(np.full((1, H), 0.5))])
        scan = _scan(g.model(["x", "h0"], {"hN": h_new}), ["h0"])
        assert (scan.matches, scan.candidates) == ([], []), extra
