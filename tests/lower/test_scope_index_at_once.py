"""ModelIndex's fast path (``_index_nodes_at_once``) against the node-by-node walk (``_index_nodes``), for the parts
the speed work of issue 27 rebuilt: producers made from each node's first output then the later ports, node
positions made only when asked, the per-op limits checked in one loop, the in-order flag found by a growing set, and
the first bad output name reported in node order.  The walk is the oracle (forced by making the fast path decline),
and positions and flags are also checked against values worked out by hand from the graphs below."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from rnnir.errors import ModelError
from rnnir.lower.scope import ModelIndex
from tests.support.onnx_models import vi

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), custom=False):
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(inits))
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.example", 1)] if custom else [])
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 8
    return m


def _summary(index: ModelIndex):
    """Everything the index records, node objects by (scope path, position)."""
    where = {id(n): (sc.path, k) for sc in index.scopes() for k, n in enumerate(sc.nodes)}
    out = []
    for sc in sorted(index.scopes(), key=lambda s: s.path):
        out.append((sc.path, [(o, where[id(n)], i) for o, (n, i) in sorted(sc.producers.items())], sorted(sc.positions.items()),
                    sc.node_inputs, sc.node_ops, sc.node_outputs, sc.in_order))
    out.append(sorted((name, [where[id(n)] for n in nodes]) for name, nodes in index.consumers.items()))
    out.append(sorted((where[k], v) for k, v in index.node_op.items()))
    out.append(sorted((where[k], v) for k, v in index.node_outputs.items()))
    return out


def _both(m, monkeypatch):
    """The index built at once (asserting the walk never ran) and the one the walk builds."""
    walked = []
    walk = ModelIndex._index_nodes

    def spy(self, sc, work):
        walked.append(sc.path)
        return walk(self, sc, work)

    with monkeypatch.context() as mp:
        mp.setattr(ModelIndex, "_index_nodes", spy)
        fast = ModelIndex(m, "m")
    assert walked == []
    with monkeypatch.context() as mp:
        mp.setattr(ModelIndex, "_index_nodes_at_once", lambda self, sc, work: False)
        slow = ModelIndex(m, "m")
    return fast, slow


def _refusals(m, monkeypatch):
    """The message of the index built normally (the fast path declines, the walk raises) and of the walk alone."""
    with pytest.raises(ModelError) as normal:
        ModelIndex(m, "m")
    with monkeypatch.context() as mp:
        mp.setattr(ModelIndex, "_index_nodes_at_once", lambda self, sc, work: False)
        with pytest.raises(ModelError) as walked:
            ModelIndex(m, "m")
    return str(normal.value), str(walked.value)


def _ports_model():
    # Split with three outputs, a custom op whose first and third outputs are absent, one with no output at all,
    # another whose only output is absent, and readers of each value (x read four times, in node order)
    nodes = [
        helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, name="split"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Multi", ["x", "", "b"], ["", "m1", "", "m2"], domain="com.example", name="multi"),
        helper.make_node("Sink", ["x"], [], domain="com.example", name="sink"),
        helper.make_node("Absent", ["x"], [""], domain="com.example", name="absent"),
        helper.make_node("Sum", ["r", "c", "m1", "m2", "x"], ["s"], name="sum"),
    ]
    return _model(nodes, [vi("x", [3])], [vi("s", [1])], custom=True)


def test_later_ports_and_absent_outputs_are_indexed_as_the_walk_indexes_them(monkeypatch):
    fast, slow = _both(_ports_model(), monkeypatch)
    assert _summary(fast) == _summary(slow)
    root = fast.root
    # by hand: each value's node position and port; absent outputs ("") are no values
    assert root.positions == {"a": 0, "b": 0, "c": 0, "r": 1, "m1": 2, "m2": 2, "s": 5}
    assert {o: (n.name, i) for o, (n, i) in root.producers.items()} == {
        "a": ("split", 0), "b": ("split", 1), "c": ("split", 2), "r": ("relu", 0), "m1": ("multi", 1), "m2": ("multi", 3), "s": ("sum", 0)}
    assert [n.name for n in fast.consumers["x"]] == ["split", "multi", "sink", "absent", "sum"]
    assert "" not in fast.consumers and "" not in root.producers
    assert not root.in_order  # custom ops: what they read may include their bodies', so never checked in order


def test_positions_are_made_from_the_nodes_when_first_asked(monkeypatch):
    fast, _ = _both(_ports_model(), monkeypatch)
    first = fast.root.positions
    assert first is fast.root.positions  # made once
    assert fast.root.positions["m2"] == 2


def test_only_single_output_nodes_need_no_later_port(monkeypatch):
    m = _model([helper.make_node("Neg", ["x"], ["y"], name="n"), helper.make_node("Abs", ["y"], ["z"], name="a")], [vi("x", [1])], [vi("z", [1])])
    fast, slow = _both(m, monkeypatch)
    assert _summary(fast) == _summary(slow)
    assert fast.root.positions == {"y": 0, "z": 1}


def test_a_value_produced_twice_on_any_port_is_refused_with_the_walks_message(monkeypatch):
    # one test function, every case in it: the mutation tool runs one parametrization of each test
    cases = [
        # a later port repeats the node's own first output
        ([helper.make_node("Split", ["x"], ["a", "a"], axis=0)], "value 'a' is produced twice"),
        # a later port repeats an earlier node's first output
        ([helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Split", ["x"], ["b", "a"], axis=0)], "value 'a' is produced twice"),
        # an earlier node's later port is produced again as a first output
        ([helper.make_node("Split", ["x"], ["b", "a"], axis=0), helper.make_node("Neg", ["x"], ["a"])], "value 'a' is produced twice"),
        # a later port names a graph input
        ([helper.make_node("Split", ["x"], ["b", "x"], axis=0)], "value 'x' is a graph input and is produced again"),
        # a later port names an initializer
        ([helper.make_node("Split", ["x"], ["b", "w"], axis=0)], "value 'w' is an initializer and is produced again"),
    ]
    w = helper.make_tensor("w", F, [1], [1.0])
    for nodes, message in cases:
        m = _model(nodes, [vi("x", [2])], [vi("b" if "b" in nodes[0].output else "a", [1])], inits=[w])
        normal, walked = _refusals(m, monkeypatch)
        assert normal == walked and message in normal, (nodes, normal)


def test_absent_outputs_given_twice_are_no_values_produced_twice_near_miss(monkeypatch):
    nodes = [helper.make_node("Multi", ["x"], ["", "y", ""], domain="com.example"), helper.make_node("Multi", ["y"], ["", "z"], domain="com.example")]
    fast, slow = _both(_model(nodes, [vi("x", [1])], [vi("z", [1])], custom=True), monkeypatch)
    assert _summary(fast) == _summary(slow)
    assert fast.root.positions == {"y": 0, "z": 1}


def _reparsed(m, swaps) -> onnx.ModelProto:
    data = m.SerializeToString()
    for old, new in swaps:
        assert data.count(old) == 1
        data = data.replace(old, new)
    bad = onnx.ModelProto()
    bad.ParseFromString(data)
    return bad


def test_the_first_output_name_that_is_not_utf8_in_node_order_is_the_one_named(monkeypatch):
    # the first bad name is a later port of the first node; the second bad one a later node's first output (which
    # the fast path records before any later port)
    nodes = [helper.make_node("Split", ["x"], ["ok", "zzba1"], axis=0, name="s"), helper.make_node("Neg", ["x"], ["zzba2"], name="n")]
    m = _reparsed(_model(nodes, [vi("x", [2])], [vi("ok", [1])]), [(b"zzba1", b"zz\xffa1"), (b"zzba2", b"zz\xfea2")])
    normal, walked = _refusals(m, monkeypatch)
    assert normal == walked
    assert "node output name b'zz\\xffa1' is not valid UTF-8 text" in normal


def test_each_ops_limits_hold_at_once_as_in_the_walk(monkeypatch):
    cases = [
        ([helper.make_node("Relu", ["x", "x"], ["y"])], False),  # one input over Relu's one
        ([helper.make_node("Relu", ["x"], ["y", "y2"])], False),  # one output over
        ([helper.make_node("Relu", ["x"], ["y"])], True),
        ([helper.make_node("Gather", ["x"], ["y"])], False),  # its required indices left out
        ([helper.make_node("Gather", ["", "i"], ["y"])], False),  # its required data input empty
        ([helper.make_node("Gather", ["x", "i"], ["y"])], True),
        ([helper.make_node("Clip", ["", "lo", "hi"], ["y"])], False),  # its one required input (#0) empty, two optional given
        ([helper.make_node("Clip", ["x", "", "hi"], ["y"])], True),  # only an optional input empty
        ([helper.make_node("Cast", ["x"], ["y"])], False),  # its required attribute 'to' missing
        ([helper.make_node("Cast", ["x"], ["y"], to=F)], True),
        ([helper.make_node("Relu", ["x"], ["y"], alpha=1.0)], False),  # an attribute Relu has not
        ([helper.make_node("Wide", ["x"] * 9, ["y"] + [f"o{k}" for k in range(9)], domain="com.example")], True),  # a custom op: no limit
    ]
    for nodes, ok in cases:
        m = _model(nodes, [vi("x", [2]), vi("i", [1], TensorProto.INT64), vi("lo", [], F), vi("hi", [], F)], [vi("y", [1])], custom=True)
        if ok:
            fast, slow = _both(m, monkeypatch)
            assert _summary(fast) == _summary(slow), nodes
        else:
            normal, walked = _refusals(m, monkeypatch)
            assert normal == walked, nodes


def test_a_custom_recurrent_op_without_attributes_is_listed_as_recurrent(monkeypatch):
    # com.microsoft's DynamicQuantizeLSTM has no schema here (a custom domain): with no attribute, only being
    # recurrent makes the index look at its node
    node = helper.make_node("DynamicQuantizeLSTM", ["x", "W", "R", "", "", "", "", "", "ws", "wz", "rs", "rz"], ["", "h"], domain="com.microsoft", name="dq")
    m = _model([node], [vi(n, [1]) for n in ("x", "W", "R", "ws", "wz", "rs", "rz")], [vi("h", [1])])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    fast, slow = _both(m, monkeypatch)
    assert _summary(fast) == _summary(slow)
    assert [(sc.path, n.name) for sc, n in fast.recurrent] == [((), "dq")]


def test_the_in_order_flag_says_whether_every_node_reads_only_earlier_names(monkeypatch):
    cases = [
        ([helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Add", ["a", "w"], ["y"])], True),  # an input, an initializer, a node output
        ([helper.make_node("Add", ["a", "w"], ["y"]), helper.make_node("Neg", ["x"], ["a"])], False),  # a read before its definition: no cycle
        ([helper.make_node("Clip", ["x", "", "w"], ["y"])], True),  # an absent input is defined enough
        ([helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]), helper.make_node("Add", ["b", "x"], ["y"])], True),
        ([helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Add", ["b", "x"], ["y"]), helper.make_node("Neg", ["a"], ["b"])], False),
        ([helper.make_node("Split", ["x"], ["a", "b"], axis=0), helper.make_node("Add", ["b", "a"], ["y"])], True),  # a later port read
    ]
    w = helper.make_tensor("w", F, [1], [1.0])
    for nodes, in_order in cases:
        fast, slow = _both(_model(nodes, [vi("x", [1])], [vi("y", [1])], inits=[w]), monkeypatch)
        assert fast.root.in_order is in_order, nodes
        assert _summary(fast) == _summary(slow), nodes


def test_a_graph_with_a_subgraph_or_an_outer_read_is_never_in_order(monkeypatch):
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", [1])])  # reads the outer x
    other = helper.make_graph([helper.make_node("Abs", ["e0"], ["e"])], "else", [], [vi("e", [1])], initializer=[helper.make_tensor("e0", F, [1], [1.0])])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="gate")], [vi("c", [], TensorProto.BOOL), vi("x", [1])], [vi("y", [1])])
    fast, slow = _both(m, monkeypatch)
    assert _summary(fast) == _summary(slow)
    flags = {sc.path: sc.in_order for sc in fast.scopes()}
    assert flags == {(): False, ("gate.then_branch",): False, ("gate.else_branch",): True}


def test_a_cycle_is_still_refused_after_the_in_order_check(monkeypatch):
    m = _model([helper.make_node("Neg", ["b"], ["a"], name="one"), helper.make_node("Neg", ["a"], ["b"], name="two")], [vi("x", [1])], [vi("a", [1])])
    normal, walked = _refusals(m, monkeypatch)
    assert normal == walked and "cycle" in normal


def test_a_graph_found_in_order_while_indexed_is_not_checked_again(monkeypatch):
    # the in-order check is a pass over every input of a 100k-node graph: done once, while the graph is indexed
    # (the walk's graphs and those found out of order are checked after every scope is indexed, as before)
    calls = []
    again = ModelIndex._defs_in_order

    def spy(self, sc):
        calls.append(sc.path)
        return again(self, sc)

    monkeypatch.setattr(ModelIndex, "_defs_in_order", spy)
    w = helper.make_tensor("w", F, [1], [1.0])
    ordered = _model([helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Add", ["a", "w"], ["y"])], [vi("x", [1])], [vi("y", [1])], inits=[w])
    assert ModelIndex(ordered, "m").root.in_order and calls == []
    late = _model([helper.make_node("Add", ["a", "w"], ["y"]), helper.make_node("Neg", ["x"], ["a"])], [vi("x", [1])], [vi("y", [1])], inits=[w])
    assert not ModelIndex(late, "m").root.in_order and calls == [()]


def test_a_graph_without_nodes_has_no_positions(monkeypatch):
    empty = helper.make_graph([], "then", [], [vi("a", [1])])  # a branch handing back an outer value
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["na"], name="inner")], "else", [], [vi("na", [1])])
    m = _model([helper.make_node("If", ["c"], ["r"], then_branch=empty, else_branch=other, name="choose")],
               [vi("c", [], TensorProto.BOOL), vi("a", [1])], [vi("r", [1])])
    fast, slow = _both(m, monkeypatch)
    assert _summary(fast) == _summary(slow)
    assert {sc.path: sc.positions for sc in fast.scopes()} == {(): {"r": 0}, ("choose.then_branch",): {}, ("choose.else_branch",): {"na": 0}}
