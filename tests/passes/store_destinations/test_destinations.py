"""Slice destinations: which final state, which step of Y, which port (mutation survivors of store_destinations/destinations.py).

Each program is built with rnnir.Builder (ops and values named) and the expected findings are composed by hand.
Which step of Y is an op's final state is ONNX semantics: a forward op ends at Y[-1], a reverse op at Y[0]
(tests/passes/test_verdicts_read_by_hand.py checks that against onnxruntime).
"""

from __future__ import annotations

import numpy as np

import rnnir
from rnnir import passes

H, I, T = 4, 3, 5


def codes_and_messages(b: rnnir.Builder) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in passes.run(b.build())]


def y_step(direction: str, index: int) -> rnnir.Builder:
    """Slot h read by RNN 'rnn' and written back with Squeeze(Gather(Y, index, axis=0))."""
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w = b.const("W", np.ones((1, H, I), np.float32))
    r = b.const("R", np.ones((1, H, H), np.float32))
    y, _ = b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn", direction=direction, outputs=["Y", "Yh"])
    step = b.compute("Gather", [y, b.const("t", np.array(index, np.int64))], attributes={"axis": 0}, outputs=["yt"])
    b.store(b.compute("Squeeze", [step, b.const("axis", np.array([0]))], outputs=["ys"]), h)
    return b


def test_which_step_of_y_is_written_back():
    here = "slot 'h': slice h (initial_h of RNN 'rnn')"
    resumes = "not its final state: the next call resumes from the wrong point of the sequence"
    # the final step: nothing wrong for a forward op; for a reverse op its final state is persisted (SD006), nothing else
    assert codes_and_messages(y_step("forward", -1)) == []
    assert codes_and_messages(y_step("reverse", 0)) == [(
        "SD006",
        f"{here} persists RNN 'rnn'.Y[0]@first, the final state of the reverse direction of reverse RNN 'rnn': "
        "across chunks the reverse recurrence sees the chunks out of order",
    )]
    # any other step
    assert codes_and_messages(y_step("forward", 0)) == [
        ("SD003", f"{here} is written with RNN 'rnn'.Y[0]@first, the state after step 'first' of the forward RNN 'rnn', {resumes}")
    ]
    assert codes_and_messages(y_step("forward", 2)) == [
        ("SD003", f"{here} is written with RNN 'rnn'.Y[0]@t=2, the state after step 't=2' of the forward RNN 'rnn', {resumes}")
    ]
    assert codes_and_messages(y_step("reverse", -1)) == [
        ("SD003", f"{here} is written with RNN 'rnn'.Y[0]@last, the state after step 'last' of the reverse RNN 'rnn', {resumes}")
    ]


def test_the_other_final_state_of_the_same_op_is_another_port():
    # h is the LSTM's initial_h (initial_c is a constant, so no slot owns Y_c); h is written back with Y_c
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w = b.const("W", np.ones((1, 4 * H, I), np.float32))
    r = b.const("R", np.ones((1, 4 * H, H), np.float32))
    c0 = b.const("c0", np.zeros((1, 1, H), np.float32))
    _, yh, yc = b.recurrent("LSTM", x, w, r, initial_h=b.load(h, name="h0"), initial_c=c0, hidden_size=H, name="lstm", outputs=["Y", "Yh", "Yc"])
    b.store(yc, h)
    (d,) = passes.run(b.build())
    assert (d.code, d.message) == (
        "SD002",
        "slot 'h': slice h (initial_h of LSTM 'lstm') is written with LSTM 'lstm'.Y_c[0], the final state of another port or direction "
        "of the same op: the next call starts this slice from the wrong state",
    )
    assert d.hint == "write the final state of LSTM 'lstm'.Y_h into h"
    assert d.data["got"] == "LSTM 'lstm'.Y_c[0]"


def test_slices_that_nothing_writes_back_are_not_called_constant():
    # h[0] and h[1] are the two directions of a bidirectional RNN; h is written back whole with the [1,1,4] final
    # state of a one-direction op that starts from zeros: one exit for the whole slot, none for h[0] and h[1]
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w = b.const("W", np.ones((2, H, I), np.float32))
    r = b.const("R", np.ones((2, H, H), np.float32))
    b.recurrent("RNN", x, w, r, initial_h=b.load(h, name="h0"), hidden_size=H, name="rnn", direction="bidirectional", outputs=["Y", "Yh"])
    w1 = b.const("W1", np.ones((1, H, I), np.float32))
    r1 = b.const("R1", np.ones((1, H, H), np.float32))
    _, one = b.recurrent("RNN", x, w1, r1, hidden_size=H, name="one", outputs=["Y1", "Yh1"])
    b.store(one, h)
    assert codes_and_messages(b) == [
        ("SD005", "slot 'h' (float32[2,1,4]) and the final state written into it disagree on directions (directions: h <- RNN 'one'.Y_h[0]: "
                  "the op writes 1 direction(s), the slot holds 2): the state fed back at the next call is not what the slot declares"),
        ("SD007", "slot 'h': slice h (not read by any recurrent op) never reaches the op whose final state is written back (RNN 'one'.Y_h[0]); "
                  "RNN 'one'.initial_h starts from zeros (no initial_h input): the caller's state is ignored and every call restarts"),
    ]
