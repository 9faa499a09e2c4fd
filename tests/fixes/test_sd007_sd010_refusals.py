"""SD007's fix on near misses no sample reaches (a two-direction op whose state is not split per direction because
the slot's first axis is symbolic; a slot whose first slice is unread while another is read by a second op), and
SD010's refusal when there is nothing to expose, worded with the recurrence the finding names or, when the finding
carries no such data, with its subject."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from rnnir.fixes.edits import FixContext
from rnnir.fixes.planners import sd010_state_not_exposed
from tests.fixes.test_final_state_models import X, _i64, _model, _rnn, _vi

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _bidirectional_symbolic_slot() -> onnx.ModelProto:
    """h0 is ['D', 1, 4] (its first axis unknown) and unread; hn = Y_h of a bidirectional GRU from zeros."""
    gru, weights = _rnn("gru", "", ["y", "hn"], seed=1, dirs=2)
    return _model([gru], [X, _vi("h0", ["D", 1, 4])], [_vi("y", ["T", 2, 1, 4]), _vi("hn", ["D", 1, 4])], weights)


def _first_slice_read_second_written() -> onnx.ModelProto:
    """GRU ga reads h0[0:1]; hn = Y_h of GRU gb that starts from zeros ([1,1,4] into a [2,1,4] slot, traced whole)."""
    ga, wa = _rnn("ga", "h0_first", ["ya"], seed=1)
    gb, wb = _rnn("gb", "", ["yb", "hn"], seed=3)
    first = helper.make_node("Slice", ["h0", "zero", "one", "zero"], ["h0_first"], name="first_slice")
    outs = [_vi("ya", ["T", 1, 1, 4]), _vi("hn", [1, 1, 4])]
    return _model([first, ga, gb], [X, _vi("h0", [2, 1, 4])], outs, [*wa, *wb, _i64("zero", [0]), _i64("one", [1])])


def test_sd007_near_misses_no_sample_reaches_are_refused() -> None:
    cases = [
        (_bidirectional_symbolic_slot(), "the op is not a one-direction recurrent op rnnir can edit"),
        (_first_slice_read_second_written(), "the slot is read in slices, or read at all: which port it should feed is not certain"),
    ]
    for model, reason in cases:
        assert "SD007" in {d.code for d in passes.run(rnnir.load(model))}, reason
        result = rnnir.fix(model, unsafe=True)
        assert result.edits == [] and result.model.graph == model.graph, reason
        assert [str(e) for e in result.skipped if e.code == "SD007"] == [f"SD007 [no fix] SD007 on slot 'h0': {reason}"]


def test_sd010_with_nothing_to_expose_says_so_about_the_findings_recurrence() -> None:
    """SD010 of sd010_gru_no_initial_state planned on a model with no recurrence left (as if another fix had taken it):
    nothing to expose and nothing skipped; the refusal names GRU 'gru' from the finding's data, else its subject."""
    program = rnnir.load(onnx.load(str(SAMPLES / "sd010_gru_no_initial_state.onnx")))
    (d,) = [d for d in passes.run(program) if d.code == "SD010"]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("a", "b")]
    plain = helper.make_model(helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "g", io[:1], io[1:]))
    ctx = FixContext(plain, rnnir.load(plain), None, "m")
    got = [str(sd010_state_not_exposed.plan(ctx, finding)) for finding in (d, dataclasses.replace(d, data={}))]
    assert got == [
        "SD010 [no fix] SD010 on GRU 'gru' starts afresh on every call: no recurrence rnnir can expose",
        "SD010 [no fix] SD010 on gru: no recurrence rnnir can expose",  # the ONNX node the finding points at
    ]
