"""The scope-aware def-use index of rnnir/lower/scope.py (mutation survivors): names resolve as ONNX scoping says
(a subgraph's own names first, then the enclosing graphs'; an input with an initializer is an input with a default),
and every malformed model is a ModelError naming what is wrong. Each malformed case has a near miss that loads;
onnx.checker agrees with the verdict where it has an opinion."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.lower.scope import ModelIndex, attribute_value, outer_names

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, shape=(1,), dtype=F32):
    return helper.make_tensor_value_info(name, dtype, list(shape) if shape is not None else None)


def tensor(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(nodes, inputs, outputs, inits=(), opset=17, value_info=(), domains=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *[helper.make_opsetid(d, 1) for d in domains]])
    m.ir_version = 8
    return m


def index(m):
    return ModelIndex(m, "m")


def refused(m, message):
    with pytest.raises(rnnir.ModelError, match=message) as ei:
        index(m)
    return str(ei.value)


def branch(nodes, outputs, inputs=(), inits=()):
    return helper.make_graph(nodes, "b", list(inputs), list(outputs), initializer=list(inits))


def if_model(then_nodes, else_nodes, then_out="t", else_out="e", outer_inits=(), then_inits=()):
    node = helper.make_node(
        "If",
        ["c"],
        ["y"],
        name="gate",
        then_branch=branch(then_nodes, [vi(then_out)], inits=then_inits),
        else_branch=branch(else_nodes, [vi(else_out)]),
    )
    return model([node], [vi("c", [], BOOL), vi("x")], [vi("y")], outer_inits)


# -- name resolution ------------------------------------------------------------------------------


def test_a_subgraph_sees_its_own_names_before_the_enclosing_graphs():
    then_nodes = [helper.make_node("Identity", ["w"], ["t"])]  # w: the branch's own initializer, shadowing the outer one
    m = if_model(then_nodes, [helper.make_node("Identity", ["w"], ["e"])], outer_inits=[tensor("w", [1.0])], then_inits=[tensor("w", [2.0])])
    ix = index(m)
    then_scope = ix.root.child(m.graph.node[0], "then_branch")
    else_scope = ix.root.child(m.graph.node[0], "else_branch")
    assert numpy_helper.to_array(then_scope.resolve("w").tensor).tolist() == [2.0]
    assert then_scope.resolve("w").scope is then_scope
    assert numpy_helper.to_array(else_scope.resolve("w").tensor).tolist() == [1.0]  # the else branch has none: the outer one
    assert else_scope.resolve("w").scope is ix.root
    assert then_scope.resolve("t").kind == "node" and then_scope.resolve("t").node.op_type == "Identity"
    assert else_scope.resolve("x").kind == "input" and else_scope.resolve("x").scope is ix.root
    missing = then_scope.resolve("nothing")
    assert (missing.kind, missing.name, missing.scope) == ("missing", "nothing", then_scope)
    assert then_scope.path == ("gate.then_branch",) and then_scope.branch_path == "gate.then_branch"
    assert ix.root.path == () and ix.root.branch_path == ""


def test_an_input_with_an_initializer_is_an_input_with_a_default():
    m = model([helper.make_node("Identity", ["h"], ["y"])], [vi("h")], [vi("y")], [tensor("h", [3.0]), tensor("k", [4.0])])
    ix = index(m)
    d = ix.root.resolve("h")
    assert d.kind == "input" and numpy_helper.to_array(d.tensor).tolist() == [3.0] and d.info.name == "h"
    k = ix.root.resolve("k")
    assert k.kind == "initializer" and k.info is None
    y = ix.root.resolve("y")
    assert (y.kind, y.index, y.info.name) == ("node", 0, "y")


def test_a_node_output_is_resolved_with_its_output_position():
    m = model([helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=0)], [vi("x", [2])], [vi("a"), vi("b")], [tensor("sizes", [1, 1], np.int64)])
    ix = index(m)
    assert (ix.root.resolve("a").index, ix.root.resolve("b").index) == (0, 1)
    assert ix.root.positions == {"a": 0, "b": 0}
    assert [n.op_type for n in ix.consumers["x"]] == ["Split"] and [n.op_type for n in ix.consumers["sizes"]] == ["Split"]


def test_info_comes_from_value_info_before_the_output_list_and_stops_at_a_definition_without_one():
    shaped = vi("t", [7])
    node = helper.make_node(
        "If", ["c"], ["y"], name="gate", then_branch=branch([helper.make_node("Identity", ["x"], ["t"])], [vi("t", [1])]),
        else_branch=branch([helper.make_node("Identity", ["x"], ["e"])], [vi("e")]),
    )
    m = model([node, helper.make_node("Identity", ["y"], ["z"])], [vi("c", [], BOOL), vi("x", [3])], [vi("z")], [tensor("k", [1.0])])
    next(a.g for a in m.graph.node[0].attribute if a.name == "then_branch").value_info.append(shaped)
    ix = index(m)
    then_scope = ix.root.child(m.graph.node[0], "then_branch")
    assert [d.dim_value for d in then_scope.info("t").type.tensor_type.shape.dim] == [7]  # value_info is listed first
    assert then_scope.info("x").name == "x"  # an outer input
    assert then_scope.info("k") is None  # an initializer has no value info
    assert ix.root.info("y") is None  # produced by a node, no value_info
    assert ix.root.info("ghost") is None


def test_subgraph_outputs_are_linked_to_their_owner_output():
    m = if_model([helper.make_node("Identity", ["x"], ["t"])], [helper.make_node("Identity", ["x"], ["e"])])
    ix = index(m)
    assert [(n.name, k) for n, k in ix.subgraph_outputs["t"]] == [("gate", 0)]
    assert [(n.name, k) for n, k in ix.subgraph_outputs["e"]] == [("gate", 0)]
    assert "y" not in ix.subgraph_outputs  # a main graph output has no owner


def test_outer_names_are_the_names_a_subgraph_borrows_including_from_nested_subgraphs():
    inner = helper.make_node(
        "If", ["c"], ["t"], then_branch=branch([helper.make_node("Add", ["x", "u"], ["i"])], [vi("i")]),
        else_branch=branch([], [vi("v")]),
    )
    then_g = branch([helper.make_node("Identity", ["x"], ["u"]), inner], [vi("t")])
    assert outer_names(then_g) == {"x", "c", "v"}  # u is the branch's own; v: an output it does not define
    node = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then_g, else_branch=branch([], [vi("x")]))
    m = model([node], [vi("c", [], BOOL), vi("x"), vi("v")], [vi("y")])
    ix = index(m)
    assert ix.outer_names(then_g) == frozenset({"x", "c", "v"})
    assert ix.outer_names(then_g) is ix.outer_names(then_g)  # memoised


def test_node_names_for_messages():
    ix = index(model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y")]))
    assert ix.node_name(helper.make_node("Relu", ["x"], ["r"], name="act")) == "act"
    assert ix.node_name(helper.make_node("Split", ["x"], ["", "b"])) == "Split(b)"  # the first output that is there
    assert ix.node_name(helper.make_node("Relu", ["x"], [])) == "Relu()"


def test_the_ai_onnx_opset_defaults_to_the_default_domains():
    ix = index(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")]))
    assert ix.opsets[""] == 17 and ix.opsets["ai.onnx"] == 17
    m2 = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")])
    m2.opset_import.append(helper.make_opsetid("ai.onnx", 13))
    assert index(m2).opsets["ai.onnx"] == 13  # a declared ai.onnx version is kept
    m3 = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")], domains=["my.ops"])
    assert index(m3).opsets == {"": 17, "my.ops": 1, "ai.onnx": 17}


def test_recurrent_ops_are_listed_with_their_scope():
    w, r = tensor("W", np.zeros((1, 4, 3))), tensor("R", np.zeros((1, 4, 4)))
    then_g = branch([helper.make_node("RNN", ["x", "W", "R"], ["ty", "t"], hidden_size=4, name="inner")], [vi("t")])
    nodes = [
        helper.make_node("RNN", ["x", "W", "R"], ["Y", "Yh"], hidden_size=4, name="outer"),
        helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then_g, else_branch=branch([], [vi("Yh")])),
    ]
    m = model(nodes, [vi("c", [], BOOL), vi("x", [2, 1, 3])], [vi("y")], [w, r])
    ix = index(m)
    assert sorted((sc.branch_path, n.name) for sc, n in ix.recurrent) == [("", "outer"), ("gate.then_branch", "inner")]


def test_a_cycle_inside_any_of_a_graphs_attributes_subgraphs_is_refused():
    # each subgraph of a GRAPHS attribute is a scope of its own: the first used to be overwritten by the second, unchecked
    cyclic = branch([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Relu", ["x"], ["o"])], [vi("o")])
    fine = branch([helper.make_node("Relu", ["x"], ["o"])], [vi("o")])
    for bodies, where in (([cyclic, fine], "cu.bodies[0]"), ([fine, cyclic], "cu.bodies[1]")):
        node = helper.make_node("Custom", ["x"], ["y"], domain="my.ops", name="cu")
        node.attribute.append(helper.make_attribute("bodies", bodies))
        assert where in refused(model([node], [vi("x")], [vi("y")], domains=["my.ops"]), "cycle")


def test_a_graphs_attribute_names_each_subgraph_by_its_position():
    body = branch([helper.make_node("Identity", ["x"], ["o"])], [vi("o")])
    node = helper.make_node("Custom", ["x"], ["y"], domain="my.ops", name="cu")
    node.attribute.append(helper.make_attribute("bodies", [body, body]))
    m = model([node], [vi("x")], [vi("y")], domains=["my.ops"])
    ix = index(m)
    paths = sorted(sc.path for sc in ix.scopes())
    assert paths == [(), ("cu.bodies[0]",), ("cu.bodies[1]",)]


def test_attribute_value_decodes_text():
    node = helper.make_node("LSTM", ["x"], ["y"], direction="reverse", activations=["Tanh", "Relu"], hidden_size=4)
    assert attribute_value(node, "direction") == "reverse"
    assert attribute_value(node, "activations") == ["Tanh", "Relu"]
    assert attribute_value(node, "hidden_size") == 4
    assert attribute_value(node, "clip") is None
    assert attribute_value(node, "clip", 2.5) == 2.5


# -- what a model must be -------------------------------------------------------------------------


def test_a_value_produced_twice_is_refused_and_once_near_miss():
    msg = refused(model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Relu", ["x"], ["y"], name="b")], [vi("x")], [vi("y")]), "produced twice")
    assert "'a'" in msg and "'b'" in msg and msg.endswith("(at main graph)")
    index(model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Relu", ["x"], ["z"], name="b")], [vi("x")], [vi("y"), vi("z")]))


def test_too_many_inputs_or_outputs_are_refused():
    refused(model([helper.make_node("Relu", ["x", "x"], ["y"])], [vi("x")], [vi("y")]), "Relu node has 2 input.*at most 1 and 1")
    refused(model([helper.make_node("Relu", ["x"], ["y", "z"])], [vi("x")], [vi("y"), vi("z")]), "Relu node has 1 input.*2 output")
    index(model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [vi("x")], [vi("y")], [tensor("lo", 0.0), tensor("hi", 1.0)]))  # its maximum


@pytest.mark.parametrize(("inputs", "ok"), [(["x", "i"], True), (["x"], False), (["", "i"], False), (["x", ""], False)])
def test_required_inputs_must_be_present_and_named(inputs, ok):
    m = model([helper.make_node("Gather", inputs, ["y"], axis=0)], [vi("x", [3]), vi("i", [], I64)], [vi("y")])
    if ok:
        index(m)
    else:
        k = 0 if inputs[0] == "" else 1
        refused(m, f"Gather node lacks its required input #{k} \\(it has {len(inputs)} input")


def test_an_optional_input_left_empty_is_fine():
    index(model([helper.make_node("Clip", ["x", "", "hi"], ["y"])], [vi("x")], [vi("y")], [tensor("hi", 1.0)]))
    index(model([helper.make_node("Slice", ["x", "s", "e", "", "st"], ["y"])], [vi("x", [3])], [vi("y")], [tensor(n, [v], np.int64) for n, v in (("s", 0), ("e", 2), ("st", 1))]))


def test_attributes_are_checked_against_the_schema():
    refused(model([helper.make_node("Relu", ["x"], ["y"], alpha=1.0)], [vi("x")], [vi("y")]), "'alpha' is not an attribute of Relu")
    refused(model([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=1)], [vi("x")], [vi("y")]), "'alpha' is INT, the LeakyRelu schema wants FLOAT")
    twice = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=1.0)
    twice.attribute.append(helper.make_attribute("alpha", 2.0))
    refused(model([twice], [vi("x")], [vi("y")]), "'alpha' is given twice")
    refused(model([helper.make_node("Cast", ["x"], ["y"])], [vi("x")], [vi("y")]), "Cast node lacks required attribute\\(s\\) 'to'")
    index(model([helper.make_node("Cast", ["x"], ["y"], to=F32), helper.make_node("LeakyRelu", ["y"], ["z"], alpha=0.5)], [vi("x")], [vi("z")]))


def test_an_unknown_op_is_refused_in_the_standard_domain_only():
    refused(model([helper.make_node("NoSuchOp", ["x"], ["y"])], [vi("x")], [vi("y")]), "unknown op 'NoSuchOp' in the standard ONNX domain at opset 17")
    refused(model([helper.make_node("NoSuchOp", ["x"], ["y"], domain="ai.onnx")], [vi("x")], [vi("y")]), "unknown op")
    # an op newer than the model's opset is unknown to it
    refused(model([helper.make_node("Gelu", ["x"], ["y"])], [vi("x")], [vi("y")], opset=17), "unknown op 'Gelu'")
    index(model([helper.make_node("Gelu", ["x"], ["y"])], [vi("x")], [vi("y")], opset=20))
    index(model([helper.make_node("NoSuchOp", ["x"], ["y"], domain="my.ops", bad=1)], [vi("x")], [vi("y")], domains=["my.ops"]))


def test_an_unknown_op_inside_a_branch_names_the_branch():
    msg = refused(if_model([helper.make_node("NoSuchOp", ["x"], ["t"])], [helper.make_node("Identity", ["x"], ["e"])]), "unknown op")
    assert "in gate.then_branch" in msg


def test_the_same_op_is_checked_in_every_node():
    # the schema is looked up once per op, the rules still apply to each node
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a", "x"], ["y"])]
    refused(model(nodes, [vi("x")], [vi("y")]), "Relu node has 2 input")


@pytest.mark.parametrize(("dims", "ok"), [([1, 4], True), ([0, 4], True), ([-1, 4], False)])
def test_a_negative_dim_is_refused(dims, ok):
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", dims)], [vi("y")])
    if ok:
        index(m)
    else:
        msg = refused(m, "negative dimension \\(-1\\)")
        assert "'x'" in msg and msg.endswith("(at main graph)")


def test_a_negative_dim_in_value_info_or_a_branch_output_is_refused():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y")], value_info=[vi("y", [-2])])
    refused(m, "'y' has a negative dimension \\(-2\\)")
    m = if_model([helper.make_node("Identity", ["x"], ["t"])], [helper.make_node("Identity", ["x"], ["e"])])
    then_g = next(a.g for a in m.graph.node[0].attribute if a.name == "then_branch")
    then_g.output[0].type.tensor_type.shape.dim[0].dim_value = -3
    assert "gate.then_branch" in refused(m, "negative dimension \\(-3\\)")


def test_unknown_element_types_are_refused():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y")])
    m.graph.input[0].type.tensor_type.elem_type = 1000
    refused(m, "value 'x' has unknown element type 1000")
    m = model([helper.make_node("Identity", ["k"], ["y"])], [vi("x")], [vi("y")], [tensor("k", [1.0])])
    m.graph.initializer[0].data_type = 999
    refused(m, "initializer 'k' has unknown data type 999")
    sparse = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y")])
    sp = helper.make_sparse_tensor(tensor("sv", [1.0]), tensor("si", [0], np.int64), [2])
    sp.values.data_type = 998
    sparse.graph.sparse_initializer.append(sp)
    refused(sparse, "initializer 'sv' has unknown data type 998")


def test_a_sparse_initializer_defines_its_name():
    m = model([helper.make_node("Identity", ["sv"], ["y"])], [vi("x")], [vi("y")])
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(tensor("sv", [1.0]), tensor("si", [0], np.int64), [2]))
    assert index(m).root.resolve("sv").kind == "initializer"


def test_a_value_that_is_not_a_tensor_is_not_checked_for_dims():
    seq = helper.make_tensor_sequence_value_info("s", F32, [1])
    index(model([helper.make_node("SequenceConstruct", ["x"], ["s"])], [vi("x")], [seq]))


@pytest.mark.parametrize(
    ("attr", "value", "message"),
    [
        ("hidden_size", 0, "hidden_size 0 is not positive"),
        ("hidden_size", -2, "hidden_size -2 is not positive"),
        ("direction", "sideways", "direction 'sideways' is not one of forward, reverse, bidirectional"),
        ("layout", 2, "layout 2 is not 0 or 1"),
        ("layout", -1, "layout -1 is not 0 or 1"),
        ("clip", 1, "attribute 'clip' is INT, a DynamicQuantizeLSTM wants FLOAT"),
    ],
)
def test_recurrent_attributes_are_checked_even_for_custom_domain_ops(attr, value, message):
    # com.microsoft's DynamicQuantizeLSTM has no schema in onnx: only rnnir's own check sees these
    node = helper.make_node("DynamicQuantizeLSTM", ["x"], ["y"], domain="com.microsoft", hidden_size=4, name="q")
    for a in list(node.attribute):
        if a.name == attr:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(attr, value))
    m = model([node], [vi("x")], [vi("y")], domains=["com.microsoft"])
    assert "'q'" in refused(m, message)


@pytest.mark.parametrize(("attr", "value"), [("hidden_size", 1), ("direction", "reverse"), ("direction", "bidirectional"), ("layout", 0), ("layout", 1), ("clip", 1.0)])
def test_recurrent_attributes_within_range_near_miss(attr, value):
    node = helper.make_node("DynamicQuantizeLSTM", ["x"], ["y"], domain="com.microsoft", name="q")
    node.attribute.append(helper.make_attribute(attr, value))
    ix = index(model([node], [vi("x")], [vi("y")], domains=["com.microsoft"]))
    assert [n.name for _, n in ix.recurrent] == ["q"]


def test_a_graph_output_listed_twice_or_undefined_is_refused():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y"), vi("y")])
    refused(m, "graph output 'y' is listed twice")
    refused(model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y"), vi("z")]), "graph output 'z' is not defined")
    index(model([], [vi("x")], [vi("x")]))  # an input handed straight back is defined


def test_a_branch_output_must_be_defined_somewhere():
    m = if_model([helper.make_node("Identity", ["x"], ["t"])], [], else_out="ghost")
    assert "gate.else_branch" in refused(m, "graph output 'ghost' is not defined")
    index(if_model([helper.make_node("Identity", ["x"], ["t"])], [], else_out="x"))  # an outer name is defined


def test_a_read_of_an_undefined_name_is_refused_in_any_graph():
    refused(model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [vi("x")], [vi("y")]), "node 'r' reads 'ghost'")
    # a branch borrowing an undefined name: the If that owns it reads it
    refused(if_model([helper.make_node("Relu", ["ghost"], ["t"], name="r")], [helper.make_node("Identity", ["x"], ["e"])]), "node 'gate' reads 'ghost'")
    # a custom op's subgraph borrowing an undefined outer name
    node = helper.make_node("Custom", ["x"], ["y"], domain="my.ops", name="cu", body=branch([helper.make_node("Relu", ["ghost"], ["o"])], [vi("o")]))
    refused(model([node], [vi("x")], [vi("y")], domains=["my.ops"]), "reads 'ghost'")


def test_a_node_may_read_a_value_produced_later_in_the_list_but_not_in_a_cycle():
    late = [helper.make_node("Relu", ["a"], ["y"], name="second"), helper.make_node("Relu", ["x"], ["a"], name="first")]
    index(model(late, [vi("x")], [vi("y")]))  # out of order, still a DAG
    cycle = [helper.make_node("Relu", ["b"], ["a"], name="p"), helper.make_node("Relu", ["a"], ["b"], name="q"), helper.make_node("Relu", ["x"], ["y"], name="r")]
    msg = refused(model(cycle, [vi("x")], [vi("y")]), "cycle through nodes 'p', 'q'; ONNX graphs must be acyclic")
    assert "'r'" not in msg


def test_a_self_loop_is_a_cycle():
    refused(model([helper.make_node("Add", ["x", "y"], ["y"], name="self")], [vi("x")], [vi("y")]), "cycle through nodes 'self'")


def test_a_long_cycle_names_six_nodes_and_an_ellipsis():
    n = 8
    nodes = [helper.make_node("Relu", [f"v{(k + 1) % n}"], [f"v{k}"], name=f"n{k}") for k in range(n)]
    msg = refused(model([*nodes, helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")]), "cycle")
    assert "'n5' …" in msg and "'n6'" not in msg


def test_a_cycle_through_a_subgraphs_borrowed_name_is_found():
    node = helper.make_node(
        "If", ["c"], ["a"], name="gate", then_branch=branch([helper.make_node("Relu", ["b"], ["t"])], [vi("t")]),
        else_branch=branch([helper.make_node("Relu", ["x"], ["e"])], [vi("e")]),
    )
    nodes = [node, helper.make_node("Relu", ["a"], ["b"], name="q")]
    refused(model(nodes, [vi("c", [], BOOL), vi("x")], [vi("a")]), "cycle through nodes 'gate', 'q'")


@pytest.mark.parametrize(("n_then_in", "n_then_out", "ok"), [(0, 1, True), (1, 1, False), (0, 2, False)])
def test_if_branches_take_no_inputs_and_give_one_output_per_if_output(n_then_in, n_then_out, ok):
    then_g = branch([helper.make_node("Identity", ["x"], ["t"])], [vi("t")] * 1 + [vi("x")] * (n_then_out - 1), inputs=[vi("p")] * n_then_in)
    node = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then_g, else_branch=branch([], [vi("x")]))
    m = model([node], [vi("c", [], BOOL), vi("x")], [vi("y")])
    if ok:
        index(m)
    else:
        refused(m, f"If then_branch has {n_then_in} input\\(s\\) and {n_then_out} output\\(s\\).*need 0 and 1")


def loop(body_inputs, body_outputs, n_carried=1, n_scan=0):
    body = branch([helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["v_in"], ["v_out"])], body_outputs, inputs=body_inputs)
    outs = ["v_final"][:n_carried] + [f"scan{k}" for k in range(n_scan)]
    node = helper.make_node("Loop", ["n", "c", "v0"][: 2 + n_carried], outs, name="lp", body=body)
    return model([node], [vi("n", [], I64), vi("c", [], BOOL), vi("v0")], [vi(o) for o in outs])


def test_a_loop_body_takes_iteration_cond_and_carried_and_returns_cond_carried_and_scans():
    ins = [vi("i", [], I64), vi("cond_in", [], BOOL), vi("v_in")]
    outs = [vi("cond_out", [], BOOL), vi("v_out")]
    index(loop(ins, outs))
    refused(loop(ins[:2], outs), "Loop body has 2 input\\(s\\) and 2 output\\(s\\); the node's 3 input\\(s\\) and 1 output\\(s\\) need 3 and 2")
    refused(loop(ins, outs[:1]), "Loop body has 3 input\\(s\\) and 1 output")
    index(loop(ins, [*outs, vi("v_out")], n_scan=1))


def test_a_scan_body_returns_one_output_per_scan_output():
    body = branch([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])], [vi("s_out"), vi("y_t")], inputs=[vi("s_in"), vi("x_t")])
    ok = helper.make_node("Scan", ["s0", "xs"], ["s_n", "ys"], num_scan_inputs=1, body=body)
    index(model([ok], [vi("s0"), vi("xs", [3, 1])], [vi("s_n"), vi("ys", [3, 1])]))
    short = helper.make_node("Scan", ["s0", "xs"], ["s_n"], num_scan_inputs=1, body=body)
    refused(model([short], [vi("s0"), vi("xs", [3, 1])], [vi("s_n")]), "Scan body has 2 input\\(s\\) and 2 output\\(s\\)")


def nested_ifs(depth):
    """If inside the then branch of an If, ``depth`` levels, built in place (protobuf refuses to copy that deep)."""
    m = model([], [vi("c", [], BOOL), vi("x")], [vi("y0")])
    g = m.graph
    for d in range(depth):
        n = g.node.add(op_type="If", name=f"if{d}", input=["c"], output=[f"y{d}"])
        then = n.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH)
        other = n.attribute.add(name="else_branch", type=onnx.AttributeProto.GRAPH)
        other.g.name = f"e{d}"
        other.g.output.append(vi("x"))
        then.g.name = f"t{d}"
        then.g.output.append(vi(f"y{d + 1}"))
        g = then.g
    g.node.append(helper.make_node("Identity", ["x"], [f"y{depth}"]))
    return m


def test_subgraphs_nested_deeper_than_the_limit_are_refused_naming_the_outermost():
    from rnnir.lower.scope import MAX_SUBGRAPH_DEPTH

    msg = refused(nested_ifs(MAX_SUBGRAPH_DEPTH + 1), f"subgraphs nested {MAX_SUBGRAPH_DEPTH + 1} deep; rnnir analyses at most {MAX_SUBGRAPH_DEPTH}")
    assert "if0.then_branch" in msg
    assert len(list(index(nested_ifs(MAX_SUBGRAPH_DEPTH)).scopes())) == 2 * MAX_SUBGRAPH_DEPTH + 1  # the limit itself is fine


def test_onnx_checker_agrees_on_a_cycle_and_an_undefined_read():
    for nodes in ([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Relu", ["x"], ["y"])], [helper.make_node("Relu", ["ghost"], ["y"])]):
        with pytest.raises(onnx.checker.ValidationError):
            onnx.checker.check_model(model(nodes, [vi("x")], [vi("y")]), full_check=False)


def _serialized_with(old: bytes, new: bytes) -> bytes:
    m = model([helper.make_node("Relu", ["x"], ["hidden"], name="act"), helper.make_node("Relu", ["x"], ["yy"], name="act2")], [vi("x")], [vi("hidden"), vi("yy")])
    data = m.SerializeToString()
    assert data.count(old) >= 1
    return data.replace(old, new)


def test_an_op_type_that_is_not_utf8_is_named_in_the_message():
    bad = onnx.ModelProto()
    bad.ParseFromString(_serialized_with(b"Relu", b"\xffelu"))
    msg = refused(bad, "op type or domain b'.xffelu' is not valid UTF-8")
    assert "act" in msg


def test_a_value_name_that_is_not_utf8_is_the_one_named():
    bad = onnx.ModelProto()
    bad.ParseFromString(_serialized_with(b"hidden", b"hidd\xffn"))
    msg = refused(bad, "is not valid UTF-8")
    assert "hidd\\xffn" in msg and "'yy'" not in msg


def test_empty_optional_outputs_of_several_nodes_are_not_values():
    w, r = tensor("W", np.zeros((1, 4, 3))), tensor("R", np.zeros((1, 4, 4)))
    nodes = [
        helper.make_node("RNN", ["x", "W", "R"], ["", "h1"], hidden_size=4, name="a"),
        helper.make_node("RNN", ["x", "W", "R"], ["", "h2"], hidden_size=4, name="b"),
    ]
    ix = index(model(nodes, [vi("x", [2, 1, 3])], [vi("h1"), vi("h2")], [w, r]))
    assert "" not in ix.root.producers and ix.root.resolve("h2").index == 1


def test_a_node_error_inside_a_branch_names_the_node_and_the_branch():
    msg = refused(if_model([helper.make_node("Relu", ["x"], ["t"], name="act", alpha=1.0)], [helper.make_node("Identity", ["x"], ["e"])]), "not an attribute of Relu")
    assert msg.endswith("(at node 'act' in gate.then_branch)")
    msg = refused(model([helper.make_node("Relu", ["x"], ["y"], name="act", alpha=1.0)], [vi("x")], [vi("y")]), "not an attribute of Relu")
    assert msg.endswith("(at node 'act')")


def test_a_graph_attribute_of_an_op_without_body_rules_is_not_checked_for_arity():
    # SequenceMap's body: no If/Loop/Scan arity rule applies to it
    body = helper.make_graph([helper.make_node("Identity", ["e"], ["o"])], "body", [vi("e")], [vi("o")])
    seq = helper.make_tensor_sequence_value_info("s", F32, [1])
    node = helper.make_node("SequenceMap", ["s"], ["t"], body=body)
    out = helper.make_tensor_sequence_value_info("t", F32, [1])
    index(model([node], [seq], [out]))


def test_an_attribute_name_that_is_not_utf8_is_refused():
    m = model([helper.make_node("LeakyRelu", ["x"], ["y"], name="act", alpha=0.5)], [vi("x")], [vi("y")])
    bad = onnx.ModelProto()
    bad.ParseFromString(m.SerializeToString().replace(b"alpha", b"\xfflpha"))
    assert "act" in refused(bad, "attribute name b'.xfflpha' is not valid UTF-8")


def test_an_undefined_read_names_the_reading_node_and_the_main_graph():
    msg = refused(model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [vi("x")], [vi("y")]), "node 'r' reads 'ghost'")
    assert msg.endswith("(at main graph)")
    node = helper.make_node("Custom", ["x"], ["y"], domain="my.ops", name="cu", body=branch([helper.make_node("Relu", ["ghost"], ["o"])], [vi("o")]))
    # the custom op borrows ghost from the main graph: the custom node is the reader named
    refused(model([node], [vi("x")], [vi("y")], domains=["my.ops"]), "node 'cu' reads 'ghost'")


def test_an_intermediate_value_name_that_is_not_utf8_is_the_one_named():
    nodes = [helper.make_node("Relu", ["x"], ["hidden"], name="a"), helper.make_node("Relu", ["hidden"], ["y"], name="b"), helper.make_node("Relu", ["x"], ["z"], name="c")]
    bad = onnx.ModelProto()
    bad.ParseFromString(model(nodes, [vi("x")], [vi("y"), vi("z")]).SerializeToString().replace(b"hidden", b"hidd\xffn"))
    msg = refused(bad, "node output name b'hidd.xffn' is not valid UTF-8")
    assert "'y'" not in msg and "'z'" not in msg


def test_an_attribute_name_of_a_custom_op_that_is_not_utf8_is_refused():
    m = model([helper.make_node("Fancy", ["x"], ["y"], domain="my.ops", name="cu", alpha=0.5)], [vi("x")], [vi("y")], domains=["my.ops"])
    bad = onnx.ModelProto()
    bad.ParseFromString(m.SerializeToString().replace(b"alpha", b"\xfflpha"))
    assert "'cu'" in refused(bad, "attribute name b'.xfflpha' is not valid UTF-8")
