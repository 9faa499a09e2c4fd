"""Slice analysis and dataflow suggestions at their edges (rnnir.analysis.slices, rnnir.analysis.suggest): what a
traced pair reports (its reason, the node path of a recurrence written as plain ops, in JSON only then), which
output an undeclared aliasing slot is named after, an append-only cache against a sliding window, and suggestions
beside an output that is a graph input itself. Models are built with onnx.helper or rnnir.Builder; every expected
name is read off the model."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import rnnir
from rnnir.analysis.facts import analyses
from rnnir.analysis.slicemaps import ExitKind
from rnnir.analysis.slices import SliceAnalysis, slice_maps
from rnnir.analysis.suggest import SuggestedPairs, suggested_pairs
from rnnir.ir.pairs import PairSource
from tests.support.onnx_models import const, lstm_h0c0, model, vi


def _leaky():
    """h' = 0.9 * h + x: a recurrence of plain ops no recurrent op stands for."""
    nodes = [helper.make_node("Mul", ["h", "a"], ["ha"], name="decay"), helper.make_node("Add", ["ha", "x"], ["h_new"], name="leak")]
    return model(nodes, [vi("x", [1, 4]), vi("h", [1, 4])], [vi("h_new", [1, 4])], [const("a", np.float32(0.9))])


def _cache(append_only: bool):
    """c' = Concat(c, 2x, axis=1), then (unless append_only) its newest 3 frames."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["new"], name="frames"), helper.make_node("Concat", ["c", "new"], ["cat"], axis=1, name="cat")]
    if not append_only:
        nodes.append(helper.make_node("Slice", ["cat", "s", "e", "ax"], ["c_new"], name="window"))
    else:
        nodes.append(helper.make_node("Identity", ["cat"], ["c_new"], name="grow"))
    inits = [const("w", np.float32(2.0)), const("s", np.array([-3], np.int64)), const("e", np.array([2**63 - 1], np.int64)),
             const("ax", np.array([1], np.int64))]
    return model(nodes, [vi("x", [1, 1, 2]), vi("c", [1, "N" if append_only else 3, 2])], [vi("c_new", [1, None, 2])], inits)


def test_a_traced_pair_reads_its_declaration_and_names_a_plain_recurrences_path_only_when_there_is_one():
    program = rnnir.load(_leaky())
    (t,) = slice_maps(program).declared
    assert (t.input, t.output, t.reason) == ("h", "h_new", program.state_pairs[0].reason)
    assert t.plain_recurrence == ("loadslot0", "decay", "leak")
    assert t.to_json()["plain_recurrence"] == ["loadslot0", "decay", "leak"]
    for m in (lstm_h0c0(), _cache(False), _cache(True)):  # an op carries the state, or a cache of it: no plain path
        for t in slice_maps(rnnir.load(m)).declared:
            assert t.plain_recurrence is None and "plain_recurrence" not in t.to_json(), t.input


def test_a_pair_not_of_the_program_and_an_input_of_no_pair_are_key_errors():
    analysis = slice_maps(rnnir.load(lstm_h0c0()))
    assert analysis.pair("c0").input == "c0"
    with pytest.raises(KeyError):
        analysis.pair("x")
    with pytest.raises(KeyError):
        analysis.of(rnnir.load(lstm_h0c0()).state_pairs[0])  # an equal pair of another program is not one of these


def test_analyses_describe_the_program_they_were_built_from():
    program = rnnir.load(lstm_h0c0())
    assert analyses(program).get(SliceAnalysis).program is program
    assert analyses(program).get(SuggestedPairs).program is program


def test_an_append_only_cache_and_a_sliding_window_are_told_apart():
    kinds = {}
    for append_only in (True, False):
        (t,) = slice_maps(rnnir.load(_cache(append_only))).declared
        (sm,) = t.slices
        kinds[append_only] = sm.exit_kind[""]
    assert kinds == {True: ExitKind.APPEND, False: ExitKind.WINDOW}


def test_an_undeclared_slot_aliasing_an_output_is_paired_with_that_output():
    b = rnnir.Builder("alias")
    out = b.output("h_out")
    h = b.slot("h", "float32", (1, 1, 4), alias_of=out)
    x = b.input("x", "float32", (5, 1, 3))
    rng = np.random.default_rng(1)
    w, r = b.const("W", rng.standard_normal((1, 4, 3)).astype(np.float32)), b.const("R", rng.standard_normal((1, 4, 4)).astype(np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(h, "view"), hidden_size=4, name="rnn", outputs=["Y", "hn"])
    b.store(hn, out)
    program = b.build()
    program.state_pairs = ()
    assert [(t.input, t.output, t.source) for t in slice_maps(program).pairs] == [("h", "h_out", PairSource.BUILDER)]


def test_a_suggestion_beside_an_output_that_is_a_graph_input_and_an_op_without_an_initial_state():
    H, I = 2, 1
    rng = np.random.default_rng(0)
    W, R = rng.standard_normal((1, 3 * H, I)).astype(np.float32), rng.standard_normal((1, 3 * H, H)).astype(np.float32)
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "foo"], ["", "bar"], hidden_size=H, name="gru"),
             helper.make_node("GRU", ["x", "W", "R"], ["", "other"], hidden_size=H, name="fresh")]  # starts from zeros
    m = model(nodes, [vi("x", ["T", 1, I]), vi("foo", [1, 1, H]), vi("flag", [1], TensorProto.BOOL)],
              [vi("bar", [1, 1, 3]), vi("other", [1, 1, H]), vi("flag", [1], TensorProto.BOOL)],
              [const("W", W), const("R", R)])
    program = rnnir.load(m)
    assert [(p.input, p.output, p.source) for p in suggested_pairs(program)] == [("foo", "bar", PairSource.DATAFLOW)]
