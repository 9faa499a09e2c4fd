"""Recurrent cells written as plain ONNX ops, built by hand with onnx.helper, for the cell recogniser's tests.

Each builder returns ``(model, expected)`` where ``expected`` holds the weights in ONNX gate order,
assembled here from the per-gate weights independently of the recogniser (gate order tables below),
and the names of the state values. Variants cover what exporters vary: gate order, Gemm vs
MatMul+Add vs one joint matmul over Concat(x, h), Split vs Slice, transB, operand order of
commutative ops, batch 1 vs symbolic, separate vs packed state; near-misses compute something else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18

#: gate order of each convention (what the rows of the model's stacked weight matrix are)
LSTM_ORDERS = {"pytorch": "ifgo", "onnx": "iofg", "keras": "ifgo", "odd": "gofi"}  # keras: i, f, c(=g), o
GRU_ORDERS = {"pytorch": "rzn", "onnx": "zrn", "odd": "nzr"}


@dataclass
class Expected:
    kind: str
    W: np.ndarray  # [1, G*H, I] ONNX order
    R: np.ndarray
    Bsum: np.ndarray  # per gate W+R bias sum in ONNX order, [G*H] (what any equivalent split must add up to)
    h_in: str
    c_in: str | None
    h_out: str
    c_out: str | None
    hidden: int
    inputs: dict[str, tuple[int, ...]] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


class _G:
    """A tiny graph builder: unique names, initializers, nodes."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def name(self, stem: str) -> str:
        self.n += 1
        return f"{stem}_{self.n}"

    def const(self, arr: np.ndarray, stem: str = "w") -> str:
        nm = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def op(self, op: str, ins: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.name(f"n{op}"), **attrs))
        return outs[0] if n_out == 1 else outs

    def binop(self, op: str, a: str, b: str, swap: bool) -> str:
        return self.op(op, [b, a] if swap else [a, b])  # type: ignore[return-value]


def _f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _project(g: _G, v: str, W: np.ndarray, b: np.ndarray | None, style: str, swap: bool) -> str:
    """v @ W.T + b written as Gemm (transB 1 or 0) or MatMul + Add."""
    if style == "gemm":
        ins = [v, g.const(_f32(W))] + ([g.const(_f32(b))] if b is not None else [])
        return g.op("Gemm", ins, transB=1)  # type: ignore[return-value]
    if style == "gemm_t0":
        ins = [v, g.const(_f32(W.T))] + ([g.const(_f32(b))] if b is not None else [])
        return g.op("Gemm", ins, transB=0)  # type: ignore[return-value]
    mm = g.op("MatMul", [v, g.const(_f32(W.T))])
    if b is None:
        return mm  # type: ignore[return-value]
    return g.binop("Add", mm, g.const(_f32(b)), swap)  # type: ignore[arg-type]


def _split(g: _G, v: str, n: int, H: int, style: str) -> list[str]:
    if style == "split":
        return g.op("Split", [v], n_out=n, axis=1, num_outputs=n)  # type: ignore[return-value]
    if style == "split_sizes":
        return g.op("Split", [v, g.const(np.array([H] * n, dtype=np.int64), "sizes")], n_out=n, axis=-1)  # type: ignore[return-value]
    outs = []
    for k in range(n):
        s = g.const(np.array([k * H], dtype=np.int64), "st")
        e = g.const(np.array([(k + 1) * H], dtype=np.int64), "en")
        a = g.const(np.array([1], dtype=np.int64), "ax")
        outs.append(g.op("Slice", [v, s, e, a]))
    return outs  # type: ignore[return-value]


def _state_inputs(g: _G, packed: bool, n_states: int, H: int, batch: int | str) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    if packed:
        vi = [helper.make_tensor_value_info("state", TensorProto.FLOAT, [n_states, batch, H])]
        outs = []
        for k in range(n_states):
            idx = g.const(np.array(k, dtype=np.int64), "idx")
            outs.append(g.op("Gather", ["state", idx], axis=0))
        return vi, outs  # type: ignore[return-value]
    names = ["h0", "c0"][:n_states]
    return [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, H]) for n in names], names


def _finish(g: _G, inputs, new_states: list[str], packed: bool, batch, H: int, extra_outputs: list[tuple[str, str]] | None = None) -> onnx.ModelProto:
    outputs = []
    if packed:
        axes = g.const(np.array([0], dtype=np.int64), "axes")
        parts = [g.op("Unsqueeze", [s, axes]) for s in new_states]
        g.nodes.append(helper.make_node("Concat", parts, ["stateN"], axis=0, name="pack"))
        outputs.append(helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [len(new_states), batch, H]))
    else:
        for name, s in zip(["hn", "cn"], new_states):
            g.nodes.append(helper.make_node("Identity", [s], [name], name=f"out_{name}"))
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, H]))
    for name, s in extra_outputs or []:
        g.nodes.append(helper.make_node("Identity", [s], [name], name=f"out_{name}"))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    graph = helper.make_graph(g.nodes, "cell", inputs, outputs, g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def lstm_cell(
    *,
    order: str = "pytorch",
    proj: str = "gemm",
    split: str = "split",
    swap: bool = False,
    batch: int | str = 1,
    packed: bool = False,
    I: int = 5,  # noqa: E741
    H: int = 4,
    seed: int = 0,
    mutant: str = "",
    gate_act: str = "Sigmoid",
) -> tuple[onnx.ModelProto, Expected]:
    """c' = f*c + i*g, h' = o*tanh(c'); gate_act 'HardSigmoid' (alpha 0.25, beta 0.45) as legacy Keras writes it. mutants: 'tanh_cprev' (h' = o*tanh(c)), 'gate_tanh' (forget gate a Tanh),
    'runtime_R' (the recurrent weight is a graph input), 'swap_out' (h'/c' leave in each other's place),
    'c_through_matmul' (the cell state operand is c @ M)."""
    rng = np.random.default_rng(seed)
    gates = LSTM_ORDERS[order]
    Wg = {k: rng.standard_normal((H, I)) * 0.5 for k in "ifgo"}
    Rg = {k: rng.standard_normal((H, H)) * 0.5 for k in "ifgo"}
    bW = {k: rng.standard_normal(H) * 0.3 for k in "ifgo"}
    bR = {k: rng.standard_normal(H) * 0.3 for k in "ifgo"}
    g = _G()
    x = "x"
    state_vi, (h, c) = _state_inputs(g, packed, 2, H, batch)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, I]), *state_vi]
    Wx = np.concatenate([Wg[k] for k in gates])
    Rh = np.concatenate([Rg[k] for k in gates])
    bx = np.concatenate([bW[k] for k in gates])
    bh = np.concatenate([bR[k] for k in gates])
    if proj == "joint":
        cat = g.op("Concat", [h, x] if swap else [x, h], axis=1)
        Wj = np.concatenate([Rh, Wx], axis=1) if swap else np.concatenate([Wx, Rh], axis=1)
        allg = _project(g, cat, Wj, bx + bh, "matmul", swap)  # type: ignore[arg-type]
    else:
        if mutant == "runtime_R":
            inputs.append(helper.make_tensor_value_info("Rt", TensorProto.FLOAT, [4 * H, H]))
            gh = g.op("Gemm", [h, "Rt", g.const(_f32(bh))], transB=1)
        else:
            gh = _project(g, h, Rh, bh, proj, swap)
        gx = _project(g, x, Wx, bx, proj, swap)
        allg = g.binop("Add", gx, gh, swap)  # type: ignore[arg-type]
    parts = dict(zip(gates, _split(g, allg, 4, H, split)))
    hard = {"alpha": 0.25, "beta": 0.45} if gate_act == "HardSigmoid" else {}
    act = {k: g.op(gate_act, [parts[k]], **hard) for k in "ifo"}
    if mutant == "mixed_gates":
        act["o"] = g.op("Sigmoid" if gate_act == "HardSigmoid" else "HardSigmoid", [parts["o"]])
    if mutant == "gate_tanh":
        act["f"] = g.op("Tanh", [parts["f"]])
    act["g"] = g.op("Tanh", [parts["g"]])
    c_operand = c
    if mutant == "c_through_matmul":
        c_operand = g.op("MatMul", [c, g.const(_f32(np.eye(H) * 0.9))])
    fc = g.binop("Mul", act["f"], c_operand, swap)  # type: ignore[arg-type]
    ig = g.binop("Mul", act["g"], act["i"], not swap)  # type: ignore[arg-type]
    c_new = g.binop("Add", fc, ig, swap)  # type: ignore[arg-type]
    th = g.op("Tanh", [c if mutant == "tanh_cprev" else c_new])
    h_new = g.binop("Mul", th, act["o"], swap)  # type: ignore[arg-type]
    outs = [c_new, h_new] if mutant == "swap_out" else [h_new, c_new]
    model = _finish(g, inputs, outs, packed, batch, H)  # type: ignore[arg-type]
    onnx_order = "iofg"
    exp = Expected(
        "LSTM",
        W=np.concatenate([Wg[k] for k in onnx_order])[None],
        R=np.concatenate([Rg[k] for k in onnx_order])[None],
        Bsum=np.concatenate([bW[k] + bR[k] for k in onnx_order]),
        h_in=h,
        c_in=c,
        h_out=h_new,  # type: ignore[arg-type]
        c_out=c_new,  # type: ignore[arg-type]
        hidden=H,
    )
    return model, exp


def gru_cell(
    *,
    order: str = "pytorch",
    proj: str = "gemm",
    split: str = "split",
    swap: bool = False,
    batch: int | str = 1,
    packed: bool = False,
    lbr: int = 1,
    blend: str = "a",
    I: int = 5,  # noqa: E741
    H: int = 4,
    seed: int = 1,
    mutant: str = "",
    blend_view: str = "same",
) -> tuple[onnx.ModelProto, Expected]:
    """blend_view (packed state only): 'same' reads h once; 'other_path' reads the blend's h through another
    layout path (Squeeze(Slice(state))) than the matmul's (Gather(state, 0)); 'other_slice' reads state[1] there.

    ONNX GRU semantics, z the keep ratio: h' = (1-z)*n + z*h. blend 'a': (1-z)*n + z*h; 'b': n + z*(h-n);
    'c': the model's gate is the write ratio u = 1-z: h' = (1-u)*h + u*n; 'd': h - z*h + ... written as h' = n - z*n + z*h.
    lbr 1: n = tanh(Wn x + bWn + r*(Rn h + bRn)); lbr 0: n = tanh(Wn x + Rn (r*h) + b).
    mutants: 'no_reset_mul' (n ignores r: not a GRU), 'z_times_n_only' (h' = z*n + z*h)."""
    rng = np.random.default_rng(seed)
    gates = GRU_ORDERS[order]
    Wg = {k: rng.standard_normal((H, I)) * 0.5 for k in "zrn"}
    Rg = {k: rng.standard_normal((H, H)) * 0.5 for k in "zrn"}
    bW = {k: rng.standard_normal(H) * 0.3 for k in "zrn"}
    bR = {k: rng.standard_normal(H) * 0.3 for k in "zrn"}
    g = _G()
    state_vi, views = _state_inputs(g, packed, 2 if blend_view == "other_slice" else 1, H, batch)
    h = views[0]
    h_blend = h
    if blend_view == "other_path":
        cut = g.op("Slice", ["state", *(g.const(np.array([v], dtype=np.int64)) for v in (0, 1, 0))])
        h_blend = g.op("Squeeze", [cut, g.const(np.array([0], dtype=np.int64))])  # type: ignore[list-item]
    elif blend_view == "other_slice":
        h_blend = views[1]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, I]), *state_vi]
    # the model's own z weights: for the write-ratio blend the model's gate is u = 1 - z = sigmoid(-pre_z)
    sign = -1.0 if blend == "c" else 1.0
    mW = {k: Wg[k] * (sign if k == "z" else 1.0) for k in "zrn"}
    mR = {k: Rg[k] * (sign if k == "z" else 1.0) for k in "zrn"}
    mbW = {k: bW[k] * (sign if k == "z" else 1.0) for k in "zrn"}
    mbR = {k: bR[k] * (sign if k == "z" else 1.0) for k in "zrn"}
    gx = _project(g, "x", np.concatenate([mW[k] for k in gates]), np.concatenate([mbW[k] for k in gates]), proj, swap)
    xs = dict(zip(gates, _split(g, gx, 3, H, split)))
    if lbr:
        gh = _project(g, h, np.concatenate([mR[k] for k in gates]), np.concatenate([mbR[k] for k in gates]), proj, swap)
        hs = dict(zip(gates, _split(g, gh, 3, H, split)))
    else:
        rz = [k for k in gates if k != "n"]
        gh = _project(g, h, np.concatenate([mR[k] for k in rz]), np.concatenate([mbR[k] for k in rz]), proj, swap)
        hs = dict(zip(rz, _split(g, gh, 2, H, split)))
    r = g.op("Sigmoid", [g.binop("Add", xs["r"], hs["r"], swap)])
    z = g.op("Sigmoid", [g.binop("Add", xs["z"], hs["z"], swap)])
    if mutant == "no_reset_mul":
        n_pre = g.binop("Add", xs["n"], hs["n"], swap)
    elif lbr:
        n_pre = g.binop("Add", xs["n"], g.binop("Mul", r, hs["n"], swap), swap)  # type: ignore[arg-type]
    else:
        rh = g.binop("Mul", r, h, swap)  # type: ignore[arg-type]
        n_pre = g.binop("Add", xs["n"], _project(g, rh, mR["n"], mbR["n"], proj, swap), swap)  # type: ignore[arg-type]
    n = g.op("Tanh", [n_pre])
    one = g.const(np.array(1.0, dtype=np.float32), "one")
    hb = h_blend
    if mutant == "z_times_n_only":
        h_new = g.binop("Add", g.binop("Mul", z, n, swap), g.binop("Mul", z, hb, swap), swap)  # type: ignore[arg-type]
    elif blend == "a":
        h_new = g.binop("Add", g.binop("Mul", g.op("Sub", [one, z]), n, swap), g.binop("Mul", z, hb, swap), swap)  # type: ignore[arg-type]
    elif blend == "b":
        h_new = g.binop("Add", n, g.binop("Mul", z, g.op("Sub", [hb, n]), swap), swap)  # type: ignore[arg-type]
    elif blend == "c":
        h_new = g.binop("Add", g.binop("Mul", g.op("Sub", [one, z]), hb, swap), g.binop("Mul", z, n, swap), swap)  # type: ignore[arg-type]
    else:  # 'd': n - z*n + z*h
        h_new = g.binop("Add", g.op("Sub", [n, g.binop("Mul", z, n, swap)]), g.binop("Mul", z, hb, swap), swap)  # type: ignore[arg-type]
    new_states = [h_new, views[1]] if blend_view == "other_slice" else [h_new]
    model = _finish(g, inputs, new_states, packed, batch, H)  # type: ignore[arg-type]
    exp = Expected(
        "GRU",
        W=np.concatenate([Wg[k] for k in "zrn"])[None],
        R=np.concatenate([Rg[k] for k in "zrn"])[None],
        Bsum=np.concatenate([bW[k] + bR[k] for k in "zrn"]),
        h_in=h,
        c_in=None,
        h_out=h_new,  # type: ignore[arg-type]
        c_out=None,
        hidden=H,
        extra={"lbr": lbr, "h_blend": h_blend},
    )
    return model, exp


def rnn_cell(
    *, act: str = "Tanh", proj: str = "gemm", swap: bool = False, batch: int | str = 1, packed: bool = False, I: int = 5, H: int = 4, seed: int = 2, mutant: str = ""  # noqa: E741
) -> tuple[onnx.ModelProto, Expected]:
    """h' = act(W x + R h + b). mutants: 'no_matmul' (h' = tanh(Wx + h): no recurrent weight), 'square' (h' = tanh(Wx + (h*h) R))."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((H, I)) * 0.5
    R = rng.standard_normal((H, H)) * 0.5
    bW = rng.standard_normal(H) * 0.3
    bR = rng.standard_normal(H) * 0.3
    g = _G()
    state_vi, (h,) = _state_inputs(g, packed, 1, H, batch)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, I]), *state_vi]
    gx = _project(g, "x", W, bW, proj, swap)
    if mutant == "no_matmul":
        gh = h
    elif mutant == "square":
        gh = _project(g, g.op("Mul", [h, h]), R, bR, proj, swap)  # type: ignore[arg-type]
    else:
        gh = _project(g, h, R, bR, proj, swap)
    h_new = g.op(act, [g.binop("Add", gx, gh, swap)])
    model = _finish(g, inputs, [h_new], packed, batch, H)  # type: ignore[arg-type]
    return model, Expected("RNN", W[None], R[None], bW + bR, h, None, h_new, None, H, extra={"act": act})  # type: ignore[arg-type]


def unrolled_lstm(*, T: int = 3, I: int = 3, H: int = 4, seed: int = 3, thread: str = "ok") -> onnx.ModelProto:
    """T steps of one LSTM cell (same weights) threaded h->h, c->c; x [T, 1, I]. thread: 'ok', 'swap_hc' (step 2 reads
    c from step 1's h and h from its c), 'write_prev' (the state written back is step T-1's)."""
    rng = np.random.default_rng(seed)
    Wx = _f32(rng.standard_normal((4 * H, I)) * 0.5)
    Rh = _f32(rng.standard_normal((4 * H, H)) * 0.5)
    b = _f32(rng.standard_normal(4 * H) * 0.3)
    g = _G()
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, 1, I]),
        helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, H]),
        helper.make_tensor_value_info("c0", TensorProto.FLOAT, [1, H]),
    ]
    wx, rh, bb = g.const(Wx), g.const(Rh), g.const(b)
    h, c = "h0", "c0"
    hs = [h]
    cs = [c]
    for t in range(T):
        xt = g.op("Gather", ["x", g.const(np.array(t, dtype=np.int64), "t")], axis=0)
        allg = g.op("Add", [g.op("Gemm", [xt, wx, bb], transB=1), g.op("Gemm", [h, rh], transB=1)])
        i, f, gg, o = g.op("Split", [allg], n_out=4, axis=1, num_outputs=4)  # type: ignore[misc]
        c_new = g.op("Add", [g.op("Mul", [g.op("Sigmoid", [f]), c]), g.op("Mul", [g.op("Sigmoid", [i]), g.op("Tanh", [gg])])])
        h_new = g.op("Mul", [g.op("Sigmoid", [o]), g.op("Tanh", [c_new])])
        h, c = h_new, c_new  # type: ignore[assignment]
        if thread == "swap_hc" and t == 0:
            h, c = c, h
        hs.append(h)
        cs.append(c)
    if thread == "write_prev":
        h, c = hs[-2], cs[-2]
    return _finish(g, inputs, [h, c], False, 1, H)


def lstm_loop(*, T: int = 3, I: int = 3, H: int = 4, seed: int = 4, swap_carried: bool = False) -> onnx.ModelProto:
    """A Loop over T steps whose body is one LSTM cell carrying (h, c); swap_carried yields (c', h') in the (h, c) slots."""
    rng = np.random.default_rng(seed)
    Wx = _f32(rng.standard_normal((4 * H, I)) * 0.5)
    Rh = _f32(rng.standard_normal((4 * H, H)) * 0.5)
    b = _f32(rng.standard_normal(4 * H) * 0.3)
    body = _G()
    xt = body.op("Gather", ["x", "it"], axis=0)
    allg = body.op("Add", [body.op("Gemm", [xt, body.const(Wx), body.const(b)], transB=1), body.op("Gemm", ["h_it", body.const(Rh)], transB=1)])
    i, f, gg, o = body.op("Split", [allg], n_out=4, axis=1, num_outputs=4)  # type: ignore[misc]
    c_new = body.op("Add", [body.op("Mul", [body.op("Sigmoid", [f]), "c_it"]), body.op("Mul", [body.op("Sigmoid", [i]), body.op("Tanh", [gg])])])
    h_new = body.op("Mul", [body.op("Sigmoid", [o]), body.op("Tanh", [c_new])])
    body.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_pass"))
    yields = [c_new, h_new] if swap_carried else [h_new, c_new]
    body.nodes.append(helper.make_node("Identity", [yields[0]], ["h_next"], name="yield_h"))
    body.nodes.append(helper.make_node("Identity", [yields[1]], ["c_next"], name="yield_c"))
    bgraph = helper.make_graph(
        body.nodes,
        "body",
        [
            helper.make_tensor_value_info("it", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_it", TensorProto.FLOAT, [1, H]),
            helper.make_tensor_value_info("c_it", TensorProto.FLOAT, [1, H]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_next", TensorProto.FLOAT, [1, H]),
            helper.make_tensor_value_info("c_next", TensorProto.FLOAT, [1, H]),
        ],
        body.inits,
    )
    g = _G()
    trip = g.const(np.array(T, dtype=np.int64), "trip")
    cond = g.const(np.array(True), "cond")
    g.nodes.append(helper.make_node("Loop", [trip, cond, "h0", "c0"], ["hn", "cn"], name="time_loop", body=bgraph))
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, 1, I]),
        helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, H]),
        helper.make_tensor_value_info("c0", TensorProto.FLOAT, [1, H]),
    ]
    outputs = [helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, H]), helper.make_tensor_value_info("cn", TensorProto.FLOAT, [1, H])]
    m = helper.make_model(helper.make_graph(g.nodes, "loop", inputs, outputs, g.inits), opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def lstm_scan(*, T: int = 3, I: int = 3, H: int = 4, seed: int = 5, swap_carried: bool = False, reverse: bool = False) -> onnx.ModelProto:
    """A Scan over x[T, 1, I] whose body is one LSTM cell carrying (h, c); swap_carried yields (c', h') in the (h, c) slots."""
    rng = np.random.default_rng(seed)
    Wx = _f32(rng.standard_normal((4 * H, I)) * 0.5)
    Rh = _f32(rng.standard_normal((4 * H, H)) * 0.5)
    b = _f32(rng.standard_normal(4 * H) * 0.3)
    body = _G()
    allg = body.op("Add", [body.op("Gemm", ["x_t", body.const(Wx), body.const(b)], transB=1), body.op("Gemm", ["h_t", body.const(Rh)], transB=1)])
    i, f, gg, o = body.op("Split", [allg], n_out=4, axis=1, num_outputs=4)  # type: ignore[misc]
    c_new = body.op("Add", [body.op("Mul", [body.op("Sigmoid", [f]), "c_t"]), body.op("Mul", [body.op("Sigmoid", [i]), body.op("Tanh", [gg])])])
    h_new = body.op("Mul", [body.op("Sigmoid", [o]), body.op("Tanh", [c_new])])
    yields = [c_new, h_new] if swap_carried else [h_new, c_new]
    body.nodes.append(helper.make_node("Identity", [yields[0]], ["h_next"], name="yield_h"))
    body.nodes.append(helper.make_node("Identity", [yields[1]], ["c_next"], name="yield_c"))
    body.nodes.append(helper.make_node("Identity", [h_new], ["y_t"], name="yield_y"))
    vi = helper.make_tensor_value_info
    bgraph = helper.make_graph(
        body.nodes,
        "body",
        [vi("h_t", TensorProto.FLOAT, [1, H]), vi("c_t", TensorProto.FLOAT, [1, H]), vi("x_t", TensorProto.FLOAT, [1, I])],
        [vi("h_next", TensorProto.FLOAT, [1, H]), vi("c_next", TensorProto.FLOAT, [1, H]), vi("y_t", TensorProto.FLOAT, [1, H])],
        body.inits,
    )
    attrs = {"num_scan_inputs": 1}
    if reverse:
        attrs["scan_input_directions"] = [1]
    node = helper.make_node("Scan", ["h0", "c0", "x"], ["hn", "cn", "y"], name="time_scan", body=bgraph, **attrs)
    inputs = [vi("x", TensorProto.FLOAT, [T, 1, I]), vi("h0", TensorProto.FLOAT, [1, H]), vi("c0", TensorProto.FLOAT, [1, H])]
    outputs = [vi("hn", TensorProto.FLOAT, [1, H]), vi("cn", TensorProto.FLOAT, [1, H]), vi("y", TensorProto.FLOAT, [T, 1, H])]
    m = helper.make_model(helper.make_graph([node], "scan", inputs, outputs), opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def lstm_op_loop(*, T: int = 3, I: int = 3, H: int = 4, seed: int = 6, swap_carried: bool = False) -> onnx.ModelProto:
    """A Loop whose body runs a one-step ONNX LSTM node on the carried (h, c), as TorchScript exports a scripted
    loop over nn.LSTMCell; swap_carried yields (c', h') in the (h, c) slots."""
    rng = np.random.default_rng(seed)
    body = _G()
    W = body.const(_f32(rng.standard_normal((1, 4 * H, I)) * 0.5))
    R = body.const(_f32(rng.standard_normal((1, 4 * H, H)) * 0.5))
    B = body.const(_f32(rng.standard_normal((1, 8 * H)) * 0.3))
    ax0 = body.const(np.array([0], dtype=np.int64), "ax0")
    xt = body.op("Unsqueeze", [body.op("Gather", ["x", "it"], axis=0), ax0])
    h1 = body.op("Unsqueeze", ["h_it", ax0])
    c1 = body.op("Unsqueeze", ["c_it", ax0])
    _, yh, yc = body.op("LSTM", [xt, W, R, B, "", h1, c1], n_out=3, hidden_size=H)  # type: ignore[misc]
    h_new = body.op("Squeeze", [yh, ax0])
    c_new = body.op("Squeeze", [yc, ax0])
    body.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_pass"))
    yields = [c_new, h_new] if swap_carried else [h_new, c_new]
    body.nodes.append(helper.make_node("Identity", [yields[0]], ["h_next"], name="yield_h"))
    body.nodes.append(helper.make_node("Identity", [yields[1]], ["c_next"], name="yield_c"))
    vi = helper.make_tensor_value_info
    bgraph = helper.make_graph(
        body.nodes,
        "body",
        [vi("it", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("h_it", TensorProto.FLOAT, [1, H]), vi("c_it", TensorProto.FLOAT, [1, H])],
        [vi("cond_out", TensorProto.BOOL, []), vi("h_next", TensorProto.FLOAT, [1, H]), vi("c_next", TensorProto.FLOAT, [1, H])],
        body.inits,
    )
    g = _G()
    trip = g.const(np.array(T, dtype=np.int64), "trip")
    cond = g.const(np.array(True), "cond")
    g.nodes.append(helper.make_node("Loop", [trip, cond, "h0", "c0"], ["hn", "cn"], name="time_loop", body=bgraph))
    inputs = [vi("x", TensorProto.FLOAT, [T, 1, I]), vi("h0", TensorProto.FLOAT, [1, H]), vi("c0", TensorProto.FLOAT, [1, H])]
    outputs = [vi("hn", TensorProto.FLOAT, [1, H]), vi("cn", TensorProto.FLOAT, [1, H])]
    m = helper.make_model(helper.make_graph(g.nodes, "oploop", inputs, outputs, g.inits), opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def unrolled_gru(*, T: int = 3, I: int = 3, H: int = 4, seed: int = 7, write_prev: bool = False) -> onnx.ModelProto:
    """T steps of one PyTorch-style GRU cell (r, z, n; reset after the matmul) threaded h -> h; x [T, 1, I]."""
    rng = np.random.default_rng(seed)
    Wx = _f32(rng.standard_normal((3 * H, I)) * 0.5)
    Rh = _f32(rng.standard_normal((3 * H, H)) * 0.5)
    bx = _f32(rng.standard_normal(3 * H) * 0.3)
    bh = _f32(rng.standard_normal(3 * H) * 0.3)
    g = _G()
    wx, rh, bbx, bbh = g.const(Wx), g.const(Rh), g.const(bx), g.const(bh)
    one = g.const(np.array(1.0, dtype=np.float32), "one")
    h = "h0"
    states = [h]
    for t in range(T):
        xt = g.op("Gather", ["x", g.const(np.array(t, dtype=np.int64), "t")], axis=0)
        xr, xz, xn = g.op("Split", [g.op("Gemm", [xt, wx, bbx], transB=1)], n_out=3, axis=1, num_outputs=3)  # type: ignore[misc]
        hr, hz, hn = g.op("Split", [g.op("Gemm", [h, rh, bbh], transB=1)], n_out=3, axis=1, num_outputs=3)  # type: ignore[misc]
        r = g.op("Sigmoid", [g.op("Add", [xr, hr])])
        z = g.op("Sigmoid", [g.op("Add", [xz, hz])])
        n = g.op("Tanh", [g.op("Add", [xn, g.op("Mul", [r, hn])])])
        h = g.op("Add", [g.op("Mul", [g.op("Sub", [one, z]), n]), g.op("Mul", [z, h])])  # type: ignore[assignment]
        states.append(h)
    out = states[-2] if write_prev else h
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, 1, I]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, H])]
    return _finish(g, inputs, [out], False, 1, H)
