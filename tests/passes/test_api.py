"""The public surface of ``passes``: run / select / ignore, RULES, explain, cost, and the no-mutation promise."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import ClassVar

import numpy as np
import pytest

import rnnir
from rnnir import passes
from rnnir.analysis.facts import analyses
from rnnir.analysis.slices import SliceAnalysis, slice_maps
from rnnir.passes.manager import AnalysisPass, PassContractError, PassManager
from rnnir.passes.rules import CATALOGUE, CODE_TABLE, Family  # noqa: E402
from tests.rules.test_catalogue import H, I, T, packed_lstm, rnn_builder  # noqa: E402

#: every code the passes detect, from the code table (a new rule's one line there adds it here)
ALL_CODES = [r.rule.code for r in CATALOGUE if r.family is not Family.SUPPRESSION]

#: codes released before the one-file-per-rule catalogue: codes are stable, so none of them may ever disappear
RELEASED_CODES = {"SD001", "SD002", "SD003", "SD004", "SD005", "SD006", "SD007", "SD008", "AL001", "AL002", "AL003", "OR001", "OR002", "SD009", "SD010", "RN100"}


def _swapped():
    return rnnir.load(packed_lstm(concat=("Yc", "Yh")))


def _many_findings():
    """Findings from all three passes: chain into 'hn' (AL001), reverse op on 'h' (SD006), unawaited store into 'g' (OR001)."""
    b = rnnir.Builder("many")
    h = b.slot("h", "float32", (1, 1, H))
    g = b.slot("g", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    w, r = b.const("W", np.ones((1, H, I), np.float32)), b.const("R", np.ones((1, H, H), np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(h), hidden_size=H, direction="reverse", name="rnn")
    _, gn = b.recurrent("RNN", x, w, r, initial_h=b.load(g), hidden_size=H, name="rnn_g")
    s = b.store(hn, h, "alias")
    o = b.store(s, b.output("hn"), "value")
    b.store(gn, g)
    b.ret(o)
    return b.build()


# -- catalogue -----------------------------------------------------------------------------------


def test_rules_keep_every_released_code_in_code_table_order():
    assert RELEASED_CODES <= set(passes.RULES) | set(passes.catalogue.RETIRED)
    assert list(passes.RULES) == [r.rule.code for r in CATALOGUE]
    assert len(CODE_TABLE) == len(passes.RULES)  # one line a rule: two lines declaring one code would collapse here
    # RN100 (unused-suppression) is no pass's: it judges the model's own suppressions after the passes
    assert [r.rule.code for r in CATALOGUE if r.family is Family.SUPPRESSION] == ["RN100"]


@pytest.mark.parametrize("code", list(passes.RULES))
def test_every_rule_has_slug_severity_summary_and_a_full_docstring(code):
    rule = passes.RULES[code]
    assert isinstance(rule, passes.Rule) and rule.code == code
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    assert isinstance(rule.severity, passes.Severity) and rule.summary
    for part in ("What it finds", "Why it matters", "Bad", "Fixed"):
        assert part in rule.doc, f"{code} doc lacks {part!r}"


def test_only_the_coverage_rules_sd006_and_rn100_are_below_error_by_default():
    # SD009 (unverified) is information and SD010 (state not exposed) a warning until --strict raises them
    below = {c: r.severity for c, r in passes.RULES.items() if r.severity is not passes.Severity.ERROR}
    # RN100 (a suppression that suppresses nothing) is housekeeping, never a reason to fail CI
    assert below == {"SD006": passes.Severity.WARNING, "SD009": passes.Severity.INFO, "SD010": passes.Severity.WARNING, "RN100": passes.Severity.WARNING}


def test_explain_prints_the_rule_docstring():
    assert passes.explain("SD002") == passes.RULES["SD002"].doc
    assert passes.explain(" sd002") == passes.RULES["SD002"].doc
    assert passes.explain("SD002").startswith("What it finds")


def test_explain_unknown_code_is_a_value_error_listing_known_codes():
    with pytest.raises(ValueError, match="SD001.*OR002"):
        passes.explain("XX999")


# -- run, select, ignore -------------------------------------------------------------------------


def test_run_returns_sorted_diagnostics_with_one_line_hints():
    diags = passes.run(_many_findings())
    assert {d.code for d in diags} >= {"AL001", "OR001", "SD006"}
    assert diags == sorted(diags, key=passes.Diagnostic.sort_key)
    assert diags[-1].severity is passes.Severity.WARNING  # errors first
    for d in diags:
        assert d.hint and "\n" not in d.hint and d.locations and d.slot == ("g" if d.code == "OR001" else "h")
        assert d.name == passes.RULES[d.code].name
        json.dumps(d.to_json())


def test_select_by_prefix_and_code():
    prog = _many_findings()
    assert {d.code for d in passes.run(prog, select=["AL"])} == {"AL001"}
    assert {d.code for d in passes.run(prog, select=["OR001", "SD"])} == {"OR001", "SD006"}


def test_ignore_by_prefix_and_code():
    prog = _many_findings()
    assert {d.code for d in passes.run(prog, ignore=["SD006"])} == {"AL001", "OR001"}
    assert {d.code for d in passes.run(prog, select=["SD", "AL"], ignore=["AL"])} == {"SD006"}


@pytest.mark.parametrize("bad", [["XY"], ["SD9"], [""]])
def test_unknown_selection_is_a_value_error(bad):
    with pytest.raises(ValueError, match="known codes"):
        passes.run(_many_findings(), select=bad)
    with pytest.raises(ValueError):
        passes.run(_many_findings(), ignore=bad)


# -- never mutates -------------------------------------------------------------------------------


def _snapshot(prog):
    return (
        str(prog),
        sorted(prog.graph.edges(data="kind")),
        [(p.input, p.output, p.source, p.reason, p.slot) for p in prog.state_pairs],
        slice_maps(prog).to_json(),  # the shared analysis too: every pass reads the same maps
        [(s.name, s.address, s.alias_of) for s in prog.slots],
        {n: len(v.uses) for n, v in prog.externals.items()},
    )


@pytest.mark.parametrize("make", [_swapped, _many_findings, lambda: rnnir.load(packed_lstm(), exit="reuse-single-store")])
def test_run_and_cost_never_mutate_the_program(make):
    prog = make()
    before = _snapshot(prog)
    assert passes.run(prog)
    passes.cost(prog)
    assert _snapshot(prog) == before


def test_passes_trace_on_demand_and_leave_the_pairs_as_declared():
    # the builder traces nothing; the passes ask the analysis manager, which traces once and keeps it for later readers
    b, h, h0, y, hn = rnn_builder()
    b.store(y, h)  # Y at its first step as the state: SD003 needs traced slices to see it
    prog = b.build()
    (pair,) = prog.state_pairs
    assert analyses(prog).cached(SliceAnalysis) is None
    assert "SD003" in {d.code for d in passes.run(prog)}
    assert prog.state_pairs == (pair,) and not hasattr(pair, "slices")
    assert [e.port for e in analyses(prog).cached(SliceAnalysis).pair("h").slices[0].exit] == ["Y"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.output = "y"  # a declaration: change it by giving the program new pairs


@dataclasses.dataclass(frozen=True)
class _Vandal(AnalysisPass):
    name: ClassVar[str] = "vandal"
    rules: ClassVar = (passes.RULES["SD001"],)

    def analyse(self, facts):
        facts.program.slots[0].address = "elsewhere"
        return []


def test_a_pass_that_mutates_breaks_its_contract():
    with pytest.raises(PassContractError, match="vandal"):
        PassManager((_Vandal(),)).run(_swapped())


def test_the_freeze_is_what_catches_it_and_the_program_is_left_as_it_was():
    prog = _swapped()
    address = prog.slots[0].address
    with pytest.raises(PassContractError, match=r"vandal.*address written while program .* is frozen"):
        PassManager((_Vandal(),)).run(prog)
    assert prog.slots[0].address == address and not prog.is_frozen
    prog.slots[0].address = "moved"  # outside an analysis the program is editable again, and its version moves
    assert prog.slots[0].address == "moved"


@dataclasses.dataclass(frozen=True)
class _UseListVandal(AnalysisPass):
    """Appends to a value's use list: the list is an immutable IR container, so the default check sees it."""

    name: ClassVar[str] = "use-list-vandal"
    rules: ClassVar = (passes.RULES["SD001"],)

    def analyse(self, facts):
        facts.program.loads[0].outputs[0].uses.append((facts.program.returns[0], 0))
        return []


@dataclasses.dataclass(frozen=True)
class _OperandVandal(AnalysisPass):
    """Rewires a store in place (the stale-cache edit of issue 23), then through the Program's method."""

    name: ClassVar[str] = "operand-vandal"
    rules: ClassVar = (passes.RULES["SD001"],)
    through_program: bool = False

    def analyse(self, facts):
        st, y = facts.program.stores[0], facts.program.loads[0].outputs[0]
        if self.through_program:
            facts.program.set_input(st, 0, y)
        else:
            st.inputs[0] = y
        return []


@dataclasses.dataclass(frozen=True)
class _SliceVandal(AnalysisPass):
    """Moves a slot behind the freeze's back (``object.__setattr__`` skips the owned object's check): only the
    fingerprint sees it."""

    name: ClassVar[str] = "slice-vandal"
    rules: ClassVar = (passes.RULES["SD001"],)

    def analyse(self, facts):
        object.__setattr__(facts.program.slots[0], "address", "slot:elsewhere")
        return []


@pytest.mark.parametrize("vandal", [_UseListVandal(), _OperandVandal(), _OperandVandal(through_program=True)], ids=["uses", "operand", "set_input"])
def test_the_default_check_catches_container_writes_and_program_edits(vandal):
    prog = _swapped()
    printed = str(prog)
    with pytest.raises(PassContractError, match=f"{vandal.name}.*analyses must not mutate"):
        PassManager((vandal,)).run(prog)
    assert str(prog) == printed and not prog.is_frozen


def test_fingerprint_switch_catches_writes_the_freeze_cannot_see():
    PassManager((_SliceVandal(),)).run(_swapped())  # the default check does not see the slot move
    with pytest.raises(PassContractError, match="slice-vandal"):
        PassManager((_SliceVandal(),), check_immutable="fingerprint").run(_swapped())


def test_passes_are_frozen_dataclasses_with_a_name_and_codes():
    for p in passes.catalogue.PASSES:
        assert dataclasses.is_dataclass(p) and p.name
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.name = "x"  # type: ignore[misc]
    assert sorted(c for p in passes.catalogue.PASSES for c in p.codes()) == sorted(ALL_CODES)
    for p in passes.catalogue.PASSES:  # each pass detects exactly its family's rules, in code-table order
        assert p.codes() == tuple(r.rule.code for r in CATALOGUE if r.family.value == p.name)


# -- cost ----------------------------------------------------------------------------------------


def test_cost_of_fanout_builder_program():
    b, h, h0, y, hn = rnn_builder()
    b.store(hn, h)
    b.store(hn, b.output("hn", "float32", (1, 1, H)), "value")
    rep = passes.cost(b.build())
    assert (rep.slot_bytes, rep.output_bytes, rep.copies) == (4 * H, 4 * H, 1)
    assert rep.exact and rep.symbolic_dims == ()
    (life,) = rep.slots
    assert life.across_calls and life.load == 0 and life.span == life.store - life.load > 0
    assert json.loads(json.dumps(rep.to_json()))["bytes_per_call"] == {"slots": 16, "outputs": 16}


def test_cost_counts_symbolic_dims_as_one_and_flags_them():
    rep = passes.cost(rnnir.load("tests/data/torch/lstm_packed_state.ts.onnx"))
    # state [2, B, 16] float32 -> 128 bytes with B = 1; y [T, B, 4] -> 16 bytes with T = B = 1
    assert rep.slot_bytes == 2 * 16 * 4 and rep.output_bytes == 2 * 16 * 4 + 4 * 4
    assert set(rep.symbolic_dims) == {"B", "T"} and not rep.exact
    assert rep.copies == 2  # stateN and y are copied out


def test_cost_of_the_lowering_policies():
    m = packed_lstm()
    fan, reuse = passes.cost(rnnir.load(m)), passes.cost(rnnir.load(m, exit="reuse-single-store"))
    assert fan.slot_bytes == 2 * H * 4 and reuse.slot_bytes == 0
    assert reuse.slots[0].storage == "out:stateN" and reuse.slots[0].across_calls
    assert fan.copies == reuse.copies == 2


def test_slot_never_written_does_not_live_across_calls():
    b, h, h0, y, hn = rnn_builder()
    b.store(y, b.output("y"))
    (life,) = passes.cost(b.build()).slots
    assert not life.across_calls and life.store is None and life.span is None


def test_cost_with_unknown_dtype_is_not_exact():
    b = rnnir.Builder("u")
    s = b.slot("s", None, None)
    b.store(b.load(s), s)
    rep = passes.cost(b.build())
    assert rep.unknown and not rep.exact and rep.slot_bytes == 0


# -- cost of the analysis itself -----------------------------------------------------------------


def _many_slots(n, load="view"):
    b = rnnir.Builder("wide")
    x = b.input("x", "float32", (T, 1, I))
    w, r = b.const("W", np.ones((1, H, I), np.float32)), b.const("R", np.ones((1, H, H), np.float32))
    for i in range(n):
        s = b.slot(f"h{i}", "float32", (1, 1, H))
        _, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(s, load), hidden_size=H, name=f"rnn{i}")
        b.store(hn, s)
        b.store(hn, b.output(f"hn{i}", "float32", (1, 1, H)), "value")
    return b.build()


def test_ordering_uses_one_traversal_per_view_slot_store_not_per_node_pair(monkeypatch):
    from rnnir.ir import digraph as nx  # the traversals passes use

    calls = {"ancestors": 0, "descendants": 0}
    real_anc, real_desc, real_anc_any = nx.ancestors, nx.descendants, nx.ancestors_of_any

    def anc(g, n):
        calls["ancestors"] += 1
        return real_anc(g, n)

    def anc_any(g, ns):
        calls["ancestors"] += 1
        return real_anc_any(g, ns)

    def desc(g, n):
        calls["descendants"] += 1
        return real_desc(g, n)

    monkeypatch.setattr(nx, "ancestors", anc)
    monkeypatch.setattr(nx, "descendants", desc)
    monkeypatch.setattr(nx, "ancestors_of_any", anc_any)
    n = 30
    assert passes.run(_many_slots(n, "copy"), select=["OR"]) == []
    # OR001: at most one traversal for every slot (none when each store feeds the Return itself; what follows the
    # boundary is every node of the next call: no traversal)
    assert calls["ancestors"] <= 1 and calls["descendants"] == 0
    calls.update(ancestors=0, descendants=0)
    assert passes.run(_many_slots(n, "view"), select=["OR"]) == []
    assert n <= calls["ancestors"] <= 1 + n  # OR002: one per store of a view-loaded slot


def test_a_program_with_a_cycle_is_refused_before_any_pass_runs():
    b, h, h0, y, hn = rnn_builder()
    s = b.store(hn, h)
    prog = b.build()
    prog.add_order(s.producer, h0.producer)  # the store before the load that feeds it: a cycle
    with pytest.raises(PassContractError, match="cycle"):
        passes.run(prog)
