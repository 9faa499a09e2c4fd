"""How the store-destination rules name a slice, its readers and the state an op starts from (rnnir/passes/store_destinations/context.py).

Mutation survivors of context.py: each program is built with rnnir.Builder so every name is known, and each
expected message is composed by hand from what the program does: which op reads which slice through which port
(directly, or only through a value-changing op), which direction, and what an op's initial state is made of.
"""

from __future__ import annotations

import numpy as np

import rnnir
from rnnir import passes

H, I, T = 4, 3, 5


def weights(b: rnnir.Builder, stem: str, dirs: int = 1, gates: int = 1):
    return (
        b.const(f"W{stem}", np.ones((dirs, gates * H, I), np.float32)),
        b.const(f"R{stem}", np.ones((dirs, gates * H, H), np.float32)),
    )


def findings(prog, code=None):
    return [d for d in passes.run(prog) if code is None or d.code == code]


def test_a_slot_read_only_through_a_value_changing_op_is_not_named_as_the_ops_initial_state():
    # Add(h0, h0) mixes the state with itself: the op reads a value derived from h, not h's slices, so the slice
    # has no recurrent reader to name, and the hint cannot name an op's final state
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w, r = weights(b, "")
    h0 = b.load(h, name="h0")
    b.recurrent("RNN", x, w, r, initial_h=b.compute("Add", [h0, h0]), hidden_size=H, name="rnn", outputs=["Y", "Yh"])
    b.store(b.const("z", np.zeros((1, 1, H), np.float32)), h)
    (d,) = findings(b.build())
    assert (d.code, d.slot) == ("SD003", "h")
    assert d.message == (
        "slot 'h': slice h (not read by any recurrent op) is overwritten with a constant on every call path, not with a final state: every call restarts"
    )
    assert d.hint == "write the final state of the op that reads h into it"


def test_the_same_slot_read_directly_is_named_as_the_ops_initial_state():
    # near miss of the one above: h read as it is
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w, r = weights(b, "")
    b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn", outputs=["Y", "Yh"])
    b.store(b.const("z", np.zeros((1, 1, H), np.float32)), h)
    (d,) = findings(b.build())
    assert d.message == (
        "slot 'h': slice h (initial_h of RNN 'rnn') is overwritten with a constant on every call path, not with a final state: every call restarts"
    )


def swapped_layout1_bidirectional():
    """Two layout=1 bidirectional RNNs, each reading a whole [batch, 2, H] slot; each slot gets the other op's Y_h.

    A layout=1 state is [batch, directions, hidden]: its axis 0 is not the directions, so the slot is one slice read
    by both directions at once (no direction index to print)."""
    b = rnnir.Builder("c")
    x = b.input("x", "float32", (1, T, I))
    slots, finals = [], []
    for n in ("a", "b"):
        s = b.slot(n, "float32", (1, 2, H))
        w, r = weights(b, n, dirs=2)
        _, hn = b.recurrent(
            "RNN", x, w, r, initial_h=b.load(s, name=f"{n}0"), hidden_size=H, name=f"rnn_{n}", direction="bidirectional", layout=1, outputs=[f"Y{n}", f"Yh{n}"]
        )
        slots.append(s)
        finals.append(hn)
    b.store(finals[1], slots[0])
    b.store(finals[0], slots[1])
    return b.build()


def test_a_layout_1_bidirectional_state_read_whole_is_named_without_a_direction():
    found = {(d.code, d.slot): d for d in findings(swapped_layout1_bidirectional())}
    assert sorted(found) == [("SD002", "a"), ("SD002", "b"), ("SD006", "a"), ("SD006", "b")]
    a = found["SD002", "a"]
    assert a.message == (
        "slot 'a': slice a (initial_h of RNN 'rnn_a') is written with RNN 'rnn_b'.Y_h, the final state that belongs to "
        "slot 'b', slice b (initial_h of RNN 'rnn_b'): the next call starts each slice from another slice's state"
    )
    assert a.hint == "write the final state of RNN 'rnn_a'.Y_h into a"
    assert found["SD006", "b"].message == (
        "slot 'b': slice b (initial_h of RNN 'rnn_b') persists RNN 'rnn_a'.Y_h, the final state of the reverse direction of "
        "bidirectional (direction 0 and 1) RNN 'rnn_a': across chunks the reverse recurrence sees the chunks out of order"
    )


def bidirectional_rnn(b: rnnir.Builder, h):
    x = b.input("x", "float32", (T, 1, I))
    w, r = weights(b, "", dirs=2)
    return b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn", direction="bidirectional", outputs=["Y", "Yh"])


def test_directions_written_back_swapped_name_the_slice_each_final_state_belongs_to():
    # h[d] is read as initial_h[d]; Y_h[1] goes into h[0] and Y_h[0] into h[1]
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    _, hn = bidirectional_rnn(b, h)

    def direction(d):
        ints = [b.const(f"{n}{d}", np.array([v])) for n, v in (("start", d), ("end", d + 1), ("axis", 0))]
        return b.compute("Slice", [hn, *ints])

    b.store(b.compute("Concat", [direction(1), direction(0)], attributes={"axis": 0}), h)
    (d,) = findings(b.build(), "SD002")
    assert [(s["slice"], s["got"], s["belongs_to"]) for s in d.data["slices"]] == [
        ("h[0]", "RNN 'rnn'.Y_h[1]", "h[1]"),
        ("h[1]", "RNN 'rnn'.Y_h[0]", "h[0]"),
    ]
    assert d.data["slices"][0]["part"] == (
        "slice h[0] (initial_h[0] of RNN 'rnn') is written with RNN 'rnn'.Y_h[1], the final state that belongs to h[1] (initial_h[1] of RNN 'rnn')"
    )
    assert d.hint == "write the final state of RNN 'rnn'.Y_h[0] into h[0]; write the final state of RNN 'rnn'.Y_h[1] into h[1]"


def rnn_with_slot_shape(shape):
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", shape)
    x = b.input("x", "float32", (T, 1, I))
    w, r = weights(b, "")
    _, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn", outputs=["Y", "Yh"])
    b.store(hn, h)
    return b.build()


def test_a_slot_dim_that_is_not_a_size_is_never_compared():
    # 0 stands for "unknown" in some exporters' shapes, a symbol or None is dynamic, and a bool is not a size:
    # none of them may be read as a hidden size that disagrees with the op's hidden_size=4
    for last in (0, True, "hidden", None):
        assert findings(rnn_with_slot_shape((1, 1, last))) == [], last


def test_a_static_slot_dim_that_differs_from_the_ops_hidden_size_is_sd005():
    (d,) = findings(rnn_with_slot_shape((1, 1, 5)))
    assert d.code == "SD005" and d.message == (
        "slot 'h' (float32[1,1,5]) and the final state written into it disagree on hidden size (hidden size: h <- RNN 'rnn'.Y_h[0]: "
        "the op's hidden_size is 4, the slot's last dim is 5): the state fed back at the next call is not what the slot declares"
    )


# -- If alternatives: a deliberate reset, or an op that has no business writing the slot ---------------------------


def gated(then_start: str):
    """Slot h read by rnn0; If(cond) writes back rnn1's final state (then) or rnn0's (else).

    rnn1 starts from ``then_start``: "none" (no initial_h: zeros), "constant", or "slot g" (the state of another
    slot g, mixed by Add so rnn1 does not own a slice of g, only derives from it)."""
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    cond = b.input("cond", "bool", ())
    w, r = weights(b, "0")
    _, live = b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn0", outputs=["Y0", "Yh0"])
    g = None
    if then_start == "none":
        start = None
    elif then_start == "constant":
        start = b.const("k", np.zeros((1, 1, H), np.float32))
    else:
        g = b.slot("g", "float32", (1, 1, H))
        g0 = b.load(g, name="g0")
        start = b.compute("Add", [g0, g0], outputs=["g2"])
    w, r = weights(b, "1")
    _, other = b.recurrent("RNN", x, w, r, initial_h=start, hidden_size=H, name="rnn1", outputs=["Y1", "Yh1"])
    b.store(b.if_(cond, [other], [live], outputs=["hsel"]), h)
    if g is not None:
        b.store(other, g)
    return b.build()


def test_an_alternative_that_restarts_from_zeros_or_a_constant_while_the_other_writes_live_state_is_a_reset():
    for start in ("none", "constant"):
        assert [d for d in findings(gated(start)) if d.slot == "h"] == [], start


def test_an_alternative_whose_op_starts_from_another_slots_state_is_not_a_reset():
    # rnn1 in the then branch does not read h but does read state (slot g's): its final state is not h's
    (d,) = [d for d in findings(gated("slot g")) if d.slot == "h"]
    assert d.code == "SD003"
    assert d.message == (
        "slot 'h': slice h (initial_h of RNN 'rnn0') is written with RNN 'rnn1'.Y_h[0] in branch then_branch, the final state of "
        "an op that never read this slot (it starts from slot 'g'): the live-out value is not the live-in's final state"
    )
    assert d.hint == "write the final state of RNN 'rnn0'.Y_h into h"


def test_two_alternatives_that_both_restart_are_not_resets_nothing_ever_writes_live_state():
    # h is read by rnn0, whose final state is dropped; both alternatives write an op that starts from zeros
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    cond = b.input("cond", "bool", ())
    w, r = weights(b, "0")
    b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn0", outputs=["Y0", "Yh0"])
    finals = []
    for n in ("1", "2"):
        w, r = weights(b, n)
        finals.append(b.recurrent("RNN", x, w, r, hidden_size=H, name=f"rnn{n}", outputs=[f"Y{n}", f"Yh{n}"])[1])
    b.store(b.if_(cond, [finals[0]], [finals[1]], outputs=["hsel"]), h)
    (d,) = findings(b.build())
    assert d.code == "SD003" and [s["part"] for s in d.data["slices"]] == [
        f"slice h (initial_h of RNN 'rnn0') is written with RNN 'rnn{n}'.Y_h[0] in branch {side}_branch, the final state of an op "
        "that never read this slot (it starts from zeros (no initial_h input))"
        for n, side in (("1", "then"), ("2", "else"))
    ]


def test_an_op_started_from_a_computed_constant_is_said_to_start_from_that_constant():
    # ConstantOfShape(shape) is no initializer, but its value depends on nothing: a constant all the same
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    b.load(h, name="h0")
    w, r = weights(b, "")
    zeros = b.compute("ConstantOfShape", [b.const("shape", np.array([1, 1, H]))], outputs=["zeros"])
    _, hn = b.recurrent("RNN", x, w, r, initial_h=zeros, hidden_size=H, name="rnn", outputs=["Y", "Yh"])
    b.store(hn, h)
    (d,) = findings(b.build())
    assert d.code == "SD007" and d.message == (
        "slot 'h': the state input never reaches the op whose final state is written back (RNN 'rnn'.Y_h[0]); "
        "RNN 'rnn'.initial_h starts from the constant 'zeros': the caller's state is ignored and every call restarts"
    )


def test_an_alternative_that_restarts_while_the_other_keeps_the_state_is_a_reset():
    # If(cond): then rnn1 from zeros, else h handed back unchanged: a deliberate reset, no SD003
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    cond = b.input("cond", "bool", ())
    w, r = weights(b, "0")
    h0 = b.load(h, name="h0")
    b.recurrent("RNN", x, w, r, initial_h=h0, hidden_size=H, name="rnn0", outputs=["Y0", "Yh0"])
    w, r = weights(b, "1")
    _, fresh = b.recurrent("RNN", x, w, r, hidden_size=H, name="rnn1", outputs=["Y1", "Yh1"])
    b.store(b.if_(cond, [fresh], [h0], outputs=["hsel"]), h)
    assert [d.code for d in findings(b.build())] == ["SD009"]  # unverified (a live-in value in one branch), not violated


def test_the_whole_final_state_of_a_bidirectional_op_belongs_to_the_slot_its_directions_read():
    # rnn reads h[0] and h[1] as its two directions; its whole Y_h also goes into g (no shape: one slice)
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    g = b.slot("g", "float32", None)
    _, hn = bidirectional_rnn(b, h)
    b.load(g, name="g0")
    b.store(hn, h)
    b.store(hn, g)
    (d,) = findings(b.build(), "SD002")
    assert d.slot == "g" and d.message.startswith(
        "slot 'g': slice g (not read by any recurrent op) is written with RNN 'rnn'.Y_h, the final state that belongs to slot 'h', slice h["
    )


def test_the_hint_names_no_final_state_for_a_slot_read_only_through_a_value_changing_op():
    # h reaches rnn0 only through Add(h0, h0): no op's final state belongs in it, so the hint cannot name one
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    g = b.slot("g", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w, r = weights(b, "0")
    h0 = b.load(h, name="h0")
    g0 = b.load(g, name="g0")
    _, hn = b.recurrent("RNN", x, w, r, initial_h=b.compute("Add", [h0, h0], outputs=["h2"]), hidden_size=H, name="rnn0", outputs=["Y0", "Yh0"])
    b.store(g0, h)
    b.store(hn, g)
    (d,) = findings(b.build(), "SD002")
    assert d.message == (
        "slot 'h': slice h (not read by any recurrent op) is written with the live-in value of g (not read by any recurrent op): "
        "the next call starts each slice from another slice's state"
    )
    assert d.hint == "write the final state of the op that reads it into h"


def test_an_op_that_reads_another_slice_of_the_slot_is_no_reset_of_this_one():
    # lstm reads h[0] as initial_h and starts c from the constant c0; rnn2 reads h[1]. If(cond) writes back
    # Concat(Y_h, Y_c) (then) or h unchanged (else): h[1] gets lstm's Y_c, an op that reads the slot, just not h[1]
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    cond = b.input("cond", "bool", ())
    h0 = b.load(h, name="h0")

    def part(i):
        ints = [b.const(f"{n}{i}", np.array([v])) for n, v in (("start", i), ("end", i + 1), ("axis", 0))]
        return b.compute("Slice", [h0, *ints], outputs=[f"h0_{i}"])

    w, r = weights(b, "", gates=4)
    c0 = b.const("c0", np.zeros((1, 1, H), np.float32))
    _, yh, yc = b.recurrent("LSTM", x, w, r, initial_h=part(0), initial_c=c0, hidden_size=H, name="lstm", outputs=["Y", "Yh", "Yc"])
    w, r = weights(b, "2")
    b.recurrent("RNN", x, w, r, initial_h=part(1), hidden_size=H, name="rnn2", outputs=["Y2", "Yh2"])
    both = b.compute("Concat", [yh, yc], attributes={"axis": 0}, outputs=["hc"])
    b.store(b.if_(cond, [both], [h0], outputs=["hsel"]), h)
    (d,) = findings(b.build(), "SD003")
    assert d.message == (
        "slot 'h': slice h[1] (initial_h of RNN 'rnn2') is written with LSTM 'lstm'.Y_c[0] in branch then_branch, the final state of "
        "an op that never read this slice (it starts from the constant 'c0'): the live-out value is not the live-in's final state"
    )
    assert d.hint == "write the final state of RNN 'rnn2'.Y_h into h[1]"
