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
