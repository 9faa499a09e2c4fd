"""The main graph's nodes are read from protobuf once (rnnir/onnxio/source.py NodeTable, the lint-speed change): the
external-data check and the model index share them for the lowering that follows reading, and only for it."""

from __future__ import annotations

import onnx
from onnx import helper

import rnnir
from rnnir.lower.scope import ModelIndex
from rnnir.onnxio.source import NodeTable, read_model
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def _gru() -> onnx.ModelProto:
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Relu", ["x"], ["y"], name="relu"),
    ]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("Yh", [1, 1, H]), vi("y", [T, 1, I])], weights("GRU"))


def test_read_model_hands_the_main_graphs_nodes_to_the_first_lowering_only():
    m = _gru()
    src = read_model(m)
    table = src.take_main_nodes()
    assert table is not None
    assert [n.name for n in table.nodes] == ["gru", "relu"]
    assert table.keys == [("GRU", ""), ("Relu", "")]
    assert src.take_main_nodes() is None  # taken: lowering the same source again reads the model afresh


def test_the_index_uses_the_table_it_is_given():
    m = _gru()
    # a table that disagrees with the graph on op types but has its length: the index believes the table, so
    # the op types it records show which nodes it read (here: the table's)
    nodes = list(m.graph.node)
    index = ModelIndex(m, "m", NodeTable(nodes, [("GRU", ""), ("Sigmoid", "")]))
    assert index.root.node_ops == [("GRU", ""), ("Sigmoid", "")]
    assert ModelIndex(m, "m").root.node_ops == [("GRU", ""), ("Relu", "")]


def test_a_table_of_another_length_is_not_used():
    m = _gru()
    stale = NodeTable(list(m.graph.node)[:1], [("GRU", "")])  # the graph gained a node since it was read
    assert ModelIndex(m, "m", stale).root.node_ops == [("GRU", ""), ("Relu", "")]


def test_lowering_with_and_without_the_table_gives_the_same_program():
    m = _gru()
    with_table = rnnir.load(m)
    src = read_model(m)
    src.take_main_nodes()
    from rnnir.lower.build import lower

    without = lower(src)
    assert str(with_table) == str(without)
    assert [p.input for p in with_table.state_pairs] == ["h0"]
