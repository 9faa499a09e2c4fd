"""The state cone's nodes in a stable order -- by scope path, then by position in the scope's node list -- found
without the index's map of every output name to its position (made only for an out-of-order graph's checks)."""

from __future__ import annotations

from onnx import TensorProto, helper

from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.scope import ModelIndex
from tests.support.onnx_models import vi

F = TensorProto.FLOAT


def _branch(tag: str) -> object:
    # reads the outer cone value b: its two nodes are cone nodes of the branch's scope
    return helper.make_graph(
        [helper.make_node("Neg", ["b"], [f"{tag}1"], name=f"{tag}_neg"), helper.make_node("Abs", [f"{tag}1"], [f"{tag}_out"], name=f"{tag}_abs")],
        tag, [], [vi(f"{tag}_out", [1, 4])],
    )


def _model():
    # nodes out of name order and interleaved with nodes outside the cone (they read x only); the If holds cone
    # nodes in both branches, and Split's first output is absent (the node is still one cone node)
    nodes = [
        helper.make_node("Relu", ["x"], ["u"], name="n_u"),
        helper.make_node("Tanh", ["h"], ["a"], name="z_first"),
        helper.make_node("Relu", ["u"], ["v"], name="n_v"),
        helper.make_node("Mul", ["a", "x"], ["b"], name="m_second"),
        helper.make_node("If", ["cond"], ["branch_out"], name="a_if", then_branch=_branch("then"), else_branch=_branch("else")),
        helper.make_node("Split", ["b"], ["", "s2"], name="c_split", axis=1, num_outputs=2),
        helper.make_node("Sigmoid", ["s2"], ["y"], name="b_last"),
        helper.make_node("Sum", ["v", "u"], ["w"], name="n_w"),
    ]
    g = helper.make_graph(
        nodes, "g", [vi("h", [1, 4]), vi("x", [1, 4]), vi("cond", [], TensorProto.BOOL)],
        [vi("y", [1, 2]), vi("w", [1, 4]), vi("branch_out", [1, 4])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def test_cone_nodes_come_in_scope_path_then_node_list_order_without_the_positions_map():
    index = ModelIndex(_model(), "m")
    rec = Recogniser(index, [(index.root, "h")])
    for sc in index.scopes():
        sc._positions = None  # the index's own checks made them (a graph with subgraphs is checked out of order)
    order = [(sc.path, node.name) for node, sc, _key in rec.cone_nodes()]
    assert order == [
        ((), "z_first"), ((), "m_second"), ((), "a_if"), ((), "c_split"), ((), "b_last"),
        (("a_if.else_branch",), "else_neg"), (("a_if.else_branch",), "else_abs"),
        (("a_if.then_branch",), "then_neg"), (("a_if.then_branch",), "then_abs"),
    ]
    assert all(sc._positions is None for sc in index.scopes())  # cone_nodes made no scope's map of every output


def test_each_cone_node_comes_once_with_its_first_present_output_near_miss():
    # Split's absent first output is skipped for the key; nodes outside the cone (n_u, n_v, n_w) never appear
    index = ModelIndex(_model(), "m")
    rec = Recogniser(index, [(index.root, "h")])
    got = {node.name: key[1] for node, _sc, key in rec.cone_nodes()}
    assert got["c_split"] == "s2"
    assert not {"n_u", "n_v", "n_w"} & set(got)
    assert len(rec.cone_nodes()) == len(got) == 9
