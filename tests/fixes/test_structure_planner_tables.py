"""The store-structure planners (AL001, AL002, OR002, SD004) on hand-edited variants of the samples' IR text: what
each repairs, with the model it leaves compared over several calls with the model a person would write by hand
(onnxruntime, the state fed back), and the near misses each must refuse with its exact reason."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx

import rnnir
from rnnir import passes
from rnnir.runtime import StatefulSession
from tests.fixes.test_store_structure_fixes import _findings, _ir, _plan_again, _variant
from tests.support.runnable_samples import exported_ir_sample

ALIAS_REFUSED = "the slot is not an alias of a stored output"


def _run(model: onnx.ModelProto, calls: int = 3) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    session = StatefulSession(model)
    return [session.run_dict({"x": rng.standard_normal((2, 1, 3)).astype(np.float32)}) for _ in range(calls)]


def _assert_computes_as(got: onnx.ModelProto, want: onnx.ModelProto, what: str) -> None:
    for k, (a, b) in enumerate(zip(_run(got), _run(want))):
        assert sorted(a) == sorted(b), what
        for name in b:
            np.testing.assert_allclose(a[name], b[name], atol=1e-6, err_msg=f"{what}: call {k} {name}")


def _diagnostic(model: onnx.ModelProto, code: str) -> passes.Diagnostic:
    (d,) = [d for d in passes.run(rnnir.load(model)) if d.code == code]
    return d


def test_structure_fixes_touch_only_their_own_stores_and_compute_as_the_hand_fixed_model(tmp_path: Path) -> None:
    # AL001: a second output chained to another OUTPUT store (y2 <- store.y) is not the slot's chain: left as it is
    y2_out = ("  output hn : float32[1,1,4]\n", "  output hn : float32[1,1,4]\n  output y2 : float32[T,1,1,4]\n")
    y2_store = "  %store.y2 = store<out:y2, value>(%store.y) loc{'id': 'store9', 'value': 'y2'}\n"
    al001 = _variant(tmp_path, "al001_chain", [y2_out, ("  return<by runtime>(", y2_store + "  return<by runtime>(%store.y2, ")])
    al001_by_hand = _variant(tmp_path, "al001_chain", [
        y2_out,
        ("store<out:hn, value>(%store.h0)", "store<out:hn, value>(%hn)"),
        ("  return<by runtime>(", y2_store + "  return<by runtime>(%store.y2, "),
    ])
    # SD004: an order edge names the store the fix drops: the edge goes with it
    order = ('  return<by runtime>', '  order %store.h0 -> %"store.h0@"\n  return<by runtime>')
    sd004 = _variant(tmp_path, "sd004_double_store", [order])
    sd004_by_hand = _variant(tmp_path, "sd004_double_store", [
        ('  %"store.h0@" = store<@h0, token>(%hn) loc{\'id\': \'store1\', \'value\': \'h0\'}\n', ""),
        ('(%store.h0, %"store.h0@",', "(%store.h0,"),
    ])
    # AL001: a second SLOT store chained to the slot store (SD004's bug, left to SD004) is no output store: kept
    h0b = ("  %store.y = store", "  %store.h0b = store<@h0, token>(%store.h0) loc{'id': 'store9', 'value': 'h0'}\n  %store.y = store")
    h0b_ret = ("return<by runtime>(", "return<by runtime>(%store.h0b, ")
    chained_slot = _variant(tmp_path, "al001_chain", [h0b, h0b_ret])
    chained_slot_by_hand = _variant(tmp_path, "al001_chain", [h0b, h0b_ret, ("store<out:hn, value>(%store.h0)", "store<out:hn, value>(%hn)")])
    repointed = "rnnir.ir store 'store.hn': reads 'store:store.h0' -> reads 'value:hn'"
    cases = [  # broken, by hand, code, the edit, IR text kept, IR text gone, findings left (before and after)
        (al001, al001_by_hand, "AL001", repointed, ["store<out:y2, value>(%store.y)", "store<out:hn, value>(%hn)"], [], []),
        (chained_slot, chained_slot_by_hand, "AL001", repointed,
         ['%"store.h0@" = store<@h0, token>(%store.h0)', "store<out:hn, value>(%hn)"], [], [("SD004", "h0")]),
        (sd004, sd004_by_hand, "SD004", "rnnir.ir stores into slot 'h0': store.h0, store.h0@ -> store.h0", [], ["order ", "store.h0@"], []),
    ]
    for broken, by_hand, code, edit, kept, gone, left in cases:
        assert _findings(broken) == sorted([(code, "h0"), *left]), code
        assert _findings(by_hand) == left, code
        result = rnnir.fix(broken)
        assert [str(e).split(": ", 2)[-1] for e in result.edits] == [edit], code
        assert sorted(e.code for e in result.skipped) == [c for c, _ in left], code
        assert _findings(result.model) == left, code
        text = _ir(result.model)
        assert all(line in text for line in kept) and not any(line in text for line in gone), code
        _assert_computes_as(result.model, by_hand, code)


def test_structure_planners_refuse_a_slot_that_is_not_theirs_with_their_reason(tmp_path: Path) -> None:
    al002 = exported_ir_sample("al002_output_alias")
    al002_d = _diagnostic(al002, "AL002")
    # c0 aliases another SLOT (AL003's bug), not a stored output: AL002 has nothing to give its own storage
    slot_alias = _variant(tmp_path, "al003_shared_address", [
        ('slot @h0 : float32[1,1,3] init=zeros address "mem:state0"', "slot @h0 : float32[1,1,3] init=zeros"),
        ('slot @c0 : float32[1,1,3] init=zeros address "mem:state0"', "slot @c0 : float32[1,1,3] init=zeros aliases slot:h0"),
    ])
    or002 = exported_ir_sample("or002_view_war")
    or002_d = _diagnostic(or002, "OR002")
    cases = [
        (slot_alias, dataclasses.replace(al002_d, slot="c0"), f"AL002 [no fix] AL002 on slot 'c0': {ALIAS_REFUSED}"),
        (al002, dataclasses.replace(al002_d, slot="other"), f"AL002 [no fix] AL002 on slot 'other': {ALIAS_REFUSED}"),
        (or002, dataclasses.replace(or002_d, slot="other"),
         "OR002 [no fix] OR002 on slot 'other': the slot is not loaded as a view"),
    ]
    for model, d, reason in cases:
        before = model.SerializeToString()
        assert _plan_again(model, d) == reason
        assert model.SerializeToString() == before, reason
