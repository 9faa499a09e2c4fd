"""A slot without a declared pair gets a verdict even when the program's slice maps are current (mutation
survivor of rnnir/passes/manager.py, whose ProgramFacts.pairs once shared the program's own maps only when every
slot had a pair; now rnnir.analysis.slices.SliceAnalysis traces both in one result)."""

from __future__ import annotations

from rnnir import passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir.text import parse_program

_PROGRAM = """program @p {
  slot @h : float32[1,1,4] init=zeros
  slot @g : float32[1,1,4] init=zeros
  output hn : float32[1,1,4]
  output gn : float32[1,1,4]
  value %x : float32[T,1,3]
  value %W : float32[1,4,3]
  value %R : float32[1,4,4]
  pair h -> hn declared "only h is declared"

  %h = load_slot<@h, copy>()
  %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h) loc{'id': 'rnn0', 'node': 'rnn'}
  %g = load_slot<@g, copy>()
  %s = store<@h, token>(%hn)
  %o = store<out:hn, value>(%hn)
  %sg = store<@g, token>(%g)
  %og = store<out:gn, value>(%g)
  return<by runtime>(%s, %o, %sg, %og)
}
"""


def test_an_undeclared_slot_gets_a_verdict_when_the_declared_pairs_maps_are_current():
    prog = parse_program(_PROGRAM)
    assert [p.input for p in slice_maps(prog).declared] == ["h"]  # the premise: the declared pairs are traced already
    v = passes.verify(prog)
    # g is handed straight back (SD001) although nobody declared it: it must not vanish from the verdicts
    assert [(s.input, s.output, s.slice, s.verdict.value) for s in v.slices] == [("h", "hn", "h", "verified"), ("g", None, "g", "violated")]
    assert [(d.code, d.slot) for d in v.diagnostics] == [("SD001", "g")]
