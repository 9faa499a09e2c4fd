"""Which ONNX recurrent op in a Loop body stands for the whole Loop (mutation survivors of rnnir/lower/recognise.py):
a one-step LSTM node on the carried (h, c), as TorchScript exports a scripted loop over nn.LSTMCell, is the Loop's
recurrence; with sequence_lens, peepholes, clip or input_forget its step is no plain cell, and it stays a recurrent op
of its own inside the body."""

from __future__ import annotations

import numpy as np
import pytest
from _cell_models import lstm_op_loop
from onnx import helper, numpy_helper

import rnnir
from rnnir.recurrence import Recognition

H = 4


def loop_model(variant: str):
    m = lstm_op_loop(H=H)
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    lstm = next(n for n in body.node if n.op_type == "LSTM")
    if variant == "sequence_lens":
        body.initializer.append(numpy_helper.from_array(np.array([1], np.int32), "sl"))
        lstm.input[4] = "sl"
    elif variant == "peepholes":
        body.initializer.append(numpy_helper.from_array(np.zeros((1, 3 * H), np.float32), "peep"))
        lstm.input.append("peep")
    elif variant == "clip":
        lstm.attribute.append(helper.make_attribute("clip", 5.0))
    elif variant == "input_forget":
        lstm.attribute.append(helper.make_attribute("input_forget", 1))
    return m


def test_a_plain_lstm_step_in_a_loop_body_is_the_loops_recurrence():
    (rec,) = rnnir.load(loop_model("plain")).recurrents
    assert (rec.kind, rec.recognition, rec.provenance.node) == ("LSTM", Recognition.LOOP, "time_loop")


@pytest.mark.parametrize("variant", ["sequence_lens", "peepholes", "clip", "input_forget"])
def test_an_lstm_step_with_what_a_plain_cell_lacks_stays_an_op_of_its_own(variant):
    (rec,) = rnnir.load(loop_model(variant)).recurrents
    assert rec.recognition is Recognition.OP and rec.provenance.node != "time_loop"


def test_an_lstm_step_in_a_loop_body_that_starts_from_its_own_zeros_is_no_loop_recurrence():
    # the step's initial_h is a constant of the body, not the carried h: the Loop carries h past it unread
    m = loop_model("plain")
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    lstm = next(n for n in body.node if n.op_type == "LSTM")
    body.initializer.append(numpy_helper.from_array(np.zeros((1, 1, H), np.float32), "z"))
    lstm.input[5] = "z"
    prog = rnnir.load(m)
    (rec,) = prog.recurrents
    assert rec.recognition is Recognition.OP
    assert prog.recurrence_candidates == []  # recognition ran to the end: nothing failed on the way
