"""Which ONNX recurrent op in a Loop body stands for the whole Loop (mutation survivors of rnnir/lower/recognise.py):
a one-step LSTM node on the carried (h, c), as TorchScript exports a scripted loop over nn.LSTMCell, is the Loop's
recurrence; with sequence_lens, peepholes, clip or input_forget its step is no plain cell, and it stays a recurrent op
of its own inside the body."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.ir.recurrence import Recognition
from tests.support import cell_models as cm
from tests.support.cell_models import _G, lstm_op_loop

H = 4


def loop_model(variant: str):
    m = lstm_op_loop(H=H)
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    lstm = next(n for n in body.node if n.op_type == "LSTM")
    if variant == "sequence_lens":
        body.initializer.append(numpy_helper.from_array(np.array([1], np.int32), "sl"))
        lstm.input[4] = "sl"
    elif variant == "peepholes":
        body.initializer.append(numpy_helper.from_array(np.zeros((1, 3 * H), np.float32), "peep"))
        lstm.input.append("peep")
    elif variant == "clip":
        lstm.attribute.append(helper.make_attribute("clip", 5.0))
    elif variant == "input_forget":
        lstm.attribute.append(helper.make_attribute("input_forget", 1))
    return m


def test_a_plain_lstm_step_in_a_loop_body_is_the_loops_recurrence():
    (rec,) = rnnir.load(loop_model("plain")).recurrents
    assert (rec.kind, rec.recognition, rec.provenance.node) == ("LSTM", Recognition.LOOP, "time_loop")


@pytest.mark.parametrize("variant", ["sequence_lens", "peepholes", "clip", "input_forget"])
def test_an_lstm_step_with_what_a_plain_cell_lacks_stays_an_op_of_its_own(variant):
    (rec,) = rnnir.load(loop_model(variant)).recurrents
    assert rec.recognition is Recognition.OP and rec.provenance.node != "time_loop"


def test_an_lstm_step_in_a_loop_body_that_starts_from_its_own_zeros_is_no_loop_recurrence():
    # the step's initial_h is a constant of the body, not the carried h: the Loop carries h past it unread
    m = loop_model("plain")
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    lstm = next(n for n in body.node if n.op_type == "LSTM")
    body.initializer.append(numpy_helper.from_array(np.zeros((1, 1, H), np.float32), "z"))
    lstm.input[5] = "z"
    prog = rnnir.load(m)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.OP
    assert prog.recurrence_candidates == ()  # recognition ran to the end: nothing failed on the way


# -- unrolled steps: which neighbouring cells are one recurrence ---------------------------------------------------
# Each step is written by hand as plain ops (Gemm, Add, Split, activations) with its own weights; the expected
# grouping follows from the definition of an unrolled loop: the *same* cell (kind, activations, reset placement,
# weights) threaded h -> h (and c -> c for an LSTM) from one step to the next.

F32 = TensorProto.FLOAT


@dataclass(frozen=True)
class Step:
    kind: str = "RNN"
    act: str = "Tanh"  # an RNN step's activation
    lbr: int = 1  # a GRU step's reset placement: 1 after the recurrent matmul (PyTorch), 0 before it
    c_from: str = "prev"  # an LSTM step's cell state: the previous step's c' ("prev") or a graph input's name


def _w(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(np.float32)


def unrolled(steps: list[Step], I: int = 3) -> onnx.ModelProto:  # noqa: E741
    """x{t} [1, I] per step, state h0 (and c0 with LSTM steps) -> hn (cn); every step of one kind has the same weights."""
    g = _G()
    lstm = any(s.kind == "LSTM" for s in steps)
    state = ["h0", "c0"] if lstm else ["h0"]
    inputs = [helper.make_tensor_value_info(n, F32, [1, H]) for n in state]
    h, c = "h0", "c0"
    one = g.const(np.array(1.0, np.float32), "one")
    for t, s in enumerate(steps):
        x = f"x{t}"
        inputs.append(helper.make_tensor_value_info(x, F32, [1, I]))
        G = {"RNN": 1, "GRU": 3, "LSTM": 4}[s.kind]
        W, R, b = _w(G, (G * H, I)), _w(10 + G, (G * H, H)), _w(20 + G, (2, G * H))
        gx = g.op("Gemm", [x, g.const(W), g.const(b[0])], transB=1)
        if s.kind == "RNN":
            h = g.op(s.act, [g.op("Add", [gx, g.op("Gemm", [h, g.const(R), g.const(b[1])], transB=1)])])
        elif s.kind == "LSTM":
            i, f, gg, o = g.op("Split", [g.op("Add", [gx, g.op("Gemm", [h, g.const(R), g.const(b[1])], transB=1)])], n_out=4, axis=1, num_outputs=4)
            c_prev = c if s.c_from == "prev" else s.c_from
            c = g.op("Add", [g.op("Mul", [g.op("Sigmoid", [f]), c_prev]), g.op("Mul", [g.op("Sigmoid", [i]), g.op("Tanh", [gg])])])
            h = g.op("Mul", [g.op("Sigmoid", [o]), g.op("Tanh", [c])])
        else:  # GRU, gates r, z, n; the n gate's recurrent bias is 0 so that both reset placements have the same weights
            b[1, 2 * H :] = 0
            xr, xz, xn = g.op("Split", [gx], n_out=3, axis=1, num_outputs=3)
            if s.lbr:
                hr, hz, hn = g.op("Split", [g.op("Gemm", [h, g.const(R), g.const(b[1])], transB=1)], n_out=3, axis=1, num_outputs=3)
            else:
                hr, hz = g.op("Split", [g.op("Gemm", [h, g.const(R[: 2 * H]), g.const(b[1, : 2 * H])], transB=1)], n_out=2, axis=1, num_outputs=2)
            r = g.op("Sigmoid", [g.op("Add", [xr, hr])])
            z = g.op("Sigmoid", [g.op("Add", [xz, hz])])
            if s.lbr:
                n_pre = g.op("Add", [xn, g.op("Mul", [r, hn])])
            else:
                n_pre = g.op("Add", [xn, g.op("Gemm", [g.op("Mul", [r, h]), g.const(R[2 * H :])], transB=1)])
            n = g.op("Tanh", [n_pre])
            h = g.op("Add", [g.op("Mul", [g.op("Sub", [one, z]), n]), g.op("Mul", [z, h])])
    finals = {"hn": h, "cn": c} if lstm else {"hn": h}
    for name, v in finals.items():
        g.nodes.append(helper.make_node("Identity", [v], [name], name=f"out_{name}"))
    outputs = [helper.make_tensor_value_info(n, F32, [1, H]) for n in finals]
    m = helper.make_model(helper.make_graph(g.nodes, "unrolled", inputs, outputs, g.inits), opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _recurrences(model: onnx.ModelProto) -> list[tuple[str, Recognition]]:
    prog = rnnir.load(model)
    assert prog.recurrence_candidates == ()
    return sorted((r.kind, r.recognition) for r in prog.recurrents)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_two_steps_of_one_cell_threaded_through_the_state_are_one_unrolled_recurrence(kind):
    assert _recurrences(unrolled([Step(kind), Step(kind)])) == [(kind, Recognition.UNROLLED)]


def _two_cells(steps: list[Step]) -> None:
    kind = steps[0].kind
    assert _recurrences(unrolled(steps)) == [(kind, Recognition.CELL), (kind, Recognition.CELL)]


# one test function each: a mutant runs one test of each covering function first, so each case gets its own


def test_neighbouring_rnn_steps_with_other_activations_are_two_recurrences():
    _two_cells([Step("RNN", act="Tanh"), Step("RNN", act="Relu")])


def test_neighbouring_gru_steps_with_the_reset_before_and_after_the_matmul_are_two_recurrences():
    _two_cells([Step("GRU", lbr=1), Step("GRU", lbr=0)])


def test_an_lstm_step_that_restarts_c_from_the_input_is_not_the_previous_steps_next_step():
    _two_cells([Step("LSTM"), Step("LSTM", c_from="c0")])


# -- an RNN cell counts only when its new state goes where state goes ----------------------------------------------


def _rnn_step(g: _G, x: str, h: str) -> str:
    Wx, b, R = g.const(_w(1, (H, 3))), g.const(_w(2, (H,))), g.const(_w(3, (H, H)))
    return g.op("Tanh", [g.op("Add", [g.op("Gemm", [x, Wx, b], transB=1), g.op("Gemm", [h, R], transB=1)])])  # type: ignore[return-value]


def _rnn_model(g: _G, outputs: list[str]) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", F32, [1, 3]), helper.make_tensor_value_info("h0", F32, [1, H])]
    graph = helper.make_graph(g.nodes, "rnn", inputs, [helper.make_tensor_value_info(o, F32, [1, H]) for o in outputs], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def test_tanh_of_an_affine_map_of_the_state_that_is_not_written_back_is_no_recurrence():
    # y = tanh(W x + R h0 + b) leaves as a plain output; the state h0 -> hn is returned unchanged: a readout, not a cell
    g = _G()
    y = _rnn_step(g, "x", "h0")
    g.nodes += [helper.make_node("Identity", [y], ["y"]), helper.make_node("Identity", ["h0"], ["hn"])]
    prog = rnnir.load(_rnn_model(g, ["y", "hn"]))
    assert [(p.input, p.output) for p in prog.state_pairs] == [("h0", "hn")]
    assert prog.recurrents == [] and prog.recurrence_candidates == ()


def test_an_rnn_cells_new_state_written_back_through_an_if_is_a_recurrence():
    # both branches yield Identity(h'): the walk from h' to the state output goes through the branches' nodes
    g = _G()
    new_h = _rnn_step(g, "x", "h0")

    def branch(name: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node("Identity", [new_h], [f"{name}_h"])], name, [], [helper.make_tensor_value_info(f"{name}_h", F32, [1, H])])

    g.nodes.append(helper.make_node("If", [g.const(np.array(True), "cond")], ["hn"], name="pick", then_branch=branch("then"), else_branch=branch("else")))
    assert _recurrences(_rnn_model(g, ["hn"])) == [("RNN", Recognition.CELL)]


@pytest.mark.parametrize(("copies", "recognised"), [(63, True), (64, False)])
def test_the_walk_from_an_rnn_cells_new_state_follows_at_most_64_values(copies, recognised):
    # h' -> Identity -> ... -> hn: with 63 copies hn is the 64th value the walk visits, with 64 the 65th (a cost bound)
    g = _G()
    v = _rnn_step(g, "x", "h0")
    for k in range(copies):
        nxt = "hn" if k == copies - 1 else f"copy{k}"
        g.nodes.append(helper.make_node("Identity", [v], [nxt]))
        v = nxt
    assert _recurrences(_rnn_model(g, ["hn"])) == ([("RNN", Recognition.CELL)] if recognised else [])


def test_a_cell_beside_a_loop_that_carries_other_state_is_still_a_cell():
    # h0 -> RNN cell -> hn in the main graph; s0 -> Loop adding 1 per iteration -> sn: the Loop's carried value is
    # state too, but the cell reads h0, not anything the Loop carries
    g = _G()
    g.nodes.append(helper.make_node("Identity", [_rnn_step(g, "x", "h0")], ["hn"]))
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["s_in", "one"], ["s_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("s_in", F32, [1, H])],
        [vi("c_out", TensorProto.BOOL, []), vi("s_out", F32, [1, H])],
        [numpy_helper.from_array(np.float32(1), "one")],
    )
    trip, cond = g.const(np.array(2, np.int64), "trip"), g.const(np.array(True), "cond")
    g.nodes.append(helper.make_node("Loop", [trip, cond, "s0"], ["sn"], name="count", body=body))
    inputs = [vi("x", F32, [1, 3]), vi("h0", F32, [1, H]), vi("s0", F32, [1, H])]
    graph = helper.make_graph(g.nodes, "cell_and_loop", inputs, [vi("hn", F32, [1, H]), vi("sn", F32, [1, H])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    prog = rnnir.load(m)
    assert sorted((p.input, p.output) for p in prog.state_pairs) == [("h0", "hn"), ("s0", "sn")]
    assert [(r.kind, r.recognition) for r in prog.recurrents] == [("RNN", Recognition.CELL)]


def test_an_onnx_recurrent_op_in_the_main_graph_beside_a_cell_stays_an_op():
    # a GRU node on g0 -> gn and an RNN cell written as plain ops on h0 -> hn: only an op inside a Loop body can
    # stand for a Loop, the main graph's GRU is no such op
    g = _G()
    g.nodes.append(helper.make_node("Identity", [_rnn_step(g, "x", "h0")], ["hn"]))
    x3 = g.op("Unsqueeze", ["x", g.const(np.array([0], np.int64))])
    W, R = g.const(_w(4, (1, 3 * H, 3))), g.const(_w(5, (1, 3 * H, H)))
    g.nodes.append(helper.make_node("GRU", [x3, W, R, "", "", "g0"], ["", "gn"], hidden_size=H, name="gru"))
    vi = helper.make_tensor_value_info
    inputs = [vi("x", F32, [1, 3]), vi("h0", F32, [1, H]), vi("g0", F32, [1, 1, H])]
    graph = helper.make_graph(g.nodes, "cell_and_op", inputs, [vi("hn", F32, [1, H]), vi("gn", F32, [1, 1, H])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    assert _recurrences(m) == [("GRU", Recognition.OP), ("RNN", Recognition.CELL)]


@pytest.mark.parametrize("build", [lambda: cm.rnn_cell()[0], lambda: cm.lstm_cell()[0]], ids=["rnn", "lstm"])
def test_fix_expose_state_leaves_a_cell_that_reads_its_state_inputs_alone(build):
    # the cell starts from the caller's h0 (c0), not from zeros: nothing to expose, nothing to report as skipped
    result = rnnir.fix(build(), expose_state=True)
    assert result.edits == [] and result.skipped == []


# -- Loops whose body runs ONNX recurrent ops ----------------------------------------------------------------------


def rnn_op_loop(
    n_states: int = 1, T: int = 3, I: int = 3, kind: str = "RNN", h_in: str = "unsqueeze", weights: str = "const", bias: bool = False, **attrs: object  # noqa: E741
) -> onnx.ModelProto:
    """A Loop carrying h0..h{n-1}; its body runs one one-step RNN (or GRU) node per carried state, each on its own h.

    h_in: how the node reads the carried [1, H] h: "unsqueeze" (to [1, 1, H]), "scaled" (2 * that: not the state
    itself) or "direct" (the Loop carries h as [1, 1, H] and the node reads it as is); weights "const" (body
    initializers), "input" (W a graph input, known only at run time) or "R_input" (R one); bias: a B input (else none, which means zeros).
    """
    vi = helper.make_tensor_value_info
    G = {"RNN": 1, "GRU": 3}[kind]
    hshape = [1, 1, H] if h_in == "direct" else [1, H]
    body = _G()
    ax0 = body.const(np.array([0], np.int64), "ax0")
    xt = body.op("Unsqueeze", [body.op("Gather", ["x", "it"], axis=0), ax0])
    extra_inputs = []
    for k in range(n_states):
        h = f"h{k}_it"
        if h_in != "direct":
            h = body.op("Unsqueeze", [h, ax0])  # type: ignore[assignment]
        if h_in == "scaled":
            h = body.op("Mul", [h, body.const(np.float32(2), "two")])  # type: ignore[assignment]
        W, R = body.const(_w(k, (1, G * H, I))), body.const(_w(10 + k, (1, G * H, H)))
        if weights in ("input", "R_input"):
            extra_inputs.append(vi(f"R{k}", F32, [1, G * H, H]) if weights == "R_input" else vi(f"W{k}", F32, [1, G * H, I]))
            W, R = (W, f"R{k}") if weights == "R_input" else (f"W{k}", R)
        B = body.const(_w(20 + k, (1, 2 * G * H))) if bias else ""
        node_attrs = {a: v for a, v in {"hidden_size": H, **attrs}.items() if v is not None}
        _, yh = body.op(kind, [xt, W, R, B, "", h], n_out=2, **node_attrs)  # type: ignore[misc]
        if h_in == "direct":
            body.nodes.append(helper.make_node("Identity", [yh], [f"h{k}_next"]))
        else:
            body.nodes.append(helper.make_node("Squeeze", [yh, ax0], [f"h{k}_next"]))
    body.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    carried = range(n_states)
    bgraph = helper.make_graph(
        body.nodes,
        "body",
        [vi("it", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, [])] + [vi(f"h{k}_it", F32, hshape) for k in carried],
        [vi("cond_out", TensorProto.BOOL, [])] + [vi(f"h{k}_next", F32, hshape) for k in carried],
        body.inits,
    )
    g = _G()
    trip, cond = g.const(np.array(T, np.int64), "trip"), g.const(np.array(True), "cond")
    g.nodes.append(helper.make_node("Loop", [trip, cond] + [f"h{k}_in" for k in carried], [f"h{k}_out" for k in carried], name="time_loop", body=bgraph))
    inputs = [vi("x", F32, [T, 1, I])] + [vi(f"h{k}_in", F32, hshape) for k in carried] + extra_inputs
    graph = helper.make_graph(g.nodes, "rnn_op_loop", inputs, [vi(f"h{k}_out", F32, hshape) for k in carried], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def test_a_loop_whose_body_runs_one_rnn_node_on_its_carried_state_is_that_recurrence():
    prog = rnnir.load(rnn_op_loop(1))
    assert [(r.kind, r.recognition, r.provenance.node) for r in prog.recurrents] == [("RNN", Recognition.LOOP, "time_loop")]
    assert prog.recurrence_candidates == ()


@pytest.mark.parametrize(
    ("build", "kind", "activations", "linear_before_reset", "gates"),
    [
        (lambda: rnn_op_loop(), "RNN", ("Tanh",), 0, 1),
        (lambda: rnn_op_loop(h_in="direct"), "RNN", ("Tanh",), 0, 1),
        (lambda: rnn_op_loop(activations=["Relu"]), "RNN", ("Relu",), 0, 1),
        (lambda: rnn_op_loop(kind="GRU"), "GRU", ("Sigmoid", "Tanh"), 0, 3),
        (lambda: rnn_op_loop(kind="GRU", linear_before_reset=1), "GRU", ("Sigmoid", "Tanh"), 1, 3),
    ],
    ids=["rnn", "h-carried-as-1x1xH", "rnn-relu", "gru", "gru-reset-after-matmul"],
)
def test_a_one_step_node_on_the_carried_h_is_the_loops_recurrence_with_the_nodes_attributes(build, kind, activations, linear_before_reset, gates):
    # no B input: ONNX's default bias, zeros [1, 2 * gates * hidden]
    (rec,) = rnnir.load(build()).recurrents
    assert (rec.kind, rec.recognition, rec.activations, rec.linear_before_reset) == (kind, Recognition.LOOP, activations, linear_before_reset)
    B = rec.port("B")
    assert B is not None and B.type.shape == (1, 2 * gates * H) and not np.any(B.const)


def test_a_loop_recurrence_takes_the_nodes_bias():
    m = rnn_op_loop(bias=True)
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    (rec,) = rnnir.load(m).recurrents
    B = rec.port("B")
    assert rec.recognition is Recognition.LOOP and B is not None
    node = next(n for n in body.node if n.op_type == "RNN")
    np.testing.assert_array_equal(B.const, numpy_helper.to_array(next(t for t in body.initializer if t.name == node.input[3])))


@pytest.mark.parametrize(
    "build",
    [
        lambda: rnn_op_loop(direction="reverse"),
        lambda: rnn_op_loop(layout=1),
        lambda: rnn_op_loop(weights="input"),
        lambda: rnn_op_loop(weights="R_input"),
        lambda: rnn_op_loop(h_in="scaled"),
    ],
    ids=["reverse", "batch-first-layout", "W-known-at-run-time", "R-known-at-run-time", "reads-2h-not-h"],
)
def test_a_node_in_a_loop_body_that_is_no_plain_forward_step_on_the_carried_h_stays_an_op(build):
    prog = rnnir.load(build())
    assert [(r.kind, r.recognition) for r in prog.recurrents] == [("RNN", Recognition.OP)]
    assert prog.recurrence_candidates == ()


def test_a_loop_whose_carried_states_reach_two_recurrences_is_no_single_recurrence():
    # h0 and h1 each feed their own RNN node: the Loop is two recurrences, which one Recurrent cannot stand for
    prog = rnnir.load(rnn_op_loop(2))
    assert [r.recognition for r in prog.recurrents] == [Recognition.OP, Recognition.OP]
    assert sorted(c.reason for c in prog.recurrence_candidates) == [
        f"state carried by Loop 'time_loop' as 'h{k}_it' reaches 2 recurrences in its body" for k in (0, 1)
    ]


def test_an_lstm_node_in_a_loop_body_that_restarts_c_from_zeros_ignores_the_carried_c():
    # the body's LSTM reads the carried h but a zero initializer as c: the Loop is the recurrence, its c0 is never read
    m = loop_model("plain")
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    lstm = next(n for n in body.node if n.op_type == "LSTM")
    body.initializer.append(numpy_helper.from_array(np.zeros((1, 1, H), np.float32), "zc"))
    lstm.input[6] = "zc"
    prog = rnnir.load(m)
    assert [(r.recognition, r.provenance.node) for r in prog.recurrents] == [(Recognition.LOOP, "time_loop")]
    assert prog.recurrence_candidates == ()
    assert sorted((d.code, d.slot) for d in passes.run(prog)) == [("SD007", "c0")]


def lstm_loop_with(third: str = "keep", h_copies: int = 1) -> onnx.ModelProto:
    """A Loop whose body is one LSTM cell written as plain ops on the carried (h, c), carrying a third state s_in -> s_out
    that the body passes on unchanged through an Identity ("keep") or yields as its own input ("pass"), replaces by the
    carried h ("copy_h") or counts up ("count"). The new h reaches its
    yield through ``h_copies`` Identity ops."""
    vi = helper.make_tensor_value_info
    body = _G()
    xt = body.op("Gather", ["x", "it"], axis=0)
    gates = body.op("Add", [body.op("Gemm", [xt, body.const(_w(1, (4 * H, 3))), body.const(_w(2, (4 * H,)))], transB=1), body.op("Gemm", ["h_it", body.const(_w(3, (4 * H, H)))], transB=1)])
    i, f, gg, o = body.op("Split", [gates], n_out=4, axis=1, num_outputs=4)  # type: ignore[misc]
    c_new = body.op("Add", [body.op("Mul", [body.op("Sigmoid", [f]), "c_it"]), body.op("Mul", [body.op("Sigmoid", [i]), body.op("Tanh", [gg])])])
    h_new = body.op("Mul", [body.op("Sigmoid", [o]), body.op("Tanh", [c_new])])
    for k in range(h_copies):
        nxt = "h_next" if k == h_copies - 1 else f"h_copy{k}"
        body.nodes.append(helper.make_node("Identity", [h_new], [nxt], name=f"copy_h{k}"))
        h_new = nxt
    body.nodes += [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", [c_new], ["c_next"])]
    s_yield = "s_it" if third == "pass" else "s_next"
    if third == "count":
        body.nodes.append(helper.make_node("Add", ["s_it", body.const(np.float32(1), "one")], ["s_next"], name="count_s"))
    elif third in ("keep", "copy_h"):
        body.nodes.append(helper.make_node("Identity", ["h_it" if third == "copy_h" else "s_it"], ["s_next"], name=third))
    state = [vi(n, F32, [1, H]) for n in ("h_it", "c_it", "s_it")]
    bgraph = helper.make_graph(
        body.nodes,
        "body",
        [vi("it", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), *state],
        [vi("cond_out", TensorProto.BOOL, []), *(vi(n, F32, [1, H]) for n in ("h_next", "c_next", s_yield))],
        body.inits,
    )
    g = _G()
    trip, cond = g.const(np.array(3, np.int64), "trip"), g.const(np.array(True), "cond")
    g.nodes.append(helper.make_node("Loop", [trip, cond, "h0", "c0", "s_in"], ["hn", "cn", "s_out"], name="time_loop", body=bgraph))
    inputs = [vi("x", F32, [3, 1, 3]), *(vi(n, F32, [1, H]) for n in ("h0", "c0", "s_in"))]
    graph = helper.make_graph(g.nodes, "lstm_loop3", inputs, [vi(n, F32, [1, H]) for n in ("hn", "cn", "s_out")], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize(
    ("third", "candidates"),
    [
        ("keep", []),
        ("pass", []),
        ("copy_h", ["state carried by Loop 'time_loop' as 's_it' is transformed in its body by input 'h_it', which rnnir does not understand"]),
        ("count", ["state carried by Loop 'time_loop' as 's_it' is transformed in its body by Add 'count_s', which rnnir does not understand"]),
    ],
)
def test_a_carried_state_the_loops_cell_does_not_explain_is_a_candidate_unless_passed_on_unchanged(third, candidates):
    prog = rnnir.load(lstm_loop_with(third))
    assert sorted((p.input, p.output) for p in prog.state_pairs) == [("c0", "cn"), ("h0", "hn"), ("s_in", "s_out")]
    assert [(r.kind, r.recognition) for r in prog.recurrents] == [("LSTM", Recognition.LOOP)]
    assert [c.reason for c in prog.recurrence_candidates] == candidates


def _unexplained_h(copies: int) -> list[str]:
    # h' = o * tanh(c') reaches the h yield through `copies` Identity ops
    prog = rnnir.load(lstm_loop_with(h_copies=copies))
    assert [r.recognition for r in prog.recurrents] == [Recognition.LOOP]
    return [c.reason for c in prog.recurrence_candidates]


def _h_transformed_by(what: str) -> list[str]:
    return [f"state carried by Loop 'time_loop' as 'h_it' is transformed in its body by {what}, which rnnir does not understand"]


def test_a_yield_15_copies_away_from_the_new_h_is_the_new_h():
    assert _unexplained_h(15) == []


def test_a_yield_16_copies_away_from_the_new_h_is_not_followed_back_and_the_candidate_names_the_op():
    assert _unexplained_h(16) == _h_transformed_by("Mul 'nMul_34'")


def test_an_unexplained_yield_32_copies_away_from_its_op_is_named_by_itself():
    assert _unexplained_h(32) == _h_transformed_by("'h_next'")


# -- the sequence a Loop's recurrence reads as X -------------------------------------------------------------------


def _lstm_gates(body: _G, xs: list[str], h: str, c: str) -> tuple[str, str]:
    """One LSTM step on the inputs xs (one Gemm each, I = 3) and the state (h, c): (h', c')."""
    gates = body.op("Gemm", [h, body.const(_w(3, (4 * H, H)))], transB=1)
    for k, x in enumerate(xs):
        gates = body.op("Add", [body.op("Gemm", [x, body.const(_w(1 + 10 * k, (4 * H, 3))), body.const(_w(2 + 10 * k, (4 * H,)))], transB=1), gates])
    i, f, gg, o = body.op("Split", [gates], n_out=4, axis=1, num_outputs=4)  # type: ignore[misc]
    c_new = body.op("Add", [body.op("Mul", [body.op("Sigmoid", [f]), c]), body.op("Mul", [body.op("Sigmoid", [i]), body.op("Tanh", [gg])])])
    h_new = body.op("Mul", [body.op("Sigmoid", [o]), body.op("Tanh", [c_new])])
    return h_new, c_new  # type: ignore[return-value]


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto] = ()) -> onnx.ModelProto:  # type: ignore[assignment]
    outputs = [helper.make_tensor_value_info(n, F32, [1, H]) for n in ("hn", "cn")]
    m = helper.make_model(helper.make_graph(nodes, "seq", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def loop_reading(how: str, T: int = 3) -> onnx.ModelProto:
    """A Loop over an LSTM cell whose step input is x[t] ("gather": Gather(x, t) on axis 0 of x [T, 1, 3]), x[:, t]
    ("axis1": axis 1 of x [1, T, 3]), the same x0 [1, 3] every step ("outer"), x0 ** t ("pow") or x[t] and u[t] ("two")."""
    vi = helper.make_tensor_value_info
    body = _G()
    xshape, extra = [T, 1, 3], []
    if how == "outer":
        xs, extra = ["x0"], [vi("x0", F32, [1, 3])]
    elif how == "pow":  # x0 ** t: a step input that depends on the iteration without slicing a sequence
        xs, extra = [body.op("Pow", ["x0", "it"])], [vi("x0", F32, [1, 3])]
    elif how == "axis1":
        xs, xshape = [body.op("Gather", ["x", "it"], axis=1)], [1, T, 3]
    else:
        xs = [body.op("Gather", ["x", "it"], axis=0)]
        if how == "two":
            xs.append(body.op("Gather", ["u", "it"], axis=0))
            extra = [vi("u", F32, [T, 1, 3])]
    h_new, c_new = _lstm_gates(body, xs, "h_it", "c_it")  # type: ignore[arg-type]
    body.nodes += [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", [h_new], ["h_next"]), helper.make_node("Identity", [c_new], ["c_next"])]
    state = [vi("h_it", F32, [1, H]), vi("c_it", F32, [1, H])]
    bgraph = helper.make_graph(
        body.nodes,
        "body",
        [vi("it", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), *state],
        [vi("cond_out", TensorProto.BOOL, []), vi("h_next", F32, [1, H]), vi("c_next", F32, [1, H])],
        body.inits,
    )
    g = _G()
    trip, cond = g.const(np.array(T, np.int64), "trip"), g.const(np.array(True), "cond")
    g.nodes.append(helper.make_node("Loop", [trip, cond, "h0", "c0"], ["hn", "cn"], name="time_loop", body=bgraph))
    return _model(g.nodes, [vi("x", F32, xshape), vi("h0", F32, [1, H]), vi("c0", F32, [1, H]), *extra], g.inits)


def scan_reading(how: str, T: int = 3) -> onnx.ModelProto:
    """A Scan over an LSTM cell whose step input is its scanned x_t ("plain": axis 0 of x [T, 1, 3]; "axis1": axis 1
    of x [1, T, 3]), Relu(x_t) ("relu") or a third carried value u, passed on unchanged ("carried")."""
    vi = helper.make_tensor_value_info
    body = _G()
    xt = {"relu": body.op("Relu", ["x_t"]), "carried": "u_t"}.get(how, "x_t")
    h_new, c_new = _lstm_gates(body, [xt], "h_t", "c_t")  # type: ignore[list-item]
    body.nodes += [helper.make_node("Identity", [h_new], ["h_next"]), helper.make_node("Identity", [c_new], ["c_next"]), helper.make_node("Identity", ["u_t"], ["u_next"])]
    state = [vi("h_t", F32, [1, H]), vi("c_t", F32, [1, H]), vi("u_t", F32, [1, 3])]
    bgraph = helper.make_graph(body.nodes, "body", [*state, vi("x_t", F32, [1, 3])], [vi("h_next", F32, [1, H]), vi("c_next", F32, [1, H]), vi("u_next", F32, [1, 3])], body.inits)
    attrs: dict[str, object] = {"num_scan_inputs": 1}
    if how == "axis1":
        attrs["scan_input_axes"] = [1]
    node = helper.make_node("Scan", ["h0", "c0", "u0", "x"], ["hn", "cn", ""], name="time_scan", body=bgraph, **attrs)
    inputs = [vi("x", F32, [1, T, 3] if how == "axis1" else [T, 1, 3]), vi("h0", F32, [1, H]), vi("c0", F32, [1, H]), vi("u0", F32, [1, 3])]
    return _model([node], inputs)


def _loop_x(model: onnx.ModelProto) -> str:
    prog = rnnir.load(model)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.LOOP and prog.recurrence_candidates == ()
    X = rec.port("X")
    assert X is not None
    return X.name


# X of an ONNX recurrence is [seq, batch, input]: the Loop's own x when its body reads x[t] as the cell's whole input;
# anything else (a constant input, another axis, a second sequence, an op on the step) is not that sequence. One test
# function each: a mutant runs one test of each covering function first.


@pytest.mark.parametrize("build", [lambda: loop_reading("gather"), lambda: scan_reading("plain")], ids=["loop-x[t]", "scan-axis-0"])
def test_the_loops_recurrence_reads_the_models_x_when_the_body_takes_x_step_by_step_along_axis_0(build):
    assert _loop_x(build()) == "x"


def test_a_loop_reading_the_same_x0_every_step_has_no_sequence_of_the_model_as_x():
    assert _loop_x(loop_reading("outer")) not in ("x", "x0")


def test_a_loop_slicing_x_along_axis_1_has_no_sequence_of_the_model_as_x():
    assert _loop_x(loop_reading("axis1")) != "x"


def test_a_loop_whose_cell_reads_two_sequences_has_neither_alone_as_x():
    assert _loop_x(loop_reading("two")) not in ("x", "u")


def test_a_loop_whose_step_input_is_x0_to_the_power_t_has_no_sequence_of_the_model_as_x():
    assert _loop_x(loop_reading("pow")) not in ("x", "x0")


def test_a_scan_whose_cell_reads_relu_of_the_step_has_no_sequence_of_the_model_as_x():
    assert _loop_x(scan_reading("relu")) != "x"


def test_a_scan_along_axis_1_has_no_sequence_of_the_model_as_x():
    assert _loop_x(scan_reading("axis1")) != "x"


def test_a_scan_whose_cell_reads_a_carried_value_has_no_sequence_of_the_model_as_x():
    assert _loop_x(scan_reading("carried")) not in ("x", "u0")


def test_a_contrib_quantized_lstm_in_a_loop_body_stays_an_op_of_its_own():
    # onnxruntime's DynamicQuantizeLSTM (int8 weights [1, input, 4H] with scales) on the carried (h, c): only the
    # standard RNN/GRU/LSTM nodes are read as a plain cell standing for the Loop
    m = loop_model("plain")
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    lstm = next(n for n in body.node if n.op_type == "LSTM")
    lstm.op_type, lstm.domain = "DynamicQuantizeLSTM", "com.microsoft"
    for k, (port, rows) in enumerate((("W", 3), ("R", H))):
        body.initializer.append(numpy_helper.from_array(np.ones((1, rows, 4 * H), np.int8), f"q{port}"))
        body.initializer.append(numpy_helper.from_array(np.full((1,), 0.01, np.float32), f"q{port}_scale"))
        body.initializer.append(numpy_helper.from_array(np.zeros((1,), np.int8), f"q{port}_zero"))
        lstm.input[1 + k] = f"q{port}"
    lstm.input.extend(["", "qW_scale", "qW_zero", "qR_scale", "qR_zero"])  # P absent, then the quantization inputs
    prog = rnnir.load(m)
    assert [(r.kind, r.recognition) for r in prog.recurrents] == [("DynamicQuantizeLSTM", Recognition.OP)]
    assert prog.recurrence_candidates == ()
