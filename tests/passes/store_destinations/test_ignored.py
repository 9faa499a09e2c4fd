"""SD007 state-ignored, slice by slice and for a whole state input (mutation survivors of store_destinations/ignored.py).

Each program is built with rnnir.Builder: which slice an op reads and what each op starts from is known, so the
expected finding is composed by hand.  A slice SD007 reports is not reported again by SD003 (the same slice, the
same cause), and a value computed through value-changing ops is the derived family's, not SD007's.
"""

from __future__ import annotations

import numpy as np

import rnnir
from rnnir import passes

H, I, T = 4, 3, 5
TAIL = "the caller's state is ignored and every call restarts"


def rnn(b: rnnir.Builder, x, name: str, initial_h=None, gates: int = 1, **kw):
    kind = {1: "RNN", 4: "LSTM"}[gates]
    w = b.const(f"W_{name}", np.ones((1, gates * H, I), np.float32))
    r = b.const(f"R_{name}", np.ones((1, gates * H, H), np.float32))
    return b.recurrent(kind, x, w, r, initial_h=initial_h, hidden_size=H, name=name, **kw)


def slice0(b: rnnir.Builder, v):
    ints = [b.const(n, np.array([i])) for n, i in (("start", 0), ("end", 1), ("axis", 0))]
    return b.compute("Slice", [v, *ints], outputs=["h0_0"])


def packed(second: str):
    """Slot h[2,1,4]: h[0] is rnn's initial state; h[1] is read by nobody and written with rnn2's final state
    (``second`` "plain") or with rnn2's final state plus one ("derived")."""
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    _, hn = rnn(b, x, "rnn", initial_h=slice0(b, b.load(h, name="h0")), outputs=["Y", "Yh"])
    _, h2 = rnn(b, x, "rnn2", outputs=["Y2", "Yh2"])
    if second == "derived":
        h2 = b.compute("Add", [h2, b.const("one", np.ones((1, 1, H), np.float32))], outputs=["h2p"])
    b.store(b.compute("Concat", [hn, h2], attributes={"axis": 0}, outputs=["hc"]), h)
    return b.build()


def test_a_slice_nobody_reads_written_with_a_fresh_ops_final_state():
    (d,) = passes.run(packed("plain"))  # SD007 only: SD003 does not report the same slice again
    assert (d.code, d.slot) == ("SD007", "h")
    assert d.message == (
        "slot 'h': slice h[1] (not read by any recurrent op) never reaches the op whose final state is written back "
        f"(RNN 'rnn2'.Y_h[0]); RNN 'rnn2'.initial_h starts from zeros (no initial_h input): {TAIL}"
    )
    assert d.data["slice"] == "h[1]" and [(loc.onnx_node, loc.value) for loc in d.locations] == [("rnn2", "Y_h")]
    assert d.hint == "feed 'h' (its slice) into the op's initial state instead of the constant/other value"


def test_a_slice_written_with_a_value_computed_from_final_states_is_not_sd007():
    # Add(Yh2, 1): the value is computed, so the derived family speaks (a warning), not SD007
    assert [d.code for d in passes.run(packed("derived"))] == ["SD003"]


def test_a_state_input_no_op_reads_names_every_op_written_back_once():
    # h[2,1,4] is loaded and never read; Concat(rnn.Y_h, rnn.Y[-1]) is written back: one op, two ports, one start
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    b.load(h, name="h0")
    y, hn = rnn(b, x, "rnn", outputs=["Y", "Yh"])
    last = b.compute("Gather", [y, b.const("last", np.array(-1, np.int64))], attributes={"axis": 0}, outputs=["ylast"])
    b.store(b.compute("Concat", [hn, last], attributes={"axis": 0}, outputs=["hc"]), h)
    (d,) = [d for d in passes.run(b.build()) if d.code in ("SD007", "SD003")]
    assert d.code == "SD007" and d.message == (
        "slot 'h': the state input never reaches the op whose final state is written back (RNN 'rnn'.Y_h[0], RNN 'rnn'.Y[0]@last); "
        f"RNN 'rnn'.initial_h starts from zeros (no initial_h input): {TAIL}"
    )


def test_an_lstm_cell_state_written_into_a_slice_nobody_reads_names_initial_c():
    # h[0] is the LSTM's initial_h; h[1] gets its Y_c, while initial_c starts from the constant c0
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    c0 = b.const("c0", np.zeros((1, 1, H), np.float32))
    _, yh, yc = rnn(b, x, "lstm", initial_h=slice0(b, b.load(h, name="h0")), gates=4, initial_c=c0, outputs=["Y", "Yh", "Yc"])
    b.store(b.compute("Concat", [yh, yc], attributes={"axis": 0}, outputs=["hc"]), h)
    (d,) = passes.run(b.build())
    assert d.code == "SD007" and d.message == (
        "slot 'h': slice h[1] (not read by any recurrent op) never reaches the op whose final state is written back "
        f"(LSTM 'lstm'.Y_c[0]); LSTM 'lstm'.initial_c starts from the constant 'c0': {TAIL}"
    )


def test_a_slot_read_by_its_op_is_not_ignored():
    # near miss: the same packed slot with h[1] read too (by rnn2)
    b = rnnir.Builder("c")
    h = b.slot("h", "float32", (2, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    h0 = b.load(h, name="h0")
    parts = b.compute("Split", [h0, b.const("sizes", np.array([1, 1]))], attributes={"axis": 0}, outputs=["p0", "p1"])
    _, hn = rnn(b, x, "rnn", initial_h=parts[0], outputs=["Y", "Yh"])
    _, h2 = rnn(b, x, "rnn2", initial_h=parts[1], outputs=["Y2", "Yh2"])
    b.store(b.compute("Concat", [hn, h2], attributes={"axis": 0}, outputs=["hc"]), h)
    assert passes.run(b.build()) == []
