"""Slice destinations: which final state, which step of Y, which port (mutation survivors of store_destinations/destinations.py).

Each program is built with rnnir.Builder (ops and values named) and the expected findings are composed by hand.
Which step of Y is an op's final state is ONNX semantics: a forward op ends at Y[-1], a reverse op at Y[0]
(tests/test_pinned_verdicts.py checks that against onnxruntime).
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
