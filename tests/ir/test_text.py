"""The IR prints and parses (xDSL's habit): round trips over every model we have, errors that name the line,
and IR-level cases written as text with the findings they must produce (tests/ir/*.rnnir)."""

from __future__ import annotations

import collections
import os
import pathlib
import re

import pytest

import rnnir
from rnnir import passes
from rnnir.analysis.facts import analyses
from rnnir.analysis.slices import SliceAnalysis, slice_maps
from rnnir.ir.text import IRParseError, iter_programs, parse_program, print_program

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/
REPO = HERE.parent
MODELS = sorted(REPO.glob("samples/*.onnx")) + sorted(HERE.glob("data/torch*/*.onnx")) + sorted(HERE.glob("data/ort/*.onnx"))


def _findings(prog) -> list[tuple[str, str, str]]:
    # passes.run(noqa=False): a model's own suppressions (rnnir.noqa metadata) belong to the ONNX file, not to the program text
    return sorted((d.code, d.severity.value, d.slot or "") for d in passes.run(prog, noqa=False))


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_print_parse_print_is_a_fixed_point_and_the_passes_agree(path):
    prog = rnnir.load(path)
    text = print_program(prog)
    again = parse_program(text)
    assert print_program(again) == text
    assert _findings(again) == _findings(prog)
    assert slice_maps(again).to_json() == slice_maps(prog).to_json()


def test_silero_files_round_trip_too():

    from tests.support import realmodels as rm

    try:
        folder = rm.silero_vad_dir()
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"silero-vad unavailable: {exc}")
    for path in sorted(folder.glob("*.onnx")):
        prog = rnnir.load(path)
        again = parse_program(print_program(prog))
        assert print_program(again) == print_program(prog) and _findings(again) == _findings(prog), path.name


HAND_WRITTEN = """
program @cell {
  slot @h : float32[1,1,2] init=constant dense<float32[1,1,2] [0.25, -1.0]>
  output "h out" : float32[1,1,2]
  value %x : float32[T,1,2]
  value %"onnx::W" : float32[1,2,2]
  value %R : float32[1,2,2]
  pair h -> "h out" declared "the caller feeds it back"

  %h = load_slot<@h, view>()
  %y, %hn = recurrent.RNN<direction='forward', hidden_size=2, activations=('Tanh',)>(%x, %"onnx::W", %R, _, _, %h) loc{'node': 'rnn'}
  %s = store<@h, token>(%hn)
  %o = store<out:"h out", value>(%hn)
  return<by caller>(%s, %o)
}
"""


def test_hand_written_ir_parses_into_the_program_it_says():
    prog = parse_program(HAND_WRITTEN)
    slot = prog.slot("h")
    assert slot.init.kind == "constant" and slot.init.value.tolist() == [[[0.25, -1.0]]]
    (rec,) = prog.recurrents
    assert (rec.kind, rec.hidden_size, rec.activations, rec.describe()) == ("RNN", 2, ("Tanh",), "rnn")
    assert rec.port("X").name == "x" and rec.port("W").name == "onnx::W" and rec.port("initial_h").producer.kind.value == "view"
    assert [s.dest.name for s in prog.stores] == ["h", "h out"] and prog.returns[0].layer.value == "caller"
    v = passes.verify(prog)
    assert [(s.slice, s.verdict.value) for s in v.slices] == [("h", "verified")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("slot @h : float32[1] init=zeros", "line 1: expected 'program'"),
        ("", "no 'program @NAME {' line"),
        ("program @p {\n  %a = Relu(%b)\n}", r"line 2: %b is used before it is defined"),
        ("program @p {\n  value %b : float32[1]\n  %a = Relu(%b) oops\n}", r"line 3: unexpected text after the node"),
        ("program @p {\n  slot @h : float32[1] init=zeros\n  %a = load_slot<@g, copy>()\n}", r"line 3: no slot @g"),
        ("program @p {\n  slot @h : float32[1 init=zeros\n}", r"line 2: no matching '\]'"),
        ("program @p {\n  value %b : float32[1]\n  %a = recurrent.XLSTM<hidden_size=2>(%b)\n}", r"line 3: unknown recurrence kind 'XLSTM'"),
        ("program @p {\n  value %b : float32[1]\n  %a = Relu(%b)\n  %a = Relu(%b)\n}", r"line 4: %a is defined twice"),
        ("program @p {\n  value %b : float32[1]\n", "closing '}' is missing"),
    ],
)
def test_bad_ir_text_is_an_error_naming_the_line(text, message):
    with pytest.raises(IRParseError, match=message):
        parse_program(text)


# -- filecheck-style cases: tests/ir/*.rnnir -----------------------------------------------------------

CASES = [(f, i, block) for f in sorted((HERE / "ir").glob("*.rnnir")) for i, block in enumerate(iter_programs(f.read_text()))]


def _expectations(path: pathlib.Path, block: str) -> tuple[list[str], list[str], dict[str, str]]:
    """The // CHECK, // CHECK-NOT and // VERDICT lines between this program's end and the next program."""
    text = path.read_text()
    after = text[text.index(block) + len(block) :]
    tail = after.split("\nprogram ", 1)[0]
    checks = re.findall(r"^// CHECK: (\S+)$", tail, re.M)
    nots = re.findall(r"^// CHECK-NOT: (\S+)$", tail, re.M)
    verdicts = dict(re.findall(r"^// VERDICT: (\S+) (verified|violated|unverified)$", tail, re.M))
    return checks, nots, verdicts


@pytest.mark.parametrize(("path", "index", "block"), CASES, ids=[f"{f.stem}-{i}" for f, i, _ in CASES])
def test_ir_case_gives_exactly_its_checked_findings(path, index, block):
    checks, nots, verdicts = _expectations(path, block)
    prog = parse_program(block)
    v = passes.verify(prog)
    got = collections.Counter(d.code for d in v.diagnostics)
    assert got == collections.Counter(checks), [d.message for d in v.diagnostics]
    assert not [d.code for d in v.diagnostics for n in nots if d.code.startswith(n)]
    assert {s.slice: s.verdict.value for s in v.slices if s.slice in verdicts} == verdicts
    assert print_program(parse_program(print_program(prog))) == print_program(prog)


def test_the_ir_cases_cover_every_store_and_ordering_rule():
    covered = {c for f, _, block in CASES for c in _expectations(f, block)[0]}
    assert covered >= {"AL001", "AL002", "AL003", "OR001", "OR002", "SD004", "SD002"}
    assert os.path.isfile(HERE / "ir" / "README.md")


def test_a_comment_runs_from_double_slash_to_the_end_of_the_line_but_not_inside_quotes():
    text = """// a whole-line comment before the program
program @p {  // after the header
  slot @"h//0" : float32[1,1,2] init=zeros   // a name with // in it is quoted, so it is no comment
  output hn : float32[1,1,2]
  value %x : float32[T,1,2]
  value %W : float32[1,2,2]
  value %R : float32[1,2,2]
  pair "h//0" -> hn declared "fed back // as the caller says"

  %h = load_slot<@"h//0", copy>()  // the load
  %y, %hn = recurrent.RNN<hidden_size=2>(%x, %W, %R, _, _, %h) loc{'id': 'rnn//a'}
  %s = store<@"h//0", token>(%hn)
  %o = store<out:hn, value>(%hn)
  return<by runtime>(%s, %o)  // waits for both
}
"""
    program = parse_program(text)
    assert [s.name for s in program.slots] == ["h//0"]
    assert program.state_pairs[0].reason == "fed back // as the caller says"
    assert program.recurrents[0].id == "rnn//a"
    assert [n.id for n in program.nodes][-1] == program.returns[0].id  # the trailing comment did not swallow the Return
    assert print_program(parse_program(print_program(program))) == print_program(program)


def test_parsing_traces_nothing_until_the_slice_maps_are_asked_for():
    text = (pathlib.Path(__file__).resolve().parents[2] / "samples" / "al001_chain.rnnir").read_text(encoding="utf-8")
    program = parse_program(text)
    assert analyses(program).cached(SliceAnalysis) is None  # the parser only reads
    assert [len(p.slices) for p in slice_maps(program).declared] == [1]  # one slice, h0, traced to the GRU
    assert analyses(program).cached(SliceAnalysis) is slice_maps(program)  # traced once, then shared
