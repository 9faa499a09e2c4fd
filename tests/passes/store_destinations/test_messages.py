"""What store-destination findings say (mutation survivors of rnnir/passes/store_destinations/): the slice and the role
it plays, the branch, where an ignored op starts from, one merged finding per slot. Every expected phrase is read off
the model by hand: which slice feeds which port of which op, in which If branch."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from tests.support.recurrent_op_models import F32, H, I, T, const, model, vi, weights  # noqa: F401 - shared builders


def one(diags, code):
    (d,) = [d for d in diags if d.code == code]
    return d


# -- where an ignored op starts from (SD007) ------------------------------------------------------


def gru_from(init, extra_inputs=(), extra_inits=(), head=()):
    nodes = [*head, helper.make_node("GRU", ["x", "W", "R", "", "", init], ["Y", "hn"], hidden_size=H, name="gru")]
    ins = [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), *extra_inputs]
    return model(nodes, ins, [vi("hn", [1, 1, H])], [*weights("GRU"), *extra_inits])


def test_an_op_started_from_a_constant_names_the_constant():
    d = one(passes.run(rnnir.load(gru_from("k", extra_inits=[const("k", np.zeros((1, 1, H)), np.float32)]))), "SD007")
    assert "GRU 'gru'.initial_h starts from the constant 'k'" in d.message


def test_an_op_started_from_a_plain_input_says_it_depends_on_no_state():
    m = gru_from("start", extra_inputs=[vi("start", [1, 1, H])])
    d = one(passes.run(rnnir.load(m, pairs={"h0": "hn"})), "SD007")
    assert "GRU 'gru'.initial_h starts from 'start', which depends on no state" in d.message


def test_an_op_started_from_another_ops_results_names_that_op():
    head = [helper.make_node("GRU", ["x", "pW", "pR"], ["pY", "pYh"], hidden_size=H, name="pre")]
    m = gru_from("pYh", extra_inits=weights("GRU", prefix="p"), head=head)
    d = one(passes.run(rnnir.load(m)), "SD007")
    assert "GRU 'gru'.initial_h starts from the results of pre" in d.message


def test_an_op_started_from_zeros_says_so():
    d = one(passes.run(rnnir.load(gru_from(""))), "SD007")
    assert "GRU 'gru'.initial_h starts from zeros (no initial_h input)" in d.message


# -- the slice, its role and the branch -----------------------------------------------------------


def test_a_one_direction_op_names_the_role_without_a_direction_index_and_the_branch():
    # then: Y[0] (the first step) written back; else: Y_h; the finding is about the then branch only
    def body(prefix, tail):
        ws = weights("GRU", prefix=prefix)
        return helper.make_graph(
            [
                *[helper.make_node("Constant", [], [w.name], value=w) for w in ws],
                helper.make_node("Constant", [], [prefix + "t"], value=const(prefix + "tv", 0)),
                helper.make_node("GRU", ["x", prefix + "W", prefix + "R", "", "", "h0"], [prefix + "Y", prefix + "Yh"], hidden_size=H, name=prefix + "gru"),
                *tail(prefix),
            ],
            prefix + "body",
            [],
            [vi(prefix + "out", [1, 1, H])],
        )

    then_g = body("t_", lambda p: [helper.make_node("Gather", [p + "Y", p + "t"], [p + "out"], axis=0)])
    else_g = body("e_", lambda p: [helper.make_node("Identity", [p + "Yh"], [p + "out"])])
    nodes = [helper.make_node("If", ["go"], ["hn"], then_branch=then_g, else_branch=else_g, name="gate")]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), vi("go", [], TensorProto.BOOL)], [vi("hn", [1, 1, H])])
    d = one(passes.run(rnnir.load(m)), "SD003")
    role = d.message.split("slice h0 (", 1)[1].split(")", 1)[0]
    assert sorted(role.split(" and ")) == ["initial_h of GRU 'e_gru'", "initial_h of GRU 't_gru'"]  # one direction: no [0]
    assert "is written with GRU 't_gru'.Y[0]@first" in d.message
    assert " in branch gate.then_branch" in d.message and "else_branch" not in d.message


def bidir(tail):
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, direction="bidirectional", name="gru"), *tail]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [2, 1, H])], [vi("hn", [2, 1, H])], weights("GRU", 2))


def test_a_bidirectional_op_names_each_slice_with_its_direction_and_the_swap_is_one_merged_finding():
    tail = [helper.make_node("Split", ["Yh"], ["f", "b"], axis=0), helper.make_node("Concat", ["b", "f"], ["hn"], axis=0)]
    d = one(passes.run(rnnir.load(bidir(tail))), "SD002")
    assert d.message.startswith(
        "slot 'h0': slice h0[0] (initial_h[0] of GRU 'gru') is written with GRU 'gru'.Y_h[1], the final state that belongs to "
        "h0[1] (initial_h[1] of GRU 'gru'); slice h0[1] (initial_h[1] of GRU 'gru') is written with GRU 'gru'.Y_h[0]"
    )
    assert [s["slice"] for s in d.data["slices"]] == ["h0[0]", "h0[1]"]


def test_a_single_finding_is_not_merged():
    d = one(passes.run(rnnir.load(bidir([helper.make_node("Identity", ["Yh"], ["hn"])]))), "SD006")
    assert d.data["slice"] == "h0[1]" and "slices" not in d.data
    assert d.message.startswith("slot 'h0': slice h0[1] (initial_h[1] of GRU 'gru') persists GRU 'gru'.Y_h[1]")


# -- SD001: what is never written back -----------------------------------------------------------


def test_a_builder_slot_loaded_and_never_stored_says_no_store_writes_it_back():
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    rng = np.random.default_rng(1)
    w = b.const("W", rng.standard_normal((1, H, I)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, H, H)).astype(np.float32))
    y, _ = b.recurrent("RNN", x, w, r, initial_h=b.load(h), hidden_size=H, name="rnn")
    b.store(y, b.output("y"), "value")
    d = one(passes.run(b.build()), "SD001")
    assert d.message == "slot 'h', which feeds 'rnn', is loaded but no store writes it back: every call restarts from the initial state"
    assert d.hint == "store the final state into slot 'h' on every call path"


def test_a_state_input_without_an_output_says_no_graph_output_returns_it():
    m = model([helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y"], hidden_size=H, name="gru")], [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("Y", [T, 1, 1, H])], weights("GRU"))
    d = one(passes.run(rnnir.load(m, pairs={"h0": None})), "SD001")
    assert "state input 'h0', which feeds 'gru', is live-in but no graph output returns its final state" in d.message
    assert d.hint.startswith("add a graph output with the final state of 'h0'")


def test_one_slice_handed_back_unchanged_is_SD001_for_that_slice_only():
    # state[2,1,H]: state[0] -> initial_h, state[1] -> initial_c; written back: Y_h and the incoming state[1]
    nodes = [
        helper.make_node("Split", ["state", "sizes"], ["h0", "c0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Concat", ["Yh", "c0"], ["stateN"], axis=0),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("stateN", [2, 1, H])], [*weights("LSTM"), const("sizes", [1, 1])])
    diags = passes.run(rnnir.load(m))
    d = one(diags, "SD001")
    assert d.message == (
        "slot 'state': slice state[1] (initial_c of LSTM 'lstm') is written back with its own live-in value on every call path: "
        "that part of the state never advances across calls"
    )
    assert [x.code for x in diags if x.severity is not passes.Severity.INFO] == ["SD001"]


def test_the_whole_state_handed_back_is_one_SD001_for_the_slot():
    nodes = [
        helper.make_node("Split", ["state", "sizes"], ["h0", "c0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Concat", ["h0", "c0"], ["stateN"], axis=0),
        helper.make_node("Identity", ["Y"], ["y"]),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("y", [T, 1, 1, H]), vi("stateN", [2, 1, H])], [*weights("LSTM"), const("sizes", [1, 1])])
    d = one(passes.run(rnnir.load(m)), "SD001")
    assert d.message.startswith("slot 'state' is written back with its own live-in value on every call path (the state is handed straight back)")


# -- SD005: the dtype a Cast on the exit path converts to ---------------------------------------


def test_a_cast_on_the_exit_path_is_named_by_its_numpy_dtype():
    # one test over every ONNX type code rnnir names (the names are numpy's, bfloat16 aside: numpy has none)
    from onnx.helper import tensor_dtype_to_np_dtype

    codes = [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16]
    for code in codes:
        expected = "bfloat16" if code == TensorProto.BFLOAT16 else tensor_dtype_to_np_dtype(code).name
        to = code if code != TensorProto.FLOAT else TensorProto.DOUBLE  # a Cast to the slot's own dtype is no mismatch
        want = "float64" if code == TensorProto.FLOAT else expected
        nodes = [
            helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"),
            helper.make_node("Cast", ["Yh"], ["hn"], to=to),
        ]
        m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H], to)], weights("GRU"))
        d = one(passes.run(rnnir.load(m, pairs={"h0": "hn"})), "SD005")
        assert f"a Cast to {want} sits on the exit path" in d.message, (code, d.message)


# -- SD002: live-in values swapped, and another state's final state in one branch ------------------


def test_live_in_slices_written_back_swapped_name_the_final_state_each_slice_needs():
    nodes = [
        helper.make_node("Split", ["state", "sizes"], ["h0", "c0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Concat", ["c0", "h0"], ["stateN"], axis=0),
        helper.make_node("Identity", ["Y"], ["y"]),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("y", [T, 1, 1, H]), vi("stateN", [2, 1, H])], [*weights("LSTM"), const("sizes", [1, 1])])
    d = one(passes.run(rnnir.load(m)), "SD002")
    assert "slice state[0] (initial_h of LSTM 'lstm') is written with the live-in value of state[1] (initial_c of LSTM 'lstm')" in d.message
    assert d.hint == "write the final state of LSTM 'lstm'.Y_h into state[0]; write the final state of LSTM 'lstm'.Y_c into state[1]"


def test_a_branch_writing_the_final_state_of_another_states_op_is_SD002_not_a_reset():
    # h0 -> GRU 'a' (then branch writes a's Y_h into h0); g0 -> GRU 'b' -> gn; the else branch writes b's Y_h into h0:
    # b reads a state (g0), so it is no reset: h0 gets g0's recurrence
    ws_a = weights("GRU", prefix="a_")
    then_g = helper.make_graph(
        [
            *[helper.make_node("Constant", [], [w.name], value=w) for w in ws_a],
            helper.make_node("GRU", ["x", "a_W", "a_R", "", "", "h0"], ["a_Y", "a_Yh"], hidden_size=H, name="a"),
            helper.make_node("Identity", ["a_Yh"], ["t_out"]),
        ],
        "then",
        [],
        [vi("t_out", [1, 1, H])],
    )
    else_g = helper.make_graph([helper.make_node("Identity", ["b_Yh"], ["e_out"])], "else", [], [vi("e_out", [1, 1, H])])
    nodes = [
        helper.make_node("GRU", ["x", "b_W", "b_R", "", "", "g0"], ["b_Y", "b_Yh"], hidden_size=H, name="b"),
        helper.make_node("Identity", ["b_Yh"], ["gn"]),
        helper.make_node("If", ["go"], ["hn"], then_branch=then_g, else_branch=else_g, name="gate"),
    ]
    ins = [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), vi("g0", [1, 1, H]), vi("go", [], TensorProto.BOOL)]
    m = model(nodes, ins, [vi("hn", [1, 1, H]), vi("gn", [1, 1, H])], weights("GRU", prefix="b_"))
    diags = passes.run(rnnir.load(m, pairs={"h0": "hn", "g0": "gn"}))
    d = one(diags, "SD002")
    assert d.slot == "h0" and "GRU 'b'.Y_h" in d.message and "g0" in d.message and "gate.else_branch" in d.message
