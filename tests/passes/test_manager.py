"""How the pass manager selects, runs, checks and merges passes (mutation survivors of rnnir/passes/manager.py).

Each test runs small made-up passes whose findings are fixed by the test itself, so the expected result (which
pass ran, which findings survive, in which order, which contract breaks) is read off the test, not the code."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import rnnir
from rnnir import passes
from rnnir.passes.diagnostics import Location, Message, Severity, rule
from rnnir.passes.manager import (
    AnalysisPass,
    PassContractError,
    PassManager,
    ProgramFacts,
    SelectionError,
    selected_codes,
)
from tests.rules.test_catalogue import H, I, T, rnn_builder  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

_WORDS = {"said": Message("{what}", hint="fix {what}")}
AAA = rule("XA001", "first-made-up", Severity.WARNING, "made up", "What it finds\n  a test rule", messages=_WORDS)
AAB = rule("XA002", "second-made-up", Severity.ERROR, "made up", "What it finds\n  a test rule", messages=_WORDS)
XB = rule("XB001", "third-made-up", Severity.INFO, "made up", "What it finds\n  a test rule", messages=_WORDS)


def _said(r, what, slot=None):
    return r.diagnostic("said", slot=slot, locations=[Location(value=what)], what=what)


@dataclasses.dataclass(frozen=True)
class _Says(AnalysisPass):
    """Emits fixed findings and records that it ran."""

    name: ClassVar[str] = "says"
    rules: ClassVar = (AAA, AAB)
    log: list = dataclasses.field(default_factory=list, compare=False)
    findings: tuple = ()

    def analyse(self, facts):
        self.log.append(self.name)
        return list(self.findings)


@dataclasses.dataclass(frozen=True)
class _Other(_Says):
    name: ClassVar[str] = "other"
    rules: ClassVar = (XB,)


def _prog():
    b, h, h0, y, hn = rnn_builder()
    b.store(hn, h)
    return b.build()


def test_selection_takes_codes_and_prefixes_in_any_case_and_spacing():
    known = ["XA001", "XA002", "XB001"]
    assert selected_codes(known) == set(known)
    assert selected_codes(known, [" xa "]) == {"XA001", "XA002"}
    assert selected_codes(known, None, ["xa002"]) == {"XA001", "XB001"}
    assert selected_codes(known, ["X"], ["XB"]) == {"XA001", "XA002"}
    assert selected_codes(known, []) == set()  # an empty selection selects nothing (not everything)


def test_a_pattern_matching_no_rule_is_refused_naming_it_and_the_known_codes():
    with pytest.raises(SelectionError, match=r"^'XC' is not a rule code or prefix; known codes: XA001, XA002, XB001$"):
        selected_codes(["XA001", "XA002", "XB001"], ["XA", "XC"])
    with pytest.raises(SelectionError, match=r"^'' is not a rule code"):
        selected_codes(["XA001"], None, [""])
    with pytest.raises(SelectionError):  # refused when the manager is made, not at its first run
        PassManager((_Says(),), ignore=("XZ",))


def test_a_pass_none_of_whose_codes_is_selected_does_not_run():
    log: list = []
    m = PassManager((_Says(log), _Other(log)), select=("XB",))
    assert m.codes == {"XB001"}
    assert m.run(_prog()) == []
    assert log == ["other"]


def test_findings_are_kept_by_code_deduplicated_reseveritied_and_sorted():
    a, b_, c = _said(AAA, "a", "s"), _said(AAB, "b", "s"), _said(XB, "c")
    says = _Says(findings=(a, b_, a, c))  # XB001 from a pass that does not declare it would break ensures: keep it in _Other
    with pytest.raises(PassContractError, match=r"^pass 'says' broke its contract on program 'cell': it emitted XB001, which it does not declare$"):
        PassManager((says,)).run(_prog())
    m = PassManager((_Says(findings=(a, b_, a)), _Other(findings=(c,))), ignore=("XA002",), severity={"XB001": Severity.ERROR})
    found = m.run(_prog())
    assert [(d.code, d.severity) for d in found] == [("XB001", Severity.ERROR), ("XA001", Severity.WARNING)]  # errors first; one 'a'
    assert found[0].message == "c" and found[1].message == "a"


@dataclasses.dataclass(frozen=True)
class _Settles(_Says):
    """Keeps only the findings whose text no other pass also reports."""

    name: ClassVar[str] = "settles"
    seen: list = dataclasses.field(default_factory=list, compare=False)

    def settle(self, own, others):
        self.seen.append(sorted(d.message for d in others))
        return [d for d in own if d.message not in {o.message for o in others}]


def test_settle_sees_every_other_pass_findings_once_all_have_run():
    keep, drop = _said(AAA, "kept"), _said(AAB, "dup")
    settles = _Settles(findings=(keep, drop))
    found = PassManager((settles, _Other(findings=(_said(XB, "dup"), _said(XB, "x"))))).run(_prog())
    assert settles.seen == [["dup", "x"]]
    assert sorted(d.message for d in found) == ["dup", "kept", "x"]
    assert [d.code for d in found if d.message == "dup"] == ["XB001"]


def test_every_pass_runs_for_verify_whatever_the_selection():
    log: list = []
    every, _facts = PassManager((_Says(log, findings=(_said(AAA, "a"),)), _Other(log)), select=("XB",)).run_with_facts(_prog(), every_pass=True)
    assert log == ["says", "other"] and [d.code for d in every] == ["XA001"]


@dataclasses.dataclass(frozen=True)
class _Refuses(_Says):
    name: ClassVar[str] = "refuses"

    def requires(self, facts):
        return "it needs a model with no state"


def test_a_pass_whose_precondition_fails_names_itself_the_program_and_the_reason():
    with pytest.raises(PassContractError, match=r"^pass 'refuses' cannot run on program 'cell': it needs a model with no state$"):
        PassManager((_Refuses(),)).run(_prog())


def test_a_cycle_is_named_by_its_nodes():
    b, h, h0, y, hn = rnn_builder()
    s = b.store(hn, h)
    prog = b.build()
    prog.add_order(s.producer, h0.producer)
    reason = _Says().requires(ProgramFacts(prog))
    assert reason.startswith("its graph has a cycle (") and reason.endswith("); happens-before needs a DAG")
    assert s.producer.id in reason and h0.producer.id in reason and " -> " in reason
    assert _Says().requires(ProgramFacts(_prog())) is None


@dataclasses.dataclass(frozen=True)
class _Vandal(_Says):
    name: ClassVar[str] = "vandal"

    def analyse(self, facts):
        facts.program.slots[0].address = "elsewhere"
        return []


def test_with_the_check_off_a_writing_pass_is_not_stopped():
    prog = _prog()
    assert PassManager((_Vandal(),), check_immutable=False).run(prog) == []
    assert prog.slots[0].address == "elsewhere"
    with pytest.raises(PassContractError, match=r"^analysis pass 'vandal' changed program 'cell': .*analyses must not mutate the IR$"):
        PassManager((_Vandal(),), check_immutable="fingerprint").run(_prog())


def test_a_slot_without_a_declared_pair_gets_one_named_after_the_output_it_lives_in():
    b = rnnir.Builder("undeclared")
    h = b.slot("h", "float32", (1, 1, H))
    o = b.output("o", "float32", (1, 1, H))
    a = b.slot("a", "float32", (1, 1, H), alias_of=o)  # lives in output o: o is its caller-visible name
    x = b.input("x", "float32", (T, 1, I))
    w, r = b.const("W", np.ones((1, H, I), np.float32)), b.const("R", np.ones((1, H, H), np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=b.load(h), hidden_size=H, name="rnn")
    b.store(hn, h)
    b.store(hn, b.output("h_next", "float32", (1, 1, H)))  # a copy out, not h's storage: names nothing
    b.store(b.load(a), o)
    prog = b.build()
    prog.state_pairs = []  # as if nobody had declared them
    facts = ProgramFacts(prog)
    assert [(p.input, p.output, p.slot) for p in facts.pairs] == [("h", None, h), ("a", "o", a)]
    assert [sm.label for sm in facts.pairs[0].slices] == ["h"] and prog.state_pairs == ()


def test_stores_into_a_slot_storage_are_its_own_and_its_alias_target_in_program_order():
    b = rnnir.Builder("aliased")
    o = b.output("o", "float32", (2,))
    a = b.slot("a", "float32", (2,), alias_of=o)
    v = b.load(a)
    first = b.store(v, o, "value")
    second = b.store(b.compute("Neg", [v]), a)
    prog = b.build()
    facts = ProgramFacts(prog)
    assert facts.stores_to_storage(a) == [first.producer, second.producer]
    assert facts.stores_to(o) == [first.producer] and facts.loads_of(a) == [v.producer]
    assert facts.returns == prog.returns and facts.recurrents == []


def test_a_store_or_return_runs_before_the_next_call_without_walking_the_program():
    """A store with an edge into the ordering Return, and that Return, are answered from their edges: the ancestors
    set is not made (a cached property lands in the instance's dict); a load, two steps up, is answered from it."""
    b, h, h0, y, hn = rnn_builder()
    st = b.store(hn, h)
    b.ret(st)
    prog = b.build()
    (ret,) = prog.returns
    for node_id in (st.producer.id, ret.id):
        facts = ProgramFacts(prog)
        assert facts.runs_before_next_call(node_id) is True
        assert "before_next_call" not in facts.__dict__, node_id
    facts = ProgramFacts(prog)
    assert facts.runs_before_next_call(h0.producer.id) is True and "before_next_call" in facts.__dict__


def test_each_slots_stores_are_gathered_once_per_run(monkeypatch: pytest.MonkeyPatch):
    b, h, h0, y, hn = rnn_builder()
    st = b.store(hn, h)
    b.ret(st)
    facts = ProgramFacts(b.build())
    asked: list[object] = []
    real = ProgramFacts.stores_to

    def counting(self: ProgramFacts, dest: object) -> object:
        asked.append(dest)
        return real(self, dest)  # type: ignore[arg-type]

    monkeypatch.setattr(ProgramFacts, "stores_to", counting)
    first = facts.stores_to_storage(h)
    first.append(first[0])  # the caller's own list: the next answer is not changed by it
    assert facts.stores_to_storage(h) == [st.producer]
    assert asked == [h]


def test_a_return_that_orders_nothing_leaves_the_two_calls_unjoined():
    b, h, h0, y, hn = rnn_builder()
    st = b.store(hn, h)
    b.ret(st, layer="none")
    facts = ProgramFacts(b.build())
    assert facts.before_next_call == set() and facts.after_previous_call == set()
    b2, h2, h02, y2, hn2 = rnn_builder()
    st2 = b2.store(hn2, h2)
    b2.ret(st2)
    facts2 = ProgramFacts(b2.build())
    assert (0, st2.producer.id) in facts2.before_next_call and (1, h02.producer.id) in facts2.after_previous_call
    assert (1, st2.producer.id) not in facts2.before_next_call and (0, h02.producer.id) not in facts2.after_previous_call


def test_the_catalogue_passes_each_declare_their_rules_in_code_order():
    assert [p.codes() for p in passes.catalogue.PASSES] == [
        ("SD001", "SD002", "SD003", "SD004", "SD005", "SD006", "SD007", "SD008"),
        ("AL001", "AL002", "AL003"),
        ("OR001", "OR002"),
        ("SD009", "SD010"),
    ]


def test_the_slice_maps_are_traced_once_per_version_and_again_after_an_edit():
    prog = _prog()
    first = ProgramFacts(prog).pairs
    assert ProgramFacts(prog).pairs[0] is first[0]  # a second run over the same program: no second tracing
    (declared,) = prog.state_pairs
    assert first[0].pair is declared and first[0].slices[0].exit_kind == {"": "final"}
    prog.state_pairs = [dataclasses.replace(declared, reason="said again")]  # an edit: the version moves
    (again,) = ProgramFacts(prog).pairs
    assert again is not first[0] and again.reason == "said again" and again.slot is declared.slot
    assert [sm.to_json() for sm in again.slices] == [sm.to_json() for sm in first[0].slices]


def test_a_pair_without_a_slot_is_left_out_of_the_facts():
    prog = _prog()
    ghost = rnnir.StatePair("ghost", "ghost_out", rnnir.PairSource.BUILDER, "no slot behind it")
    prog.state_pairs = [*prog.state_pairs, ghost]
    assert [p.input for p in ProgramFacts(prog).pairs] == ["h"]


def test_the_two_calls_hold_every_node_and_edge_of_each_call():
    b = rnnir.Builder("lonely")
    h = b.slot("h", "float32", (1,))
    b.load(h)  # read by nobody: a node without edges
    b.ret(layer="none")
    prog = b.build()
    h2 = ProgramFacts(prog).two_calls
    g = prog.graph
    assert set(h2.nodes) == {(k, n) for k in (0, 1) for n in g.nodes} | {("call-boundary",)}
    prog2 = _prog()
    h3 = ProgramFacts(prog2).two_calls
    assert {(u, v) for u, v in h3.edges if u != ("call-boundary",) and v != ("call-boundary",)} == {((k, u), (k, v)) for k in (0, 1) for u, v in prog2.graph.edges}


@pytest.mark.parametrize("sample", sorted(p.name for p in (*SAMPLES.glob("*.onnx"), *SAMPLES.glob("*.rnnir"))))
def test_the_call_sets_are_what_the_doubled_graph_reaches(sample):
    # before_next_call / after_previous_call are read off the program without building two_calls; the
    # doubled graph's own traversals are the definition they must equal, on every sample and every layer
    from rnnir.ir import digraph

    prog = rnnir.load(SAMPLES / sample)
    facts = ProgramFacts(prog)
    before = digraph.ancestors(facts.two_calls, ("call-boundary",))
    after = digraph.descendants(facts.two_calls, ("call-boundary",))
    assert facts.before_next_call == before
    assert facts.after_previous_call == after
    _node_questions_agree(ProgramFacts(prog), before, after)  # fresh facts: the node questions first, sets not made


def _node_questions_agree(facts: ProgramFacts, before: set[object], after: set[object]) -> None:
    """runs_before_next_call / runs_after_previous_call answer for one node what the doubled graph's sets hold."""
    for n in [*facts.program.graph.nodes, "not-a-node"]:
        assert facts.runs_before_next_call(n) == ((0, n) in before), n
        assert facts.runs_after_previous_call(n) == ((1, n) in after), n


def test_the_call_sets_of_a_program_whose_return_orders_nothing_match_the_doubled_graph():
    from rnnir.ir import digraph

    b, h, h0, y, hn = rnn_builder()
    b.ret(b.store(hn, h), layer="none")
    facts = ProgramFacts(b.build())
    assert facts.before_next_call == digraph.ancestors(facts.two_calls, ("call-boundary",)) == set()
    assert facts.after_previous_call == digraph.descendants(facts.two_calls, ("call-boundary",)) == set()
    _node_questions_agree(facts, set(), set())


def test_the_manager_keeps_its_own_copy_of_the_passes_and_the_selection():
    chosen, dropped, line_up = ["XA"], ["XA002"], [_Says(), _Other()]
    m = PassManager(line_up, select=chosen, ignore=dropped)
    chosen.append("XB")
    dropped.append("XA001")
    line_up.pop()
    assert (m.passes, m.select, m.ignore) == ((_Says(), _Other()), ("XA",), ("XA002",))
    assert m.codes == {"XA001"}


@dataclasses.dataclass(frozen=True)
class _Bumps(_Says):
    """Changes the program where the freeze does not look: the version check still sees it."""

    name: ClassVar[str] = "bumps"

    def analyse(self, facts):
        facts.program.graph.add_node("extra")  # the graph is public and not frozen; its changes count in the version
        return []


def test_a_pass_that_moves_the_program_version_breaks_its_contract():
    with pytest.raises(PassContractError, match=r"^analysis pass 'bumps' changed program 'cell'; analyses must not mutate the IR$"):
        PassManager((_Bumps(),)).run(_prog())
    assert PassManager((_Bumps(),), check_immutable=False).run(_prog()) == []


def test_a_pass_without_analyse_is_an_error_not_a_silent_pass():
    @dataclasses.dataclass(frozen=True)
    class Lazy(AnalysisPass):
        name: ClassVar[str] = "lazy"
        rules: ClassVar = (AAA,)

    with pytest.raises(NotImplementedError):
        PassManager((Lazy(),)).run(_prog())


def test_a_retired_code_is_refused_with_its_reason_and_never_mistaken_for_unknown(monkeypatch):
    from rnnir.passes import catalogue

    monkeypatch.setitem(catalogue.RETIRED, "SD099", "merged into SD002")
    with pytest.raises(ValueError, match=r"^rule SD099 is retired: merged into SD002$"):
        catalogue.rule_for(" sd099 ")
    with pytest.raises(ValueError, match=r"^unknown rule code 'SD098'"):
        catalogue.rule_for("SD098")
    assert catalogue.rule_for("Wrong_Slot") is catalogue.RULES["SD002"]


def test_strict_raises_what_rnnir_could_not_verify_to_an_error():
    b = rnnir.Builder("plain")
    h = b.slot("h", "float32", (1, 1, H))
    b.store(b.compute("Tanh", [b.load(h)]), h)  # state that reaches no recurrence: SD009, information by default
    prog = b.build()
    assert {d.code: d.severity for d in passes.run(prog)}.get("SD009") is Severity.INFO
    assert {d.code: d.severity for d in passes.run(prog, strict=True)}.get("SD009") is Severity.ERROR


def test_verify_without_suppressions_keeps_only_the_selected_findings():
    b, h, h0, y, hn = rnn_builder()
    b.store(y, h)  # Y at its first step: SD003, and nothing else selected below
    prog = b.build()
    every = {d.code for d in passes.verify(prog, noqa=False).diagnostics}
    assert "SD003" in every
    chosen = passes.verify(prog, select=["SD003"], noqa=False)
    assert [d.code for d in chosen.diagnostics] == ["SD003"] and chosen.suppressed == []
