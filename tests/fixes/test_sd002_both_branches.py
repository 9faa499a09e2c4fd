"""SD002's fix when the swapped Concat sits in BOTH branches of an If: each branch's Concat is put back in order,
exactly as a person repairs the model, and the edit says how many Concats it rewrote."""

from __future__ import annotations

import numpy as np
import onnx

import rnnir
from rnnir.runtime import StatefulSession
from tests.fixes.test_planner_near_misses import _codes, _load


def _branches(model: onnx.ModelProto, then_inputs: list[str], else_inputs: list[str]) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if_node = next(n for n in m.graph.node if n.op_type == "If")
    for attr in if_node.attribute:
        concat = next(n for n in attr.g.node if n.op_type == "Concat")
        concat.input[:] = then_inputs if attr.name == "then_branch" else else_inputs
    return m


def test_sd002_swapped_concats_in_both_if_branches_are_both_put_back() -> None:
    sample = _load("sd002_hc_swap_if_branch")
    broken = _branches(sample, ["then_Y_c", "then_Y_h"], ["else_Y_c", "else_Y_h"])
    correct = _branches(sample, ["then_Y_h", "then_Y_c"], ["else_Y_h", "else_Y_c"])
    onnx.checker.check_model(broken, full_check=True)
    assert _codes(broken) == ["SD002"] and _codes(correct) == []
    result = rnnir.fix(broken)
    assert [str(e) for e in result.edits] == [
        "SD002 [safe] slot 'state': wrote each final state back into the slice its op reads: "
        "Concat 'else_concat_state' (and 1 more Concat): inputs (else_Y_c, else_Y_h) -> inputs (else_Y_h, else_Y_c)"
    ]
    assert _codes(result.model) == []
    assert result.model.graph == correct.graph
    rng = np.random.default_rng(5)
    for sr in (8000, 16000):  # each branch, several calls with the state fed back
        fixed, want = StatefulSession(result.model), StatefulSession(correct)
        for _ in range(3):
            feeds = {"x": rng.standard_normal((2, 1, 2)).astype(np.float32), "sr": np.array(sr, np.int64)}
            got, exp = fixed.run_dict(feeds), want.run_dict(feeds)
            for name in exp:
                np.testing.assert_allclose(got[name], exp[name], atol=1e-6, err_msg=f"sr={sr} {name}")
