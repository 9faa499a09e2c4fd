"""SD002's fix when the swapped Concat sits in BOTH branches of an If: each branch's Concat is put back in order,
exactly as a person repairs the model, and the edit says how many Concats it rewrote; one Concat reached twice
(through an If) is rewritten once; a swap with no Concat at all, or a Concat with an operand that is no final state,
is refused with its reason."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

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


def _behind_if(operands: list[str]) -> onnx.ModelProto:
    """sd002_hc_swap with the state Concat ``operands``, returned through an If whose two branches both yield it:
    the planner reaches the one Concat twice."""
    m = _load("sd002_hc_swap")
    g = m.graph
    concat = next(n for n in g.node if n.op_type == "Concat")
    concat.input[:] = operands
    concat.output[0] = "cat"

    def branch(name: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{name}_state", onnx.TensorProto.FLOAT, [2, 1, 3])
        return helper.make_graph([helper.make_node("Identity", ["cat"], [f"{name}_state"], name=f"{name}_id")], name, [], [out])

    g.node.append(helper.make_node("If", ["flag"], ["stateN"], name="pick", then_branch=branch("then"), else_branch=branch("else")))
    g.input.append(helper.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []))
    onnx.checker.check_model(m, full_check=True)
    return m


def _crossed_grus() -> onnx.ModelProto:
    """Two GRUs, each one's final state returned as the other's (h_an = gru_b's): no Concat to reorder."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), f"{k}_{w}")
        for k in "ab" for w, shape in (("W", (1, 12, 3)), ("R", (1, 12, 4)))
    ]
    nodes = [
        helper.make_node("GRU", ["x", "a_W", "a_R", "", "", "h_a"], ["ya", "a_fin"], name="gru_a", hidden_size=4),
        helper.make_node("GRU", ["x", "b_W", "b_R", "", "", "h_b"], ["yb", "b_fin"], name="gru_b", hidden_size=4),
        helper.make_node("Identity", ["a_fin"], ["h_bn"], name="ia"),
        helper.make_node("Identity", ["b_fin"], ["h_an"], name="ib"),
    ]
    f = onnx.TensorProto.FLOAT
    ins = [helper.make_tensor_value_info(n, f, s) for n, s in (("x", ["T", 1, 3]), ("h_a", [1, 1, 4]), ("h_b", [1, 1, 4]))]
    outs = [helper.make_tensor_value_info(n, f, s) for n, s in (("ya", ["T", 1, 1, 4]), ("yb", ["T", 1, 1, 4]), ("h_an", [1, 1, 4]), ("h_bn", [1, 1, 4]))]
    m = helper.make_model(helper.make_graph(nodes, "crossed", ins, outs, inits), opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


def test_sd002_one_concat_reached_twice_and_concats_it_cannot_reorder() -> None:
    broken, correct = _behind_if(["Y_c", "Y_h"]), _behind_if(["Y_h", "Y_c"])
    assert _codes(broken) == ["SD002"] and _codes(correct) == []
    result = rnnir.fix(broken)
    assert [str(e) for e in result.edits] == [  # one Concat, rewritten once
        "SD002 [safe] slot 'state': wrote each final state back into the slice its op reads: "
        "Concat 'concat_state_swapped': inputs (Y_c, Y_h) -> inputs (Y_h, Y_c)"
    ]
    assert result.model.graph == correct.graph and _codes(result.model) == []
    old_c_back = _load("sd002_hc_swap")  # Concat(c, Y_h): the old c (a slice of the state input) goes back in slot 0
    next(n for n in old_c_back.graph.node if n.op_type == "Concat").input[:] = ["c", "Y_h"]
    no_concat = "the wrong slice is not assembled by a Concat whose operands can be reordered"
    refused_rows = [
        (_crossed_grus(), [("h_a", no_concat), ("h_b", no_concat)]),
        (old_c_back, [("state", "operand 0 of Concat 'concat_state_swapped' is not a final state")]),
    ]
    for model, reasons in refused_rows:
        onnx.checker.check_model(model, full_check=True)
        assert _codes(model) == ["SD002"] * len(reasons)
        refused = rnnir.fix(model)
        assert refused.edits == [] and refused.model.graph == model.graph
        assert [str(e) for e in refused.skipped] == [f"SD002 [no fix] SD002 on slot {s!r}: {why}" for s, why in reasons]
