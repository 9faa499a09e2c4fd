"""Values computed from state through value-changing ops (mutation survivors of store_destinations/derived.py).

Each program is built with rnnir.Builder, the ops named, so the expected SD003/SD006 wording (which ops the
value goes through, nearest first and at most three; which final states and which live-in values it depends on;
which If branch) is composed by hand.  Near misses: a value computed from the right final state only is
unverified (SD009), never SD003.
"""

from __future__ import annotations

import numpy as np

import rnnir
from rnnir import passes

H, I, T = 4, 3, 5
WARN_TAIL = "the live-out value may not be the live-in's final state"


def cell(direction: str = "forward", dirs: int = 1):
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (dirs, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w = b.const("W", np.ones((dirs, H, I), np.float32))
    r = b.const("R", np.ones((dirs, H, H), np.float32))
    y, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn", direction=direction, outputs=["Y", "Yh"])
    return b, h, x, y, hn


def only(b: rnnir.Builder, slot: str = "h"):
    return [(d.code, d.severity.name, d.message) for d in passes.run(b.build()) if d.slot == slot]


def test_a_graph_input_written_back_as_it_is_depends_on_no_state():
    b, h, x, y, hn = cell()
    b.store(b.input("a", "float32", (1, 1, H)), h)
    assert only(b) == [(
        "SD003", "ERROR",
        "slot 'h' is written back with %a, a value that depends on no state (a constant or a graph input computed directly): "
        "every call restarts from it",
    )]


def test_the_ops_named_are_the_three_nearest_the_store():
    # hn -> Tanh -> Sigmoid -> Relu -> Neg -> Add(., h0): five value-changing ops, the three nearest the store named
    b, h, x, y, hn = cell()
    v = hn
    for i, op in enumerate(["Tanh", "Sigmoid", "Relu", "Neg"]):
        v = b.compute(op, [v], name=f"{op.lower()}{i}")
    b.store(b.compute("Add", [v, b.load(h, name="again")], name="mix"), h)
    assert only(b) == [(
        "SD003", "WARNING",
        "slot 'h' is written back with a value computed through Add 'mix', Neg 'neg3', Relu 'relu2' from RNN 'rnn'.Y_h[0], "
        f"which depends on the live-in value of slot 'h': {WARN_TAIL}",
    )]


def test_layout_ops_on_the_way_are_not_named():
    b, h, x, y, hn = cell()
    sq = b.compute("Mul", [hn, hn], name="sq")
    moved = b.compute("Reshape", [sq, b.const("shape", np.array([1, 1, H]))], name="rs")
    b.store(b.compute("Add", [moved, b.load(h, name="again")], name="mix"), h)
    assert only(b) == [(
        "SD003", "WARNING",
        f"slot 'h' is written back with a value computed through Add 'mix', Mul 'sq' from RNN 'rnn'.Y_h[0], which depends on the live-in value of slot 'h': {WARN_TAIL}",
    )]


def test_another_slots_live_in_value_in_one_branch_names_that_slot_and_branch_not_the_condition():
    # If(x summed > 0): then Add(hn, g0), else hn. The ops computing the condition are not on the value's path.
    b, h, x, y, hn = cell()
    g = b.slot("g", "float32", (1, 1, H))
    g0 = b.load(g, name="g0")
    cond = b.compute("Greater", [b.compute("ReduceSum", [x], name="total"), b.const("zero", np.array(0, np.float32))], name="gt")
    b.store(b.if_(cond, [b.compute("Add", [hn, g0], name="mix")], [hn], outputs=["hsel"]), h)
    b.store(hn, g)
    assert only(b) == [(
        "SD003", "WARNING",
        "slot 'h' is written back with a value computed through Add 'mix' from RNN 'rnn'.Y_h[0] in branch then_branch, "
        f"which depends on the live-in value of slot 'g': {WARN_TAIL}",
    )]


def test_a_value_computed_from_the_right_final_state_only_is_unverified_not_violated():
    b, h, x, y, hn = cell()
    b.store(b.compute("Mul", [hn, hn], name="sq"), h)
    assert [code for code, _, _ in only(b)] == ["SD009"]


def test_a_value_computed_from_a_whole_bidirectional_final_state_is_sd006_once():
    # Mul(Y_h, Y_h): both directions, the reverse one among them; one SD006 for the op, and no SD003 (right final states)
    b, h, x, y, hn = cell(direction="bidirectional", dirs=2)
    b.store(b.compute("Mul", [hn, hn], name="sq"), h)
    assert only(b) == [(
        "SD006", "WARNING",
        "slot 'h' is written back with a value computed from RNN 'rnn'.Y_h, the final state of the reverse direction of bidirectional "
        "RNN 'rnn': across chunks the reverse recurrence sees the chunks out of order",
    )]


def fresh_rnn(b: rnnir.Builder, x, n: str):
    w = b.const(f"W{n}", np.ones((1, H, I), np.float32))
    r = b.const(f"R{n}", np.ones((1, H, H), np.float32))
    return b.recurrent("RNN", x, w, r, hidden_size=H, name=f"rnn{n}", outputs=[f"Y{n}", f"Yh{n}"])[1]


def after_from(message: str) -> str:
    """What a computed-value message says the value comes from (after the ops it goes through)."""
    return message.split(" from ", 1)[1]


def test_a_value_computed_from_another_slots_live_in_value_only():
    b, h, x, y, hn = cell()
    g = b.slot("g", "float32", (1, 1, H))
    g0 = b.load(g, name="g0")
    b.store(b.compute("Mul", [g0, g0], name="sq"), h)
    b.store(hn, g)
    assert only(b) == [(
        "SD003", "WARNING",
        f"slot 'h' is written back with a value computed through Mul 'sq' from no recurrent op, which depends on the live-in value of slot 'g': {WARN_TAIL}",
    )]


def test_alternatives_computed_from_ops_that_start_fresh_with_no_live_state_anywhere():
    # h is read by rnn; If(cond) writes back Mul(rnn1.Y_h, ...) or Mul(rnn2.Y_h, ...), both ops starting from zeros:
    # resets on both sides and nothing live, so each branch's value is not the slot's final state
    b, h, x, y, hn = cell()
    cond = b.input("cond", "bool", ())
    sides = [b.compute("Mul", [f, f], name=f"sq{n}") for n, f in (("1", fresh_rnn(b, x, "1")), ("2", fresh_rnn(b, x, "2")))]
    b.store(b.if_(cond, [sides[0]], [sides[1]], outputs=["hsel"]), h)
    found = only(b)
    assert [(code, severity) for code, severity, _ in found] == [("SD003", "WARNING")] * 2
    assert sorted(after_from(m) for _, _, m in found) == [
        f"RNN 'rnn1'.Y_h[0] in branch then_branch, which depends on values that are not final states: {WARN_TAIL}",
        f"RNN 'rnn2'.Y_h[0] in branch else_branch, which depends on values that are not final states: {WARN_TAIL}",
    ]


def test_each_branch_names_the_slot_its_own_value_depends_on():
    b, h, x, y, hn = cell()
    cond = b.input("cond", "bool", ())
    g, k = b.slot("g", "float32", (1, 1, H)), b.slot("k", "float32", (1, 1, H))
    g0, k0 = b.load(g, name="g0"), b.load(k, name="k0")
    b.store(b.if_(cond, [b.compute("Add", [hn, g0], name="mixg")], [b.compute("Add", [hn, k0], name="mixk")], outputs=["hsel"]), h)
    b.store(hn, g)
    b.store(hn, k)
    assert sorted(after_from(m) for code, _, m in only(b) if code == "SD003") == [
        f"RNN 'rnn'.Y_h[0] in branch else_branch, which depends on the live-in value of slot 'k': {WARN_TAIL}",
        f"RNN 'rnn'.Y_h[0] in branch then_branch, which depends on the live-in value of slot 'g': {WARN_TAIL}",
    ]


def test_the_ops_named_are_those_of_the_value_written_back_first():
    # two stores into h (SD004): Add(hn, h0) first, Tanh(hn) second; the SD003 names the first value's ops only
    b, h, x, y, hn = cell()
    b.store(b.compute("Add", [hn, b.load(h, name="again")], name="mix"), h)
    b.store(b.compute("Tanh", [hn], name="t"), h)
    assert [m for code, _, m in only(b) if code == "SD003"] == [
        f"slot 'h' is written back with a value computed through Add 'mix' from RNN 'rnn'.Y_h[0], which depends on the live-in value of slot 'h': {WARN_TAIL}"
    ]


def test_an_absent_optional_input_on_the_way_is_skipped():
    # Clip(hn, <no min>, hi): the missing input is no value to walk through
    b, h, x, y, hn = cell()
    clipped = b.compute("Clip", [hn, None, b.const("hi", np.array(1, np.float32))], name="clip")
    b.store(b.compute("Add", [clipped, b.load(h, name="again")], name="mix"), h)
    assert only(b) == [(
        "SD003", "WARNING",
        f"slot 'h' is written back with a value computed through Add 'mix', Clip 'clip' from RNN 'rnn'.Y_h[0], which depends on the live-in value of slot 'h': {WARN_TAIL}",
    )]


def test_a_value_computed_from_both_final_states_of_a_reverse_lstm_is_one_sd006():
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w = b.const("W", np.ones((1, 4 * H, I), np.float32))
    r = b.const("R", np.ones((1, 4 * H, H), np.float32))
    h0, c0 = b.compute("Split", [b.load(h, name="h0"), b.const("sizes", np.array([1, 1]))], attributes={"axis": 0}, outputs=["p0", "p1"])
    _, yh, yc = b.recurrent("LSTM", x, w, r, initial_h=h0, initial_c=c0, hidden_size=H, name="lstm", direction="reverse", outputs=["Y", "Yh", "Yc"])
    both = b.compute("Concat", [yh, yc], attributes={"axis": 0}, outputs=["hc"])
    b.store(b.compute("Mul", [both, b.const("two", np.array(2, np.float32))], name="dbl"), h)
    assert only(b) == [(
        "SD006", "WARNING",
        "slot 'h' is written back with a value computed from LSTM 'lstm'.Y_h[0], the final state of the reverse direction of reverse "
        "LSTM 'lstm': across chunks the reverse recurrence sees the chunks out of order",
    )]
