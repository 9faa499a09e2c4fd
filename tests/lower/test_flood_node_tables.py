"""The state flood (rnnir/lower/plan.py, may_carry_state) reads a visited node's op and outputs from protobuf while
it has visited at most an eighth of the model's nodes, and from the index's tables by id (made when first asked)
past that or when they are made already: the same names either way, as worked out by hand."""

from __future__ import annotations

from onnx import TensorProto, helper

from rnnir.lower import plan
from rnnir.lower.scope import ModelIndex
from tests.lower.test_plan_seeds_since_speed import _stages as load_stages
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def _model(fillers: int):
    """A GRU's results: Yh through an Identity (layout-only: yi carries state) into a Neg (not layout-only: a
    recurrent result reached through it stops there), and ``fillers`` Relus reading x only.  The flood from the
    recurrent results visits two nodes: the Identity and the Neg."""
    nodes = [
        helper.make_node("GRU", ["x", "W", "R"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Identity", ["Yh"], ["yi"], name="ident"),
        helper.make_node("Neg", ["yi"], ["n"], name="neg"),
    ]
    prev = "x"
    for k in range(fillers):
        nodes.append(helper.make_node("Relu", [prev], [f"r{k}"], name=f"relu{k}"))
        prev = f"r{k}"
    outs = [vi("Y", [T, 1, 1, H]), vi("n", [1, 1, H])] + ([vi(prev, [T, 1, I])] if fillers else [])
    return model(nodes, [vi("x", [T, 1, I])], outs, weights("GRU"))


def _stages(m, monkeypatch):
    return load_stages(m, False, monkeypatch)  # what lowering hands the plan (entry=dynamic)


def _flood(index, state, recognised, *, tables_first: bool) -> tuple[set[str], bool]:
    index._node_op = index._node_outputs = None  # as a lint that made no tables before the flood
    if tables_first:
        assert index.node_op and index.node_outputs
    reach = plan.may_carry_state(index, state, recognised, through_recurrent_results=False)
    return reach, index.node_tables_made


def test_a_flood_over_few_nodes_reads_protobuf_and_makes_no_tables_the_same_names(monkeypatch):
    by_hand = {"Y", "Yh", "yi"}
    # 16 nodes: a budget of two visits, both spent, none past it
    stages = _stages(_model(13), monkeypatch)
    assert _flood(*stages, tables_first=False) == (by_hand, False)
    assert _flood(*stages, tables_first=True) == (by_hand, True)


def test_a_flood_past_an_eighth_of_the_nodes_makes_the_tables_and_goes_on_from_them(monkeypatch):
    by_hand = {"Y", "Yh", "yi"}
    # 15 nodes: a budget of one visit, the second makes the tables
    stages = _stages(_model(12), monkeypatch)
    assert _flood(*stages, tables_first=False) == (by_hand, True)
    # 3 nodes: no budget, the first visit makes them
    stages = _stages(_model(0), monkeypatch)
    assert _flood(*stages, tables_first=False) == (by_hand, True)
    assert _flood(*stages, tables_first=True) == (by_hand, True)


def test_the_node_tables_are_made_from_every_scope_when_first_asked():
    # a node in an If branch and one in the main graph: both by id, with the op and outputs read while indexing
    branch = helper.make_graph([helper.make_node("Neg", ["x"], ["b"], name="bneg")], "then", [], [vi("b", [T, 1, I])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["c"], name="babs")], "else", [], [vi("c", [T, 1, I])])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("If", ["cond"], ["o"], name="iff", then_branch=branch, else_branch=other),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("cond", [], TensorProto.BOOL)], [vi("r", [T, 1, I]), vi("o", [T, 1, I])])
    index = ModelIndex(m, "m")
    assert not index.node_tables_made
    outs = {index.node_outputs[id(n)] for sc in index.scopes() for n in sc.nodes}  # asked first: makes both
    assert index.node_tables_made
    ops = {index.node_op[id(n)] for sc in index.scopes() for n in sc.nodes}
    assert ops == {("Relu", ""), ("If", ""), ("Neg", ""), ("Abs", "")}
    assert outs == {("r",), ("o",), ("b",), ("c",)}
    assert len(index.node_op) == len(index.node_outputs) == 4
