"""The analysis manager (rnnir.analysis.facts): results outside the IR, keyed by analysis type, valid for one
version of the program; lowering, the builder and the parser trace nothing (issue 24)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import rnnir
from rnnir import passes
from rnnir.analysis.facts import Analysis, AnalysisManager, analyses
from rnnir.analysis.slices import SliceAnalysis, TracedPair, slice_maps
from rnnir.analysis.suggest import SuggestedPairs, suggested_pairs
from rnnir.analysis.tracer import Tracer
from rnnir.ir.pairs import PairSource, StatePair
from rnnir.ir.text import parse_program, print_program

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


class _Versions(Analysis):
    """Records the version it was computed for (a fresh object per computation)."""

    def __init__(self, program: rnnir.Program, facts: AnalysisManager) -> None:
        super().__init__(program, facts)
        self.version = program.version


class _Other(_Versions):
    pass


def _fanout() -> rnnir.Program:
    return rnnir.load(SAMPLES / "gru_fanout.onnx")


def test_results_are_keyed_by_analysis_type_and_kept_while_the_version_stays():
    prog = _fanout()
    facts = analyses(prog)
    a, b = facts.get(_Versions), facts.get(_Other)
    assert type(a) is _Versions and type(b) is _Other and a is not b  # a subclass is an analysis of its own
    assert facts.get(_Versions) is a and facts.cached(_Versions) is a and analyses(prog) is facts


def test_an_edit_drops_every_result_and_the_next_get_computes_it_again():
    prog = _fanout()
    facts = analyses(prog)
    before = facts.get(_Versions)
    (rec,) = prog.recurrents
    (store,) = prog.stores_to(prog.slot("h0"))
    prog.set_input(store, 0, rec.port("Y"))
    assert facts.cached(_Versions) is None and facts.cached(SliceAnalysis) is None
    after = facts.get(_Versions)
    assert after is not before and after.version == prog.version != before.version


def test_two_programs_never_share_a_manager_or_a_result():
    one, two = _fanout(), _fanout()
    assert analyses(one) is not analyses(two)
    assert slice_maps(one) is not slice_maps(two) and slice_maps(one).to_json() == slice_maps(two).to_json()


@pytest.mark.parametrize(
    "make",
    [
        _fanout,
        lambda: parse_program((SAMPLES / "al001_chain.rnnir").read_text(encoding="utf-8")),
        lambda: _builder_program(),
    ],
    ids=["lowered", "parsed", "built"],
)
def test_lowering_parsing_and_building_trace_nothing(make):
    prog = make()
    facts = analyses(prog)
    assert facts.cached(Tracer) is None and facts.cached(SliceAnalysis) is None and facts.cached(SuggestedPairs) is None
    assert slice_maps(prog).declared  # asked for: traced now
    assert facts.cached(Tracer) is not None


def _builder_program() -> rnnir.Program:
    import numpy as np

    b = rnnir.Builder("built")
    h = b.slot("h", "float32", (1, 1, 2))
    x = b.input("x", "float32", (3, 1, 2))
    w, r = b.const("W", np.ones((1, 2, 2), np.float32)), b.const("R", np.ones((1, 2, 2), np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(h), hidden_size=2, name="rnn")
    b.store(hn, h)
    return b.build()


def test_a_state_pair_is_a_frozen_declaration_and_its_slices_live_in_the_analysis():
    prog = _fanout()
    (pair,) = prog.state_pairs
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.slot = None  # type: ignore[misc]
    traced = slice_maps(prog).of(pair)
    assert isinstance(traced, TracedPair) and traced.pair is pair and (traced.input, traced.slot) == (pair.input, pair.slot)
    assert [(sm.label, [e.port for e in sm.entry], [e.port for e in sm.exit]) for sm in traced.slices] == [("h0", ["initial_h"], ["Y_h"])]
    assert isinstance(traced.slices, tuple)  # shared by every reader: not a list one of them could append to


def test_the_issue_scenario_answers_for_the_program_as_edited():
    # issue 24: the slot store pointed at Y after the slice maps were cached must give SD003, not the cached []
    prog = _fanout()
    assert passes.run(prog) == [] and slice_maps(prog).declared[0].slices[0].exit_kind == {"": "final"}
    (rec,) = prog.recurrents
    (store,) = prog.stores_to(prog.slot("h0"))
    prog.set_input(store, 0, rec.port("Y"))
    assert [d.code for d in passes.run(prog)] == ["SD003"]
    assert slice_maps(prog).declared[0].slices[0].exit_kind == {"": "sequence"}
    assert [d.code for d in passes.run(parse_program(print_program(prog)))] == ["SD003"]  # nothing cached there


def test_the_json_of_a_pair_is_the_declaration_with_its_slices():
    prog = _fanout()
    (doc,) = slice_maps(prog).to_json()
    assert list(doc) == ["input", "output", "source", "reason", "slices"]
    assert (doc["input"], doc["output"], doc["source"]) == ("h0", prog.state_pairs[0].output, prog.state_pairs[0].source.value)
    assert [s["slice"] for s in doc["slices"]] == ["h0"]


def test_suggested_pairs_of_ir_text_are_its_own_and_a_parsed_program_derives_none():
    text = (SAMPLES / "al001_chain.rnnir").read_text(encoding="utf-8")
    prog = parse_program(text)
    assert suggested_pairs(prog) == ()
    offered = StatePair("x", None, PairSource.DATAFLOW, "written in the text")
    prog.suggested_pairs = (offered,)
    assert suggested_pairs(prog) == (offered,)


def test_a_declared_pair_of_no_slot_is_traced_as_nothing_and_left_out_of_what_the_passes_judge():
    prog = _fanout()
    ghost = StatePair("ghost", "hn", PairSource.DECLARED, "no slot behind it")
    prog.state_pairs = (ghost, *prog.state_pairs)
    maps = slice_maps(prog)
    assert [t.input for t in maps.declared] == ["ghost", "h0"] and [t.input for t in maps.pairs] == ["h0"]
    assert maps.of(ghost).slices == () and maps.of(ghost).plain_recurrence is None
    with pytest.raises(ValueError, match="no slot"):
        _ = maps.of(ghost).slot


def test_an_undeclared_slot_is_still_traced_for_the_passes():
    prog = parse_program((SAMPLES / "al001_chain.rnnir").read_text(encoding="utf-8"))
    prog.state_pairs = ()  # nobody declares h0 now
    maps = slice_maps(prog)
    (t,) = maps.pairs
    assert maps.declared == () and (t.input, t.output, t.source) == ("h0", None, PairSource.BUILDER)  # h0 lives in no output
    assert [(sm.label, [e.port for e in sm.entry], [e.port for e in sm.exit]) for sm in t.slices] == [("h0", ["initial_h"], ["Y_h"])]
