"""Recurrences written as plain ops, linted end to end: the correct model is clean and its slices resolve to the
recognised recurrence's ports; planted wiring bugs get the code the existing rules give ONNX recurrent ops.

Expected codes come from what each mutant does to the state (the rule catalogue's definitions), not from
running the code under test first: an h/c swap is SD002, writing back a state the recurrence has moved past
is SD003.
"""

from __future__ import annotations

import onnx
import pytest

import rnnir
from rnnir import cli, passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir.recurrence import Recognition
from tests.support import cell_models as cm


def _findings(model):
    return sorted({(d.code, d.severity.value) for d in passes.run(rnnir.load(model))})


def _slices(prog, pair_input):
    return {sm.label: sm for sm in slice_maps(prog).pair(pair_input).slices}


def _ports(refs):
    return sorted((r.node_id, r.port) for r in refs)


# -- one cell ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: cm.lstm_cell(packed=True)[0],
        lambda: cm.lstm_cell(order="onnx", proj="joint", split="slice")[0],
        lambda: cm.gru_cell(packed=True, blend_view="other_path")[0],
        lambda: cm.gru_cell(lbr=0, blend="c", order="onnx")[0],
        lambda: cm.rnn_cell(act="Relu")[0],
    ],
    ids=["lstm-packed", "lstm-joint", "gru-two-views", "gru-write-ratio", "rnn-relu"],
)
def test_correct_cell_is_clean_and_every_slice_resolves_to_its_ports(build):
    model = build()
    prog = rnnir.load(model)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.CELL and rec.recognised_from
    assert prog.recurrence_candidates == ()
    for pair in slice_maps(prog).declared:
        for sm in pair.slices:
            assert len(sm.entry) == 1 and sm.entry[0].node_id == rec.id and sm.entry[0].port in ("initial_h", "initial_c")
            (ex,) = sm.exit
            assert ex.node_id == rec.id and ex.port == {"initial_h": "Y_h", "initial_c": "Y_c"}[sm.entry[0].port]
            assert set(sm.exit_kind.values()) == {"final"}
    assert passes.run(prog) == []


def test_cell_with_h_and_c_written_back_swapped_is_sd002():
    model, _ = cm.lstm_cell(mutant="swap_out")
    assert _findings(model) == [("SD002", "error")]


def test_cell_that_is_not_an_lstm_is_not_a_recurrence_and_says_why():
    model, _ = cm.lstm_cell(mutant="tanh_cprev")
    prog = rnnir.load(model)
    assert prog.recurrents == []
    (cand,) = prog.recurrence_candidates
    assert cand.kind == "LSTM" and "not o*tanh(c')" in cand.reason


@pytest.mark.parametrize(
    ("model", "why"),
    [
        (lambda: cm.lstm_cell(mutant="tanh_cprev")[0], "does not compute an LSTM cell: h' at node"),
        (lambda: cm.lstm_cell(mutant="runtime_R")[0], "the weights of Gemm"),
        (lambda: cm.gru_cell(mutant="no_reset_mul")[0], "has no reset gate"),
    ],
    ids=["o-tanh-c-prev", "runtime-weights", "gru-without-reset"],
)
def test_a_look_alike_leaves_its_slices_unverified_and_says_why(model, why):
    v = passes.verify(rnnir.load(model()))
    assert v.slices and all(s.verdict.value == "unverified" for s in v.slices)
    assert all(why in s.reason for s in v.slices), [s.reason for s in v.slices]
    assert {d.code for d in v.diagnostics} == {"SD009"}


# -- unrolled steps and Loops -----------------------------------------------------------------


def test_unrolled_loop_is_one_recurrence_from_the_first_step_to_the_last():
    prog = rnnir.load(cm.unrolled_lstm(T=3))
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.UNROLLED
    for slot, entry, final in (("h0", "initial_h", "Y_h"), ("c0", "initial_c", "Y_c")):
        (sm,) = slice_maps(prog).pair(slot).slices
        assert _ports(sm.entry) == [(rec.id, entry)] and _ports(sm.exit) == [(rec.id, final)]
    assert passes.run(prog) == []


def test_unrolled_loop_writing_back_the_previous_step_is_sd003():
    # h after step T-2 of a T-step recurrence is Y at an inner step: "not its final state"
    diags = passes.run(rnnir.load(cm.unrolled_lstm(T=3, thread="write_prev")))
    h = [d for d in diags if d.slot == "h0"]
    assert [(d.code, d.severity.value) for d in h] == [("SD003", "error")] and "the state after step 't=1'" in h[0].message
    assert {d.code for d in diags if d.slot == "c0"} == {"SD003"}


def test_unrolled_gru_is_one_recurrence_and_writing_back_an_inner_step_is_sd003():
    prog = rnnir.load(cm.unrolled_gru(T=4))
    (rec,) = prog.recurrents
    assert (rec.kind, rec.recognition) == ("GRU", Recognition.UNROLLED) and rec.linear_before_reset == 1
    (sm,) = slice_maps(prog).pair("h0").slices
    assert _ports(sm.entry) == [(rec.id, "initial_h")] and _ports(sm.exit) == [(rec.id, "Y_h")]
    assert passes.run(prog) == []
    diags = passes.run(rnnir.load(cm.unrolled_gru(T=4, write_prev=True)))
    assert [(d.code, d.severity.value) for d in diags] == [("SD003", "error")] and "the state after step 't=2'" in diags[0].message


def test_unrolled_steps_threaded_h_into_c_write_back_a_state_that_never_read_the_slot():
    assert _findings(cm.unrolled_lstm(T=3, thread="swap_hc")) == [("SD003", "error")]


def test_loop_carrying_state_is_checked_through_its_body():
    prog = rnnir.load(cm.lstm_loop())
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.LOOP and rec.describe() == "time_loop"
    (h,) = slice_maps(prog).pair("h0").slices
    assert _ports(h.entry) == [(rec.id, "initial_h")] and _ports(h.exit) == [(rec.id, "Y_h")]
    assert passes.run(prog) == []


def test_loop_whose_body_swaps_the_carried_values_is_sd002():
    assert _findings(cm.lstm_loop(swap_carried=True)) == [("SD002", "error")]


@pytest.mark.parametrize("build", [cm.lstm_scan, cm.lstm_op_loop], ids=["scan-cell", "loop-lstm-node"])
def test_scan_and_loop_over_an_lstm_node_are_checked_through_their_body(build):
    prog = rnnir.load(build())
    (rec,) = [r for r in prog.recurrents if r.recognition is Recognition.LOOP]
    for slot, entry, final in (("h0", "initial_h", "Y_h"), ("c0", "initial_c", "Y_c")):
        (sm,) = slice_maps(prog).pair(slot).slices
        assert _ports(sm.entry) == [(rec.id, entry)] and _ports(sm.exit) == [(rec.id, final)]
    assert passes.run(prog) == []
    assert _findings(build(swap_carried=True)) == [("SD002", "error")]


def test_scan_over_a_reversed_sequence_is_not_taken_for_a_forward_recurrence():
    prog = rnnir.load(cm.lstm_scan(reverse=True))
    assert not [r for r in prog.recurrents if r.recognition is Recognition.LOOP]
    assert any("reversed sequence" in c.reason for c in prog.recurrence_candidates)


def test_loop_whose_body_does_something_else_with_the_state_is_a_candidate():
    model = cm.lstm_loop()
    body = model.graph.node[-1].attribute[0].g
    # the carried c leaves through a MatMul instead of as the cell's new c
    yield_c = next(n for n in body.node if n.name == "yield_c")
    body.initializer.append(onnx.numpy_helper.from_array(__import__("numpy").eye(4, dtype="float32"), "M"))
    body.node.insert(len(body.node) - 1, onnx.helper.make_node("MatMul", [yield_c.input[0], "M"], ["c_mixed"], name="mix_c"))
    yield_c.input[0] = "c_mixed"
    prog = rnnir.load(model)
    reasons = [c.reason for c in prog.recurrence_candidates]
    assert any("Loop 'time_loop'" in r and "MatMul 'mix_c'" in r for r in reasons), reasons


# -- silero-vad op18: the real model ----------------------------------------------------------


def _op18(silero_dir) -> onnx.ModelProto:
    return onnx.load(silero_dir / "silero_vad_op18_ifless.onnx")


def _swap_stack_in(model: onnx.ModelProto, branch: str) -> onnx.ModelProto:
    if_node = next(n for n in model.graph.node if n.op_type == "If")
    g = next(a.g for a in if_node.attribute if a.name == branch)
    stack = next(n for n in g.node if n.op_type == "Concat" and n.output[0] == g.output[1].name)
    stack.input[0], stack.input[1] = stack.input[1], stack.input[0]
    return model


@pytest.mark.realmodel
def test_silero_op18_lints_clean_with_every_slice_on_a_recognised_cell(silero_dir, capsys):
    assert cli.main(["lint", "--no-config", str(silero_dir / "silero_vad_op18_ifless.onnx")]) == 0
    prog = rnnir.load(_op18(silero_dir))
    s = _slices(prog, "state")
    assert sorted(s) == ["state[0]", "state[1]"]
    for label, entry, final in (("state[0]", "initial_h", "Y_h"), ("state[1]", "initial_c", "Y_c")):
        assert {(e.port, e.branch[-1]) for e in s[label].entry} == {(entry, "node_cond__1.then_branch"), (entry, "node_cond__1.else_branch")}
        assert {(e.port, e.branch[-1]) for e in s[label].exit} == {(final, "node_cond__1.then_branch"), (final, "node_cond__1.else_branch")}


@pytest.mark.realmodel
@pytest.mark.parametrize("branch", ["then_branch", "else_branch"])
def test_silero_op18_with_h_and_c_swapped_in_one_branch_is_sd002(silero_dir, branch):
    diags = passes.run(rnnir.load(_swap_stack_in(_op18(silero_dir), branch)))
    assert sorted({d.code for d in diags}) == ["SD002"]
    assert all(f"node_cond__1.{branch}" in d.message for d in diags)
    assert not any(f"node_cond__1.{'else' if branch == 'then_branch' else 'then'}_branch" in d.message for d in diags)


# -- the recognised recurrence computes what the model computes ---------------------------------


def _gru_two_views():
    return cm.gru_cell(packed=True, blend_view="other_path")[0]


@pytest.mark.parametrize(
    "build",
    [cm.lstm_scan, cm.lstm_op_loop, cm.lstm_loop, cm.unrolled_lstm, _gru_two_views],
    ids=["scan", "loop-lstm-node", "loop-cell", "unrolled", "gru-cell"],
)
def test_simulated_ir_of_a_recognised_recurrence_equals_onnxruntime_on_the_model(build):
    # rnnir's simulator runs the lowered IR: one Recurrent with the weights recognition read off the model,
    # over the Loop's/Scan's whole sequence; onnxruntime runs the model as written
    import numpy as np
    import onnxruntime as ort

    from rnnir.check.simulate import Simulator

    model = build()
    rng = np.random.default_rng(11)
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    got = Simulator(rnnir.load(model)).run(feeds)
    for name, value in want.items():
        np.testing.assert_allclose(np.asarray(got[name], np.float64), value, atol=1e-5)


def test_a_check_that_breaks_leaves_the_anchor_unconfirmed_and_the_lint_running(monkeypatch):
    from rnnir.lower.cells.lstm import LstmPattern

    def broken(self, rec, node, scope, k):
        if node.op_type == "Add":
            raise ValueError("operands could not be broadcast together")
        return None

    monkeypatch.setattr(LstmPattern, "match", broken)
    model, _ = cm.lstm_cell()
    prog = rnnir.load(model)
    assert prog.recurrents == []
    assert any("could not be checked: operands could not be broadcast" in c.reason for c in prog.recurrence_candidates)
    assert {d.code for d in passes.run(prog)} == {"SD009"}


def test_recognition_that_fails_outright_lowers_the_model_as_before(monkeypatch):
    from rnnir.lower import build

    def broken(*args, **kwargs):
        raise IndexError("index 3 is out of bounds")

    monkeypatch.setattr(build, "recognise", broken)
    prog = rnnir.load(cm.lstm_cell()[0])
    assert prog.recurrents == [] and "failed: index 3 is out of bounds" in prog.recurrence_candidates[0].reason


@pytest.mark.realmodel
def test_faster_whisper_silero_v5_decoder_is_one_verified_lstm_cell_with_its_own_weights():
    import numpy as np

    from tests.support import realmodels

    try:
        path = realmodels.faster_whisper_path("silero_decoder_v5.onnx")
    except realmodels.RealModelUnavailable as exc:
        pytest.skip(f"faster-whisper wheel unavailable: {exc}")
    model = onnx.load(path)
    prog = rnnir.load(model)
    (rec,) = prog.recurrents
    assert rec.kind == "LSTM" and rec.recognition is Recognition.CELL
    v = passes.verify(prog)
    assert v.diagnostics == [] and {s.slice: s.verdict.value for s in v.slices} == {"state[0]": "verified", "state[1]": "verified"}
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    w_ih, w_hh, b_ih, b_hh = (inits[n] for n in realmodels.FASTER_WHISPER_DECODER_WEIGHTS)
    H = w_hh.shape[1]
    # PyTorch i, f, g, o -> ONNX i, o, f, g (tests/realmodels.py: the split is in PyTorch order)
    order = np.concatenate([np.arange(0, H), np.arange(3 * H, 4 * H), np.arange(H, 2 * H), np.arange(2 * H, 3 * H)])
    np.testing.assert_allclose(rec.port("W").const[0], w_ih[order], atol=1e-5)
    np.testing.assert_allclose(rec.port("R").const[0], w_hh[order], atol=1e-5)
    b = rec.port("B").const[0]
    np.testing.assert_allclose(b[: 4 * H] + b[4 * H :], (b_ih + b_hh)[order], atol=1e-5)


def test_recognising_a_long_unrolled_loop_costs_one_pass():
    # every step is confirmed as soon as the previous one is: checks grow with the steps, not with their square
    from rnnir.lower import cells
    from rnnir.lower.cells.lstm import LstmPattern
    from rnnir.lower.scope import ModelIndex

    calls = {"n": 0}
    real = LstmPattern.match

    def counting(self, rec, node, scope, k):
        calls["n"] += 1
        return real(self, rec, node, scope, k)

    for T in (8, 32):
        calls["n"] = 0
        model = cm.unrolled_lstm(T=T)
        index = ModelIndex(model, "t")
        LstmPattern.match = counting
        try:
            scan = cells.find_cells(index, [(index.root, "h0"), (index.root, "c0")])
        finally:
            LstmPattern.match = real
        assert len(scan.matches) == T
        nodes_per_step = len(model.graph.node) / T
        assert calls["n"] <= 1.5 * nodes_per_step * T  # one look at each cone node, not one per step and node


def test_a_residual_stack_on_the_state_is_no_cell_and_costs_no_execution(monkeypatch):
    # act(W h) with no input, repeated: an MLP on the state, not an RNN; recognising it once made every later
    # layer an "RNN" reading all earlier ones (quadratic); now nothing is even probed
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from rnnir.lower.cells.probe import Prober

    H, L = 4, 60
    nodes, cur = [], "h0"
    for i in range(L):
        nodes += [helper.make_node("MatMul", [cur, "W"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"r{i}"]), helper.make_node("Add", [cur, f"r{i}"], [f"a{i}"])]
        cur = f"a{i}"
    nodes.append(helper.make_node("Identity", [cur], ["hn"]))
    W = numpy_helper.from_array((np.random.default_rng(0).standard_normal((H, H)) * 0.1).astype(np.float32), "W")
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, H]) for n in ("h0", "hn")]
    model = helper.make_model(helper.make_graph(nodes, "residual", vi[:1], vi[1:], [W]), opset_imports=[helper.make_opsetid("", 18)])
    probes = {"n": 0}
    real = Prober.probe

    def counting(self, *args, **kwargs):
        probes["n"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Prober, "probe", counting)
    prog = rnnir.load(model)
    assert prog.recurrents == [] and prog.recurrence_candidates == () and probes["n"] == 0
