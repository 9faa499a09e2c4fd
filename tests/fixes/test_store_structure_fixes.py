"""The fixes of the store structure an export records as IR text (``rnnir.ir``): AL001, AL002, AL003, OR001, OR002
and SD004 -- what each refuses, and the variants of the samples that take the planners' other paths.

A planner asked to repair its finding again on the model it already fixed must refuse (the bug is gone), and so
must every planner on the same graph without the recorded structure (the stores then come from the lowering policy,
not from the model).  The variants are the samples' IR text edited by hand: a chain of two stores behind the slot
store (AL001 must point the output at the final state, not at the middle store), a slot that aliases another slot
(AL003), two stores into one slot of different values (SD004 cannot choose).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

import rnnir
from rnnir import passes
from rnnir.fixes.edits import FixContext
from rnnir.fixes.planners import PLANNERS
from tests.support.runnable_samples import exported_ir_sample

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
NOT_RECORDED = "the store structure is not recorded in the model (rnnir.ir metadata): it comes from a lowering policy"


def _strip(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.metadata_props[:]
    return m


def _findings(model: onnx.ModelProto) -> list[tuple[str, str | None]]:
    return sorted((d.code, d.slot) for d in passes.run(rnnir.load(model)))


def _plan_again(model: onnx.ModelProto, d: passes.Diagnostic) -> str:
    planned = PLANNERS[d.code].plan(FixContext(model, rnnir.load(model), None, "m.onnx"), d)
    return str(planned)


def test_a_store_structure_fix_refuses_once_its_bug_is_gone_and_without_the_recorded_structure() -> None:
    cases = {
        "or001_return_no_wait": ("OR001", "h0", "the Return already waits for the slot's stores"),
        "or002_view_war": ("OR002", "state", "the slot is not loaded as a view"),
        "al001_chain": ("AL001", "h0", "no recorded output store reads the slot store's result"),
        "al002_output_alias": ("AL002", "h0", "the slot is not an alias of a stored output"),
        "al003_shared_address": ("AL003", "c0", "the shared storage is not recorded"),
        "sd004_double_store": ("SD004", "h0", None),
    }
    for name, (code, slot, gone) in cases.items():
        broken = exported_ir_sample(name)
        (d,) = [d for d in passes.run(rnnir.load(broken)) if d.code == code]
        fixed = rnnir.fix(broken).model
        if gone is not None:
            assert _plan_again(fixed, d) == f"{code} [no fix] {code} on slot {slot!r}: {gone}", name
        assert _plan_again(_strip(broken), d) == f"{code} [no fix] {code} on slot {slot!r}: {NOT_RECORDED}", name


def _variant(tmp_path: Path, sample: str, edits: list[tuple[str, str]]) -> onnx.ModelProto:
    """The sample's IR text with each ``old`` replaced by ``new`` (each must occur), exported with random weights."""
    text = (SAMPLES / f"{sample}.rnnir").read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{sample}_variant.rnnir"
    path.write_text(text, encoding="utf-8")
    program = rnnir.load(str(path))
    rng = np.random.default_rng(7)
    for v in program.externals.values():
        if v.const is not None and np.asarray(v.const).dtype.kind == "f":
            v.const = (rng.standard_normal(np.shape(v.const)) * 0.5).astype(np.float32)
    return rnnir.export(program)


def _ir(model: onnx.ModelProto) -> str:
    return {p.key: p.value for p in model.metadata_props}["rnnir.ir"]


def test_chained_output_store_two_stores_deep_is_pointed_at_the_final_state(tmp_path: Path) -> None:
    # hn <- store.h0 <- store.hmid <- %hn: the output must read the GRU's final state, not a store on the way
    model = _variant(tmp_path, "al001_chain", [
        ("  output hn : float32[1,1,4]\n", "  output hn : float32[1,1,4]\n  output hmid : float32[1,1,4]\n"),
        ("%store.h0 = store<@h0, alias>(%hn)", "%store.hmid = store<out:hmid, value>(%hn) loc{'id': 'store9', 'value': 'hmid'}\n  %store.h0 = store<@h0, alias>(%store.hmid)"),
        ("return<by runtime>(%store.h0,", "return<by runtime>(%store.hmid, %store.h0,"),
    ])
    assert _findings(model) == [("AL001", "h0")]
    result = rnnir.fix(model)
    assert [str(e) for e in result.edits] == [
        "AL001 [safe] slot 'h0': the output store reads the final state (fan-out), not the slot store's result: "
        "rnnir.ir store 'store.hn': reads 'store:store.h0' -> reads 'value:hn'"
    ]
    assert "%store.hn = store<out:hn, value>(%hn)" in _ir(result.model)
    assert _findings(result.model) == []


def test_a_slot_aliasing_another_slot_gets_its_own_storage(tmp_path: Path) -> None:
    model = _variant(tmp_path, "al003_shared_address", [
        ('slot @h0 : float32[1,1,3] init=zeros address "mem:state0"', "slot @h0 : float32[1,1,3] init=zeros"),
        ('slot @c0 : float32[1,1,3] init=zeros address "mem:state0"', "slot @c0 : float32[1,1,3] init=zeros aliases slot:h0"),
    ])
    assert _findings(model) == [("AL003", "c0")]
    result = rnnir.fix(model)
    assert [e.code for e in result.edits] == ["AL003"] and result.skipped == []
    slots = [line.strip() for line in _ir(result.model).splitlines() if line.strip().startswith("slot ")]
    assert slots == ["slot @c0 : float32[1,1,3] init=zeros", "slot @h0 : float32[1,1,3] init=zeros"]
    assert _findings(result.model) == []


def test_two_stores_of_different_values_into_one_slot_are_not_chosen_between(tmp_path: Path) -> None:
    # the second store writes the loaded (old) state back: which store is the state is not certain.  SD001's fix of
    # the same slot makes a graph rnnir cannot analyse (a cycle through its new Identity): rolled back, never kept
    model = _variant(tmp_path, "sd004_double_store", [('%"store.h0@" = store<@h0, token>(%hn)', '%"store.h0@" = store<@h0, token>(%h0)')])
    assert _findings(model) == [("SD001", "h0"), ("SD004", "h0")]
    result = rnnir.fix(model)
    assert result.edits == []
    sd001, sd004 = sorted(result.skipped, key=lambda e: e.code)
    assert str(sd004) == "SD004 [no fix] SD004 on slot 'h0': the stores write different values: which one is the state is not certain"
    assert (sd001.code, sd001.applied, sd001.fixable) == ("SD001", False, False)
    assert sd001.reason.startswith("the edited model cannot be analysed: ") and "cycle" in sd001.reason
    assert result.model == model  # rolled back: not one byte of the edit is left
