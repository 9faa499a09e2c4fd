"""A slot written back with a value computed from a recurrence's sequence output Y (not a final state): SD003, and
no SD006 even when the recurrence runs in reverse (SD006 is about persisting a reverse direction's final state).
The near miss, the reverse op's final state Y_h in the same place, is SD006. Wording composed by hand from the
ops named in each program."""

from __future__ import annotations

import numpy as np

from tests.passes.store_destinations.test_derived import cell, only

TAIL = "the live-out value may not be the live-in's final state"


def test_a_value_summed_over_the_sequence_output_of_a_reverse_rnn_is_sd003_only_and_its_final_state_sd006():
    for direction in ("reverse", "forward"):
        b, h, _, y, _ = cell(direction)
        b.store(b.compute("ReduceSum", [y, b.const("ax", np.array([0], np.int64))], attributes={"keepdims": 0}, name="total"), h)
        assert only(b) == [(
            "SD003", "WARNING",
            "slot 'h' is written back with a value computed through ReduceSum 'total' from RNN 'rnn'.Y[0]@all, "
            f"which depends on RNN 'rnn'.Y[0]@all: {TAIL}",
        )], direction
    b, h, _, _, hn = cell("reverse")
    b.store(b.compute("Mul", [hn, b.const("two", np.array(2, np.float32))], name="dbl"), h)
    assert [code for code, _, _ in only(b)] == ["SD006"]
