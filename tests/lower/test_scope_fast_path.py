"""ModelIndex indexes a graph that passes every check field by field, at once (``_index_nodes_at_once``), and
falls back to the node-by-node walk (``_index_nodes``) only for a graph with something wrong in it. The two must
agree: for models with every odd feature the fast path looks at more closely (attributes, a missing optional
input, an absent optional output, If/Loop/Scan bodies, an empty branch, a recurrent op, a custom-domain op) the
index is the one the walk builds, and the walk never runs; a bad graph is still refused, with the walk's error."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from rnnir.errors import ModelError
from rnnir.lower.scope import ModelIndex
from tests.support import cell_models as cm
from tests.support.onnx_models import const, lstm_h0c0, model, packed_lstm_in_if, vi


def _summary(index: ModelIndex):
    scopes, stack = [], [index.root]
    while stack:
        sc = stack.pop()
        scopes.append((sc.path, sorted((k, v[0].name, v[0].op_type, v[1]) for k, v in sc.producers.items()), sorted(sc.positions.items()),
                       [n.name for n in sc.nodes], sc.node_inputs, sc.node_ops, sc.node_outputs, sc.in_order))
        stack.extend(sorted(sc.children.values(), key=lambda c: c.path))
    consumers = sorted((k, [n.name or n.op_type for n in v]) for k, v in index.consumers.items())
    return (scopes, consumers, [(sc.path, n.name) for sc, n in index.recurrent],
            sorted((k, [(n.name, i) for n, i in v]) for k, v in index.subgraph_outputs.items()),
            sorted(index.node_op.values()), sorted(index.node_outputs.values()))


def _models():
    H, I = 2, 1
    rng = np.random.default_rng(0)
    W, R = rng.standard_normal((1, 3 * H, I)).astype(np.float32), rng.standard_normal((1, 3 * H, H)).astype(np.float32)
    gru = model(  # an absent optional output (""), a missing optional input (""), attributes, a plain op without any
        [helper.make_node("GRU", ["x", "W", "R", "", "", "h"], ["", "hn"], hidden_size=H, name="gru"),
         helper.make_node("Neg", ["hn"], ["y"], name="neg"), helper.make_node("Concat", ["hn", "y"], ["both"], axis=0, name="cat")],
        [vi("x", ["T", 1, I]), vi("h", [1, 1, H])], [vi("hn", [1, 1, H]), vi("both", [2, 1, H])], [const("W", W), const("R", R)],
    )
    empty = helper.make_graph([], "then", [], [vi("a", [1])])  # a branch with no nodes: it hands back an outer value
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["na"], name="inner")], "else", [], [vi("na", [1])])
    iffy = model([helper.make_node("If", ["c"], ["r"], then_branch=empty, else_branch=other, name="choose")],
                 [vi("c", [], TensorProto.BOOL), vi("a", [1])], [vi("r", [1])])
    custom = model([helper.make_node("Thing", ["a"], ["b"], domain="com.example", name="custom"), helper.make_node("Neg", ["b"], ["c"])],
                   [vi("a", [1])], [vi("c", [1])])
    custom.opset_import.append(helper.make_opsetid("com.example", 1))
    # custom-domain ops named like standard ones: their bodies are opaque, never held to Loop's or If's arity
    opaque = helper.make_graph([helper.make_node("Identity", ["a"], ["o"])], "body", [], [vi("o", [1])])
    takes_input = helper.make_graph([helper.make_node("Identity", ["p"], ["o"])], "branch", [vi("p", [1])], [vi("o", [1]), vi("o", [1])])
    lookalikes = model([helper.make_node("Loop", ["a"], ["y"], domain="my.ops", name="lp", body=opaque),
                        helper.make_node("If", ["c"], ["z"], domain="my.ops", name="gate", then_branch=takes_input, else_branch=takes_input)],
                       [vi("a", [1]), vi("c", [], TensorProto.BOOL)], [vi("y", [1]), vi("z", [1])])
    lookalikes.opset_import.append(helper.make_opsetid("my.ops", 1))
    bare = helper.make_node("RNN", ["x", "W1", "R1"], ["", "hb"], name="bare")  # no attribute at all: hidden_size from R
    bare_rnn = model([bare], [vi("x", ["T", 1, I])], [vi("hb", [1, 1, H])],
                     [const("W1", rng.standard_normal((1, H, I)).astype(np.float32)), const("R1", rng.standard_normal((1, H, H)).astype(np.float32))])
    return {"lstm": lstm_h0c0(), "bare-rnn": bare_rnn, "gru": gru, "if-lstm": packed_lstm_in_if(), "if-empty": iffy, "custom": custom, "lookalikes": lookalikes,
            "loop": cm.lstm_loop(), "scan": cm.lstm_scan()}


def test_a_graph_that_passes_every_check_is_indexed_at_once_as_the_walk_would_and_a_bad_one_is_refused(monkeypatch):
    # one test function: the mutation tool runs the fastest test of each file first, and every part of this matters
    walks = []
    walk = ModelIndex._index_nodes

    def spy(self, sc, work):
        walks.append(sc.path)
        return walk(self, sc, work)

    models = _models()
    monkeypatch.setattr(ModelIndex, "_index_nodes", spy)
    fast = {name: _summary(ModelIndex(m, name)) for name, m in models.items()}
    assert walks == []  # nothing odd enough to need the walk
    monkeypatch.setattr(ModelIndex, "_index_nodes_at_once", lambda self, sc, work: False)
    for name, m in models.items():
        assert fast[name] == _summary(ModelIndex(m, name)), name
    assert walks  # the walk did run when forced
    _bad_graphs_are_refused()


def _bad_graphs_are_refused():
    dup = model([helper.make_node("Neg", ["a"], ["b"]), helper.make_node("Abs", ["a"], ["b"])], [vi("a", [1])], [vi("b", [1])])
    again = model([helper.make_node("Neg", ["a"], ["a"])], [vi("a", [1])], [vi("a", [1])])
    too_many = model([helper.make_node("Neg", ["a", "a"], ["b"])], [vi("a", [1])], [vi("b", [1])])
    required = model([helper.make_node("Gather", ["a", ""], ["b"])], [vi("a", [2])], [vi("b", [1])])  # no attribute
    branch_in = helper.make_graph([helper.make_node("Neg", ["i"], ["o"])], "then", [vi("i", [1])], [vi("o", [1])])  # a branch takes no input
    fine = helper.make_graph([helper.make_node("Neg", ["a"], ["o2"])], "else", [], [vi("o2", [1])])
    bad_if = model([helper.make_node("If", ["c"], ["r"], then_branch=branch_in, else_branch=fine)], [vi("c", [], TensorProto.BOOL), vi("a", [1])], [vi("r", [1])])
    graphs_if = model([helper.make_node("If", ["c"], ["r"], then_branch=[branch_in], else_branch=fine)],  # a branch as a list of one graph
                      [vi("c", [], TensorProto.BOOL), vi("a", [1])], [vi("r", [1])])
    too_few = model([helper.make_node("Gather", ["a"], ["b"])], [vi("a", [2])], [vi("b", [1])])  # its indices left out
    first_empty = model([helper.make_node("Neg", [""], ["b"])], [], [vi("b", [1])])  # the only (required) input empty
    for m in (dup, again, too_many, required, too_few, first_empty, bad_if, graphs_if):
        with pytest.raises(ModelError):
            ModelIndex(m, "m")
