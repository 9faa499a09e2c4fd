"""The fix engine's contract with its planners (``rnnir.fixes.engine``): a planner that raises, an edit that does
not clear its finding, a finding without a planner or without a slot -- each ends as a skipped edit saying why, and
the model is left as it was.  The planners are replaced for one test (``monkeypatch``), the models are samples."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.fixes import engine
from rnnir.fixes.edits import Edit, FixContext, Plan, subject
from rnnir.fixes.planners import PLANNERS, RegisteredFix
from rnnir.passes.diagnostics import Diagnostic, Location, Severity
from rnnir.runtime import StatefulSession

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SWAP = SAMPLES / "sd002_hc_swap.onnx"  # one SD002 on slot 'state', fixed by reordering a Concat


def _finding(path: Path, code: str) -> tuple[onnx.ModelProto, Diagnostic]:
    model = onnx.load(str(path))
    (d,) = [d for d in passes.run(rnnir.load(model)) if d.code == code]
    return model, d


def _replace_planner(monkeypatch: pytest.MonkeyPatch, code: str, plan) -> None:
    real = PLANNERS[code]
    monkeypatch.setitem(PLANNERS, code, RegisteredFix(real.info, plan, real.module))


def test_a_planner_that_raises_is_a_refusal_naming_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
        raise ValueError("no such slice")

    _replace_planner(monkeypatch, "SD002", boom)
    result = rnnir.fix(str(SWAP))
    assert result.edits == []
    assert [str(e) for e in result.skipped] == ["SD002 [no fix] SD002 on slot 'state': rnnir could not plan the edit (ValueError: no such slice)"]
    assert result.model.graph == onnx.load(str(SWAP)).graph


def test_an_edit_that_does_not_clear_its_finding_is_rolled_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def rename_only(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
        def apply() -> None:  # a change that leaves the swap in place
            ctx.model.graph.name = "renamed"
            ctx.model.graph.node[0].name = "renamed_node"

        return Plan(Edit(d.code, "graph", "a", "b", True, "renames the graph"), apply)

    _replace_planner(monkeypatch, "SD002", rename_only)
    result = rnnir.fix(str(SWAP))
    assert result.edits == []
    assert [(e.message, e.applied, e.fixable, e.reason) for e in result.skipped] == [
        ("renames the graph", False, False, "the edit did not clear the finding; rolled back")
    ]
    assert result.model == onnx.load(str(SWAP))  # every byte back, the names included


def test_a_finding_without_a_planner_or_a_slot_is_refused() -> None:
    model, d = _finding(SAMPLES / "sd005_fp16_state.onnx", "SD005")  # a rule with no fix
    ctx = FixContext(model, rnnir.load(model), None, "m.onnx")
    assert str(engine._plan_for(ctx, d)) == f"SD005 [no fix] SD005 on slot {d.slot!r}: no automatic fix for this rule"
    # every planner that plans from the finding's slot refuses a finding that names none
    for path, code in (
        ("sd001_no_state_output", "SD001"),
        ("sd002_hc_swap", "SD002"),
        ("sd003_first_step", "SD003"),
        ("sd007_zero_init", "SD007"),
        ("sd008_last_step_seqlens", "SD008"),
    ):
        model, d = _finding(SAMPLES / f"{path}.onnx", code)
        ctx = FixContext(model, rnnir.load(model), None, "m.onnx")
        where = subject(dataclasses.replace(d, slot=None))
        refused = PLANNERS[code].plan(ctx, dataclasses.replace(d, slot=None))
        assert str(refused) == f"{code} [no fix] {code} on {where}: the finding names no slot", code


def test_what_a_finding_is_about() -> None:
    def d(slot: str | None, *locs: Location) -> Diagnostic:
        return Diagnostic("SD009", "x", Severity.INFO, "m", tuple(locs), slot=slot)

    rows = [
        (d("h0", Location(onnx_node="gru")), "slot 'h0'"),
        (d(None, Location(node="n1"), Location(value="v"), Location(onnx_node="g")), "v"),
        (d(None, Location(onnx_node="gru", value="v")), "gru"),
        (d(None, Location(node="n1")), "SD009"),
        (d(None), "SD009"),
    ]
    assert [subject(diag) for diag, _ in rows] == [want for _, want in rows]


def test_sd010_refusal_names_the_finding_when_its_data_does_not() -> None:
    model, d = _finding(SAMPLES / "sd010_constant_init.onnx", "SD010")
    ctx = FixContext(model, rnnir.load(model), None, "m.onnx")
    bare = dataclasses.replace(d, data={})
    refused = PLANNERS["SD010"].plan(ctx, bare)
    assert isinstance(refused, Edit) and refused.target == subject(bare) != "SD010"
    assert PLANNERS["SD010"].plan(ctx, d).target == "RNN 'rnn' starts afresh on every call"


def _two_bugs() -> onnx.ModelProto:
    """lstm_fanout with two bugs: hn is the first step of y (SD003 on h0), c starts from zeros instead of c0 (SD007)."""
    m = onnx.load(str(SAMPLES / "lstm_fanout.onnx"))
    lstm = next(n for n in m.graph.node if n.op_type == "LSTM")
    m.graph.initializer.extend([numpy_helper.from_array(np.zeros((1, 1, 5), np.float32), "c_zero"), numpy_helper.from_array(np.array(0, np.int64), "t0")])
    lstm.input[6] = "c_zero"
    lstm.output[1] = ""
    m.graph.node.append(helper.make_node("Gather", [lstm.output[0], "t0"], ["hn"], name="first_step", axis=0))
    onnx.checker.check_model(m, full_check=True)
    return m


def test_two_findings_are_fixed_one_per_round_back_to_the_correct_model() -> None:
    model = _two_bugs()
    assert sorted((d.code, d.slot) for d in passes.run(rnnir.load(model))) == [("SD003", "h0"), ("SD007", "c0")]
    result = rnnir.fix(model, unsafe=True)
    assert [(e.code, e.safe) for e in result.edits] == [("SD003", True), ("SD007", False)] and result.skipped == []
    x = np.random.default_rng(51).standard_normal((6, 1, 3)).astype(np.float32)
    fixed, correct = StatefulSession(result.model), StatefulSession(str(SAMPLES / "lstm_fanout.onnx"))  # the sample is the hand fix
    for k in range(0, 6, 2):
        a, b = fixed.run_dict({"x": x[k : k + 2]}), correct.run_dict({"x": x[k : k + 2]})
        for name in b:
            np.testing.assert_allclose(a[name], b[name], atol=1e-6, err_msg=f"call {k // 2} {name}")


def test_a_refused_finding_is_not_planned_again_in_later_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str | None] = []

    def refuse(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
        calls.append(d.slot)
        return PLANNERS["SD003"].info.refuse(d, "refused for the test")

    _replace_planner(monkeypatch, "SD003", refuse)
    result = rnnir.fix(_two_bugs(), unsafe=True)  # round 1: SD003 refused, SD007 fixed; round 2: SD003 is not planned
    assert [e.code for e in result.edits] == ["SD007"]
    assert [str(e) for e in result.skipped] == ["SD003 [no fix] SD003 on slot 'h0': refused for the test"]
    assert calls == ["h0"]


def test_two_refused_findings_are_both_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
        return PLANNERS["SD003"].info.refuse(d, "refused for the test")

    _replace_planner(monkeypatch, "SD003", refuse)
    result = rnnir.fix(_two_bugs())  # SD003 refused by its planner, SD007's unsafe fix not applied: two findings, two entries
    assert result.edits == []
    assert sorted((e.code, e.message) for e in result.skipped) == [
        ("SD003", "SD003 on slot 'h0'"), ("SD007", "slot 'c0': fed the state input to the op whose final state it gets")]


def test_the_fingerprint_an_export_records_follows_the_edit_and_expose_leaves_other_fixes_on() -> None:
    from rnnir.onnxio.source import graph_fingerprint

    model = onnx.load(str(SWAP))
    model.metadata_props.add(key="rnnir.fingerprint", value=graph_fingerprint(model))  # as rnnir.export records it
    result = rnnir.fix(model)
    assert [e.code for e in result.edits] == ["SD002"]
    fingerprint = {p.key: p.value for p in result.model.metadata_props}["rnnir.fingerprint"]
    assert fingerprint == graph_fingerprint(result.model) != graph_fingerprint(model)
    assert not any(p.key == "rnnir.fingerprint" for p in rnnir.fix(str(SWAP)).model.metadata_props)  # none recorded: none added
    # exposing state does not switch the other fixes off (only SD010's, which exposing does itself)
    exposed = rnnir.fix(str(SWAP), expose_state=True)
    assert "SD002" in [e.code for e in exposed.edits]


def test_sd010_refusal_names_the_recurrence_only_from_complete_data() -> None:
    model, d = _finding(SAMPLES / "sd010_constant_init.onnx", "SD010")
    ctx = FixContext(model, rnnir.load(model), None, "m.onnx")
    plan = PLANNERS["SD010"].plan
    assert plan(ctx, d).target == "RNN 'rnn' starts afresh on every call"
    for data in ({}, {"kind": "RNN"}, {"node": "rnn"}, {"kind": 1, "node": "rnn"}):
        bare = dataclasses.replace(d, data=data)
        assert plan(ctx, bare).target == subject(bare), data
