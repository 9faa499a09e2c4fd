"""The state's forward reach (rnnir/lower/plan.py ``may_carry_state``) as one pass over the nodes in order, against
the flood it stands in for: the same names on every committed model, a hand-read set on a small graph, and the
flood itself wherever the node order cannot be trusted (subgraphs, nodes out of order)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from onnx import helper, numpy_helper

from rnnir.ir.core import Program
from rnnir.lower import plan
from rnnir.lower.build import recognise_recurrences
from rnnir.lower.scope import ModelIndex
from rnnir.lower.state import declare_state
from rnnir.onnxio.source import read_model
from tests.support.recurrent_op_models import H, I, T, model, vi, weights

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = sorted([*ROOT.glob("samples/*.onnx"), *ROOT.glob("tests/data/torch*/*.onnx"), *ROOT.glob("tests/data/keras/*.onnx")])


def _stages(m):
    src = read_model(m)
    index = ModelIndex(src.model, src.label)
    program = Program("m")
    program.source = src
    state = declare_state(src, index, program, None, constant_entries=False)
    return index, state, recognise_recurrences(index, state, program)


def _flood(index, state, recognised, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(plan, "_closure_in_node_order", lambda index, seeds: None)
        return plan.may_carry_state(index, state, recognised, through_recurrent_results=True)


def test_the_pass_in_node_order_reaches_what_the_flood_reaches_on_every_committed_model(monkeypatch):
    in_order = 0
    for path in MODELS:
        index, state, recognised = _stages(path)
        fast = plan._closure_in_node_order(index, plan._seeds(index, state, recognised))
        if fast is None:
            continue
        in_order += 1
        assert fast == _flood(index, state, recognised, monkeypatch), path.name
        assert plan.may_carry_state(index, state, recognised, through_recurrent_results=True) == fast
    assert in_order >= 20  # most exports are one graph in order: the pass is what they run


def _gru(name, h_in, x="x"):
    return helper.make_node("GRU", [x, "W", "R", "", "", h_in], [f"{name}_Y", f"{name}_Yh"], hidden_size=H, name=name)


def _two_grus(order=None, empty_output=False, omit_y=False):
    """h0 -> Relu -> gru_a; its Yh -> Add(x_sum) -> gru_b (initial_h) -> hn; y from x alone, z from gru_a's Y."""
    nodes = [
        helper.make_node("Relu", ["h0"], ["h_in"], name="relu"),
        _gru("gru_a", "h_in"),
        helper.make_node("ReduceSum", ["x"], ["x_sum"], keepdims=1, name="x_sum"),
        helper.make_node("Add", ["gru_a_Yh", "x_sum"], ["h_mid"], name="mix"),
        _gru("gru_b", "h_mid"),
        helper.make_node("Identity", ["gru_b_Yh"], ["hn"], name="out"),
        helper.make_node("Neg", ["x"], ["y"], name="y"),
        helper.make_node("Dropout", ["gru_a_Y"], ["z", ""] if empty_output else ["z"], name="z"),
        helper.make_node("Clip", ["x", "", "cmax"], ["clipped"], name="clip"),  # an absent input: never reached
    ]
    if omit_y:  # gru_b's Y left out: the recurrent op's absent output is no seed
        nodes[4].output[0] = ""
    if order is not None:
        nodes = [nodes[k] for k in order]
    outs = [vi("hn", [1, 1, H]), vi("y", [T, 1, I]), vi("z", [T, 1, 1, H])]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], outs, [*weights("GRU"), numpy_helper.from_array(np.float32(1), "cmax")])


# by hand: the slot h0 and everything after it, both GRUs' results (seeds), what reads them; not x_sum or y
REACHED = {"h0", "h_in", "gru_a_Y", "gru_a_Yh", "h_mid", "gru_b_Y", "gru_b_Yh", "hn", "z"}


def test_a_small_graph_reaches_what_reading_it_by_hand_gives(monkeypatch):
    index, state, recognised = _stages(_two_grus())
    assert plan._closure_in_node_order(index, plan._seeds(index, state, recognised)) == REACHED
    assert _flood(index, state, recognised, monkeypatch) == REACHED


@pytest.mark.parametrize(
    "kw",
    [
        {"order": [1, 0, 2, 3, 4, 5, 6, 7, 8]},  # gru_a before the Relu that makes its initial state
        {"order": [0, 1, 3, 2, 4, 5, 6, 7, 8]},  # the Add before the ReduceSum it reads
    ],
)
def test_where_the_node_order_cannot_be_trusted_the_flood_answers(kw):
    index, state, recognised = _stages(_two_grus(**kw))
    assert plan._closure_in_node_order(index, plan._seeds(index, state, recognised)) is None
    assert plan.may_carry_state(index, state, recognised, through_recurrent_results=True) == REACHED


def test_a_graph_with_a_subgraph_is_left_to_the_flood():
    m = _two_grus()
    then = helper.make_graph([helper.make_node("Identity", ["h_mid"], ["t"])], "then", [], [vi("t", [1, 1, H])])
    other = helper.make_graph([helper.make_node("Identity", ["gru_a_Yh"], ["e"])], "else", [], [vi("e", [1, 1, H])])
    m.graph.node.append(helper.make_node("If", ["flag"], ["picked"], then_branch=then, else_branch=other, name="pick"))
    m.graph.input.append(vi("flag", [], 9))
    m.graph.output.append(vi("picked", [1, 1, H]))
    index, state, recognised = _stages(m)
    assert plan._closure_in_node_order(index, plan._seeds(index, state, recognised)) is None
    assert plan.may_carry_state(index, state, recognised, through_recurrent_results=True) == REACHED | {"t", "e", "picked"}


def test_the_seeds_are_the_slots_and_recurrent_results_without_absent_outputs():
    index, state, recognised = _stages(_two_grus())
    assert plan._seeds(index, state, recognised) == {"h0", "gru_a_Y", "gru_a_Yh", "gru_b_Y", "gru_b_Yh"}
    index, state, recognised = _stages(_two_grus(omit_y=True))
    assert plan._seeds(index, state, recognised) == {"h0", "gru_a_Y", "gru_a_Yh", "gru_b_Yh"}
    # a recurrent op's absent output keeps the pass in node order
    assert plan._closure_in_node_order(index, plan._seeds(index, state, recognised)) == REACHED - {"gru_b_Y"}
    # an absent output of a plain op (Dropout's mask) is no value either: the Clip with an absent input stays out
    index, state, recognised = _stages(_two_grus(empty_output=True))
    assert plan._closure_in_node_order(index, plan._seeds(index, state, recognised)) == REACHED


def test_the_reach_through_layout_ops_only_stays_the_floods():
    # recurrent results spread through layout-only ops alone (Identity to hn), the slot through any op (the Relu)
    index, state, recognised = _stages(_two_grus())
    reach = plan.may_carry_state(index, state, recognised, through_recurrent_results=False)
    assert reach == {"h0", "h_in", "gru_a_Y", "gru_a_Yh", "gru_b_Y", "gru_b_Yh", "hn"}
