"""Verdicts no other test pinned down (issue 15): each model's expected findings are read off the graph by hand,
and where a claim is about numbers (which direction runs forward, which step of Y is the final state) onnxruntime
checks the claim first, so the expectation never comes from rnnir itself."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from tests.support.recurrent_op_models import F32, H, I, T, const, model, vi, weights  # noqa: F401 - shared builders


def findings(prog_or_model, **kw):
    """(code, severity) of every finding above INFO, in report order."""
    prog = prog_or_model if isinstance(prog_or_model, rnnir.Program) else rnnir.load(prog_or_model, **kw)
    return [(d.code, d.severity.value) for d in passes.run(prog) if d.severity is not passes.Severity.INFO]


def run_ort(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


X = np.random.default_rng(11).standard_normal((T, 1, I)).astype(np.float32)


# -- which direction of a bidirectional op is forward ---------------------------------------------


def bidir_gru(tail, h_shape=(2, 1, H), extra_inits=(), gru_init="h0"):
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", gru_init], ["Y", "Yh"], hidden_size=H, direction="bidirectional", name="gru"), *tail]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", list(h_shape))], [vi("Y", [T, 2, 1, H]), vi("hn", list(h_shape))], [*weights("GRU", 2), *extra_inits])


def test_onnxruntime_runs_direction_0_forward_and_direction_1_backward():
    # the oracle for the tests below: Y_h[0] is Y at the last step, Y_h[1] is Y at the first step
    out = run_ort(bidir_gru([helper.make_node("Identity", ["Yh"], ["hn"])]), {"x": X, "h0": np.zeros((2, 1, H), np.float32)})
    np.testing.assert_allclose(out["hn"][0], out["Y"][-1, 0], rtol=1e-6)
    np.testing.assert_allclose(out["hn"][1], out["Y"][0, 1], rtol=1e-6)
    assert not np.allclose(out["hn"][1], out["Y"][-1, 1])


def test_bidirectional_state_maps_each_slice_to_its_direction_and_warns_for_direction_1_only():
    prog = rnnir.load(bidir_gru([helper.make_node("Identity", ["Yh"], ["hn"])]))
    (pair,) = prog.state_pairs
    got = {s.label: ([(e.port, e.direction) for e in s.entry], [(e.port, e.direction) for e in s.exit], dict(s.exit_kind)) for s in pair.slices}
    assert got == {
        "h0[0]": ([("initial_h", 0)], [("Y_h", 0)], {"": "final"}),
        "h0[1]": ([("initial_h", 1)], [("Y_h", 1)], {"": "final"}),
    }
    diags = passes.run(prog)
    assert [(d.code, d.severity.value) for d in diags] == [("SD006", "warning")]
    assert "slice h0[1]" in diags[0].message and "h0[0]" not in diags[0].message and "direction 1" in diags[0].message


def test_bidirectional_directions_written_back_swapped_is_SD002():
    tail = [helper.make_node("Split", ["Yh"], ["fwd", "bwd"], axis=0), helper.make_node("Concat", ["bwd", "fwd"], ["hn"], axis=0)]
    prog = rnnir.load(bidir_gru(tail))
    got = {s.label: [(e.port, e.direction) for e in s.exit] for s in prog.state_pairs[0].slices}
    assert got == {"h0[0]": [("Y_h", 1)], "h0[1]": [("Y_h", 0)]}
    assert findings(prog) == [("SD002", "error"), ("SD006", "warning")]


@pytest.mark.parametrize(("start", "expected"), [(0, []), (1, [("SD006", "warning")])])
def test_persisting_one_direction_of_a_bidirectional_op(start, expected):
    # h0[1,1,H] + zeros -> initial_h[2,1,H]; Y_h[start:start+1] written back: direction 0 is the forward one
    head = [helper.make_node("Concat", ["h0", "zeros"], ["h_init"], axis=0)]
    tail = [helper.make_node("Slice", ["Yh", "s", "e", "a"], ["hn"])]
    inits = [const("zeros", np.zeros((1, 1, H)), np.float32), const("s", [start]), const("e", [start + 1]), const("a", [0])]
    nodes = [*head, helper.make_node("GRU", ["x", "W", "R", "", "", "h_init"], ["Y", "Yh"], hidden_size=H, direction="bidirectional", name="gru"), *tail]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("Y", [T, 2, 1, H]), vi("hn", [1, 1, H])], [*weights("GRU", 2), *inits])
    assert findings(m) == expected
    exits = [(e.port, e.direction) for s in rnnir.load(m).state_pairs[0].slices for e in s.exit]
    assert exits == [("Y_h", start)]


# -- Y written back from a reverse op ----------------------------------------------------------------


def gru_y_step(direction, step):
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, direction=direction, name="gru"),
        helper.make_node("Gather", ["Y", "t"], ["hn"], axis=0),
        helper.make_node("Identity", ["Yh"], ["yh"]),
    ]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H]), vi("yh", [1, 1, H])], [*weights("GRU"), const("t", step)])


@pytest.mark.parametrize(
    ("direction", "step", "is_final", "expected"),
    [
        ("forward", -1, True, []),
        ("forward", 0, False, [("SD003", "error")]),
        ("reverse", 0, True, [("SD006", "warning")]),  # the final state, of a reverse op: persisted, so warned
        ("reverse", -1, False, [("SD003", "error")]),
    ],
)
def test_which_step_of_y_is_the_final_state(direction, step, is_final, expected):
    m = gru_y_step(direction, step)
    out = run_ort(m, {"x": X, "h0": np.full((1, 1, H), 0.3, np.float32)})
    assert np.allclose(out["hn"], out["yh"]) is is_final  # the oracle: is Y[step] the op's Y_h?
    m.graph.output.pop()  # the check output is not part of the model linted
    m.graph.node.pop()
    assert findings(m) == expected


# -- If: one branch keeps or advances the state, the other resets it ----------------------------------


def branch(name, nodes, out):
    return helper.make_graph(nodes, name, [], [vi(out, [1, 1, H])])


def advancing(prefix):
    ws = weights("GRU", prefix=prefix)
    return [
        *[helper.make_node("Constant", [], [w.name], value=w) for w in ws],
        helper.make_node("GRU", ["x", prefix + "W", prefix + "R", "", "", "h0"], [prefix + "Y", prefix + "Yh"], hidden_size=H, name=prefix + "gru"),
        helper.make_node("Identity", [prefix + "Yh"], [prefix + "out"]),
    ]


def resetting(prefix):
    ws = weights("GRU", prefix=prefix)
    return [
        *[helper.make_node("Constant", [], [w.name], value=w) for w in ws],
        helper.make_node("GRU", ["x", prefix + "W", prefix + "R"], [prefix + "Y", prefix + "Yh"], hidden_size=H, name=prefix + "gru"),
        helper.make_node("Identity", [prefix + "Yh"], [prefix + "out"]),
    ]


def zeros(prefix):
    return [helper.make_node("Constant", [], [prefix + "out"], value=const(prefix + "z", np.zeros((1, 1, H)), np.float32))]


def unchanged(prefix):
    return [helper.make_node("Identity", ["h0"], [prefix + "out"])]


def gated(then_body, else_body):
    then_g = branch("then_branch", then_body("t_"), "t_out")
    else_g = branch("else_branch", else_body("e_"), "e_out")
    nodes = [helper.make_node("If", ["go"], ["hn"], then_branch=then_g, else_branch=else_g, name="gate")]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), vi("go", [], TensorProto.BOOL)], [vi("hn", [1, 1, H])])


@pytest.mark.parametrize(
    ("then_body", "else_body", "kinds", "expected"),
    [
        # advance or reset with a fresh op: the reset is deliberate because the other branch keeps the state live
        (advancing, resetting, {"gate.then_branch": "final", "gate.else_branch": "final"}, []),
        (advancing, zeros, {"gate.then_branch": "final", "gate.else_branch": "constant"}, []),
        # keep or reset to zeros: nothing wrong, nothing advanced
        (unchanged, zeros, {"gate.then_branch": "passthrough", "gate.else_branch": "constant"}, []),
        # keep, or run an op that never reads the state: the caller's state never reaches a recurrence
        (unchanged, resetting, {"gate.then_branch": "passthrough", "gate.else_branch": "final"}, [("SD007", "error")]),
        # handed back unchanged on every path (both branches the same value: one kind, no branch): it never advances
        (unchanged, unchanged, {"": "passthrough"}, [("SD001", "error")]),
        # both paths reset: the state is ignored
        (resetting, resetting, {"gate.then_branch": "final", "gate.else_branch": "final"}, [("SD007", "error")]),
        # zeros either way, chosen by a graph input: derived from no state
        (zeros, zeros, {"": "derived"}, [("SD003", "error")]),
    ],
)
def test_if_branches_that_keep_advance_or_reset_the_state(then_body, else_body, kinds, expected):
    prog = rnnir.load(gated(then_body, else_body))
    (sm,) = prog.state_pairs[0].slices
    assert sm.exit_kind == kinds
    assert findings(prog) == expected


# -- chained and aliased stores through view ops ---------------------------------------------------


def rnn_builder():
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    h0 = b.load(h, "copy")
    rng = np.random.default_rng(1)
    w = b.const("W", rng.standard_normal((1, H, I)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, H, H)).astype(np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=h0, hidden_size=H, name="rnn")
    return b, h, hn


@pytest.mark.parametrize("view", ["Reshape", "Squeeze", "Identity"])
def test_output_stored_from_a_view_of_the_slot_store_result_is_AL001(view):
    b, h, hn = rnn_builder()
    res = b.store(hn, h, "value")
    operands = [res, b.const("shape", np.array([1, 1, H], np.int64))] if view == "Reshape" else [res]
    b.store(b.compute(view, operands), b.output("hn"), "value")
    diags = passes.run(b.build())
    assert [d.code for d in diags] == ["AL001"]
    assert "'h'" in diags[0].message and diags[0].data["result"] == "value"


@pytest.mark.parametrize("view", ["Reshape", "Squeeze"])
def test_output_stored_from_a_view_of_the_final_state_is_not_AL001(view):
    b, h, hn = rnn_builder()
    b.store(hn, h)
    operands = [hn, b.const("shape", np.array([1, 1, H], np.int64))] if view == "Reshape" else [hn]
    b.store(b.compute(view, operands), b.output("hn"), "value")
    assert passes.run(b.build()) == []


def test_alias_result_of_a_slot_store_returned_as_an_alias_output_is_AL001_and_AL002():
    b, h, hn = rnn_builder()
    res = b.store(hn, h, "alias")
    b.store(b.compute("Reshape", [res, b.const("shape", np.array([1, 1, H], np.int64))]), b.output("hn"), "alias")
    diags = passes.run(b.build())
    assert sorted(d.code for d in diags) == ["AL001", "AL002"]
    (al002,) = [d for d in diags if d.code == "AL002"]
    assert "ALIAS result of the store into slot 'h'" in al002.message


@pytest.mark.parametrize(("slot_result", "out_result"), [("value", "alias"), ("alias", "value"), ("token", "alias")])
def test_output_alias_needs_an_alias_slot_store_result_for_AL002(slot_result, out_result):
    b, h, hn = rnn_builder()
    res = b.store(hn, h, slot_result)
    b.store(res, b.output("hn"), out_result)
    assert [d.code for d in passes.run(b.build())] == ["AL001"]


# -- state packed along a negative axis ------------------------------------------------------------


def packed(unpack, pack_axis, swap=False):
    """state[2,1,H] -> (h0, c0) -> LSTM -> Concat along pack_axis -> stateN[2,1,H]; axis -3 of a rank-3 tensor is axis 0."""
    unpackers = {
        "split": [helper.make_node("Split", ["state", "sizes"], ["h0", "c0"], axis=-3)],
        "gather": [
            helper.make_node("Gather", ["state", "first"], ["g0"], axis=-3),
            helper.make_node("Gather", ["state", "last"], ["g1"], axis=-3),
            helper.make_node("Unsqueeze", ["g0", "ax0"], ["h0"]),
            helper.make_node("Unsqueeze", ["g1", "ax0"], ["c0"]),
        ],
    }
    nodes = [
        *unpackers[unpack],
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Concat", ["Yc", "Yh"] if swap else ["Yh", "Yc"], ["stateN"], axis=pack_axis),
    ]
    inits = [*weights("LSTM"), const("sizes", [1, 1]), const("first", 0), const("last", -1), const("ax0", [0])]
    return model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("stateN", [2, 1, H])], inits)


def test_onnxruntime_reads_axis_minus_3_as_the_packing_axis():
    m = packed("gather", -3)
    state = np.random.default_rng(5).standard_normal((2, 1, H)).astype(np.float32)
    ref = packed("gather", 0)
    ref.graph.node[0].attribute[0].i = 0
    ref.graph.node[1].attribute[0].i = 0
    np.testing.assert_allclose(run_ort(m, {"x": X, "state": state})["stateN"], run_ort(ref, {"x": X, "state": state})["stateN"], rtol=1e-6)


@pytest.mark.parametrize("unpack", ["split", "gather"])
@pytest.mark.parametrize("pack_axis", [0, -3])
def test_state_packed_along_a_negative_axis_is_traced_slice_by_slice(unpack, pack_axis):
    prog = rnnir.load(packed(unpack, pack_axis))
    got = {s.label: ([(e.port, e.direction) for e in s.entry], [(e.port, e.direction) for e in s.exit]) for s in prog.state_pairs[0].slices}
    assert got == {"state[0]": ([("initial_h", 0)], [("Y_h", 0)]), "state[1]": ([("initial_c", 0)], [("Y_c", 0)])}
    assert passes.run(prog) == []


@pytest.mark.parametrize("unpack", ["split", "gather"])
@pytest.mark.parametrize("pack_axis", [0, -3])
def test_h_and_c_swapped_along_a_negative_axis_is_SD002(unpack, pack_axis):
    assert findings(packed(unpack, pack_axis, swap=True)) == [("SD002", "error")]


# -- per-slice verdicts: all verified or not ----------------------------------------------------------


def test_all_verified_holds_for_a_correct_packed_state_and_not_for_a_swapped_one():
    good = passes.verify(rnnir.load(packed("split", 0)))
    bad = passes.verify(rnnir.load(packed("split", 0, swap=True)))
    assert good.all_verified is True and good.count(passes.Verdict.VERIFIED) == 2
    assert bad.all_verified is False and bad.count(passes.Verdict.VERIFIED) == 0
