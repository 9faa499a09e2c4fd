"""A write-back computed through value-changing ops is judged for SD003/SD006 only when it is neither a recurrence
written as plain ops nor a feature cache (rnnir.passes.store_destinations._check_pair): each of those is unverified
(SD009), never SD003. Two ONNX models, each one of the two kinds only; the messages name the ops of the model."""

from __future__ import annotations

import numpy as np
from onnx import helper

import rnnir
from rnnir import passes
from tests.support.onnx_models import const, model, vi

I, H = 3, 4


def _inits():
    rng = np.random.default_rng(0)
    return [const("W", rng.standard_normal((1, H, I)).astype(np.float32)), const("R", rng.standard_normal((1, H, H)).astype(np.float32)),
            const("a", np.float32(0.9))]


def _findings(m):
    return [(d.code, d.message) for d in passes.run(rnnir.load(m))]


def test_a_plain_recurrence_beside_an_op_that_reads_the_slot_is_unverified_not_sd003():
    # the RNN reads h; h is written back as 0.9 * h: computed from the live-in value only, through plain ops
    m = model([helper.make_node("RNN", ["x", "W", "R", "", "", "h"], ["Y", ""], hidden_size=H, name="rnn"),
               helper.make_node("Mul", ["h", "a"], ["h_new"], name="decay")],
              [vi("x", ["T", 1, I]), vi("h", [1, 1, H])], [vi("Y", ["T", 1, 1, H]), vi("h_new", [1, 1, H])], _inits())
    assert _findings(m) == [("SD009", "state 'h' is not verified: write-back of 'h' passes through Mul 'decay'")]


def test_a_feature_cache_mixed_with_a_fresh_recurrences_final_state_is_unverified_not_sd003():
    # c is read by no recurrence; c' = 0.9 * c + Y_h of an RNN that starts from zeros on every call
    m = model([helper.make_node("RNN", ["x", "W", "R"], ["Y", "Yh"], hidden_size=H, name="rnn"),
               helper.make_node("Mul", ["c", "a"], ["ca"], name="decay"), helper.make_node("Add", ["ca", "Yh"], ["c_new"], name="mix")],
              [vi("x", ["T", 1, I]), vi("c", [1, 1, H])], [vi("Y", ["T", 1, 1, H]), vi("c_new", [1, 1, H])], _inits())
    assert _findings(m) == [("SD009", "state 'c' is not verified: state 'c' reaches Mul 'decay' and no recurrence rnnir recognises")]
