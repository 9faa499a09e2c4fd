"""SD007's fix on near misses no sample reaches (a two-direction op whose state is not split per direction because
the slot's first axis is symbolic; a cell written as plain ops, which has no ONNX node to feed; a slot whose first
slice is unread while another is read by a second op; a slot of another shape than the op's initial state), and
SD010's refusal when there is nothing to expose, worded with the recurrence the finding names or, when the finding
carries no such data, with its subject."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import rnnir
from rnnir import passes
from rnnir.fixes.edits import FixContext, Plan
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


def _cell_from_a_constant() -> onnx.ModelProto:
    """An RNN cell written as plain ops (tests/lower/cells) that starts from a Constant, h0 unread, hn its new state."""
    from tests.lower.cells.test_constant_initial_state import cell

    model = cell("Constant")
    for n in model.graph.node:
        n.input[:] = ["h_start" if i == "h0" else i for i in n.input]
        n.output[:] = ["h_start" if o == "h0" else o for o in n.output]
    model.graph.input.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 4]))
    onnx.checker.check_model(model, full_check=True)
    return model


def test_sd007_near_misses_no_sample_reaches_are_refused() -> None:
    cases = [
        (_cell_from_a_constant(), "the op is not a one-direction recurrent op rnnir can edit"),  # no ONNX node to feed
        (_bidirectional_symbolic_slot(), "the op is not a one-direction recurrent op rnnir can edit"),
        (_first_slice_read_second_written(), "the slot is read in slices, or read at all: which port it should feed is not certain"),
    ]
    for model, reason in cases:
        assert "SD007" in {d.code for d in passes.run(rnnir.load(model))}, reason
        result = rnnir.fix(model, unsafe=True)
        assert result.edits == [] and result.model.graph == model.graph, reason
        assert [str(e) for e in result.skipped if e.code == "SD007"] == [f"SD007 [no fix] SD007 on slot 'h0': {reason}"]


def _zero_start(layout: int = 0, after: str | None = None, slot: tuple[object, ...] | None = (1, 1, 4)) -> onnx.ModelProto:
    """A GRU from zeros whose Y_h is written back into h0 (unread), through the layout op ``after`` if given; with
    layout=1 the batch (2) comes first: x [2,T,3], h0 [2,1,4]."""
    gru, weights = _rnn("gru", "", ["y", "hn" if after is None else "h_final"], seed=1)
    if layout:
        gru.attribute.append(helper.make_attribute("layout", 1))
    nodes, inits = [gru], list(weights)
    if after == "Unsqueeze":
        nodes.append(helper.make_node("Unsqueeze", ["h_final", "axis0"], ["hn"], name="add_axis"))
        inits.append(_i64("axis0", [0]))
    elif after == "Transpose":
        nodes.append(helper.make_node("Transpose", ["h_final"], ["hn"], name="swap_axes", perm=[0, 2, 1]))
    x = _vi("x", [2, "T", 3]) if layout else X
    y = [2, "T", 1, 4] if layout else ["T", 1, 1, 4]
    shape = None if slot is None else list(slot)
    return _model(nodes, [x, _vi("h0", shape)], [_vi("y", y), _vi("hn", shape)], inits)


def test_sd007_feeds_the_slot_only_when_it_has_the_initial_states_shape() -> None:
    """The slot is fed to initial_h as it is: a slot written back through Unsqueeze or Transpose has another shape,
    which onnxruntime rejects as initial_h (found by a survivor: the fix fed [1,1,1,4] to a GRU); a layout=1 op's
    initial state is [batch, directions, hidden] and is fed, exactly as by hand, and the repaired model streams."""
    refused = [
        (_zero_start(after="Unsqueeze", slot=(1, 1, 1, 4)), "the slot is float32[1,1,1,4], not the [1,batch,4] of initial_h"),
        (_zero_start(after="Transpose", slot=(1, 4, 1)), "the slot is float32[1,4,1], not the [1,batch,4] of initial_h"),
    ]
    for model, reason in refused:
        assert "SD007" in {d.code for d in passes.run(rnnir.load(model))}, reason
        result = rnnir.fix(model, unsafe=True)
        assert result.edits == [] and result.model.graph == model.graph, reason
        skipped = [str(e) for e in result.skipped if e.code == "SD007"]
        assert skipped == [f"SD007 [no fix] SD007 on slot 'h0': {reason}: rnnir does not insert the layout change"]
    for slot in ((1, "batch", "hidden"), (1, None, None)):  # symbolic or unknown dims may be initial_h's: fed
        assert [e.after for e in rnnir.fix(_zero_start(slot=slot), unsafe=True).edits] == ["'h0'"], slot
    model = _zero_start(layout=1, slot=(2, 1, 4))
    result = rnnir.fix(model, unsafe=True)
    assert [(e.code, e.target, e.after) for e in result.edits] == [("SD007", "GRU 'gru'.initial_h", "'h0'")]
    by_hand = _zero_start(layout=1, slot=(2, 1, 4))
    by_hand.graph.node[0].input.extend(["", "", "h0"])
    assert result.model.graph == by_hand.graph
    # onnxruntime runs no layout=1 GRU: onnx.reference streams it, three calls with hn fed back ending where one call
    # over the whole sequence (time is axis 1) ends
    run = ReferenceEvaluator(result.model).run
    rng = np.random.default_rng(51)
    xs = [rng.standard_normal((2, 2, 3)).astype(np.float32) for _ in range(3)]
    h = np.zeros((2, 1, 4), np.float32)
    for x in xs:
        _, h = run(None, {"x": x, "h0": h})
    _, whole = run(None, {"x": np.concatenate(xs, axis=1), "h0": np.zeros((2, 1, 4), np.float32)})
    np.testing.assert_allclose(h, whole, atol=1e-5)
    assert np.abs(whole).max() > 0.1


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


def test_sd010_plan_names_the_recurrence_from_the_findings_data_or_its_subject() -> None:
    model = onnx.load(str(SAMPLES / "sd010_gru_no_initial_state.onnx"))
    program = rnnir.load(model)
    (d,) = [d for d in passes.run(program) if d.code == "SD010"]
    ctx = FixContext(model, program, None, "m")
    plans = [sd010_state_not_exposed.plan(ctx, finding) for finding in (d, dataclasses.replace(d, data={}))]
    tail = ": recurrences that start from zeros: final state returned, initial state absent or constant -> state input/output pairs (see the EXPOSE edits)"
    assert [str(p.edit) for p in plans if isinstance(p, Plan)] == [
        f"SD010 [unsafe] GRU 'gru' starts afresh on every call{tail}",
        f"SD010 [unsafe] gru{tail}",
    ]
