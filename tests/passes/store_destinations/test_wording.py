"""Every way a store-destination rule words a finding, in full (mutation survivors of rnnir/passes/store_destinations/).

Each program is built with rnnir.Builder so every name is known: slot 'h' read as initial_h of RNN 'rnn', values
named by the test. The expected message is composed by hand from what the program does (which slice, which port,
which op, which branch), so a check that names the wrong thing, or drops a clause, fails."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import rnnir
from rnnir import passes
from rnnir.ir import TensorType

H, I, T = 4, 3, 5


def cell(*, layout=0, direction="forward", seq_lens=False, hidden=H, kind="RNN"):
    b = rnnir.Builder("cell")
    dirs = 2 if direction == "bidirectional" else 1
    h = b.slot("h", "float32", (dirs, 1, hidden) if layout == 0 else (1, dirs, hidden))
    x = b.input("x", "float32", (T, 1, I) if layout == 0 else (1, T, I))
    gates = {"RNN": 1, "GRU": 3}[kind]
    w = b.const("W", np.ones((dirs, gates * hidden, I), np.float32))
    r = b.const("R", np.ones((dirs, gates * hidden, hidden), np.float32))
    lens = b.input("lens", "int32", (1,)) if seq_lens else None
    y, hn = b.recurrent(kind, x, w, r, sequence_lens=lens, initial_h=b.load(h, name="h0"), hidden_size=hidden,
                        direction=direction, layout=layout, name="rnn", outputs=["Y", "Yh"])
    return b, h, y, hn


def findings(b, code):
    return [d for d in passes.run(b.build()) if d.code == code]


def test_sd004_counts_the_stores_and_names_their_values():
    b, h, y, hn = cell()
    first = b.compute("Identity", [hn], outputs=["first"])
    b.store(first, h)
    b.store(hn, h)
    (d,) = findings(b, "SD004")
    head, values, tail = re.fullmatch(r"(.*) \((.*)\)(: .*)", d.message).groups()  # values in program order
    assert head == "slot 'h' is written 2 times in one call" and sorted(values.split(", ")) == ["%Yh", "%first"]
    assert tail == ": a write-after-write on persistent state; which value the next call sees depends on store order"
    assert d.hint == "keep exactly one store of the final state into 'h' per call path" and len(d.locations) == 2


def test_sd004_three_stores_are_one_finding_naming_all_three():
    b, h, y, hn = cell()
    for name in ("a", "c"):
        b.store(b.compute("Identity", [hn], outputs=[name]), h)
    b.store(hn, h)
    (d,) = findings(b, "SD004")
    head, values, _ = re.fullmatch(r"(.*) \((.*)\)(: .*)", d.message).groups()
    assert head == "slot 'h' is written 3 times in one call" and sorted(values.split(", ")) == ["%Yh", "%a", "%c"]


def test_sd001_a_slot_living_in_an_output_nobody_stores():
    b = rnnir.Builder("cell")
    o = b.output("o", "float32", (1, 1, H))
    h = b.slot("h", "float32", (1, 1, H), alias_of=o)
    x = b.input("x", "float32", (T, 1, I))
    b.recurrent("RNN", x, b.const("W", np.ones((1, H, I), np.float32)), b.const("R", np.ones((1, H, H), np.float32)),
                initial_h=b.load(h), hidden_size=H, name="rnn")
    (d,) = findings(b, "SD001")
    assert d.message == "slot 'h', which feeds 'rnn', lives in output 'o', which nothing stores: every call restarts from the initial state"
    assert d.hint == "store the final state into 'h' (and into 'o' separately)"


def test_sd001_a_paired_output_that_is_not_stored_into_the_slot():
    b, h, y, hn = cell()
    b.store(hn, b.output("hn", "float32", (1, 1, H)))
    prog = b.build()
    # declared h -> hn, but only the output is written; a declared pair with an output: not "no output returns it"
    prog.state_pairs = [dataclasses.replace(prog.state_pairs[0], output="hn", source=rnnir.PairSource.DECLARED)]
    (d,) = [d for d in passes.run(prog) if d.code == "SD001"]
    assert d.message == (
        "slot 'h', which feeds 'rnn', is loaded but no store writes it back (paired output 'hn' is not stored into the slot): "
        "every call restarts from the initial state"
    )
    assert d.hint == "store the final state into slot 'h' on every call path"


def test_sd001_a_slot_read_by_no_recurrence_says_nothing_of_what_it_feeds():
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    b.store(b.compute("Neg", [b.load(h)]), b.output("o", "float32", (1, 1, H)))
    (d,) = findings(b, "SD001")
    assert d.message == "slot 'h' is loaded but no store writes it back: every call restarts from the initial state"


def test_sd001_the_whole_state_handed_straight_back():
    b, h, y, hn = cell()
    b.store(b.program.loads[0].outputs[0], h)
    (d,) = findings(b, "SD001")
    assert d.message == (
        "slot 'h' is written back with its own live-in value on every call path (the state is handed straight back): "
        "the recurrence never advances across calls"
    )
    assert d.hint == "write the recurrent op's final state into 'h', not the loaded value"


def test_sd003_y_of_a_layout_1_op_is_a_warning_it_cannot_place():
    b, h, y, hn = cell(layout=1)
    b.store(y, h)
    (d,) = findings(b, "SD003")
    assert d.severity is passes.Severity.WARNING
    assert d.message.startswith("slot 'h': slice h (initial_h of RNN 'rnn') is written with RNN 'rnn'.Y")
    assert d.message.endswith(" of a layout=1 op: rnnir cannot tell which time step that is")
    assert d.hint == "write RNN 'rnn'.Y_h (the final state) instead of a step of Y"


def test_sd003_the_first_step_of_a_forward_op():
    b, h, y, hn = cell()
    b.store(b.compute("Gather", [y, b.const("zero", np.array(0, np.int64))], attributes={"axis": 0}), h)
    (d,) = findings(b, "SD003")
    assert d.message == (
        "slot 'h': slice h (initial_h of RNN 'rnn') is written with RNN 'rnn'.Y[0]@first, the state after step 'first' of the "
        "forward RNN 'rnn', not its final state: the next call resumes from the wrong point of the sequence"
    )


def test_sd003_the_last_step_of_a_reverse_op_is_its_first_time_step():
    b, h, y, hn = cell(direction="reverse")
    b.store(b.compute("Gather", [y, b.const("last", np.array(-1, np.int64))], attributes={"axis": 0}), h)
    msgs = [d.message for d in findings(b, "SD003")]
    assert msgs == [
        "slot 'h': slice h (initial_h of RNN 'rnn') is written with RNN 'rnn'.Y[0]@last, the state after step 'last' of the "
        "reverse RNN 'rnn', not its final state: the next call resumes from the wrong point of the sequence"
    ]


def test_sd003_y_at_the_first_step_of_a_reverse_op_is_its_final_state():
    b, h, y, hn = cell(direction="reverse")
    b.store(b.compute("Gather", [y, b.const("zero", np.array(0, np.int64))], attributes={"axis": 0}), h)
    assert findings(b, "SD003") == []
    (d,) = findings(b, "SD006")  # but it is the reverse recurrence's state
    assert d.message == (
        "slot 'h': slice h (initial_h of RNN 'rnn') persists RNN 'rnn'.Y[0]@first, the final state of the reverse direction "
        "of reverse RNN 'rnn': across chunks the reverse recurrence sees the chunks out of order"
    )


def test_sd008_y_at_the_last_step_with_sequence_lens():
    b, h, y, hn = cell(seq_lens=True)
    b.store(b.compute("Gather", [y, b.const("last", np.array(-1, np.int64))], attributes={"axis": 0}), h)
    (d,) = findings(b, "SD008")
    assert d.message == (
        "slot 'h': slice h (initial_h of RNN 'rnn') is written with RNN 'rnn'.Y[0]@last, Y at the last time step of RNN 'rnn', "
        "which has a sequence_lens input: a batch entry shorter than the chunk gets zeros there and restarts at the next call"
    )
    assert d.hint == "write RNN 'rnn'.Y_h (the final state per entry) into h"


def test_y_at_the_last_step_without_sequence_lens_is_the_final_state():
    b, h, y, hn = cell()
    b.store(b.compute("Gather", [y, b.const("last", np.array(-1, np.int64))], attributes={"axis": 0}), h)
    assert [d.code for d in passes.run(b.build())] == []


def test_sd003_a_constant_on_every_call_path():
    b, h, y, hn = cell()
    b.store(b.const("zeros", np.zeros((1, 1, H), np.float32)), h)
    (d,) = findings(b, "SD003")
    assert d.message == (
        "slot 'h': slice h (initial_h of RNN 'rnn') is overwritten with a constant on every call path, not with a final "
        "state: every call restarts"
    )
    assert d.hint == "write the final state of the op that reads h into it"


def test_sd003_a_value_computed_from_the_final_state_and_the_live_in_value_is_a_warning():
    b, h, y, hn = cell()
    b.store(b.compute("Add", [hn, b.program.loads[0].outputs[0]], name="mix"), h)
    (d,) = findings(b, "SD003")
    assert d.severity is passes.Severity.WARNING
    assert d.message == (
        "slot 'h' is written back with a value computed through Add 'mix' from RNN 'rnn'.Y_h[0], which depends on the "
        "live-in value of slot 'h': the live-out value may not be the live-in's final state"
    )


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_a_value_computed_from_the_right_final_state_only_is_not_violated(direction):
    b, h, y, hn = cell(direction=direction)
    b.store(b.compute("Add", [hn, b.const("zero", np.zeros((1, 1, H), np.float32))], outputs=["plus0"]), h)
    codes = [d.code for d in passes.run(b.build())]
    assert "SD003" not in codes
    assert ("SD006" in codes) == (direction == "reverse")


def test_sd006_a_value_computed_from_a_reverse_final_state():
    b, h, y, hn = cell(direction="reverse")
    b.store(b.compute("Add", [hn, b.const("zero", np.zeros((1, 1, H), np.float32))], outputs=["plus0"]), h)
    (d,) = findings(b, "SD006")
    assert d.message == (
        "slot 'h' is written back with a value computed from RNN 'rnn'.Y_h[0], the final state of the reverse direction of "
        "reverse RNN 'rnn': across chunks the reverse recurrence sees the chunks out of order"
    )


# -- SD005: which aspect, and the evidence for it ----------------------------------------------


_TAIL = ": the state fed back at the next call is not what the slot declares"


def test_sd005_a_cast_names_the_value_the_paired_output_and_the_cast():
    b, h, y, hn = cell()
    c = b.compute("Cast", [hn], attributes={"to": 10}, outputs=["c"], types=[TensorType("float16", (1, 1, H))])  # 10: FLOAT16
    b.store(c, h)
    b.store(c, b.output("hn", "float16", (1, 1, H)))
    (d,) = findings(b, "SD005")
    assert d.message == (
        "slot 'h' (float32[1,1,4]) and the final state written into it disagree on dtype (dtype: the value written back "
        "(%c) is float16, paired output 'hn' is float16, a Cast to float16 sits on the exit path)" + _TAIL
    )
    assert d.hint == "make the returned state match the state input exactly (float32[1,1,4]); convert outside the recurrence if needed"
    assert d.data["aspects"] == ["dtype"]


def test_sd005_a_cast_to_the_slot_dtype_is_no_mismatch():
    b, h, y, hn = cell()
    b.store(b.compute("Cast", [hn], attributes={"to": 1}, outputs=["c"], types=[TensorType("float32", (1, 1, H))]), h)  # 1: FLOAT
    assert findings(b, "SD005") == []


def test_sd005_a_hidden_size_other_than_the_slot_last_dim():
    b2 = rnnir.Builder("wide")
    h = b2.slot("h", "float32", (1, 1, 8))
    x = b2.input("x", "float32", (T, 1, I))
    _, hn = b2.recurrent("RNN", x, b2.const("W", np.ones((1, H, I), np.float32)), b2.const("R", np.ones((1, H, H), np.float32)),
                         initial_h=b2.load(h), hidden_size=H, name="rnn")
    b2.store(hn, h)
    (d,) = findings(b2, "SD005")
    assert d.message == (
        "slot 'h' (float32[1,1,8]) and the final state written into it disagree on hidden size (hidden size: "
        "h <- RNN 'rnn'.Y_h[0]: the op's hidden_size is 4, the slot's last dim is 8)" + _TAIL
    )


def _gru(h0shape, hnshape=(1, 1, H)):

    from onnx import helper

    from tests.support.recurrent_op_models import model, vi, weights

    return model([helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["", "hn"], hidden_size=H, name="gru")],
                 [vi("x", [T, 1, I]), vi("h0", list(h0shape))], [vi("hn", list(hnshape))], weights("GRU"))


def test_sd005_a_batch_other_than_the_op_batch():
    (d,) = [d for d in passes.run(rnnir.load(_gru((1, 2, H)))) if d.code == "SD005"]
    assert d.message == (
        "slot 'h0' (float32[1,2,4]) and the final state written into it disagree on batch (batch: dim 1 is 1 in the value "
        "written back (%hn), 2 in the slot, h0 <- GRU 'gru'.Y_h[0]: the op's batch is 1, the slot's is 2)" + _TAIL
    )


def test_sd005_more_directions_than_the_op_writes():
    (d,) = [d for d in passes.run(rnnir.load(_gru((2, 1, H)))) if d.code == "SD005"]
    assert d.message == (
        "slot 'h0' (float32[2,1,4]) and the final state written into it disagree on directions/layers and directions "
        "(directions/layers: dim 0 is 1 in the value written back (%hn), 2 in the slot; directions: h0 <- GRU 'gru'.Y_h[0]: "
        "the op writes 1 direction(s), the slot holds 2)" + _TAIL
    )
    assert d.data["aspects"] == ["directions/layers", "directions"]


def test_sd005_a_symbolic_batch_never_mismatches():
    assert passes.run(rnnir.load(_gru((1, "B", H), (1, "B", H)))) == []


# -- SD002 / SD007: whose state it is --------------------------------------------------------------


def lstm(c_from_slot=True):
    b = rnnir.Builder("lstm")
    h = b.slot("h", "float32", (1, 1, H))
    c = b.slot("c", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w = b.const("W", np.ones((1, 4 * H, I), np.float32))
    r = b.const("R", np.ones((1, 4 * H, H), np.float32))
    c0 = b.load(c) if c_from_slot else None
    _, hn, cn = b.recurrent("LSTM", x, w, r, initial_h=b.load(h), initial_c=c0, hidden_size=H, name="lstm")
    return b, h, c, hn, cn


def test_sd002_h_and_c_swapped_between_two_slots_name_the_slot_each_belongs_to():
    b, h, c, hn, cn = lstm()
    b.store(cn, h)
    b.store(hn, c)
    by_slot = {d.slot: d for d in findings(b, "SD002")}
    assert by_slot["h"].message == (
        "slot 'h': slice h (initial_h of LSTM 'lstm') is written with LSTM 'lstm'.Y_c[0], the final state that belongs to "
        "slot 'c', slice c (initial_c of LSTM 'lstm'): the next call starts each slice from another slice's state"
    )
    assert by_slot["h"].hint == "write the final state of LSTM 'lstm'.Y_h into h"
    assert by_slot["c"].message == (
        "slot 'c': slice c (initial_c of LSTM 'lstm') is written with LSTM 'lstm'.Y_h[0], the final state that belongs to "
        "slot 'h', slice h (initial_h of LSTM 'lstm'): the next call starts each slice from another slice's state"
    )
    assert by_slot["h"].data == {"slice": "h", "got": "LSTM 'lstm'.Y_c[0]", "belongs_to": "c", "part": by_slot["h"].data["part"],
                                 "consequence": "the next call starts each slice from another slice's state"}


def test_sd002_another_port_of_the_op_that_reads_the_slice():
    b, h, c, hn, cn = lstm(c_from_slot=False)  # c starts from zeros: Y_c belongs to no slot
    b.store(cn, h)
    b.store(cn, c)
    (d,) = [d for d in findings(b, "SD002") if d.slot == "h"]
    assert d.message == (
        "slot 'h': slice h (initial_h of LSTM 'lstm') is written with LSTM 'lstm'.Y_c[0], the final state of another port "
        "or direction of the same op: the next call starts this slice from the wrong state"
    )
    assert d.hint == "write the final state of LSTM 'lstm'.Y_h into h"


def test_sd007_a_state_input_no_op_reads():
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    _, hn = b.recurrent("RNN", x, b.const("W", np.ones((1, H, I), np.float32)), b.const("R", np.ones((1, H, H), np.float32)),
                        hidden_size=H, name="rnn")
    b.load(h)
    b.store(hn, h)
    (d,) = findings(b, "SD007")
    assert d.message == (
        "slot 'h': the state input never reaches the op whose final state is written back (RNN 'rnn'.Y_h[0]); "
        "RNN 'rnn'.initial_h starts from zeros (no initial_h input): the caller's state is ignored and every call restarts"
    )
    assert d.hint == "feed 'h' (its slice) into the op's initial state instead of the constant/other value"
    assert "slice" not in d.data and findings(b, "SD003") == []  # SD007 covers the slot: SD003 does not repeat it


# -- packed state: one slot, two slices -------------------------------------------------------------


def _packed(tail_inputs, *, direction="forward", read_c=True):
    """state[2,1,H] -> Gather/Unsqueeze -> h0 (and c0) -> LSTM 'lstm' -> stateN = Concat(tail_inputs)."""

    from onnx import helper

    from tests.support.recurrent_op_models import const, model, vi, weights

    nodes = [
        helper.make_node("Gather", ["state", "i0"], ["g0"], axis=0),
        helper.make_node("Gather", ["state", "i1"], ["g1"], axis=0),
        helper.make_node("Unsqueeze", ["g0", "ax0"], ["h0"]),
        helper.make_node("Unsqueeze", ["g1", "ax0"], ["c0"]),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0" if read_c else ""], ["Y", "Yh", "Yc"], hidden_size=H, direction=direction, name="lstm"),
        helper.make_node("Concat", list(tail_inputs), ["stateN"], axis=0),
    ]
    inits = [const("i0", 0), const("i1", 1), const("ax0", [0]), *weights("LSTM")]
    return rnnir.load(model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("stateN", [2, 1, H])], inits))


_H_ROLE, _C_ROLE = "state[0] (initial_h of LSTM 'lstm')", "state[1] (initial_c of LSTM 'lstm')"


def test_sd001_one_slice_handed_back_while_the_other_advances():
    (d,) = [d for d in passes.run(_packed(["Yh", "c0"])) if d.code == "SD001"]
    assert d.message == (
        f"slot 'state': slice {_C_ROLE} is written back with its own live-in value on every call path: "
        "that part of the state never advances across calls"
    )
    assert d.hint == "write the final state that belongs to state[1] into it" and d.data["slice"] == "state[1]"


def test_sd002_the_live_in_values_of_two_slices_swapped():
    (d,) = [d for d in passes.run(_packed(["c0", "h0"])) if d.code == "SD002"]
    assert d.message == (
        f"slot 'state': slice {_H_ROLE} is written with the live-in value of {_C_ROLE}; slice {_C_ROLE} is written with "
        f"the live-in value of {_H_ROLE}: the next call starts each slice from another slice's state"
    )
    assert d.hint == "write the final state of LSTM 'lstm'.Y_h into state[0]; write the final state of LSTM 'lstm'.Y_c into state[1]"
    assert [s["slice"] for s in d.data["slices"]] == ["state[0]", "state[1]"]


def test_sd007_a_slice_no_op_reads_while_its_final_state_is_written_back():
    diags = passes.run(_packed(["Yh", "Yc"], read_c=False))
    (d,) = [d for d in diags if d.code == "SD007"]
    assert d.message == (
        "slot 'state': slice state[1] (not read by any recurrent op) never reaches the op whose final state is written back "
        "(LSTM 'lstm'.Y_c[0]); LSTM 'lstm'.initial_c starts from zeros (no initial_c input): the caller's state is ignored "
        "and every call restarts"
    )
    assert d.data["slice"] == "state[1]"
    assert not [x for x in diags if x.code in ("SD002", "SD003")]  # SD007 covers state[1]; state[0] is right


def test_sd006_is_one_finding_per_op_even_when_both_its_states_are_persisted():
    (d,) = [d for d in passes.run(_packed(["Yh", "Yc"], direction="reverse")) if d.code == "SD006"]
    assert d.message == (
        f"slot 'state': slice {_H_ROLE} persists LSTM 'lstm'.Y_h[0], the final state of the reverse direction of "
        "reverse LSTM 'lstm': across chunks the reverse recurrence sees the chunks out of order"
    )


# -- branches and near misses ------------------------------------------------------------------------


def test_a_branch_choosing_between_values_made_outside_it_is_named():
    b, h, y, hn = cell()
    first = b.compute("Gather", [y, b.const("zero", np.array(0, np.int64))], attributes={"axis": 0})
    b.store(b.if_(b.input("go", "bool", ()), [first], [hn]), h)
    (d,) = findings(b, "SD003")
    assert d.message == (
        "slot 'h': slice h (initial_h of RNN 'rnn') is written with RNN 'rnn'.Y[0]@first, the state after step 'first' of "
        "the forward RNN 'rnn' in branch then_branch, not its final state: the next call resumes from the wrong point of the sequence"
    )


def test_a_reverse_op_with_sequence_lens_has_its_final_state_at_y0():
    b, h, y, hn = cell(direction="reverse", seq_lens=True)
    b.store(b.compute("Gather", [y, b.const("zero", np.array(0, np.int64))], attributes={"axis": 0}), h)
    assert findings(b, "SD008") == [] and findings(b, "SD003") == []


def test_sd003_a_value_computed_from_an_op_that_does_not_read_the_slot():
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    b.load(h)
    _, hn = b.recurrent("RNN", x, b.const("W", np.ones((1, H, I), np.float32)), b.const("R", np.ones((1, H, H), np.float32)),
                        hidden_size=H, name="rnn")
    b.store(b.compute("Add", [hn, b.const("zero", np.zeros((1, 1, H), np.float32))], name="plus"), h)
    (d,) = findings(b, "SD003")
    assert d.severity is passes.Severity.WARNING
    assert d.message == (
        "slot 'h' is written back with a value computed through Add 'plus' from RNN 'rnn'.Y_h[0], which depends on "
        "RNN 'rnn'.Y_h[0]: the live-out value may not be the live-in's final state"
    )


@pytest.mark.parametrize(
    ("declared", "mismatch"),
    [("batch_first", True), ("BTH", True), ("layout=1", True), ("1", True), ("seq_first", False), ("time_first", False),
     ("TBH", False), ("0", False), ("layout=0", False), ("channels_last", False)],
)
def test_sd005_a_declared_layout_against_the_op_layout(declared, mismatch):
    from rnnir.ir import TensorType

    b, h, y, hn = cell()  # the op runs layout=0 (time first)
    h.type = TensorType("float32", (1, 1, H), layout=declared)
    b.store(hn, h)
    found = findings(b, "SD005")
    if not mismatch:  # the same layout, or a name rnnir does not know: nothing to compare
        assert found == []
        return
    (d,) = found
    assert d.message == (
        f"slot 'h' (float32[1,1,4] layout={declared}) and the final state written into it disagree on layout (layout: "
        f"h <- RNN 'rnn'.Y_h[0]: the slot is declared layout {declared!r}, the op runs layout=0)" + _TAIL
    )


def test_sd005_a_quantized_slot_written_with_a_plain_final_state():
    from rnnir.ir import QuantParams, TensorType

    b, h, y, hn = cell()
    q = QuantParams(scale=(0.5,), zero_point=(0,))
    h.type = TensorType("float32", (1, 1, H), quant=q)
    b.store(hn, h)
    (d,) = findings(b, "SD005")
    assert d.message == (
        f"slot 'h' (float32[1,1,4] q(scale=(0.5,))) and the final state written into it disagree on quantization (quantization: "
        f"the slot is quantized {q}, the value written back is not quantized)" + _TAIL
    )


def test_sd005_a_value_of_unknown_type_and_origin_is_not_called_unquantized():
    from rnnir.ir import QuantParams, TensorType

    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    h.type = TensorType("float32", (1, 1, H), quant=QuantParams(scale=(0.5,), zero_point=(0,)))
    b.store(b.compute("Identity", [b.load(h)]), h)  # a value with no declared type, made by a plain op
    assert findings(b, "SD005") == []


def test_swapped_live_in_values_are_not_also_a_handed_back_state():
    assert [d.code for d in passes.run(_packed(["c0", "h0"])) if d.code == "SD001"] == []


def test_a_state_input_no_op_reads_is_one_sd007_for_the_whole_slot_not_one_per_slice():

    from onnx import helper

    from tests.support.recurrent_op_models import model, vi, weights

    # state[2,1,H] is an input and stateN = Concat(Y_h, Y_c) its pair, but the LSTM starts from zeros: no slice is read
    nodes = [helper.make_node("LSTM", ["x", "W", "R"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
             helper.make_node("Concat", ["Yh", "Yc"], ["stateN"], axis=0)]
    prog = rnnir.load(model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("stateN", [2, 1, H])], weights("LSTM")))
    diags = passes.run(prog)
    (d,) = [d for d in diags if d.code == "SD007"]
    assert d.message.startswith("slot 'state': the state input never reaches the op whose final state is written back (")
    assert "slice" not in d.data
    assert [x.code for x in diags if x.code in ("SD002", "SD003")] == []  # SD007 covered every slice


def test_a_cast_target_is_read_with_the_onnx_numbering():
    from onnx import helper

    from rnnir.passes.store_destinations.state_types import _cast_target

    for code in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16):  # ONNX's own table is the oracle
        assert _cast_target(str(code)) == str(np.dtype(helper.tensor_dtype_to_np_dtype(code))), code
    assert _cast_target("8") is None  # STRING: no numpy dtype rnnir compares
    assert (_cast_target(None), _cast_target("like"), _cast_target("float16")) == (None, None, "float16")
