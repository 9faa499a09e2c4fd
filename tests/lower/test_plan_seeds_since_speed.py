"""The state's forward reach in node order (rnnir/lower/plan.py, the lint-speed change) starts from every kind of
seed the flood starts from: a constant initial state made a slot (entry=constant) spreads to whatever else reads
that constant, as the flood and a hand reading say."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

import rnnir
from rnnir.lower import build, plan
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def _stages(m, constant_entries, monkeypatch):
    """What lowering (rnnir.load, entry=constant or not) hands the plan: the index, the declared state, the recurrences."""
    seen = []

    def spy(index, state, recognised):
        seen.append((index, state, recognised))
        return plan.plan_build(index, state, recognised)

    with monkeypatch.context() as mp:
        mp.setattr(build, "plan_build", spy)
        rnnir.load(m, entry="constant" if constant_entries else "dynamic")
    (stages,) = seen
    return stages


def _constant_start():
    """A GRU started from the initializer h0c (returned as Yh), and h0c also read by a Neg: by hand, entry=constant
    makes h0c a slot, so the Neg's result carries state; x alone (the Relu) does not."""
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "h0c"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Neg", ["h0c"], ["negated"], name="neg"),
        helper.make_node("Relu", ["x"], ["y"], name="relu"),
    ]
    inits = [*weights("GRU"), numpy_helper.from_array(np.full((1, 1, H), 0.5, np.float32), "h0c")]
    return model(nodes, [vi("x", [T, 1, I])], [vi("Yh", [1, 1, H]), vi("negated", [1, 1, H]), vi("y", [T, 1, I])], inits)


def _flood(index, state, recognised, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(plan, "_closure_in_node_order", lambda index, seeds: None)
        return plan.may_carry_state(index, state, recognised, through_recurrent_results=True)


def test_a_constant_made_a_slot_spreads_in_node_order_as_in_the_flood(monkeypatch):
    index, state, recognised = _stages(_constant_start(), True, monkeypatch)
    assert [name for _, name in state.constant_slots] == ["h0c"]
    reached = {"h0c", "negated", "Y", "Yh"}
    assert plan._closure_in_node_order(index, plan._seeds(index, state, recognised)) == reached
    assert plan.may_carry_state(index, state, recognised, through_recurrent_results=True) == reached
    assert _flood(index, state, recognised, monkeypatch) == reached
    # near miss: the constant stays a constant (entry=dynamic), so only the GRU's results carry state
    index, state, recognised = _stages(_constant_start(), False, monkeypatch)
    assert plan.may_carry_state(index, state, recognised, through_recurrent_results=True) == {"Y", "Yh"}
