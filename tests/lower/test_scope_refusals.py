"""More of rnnir/lower/scope.py's behaviour, pinned for its mutation survivors (issue 15): where a refusal says it
happened (a branch or the main graph), text that is not UTF-8 in every kind of name and attribute, required inputs
missing or empty, the default opset when a model imports none, custom ops named like If/Loop, cycles, what a
subgraph's own definitions hide from an outer value_info, and how rnnir tells whether its op-schema table matches
the installed onnx (else asking onnx.defs).  Expected messages come from the ONNX spec (op schemas, scoping) and
docs/errors.md's table; onnx.checker is asked where it has an opinion."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.lower.scope import ModelIndex, attribute_value, outer_names

F32, I64, BOOL, STRING = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, TensorProto.STRING


def vi(name, shape=(1,), dtype=F32):
    return helper.make_tensor_value_info(name, dtype, list(shape))


def tensor(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(nodes, inputs, outputs, inits=(), opsets=(("", 17),), value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    return m


def branch(nodes, outputs, inputs=(), inits=()):
    return helper.make_graph(nodes, "b", list(inputs), list(outputs), initializer=list(inits))


def refused(m, message):
    with pytest.raises(rnnir.ModelError, match=message) as ei:
        ModelIndex(m, "m")
    return str(ei.value)


def reparsed(m, old: bytes, new: bytes) -> onnx.ModelProto:
    """``m`` serialized with ``old`` replaced by ``new`` (invalid UTF-8), parsed back: protobuf then hands the
    field to Python as bytes."""
    data = m.SerializeToString()
    assert data.count(old) >= 1
    bad = onnx.ModelProto()
    bad.ParseFromString(data.replace(old, new))
    return bad


# -- where a refusal happened -------------------------------------------------------------------------


def test_a_value_produced_twice_inside_a_branch_is_refused_at_that_branch():
    twice = [helper.make_node("Identity", ["x"], ["t"], name="a"), helper.make_node("Identity", ["x"], ["t"], name="b")]
    node = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=branch(twice, [vi("t")]), else_branch=branch([], [vi("x")]))
    msg = refused(model([node], [vi("c", [], BOOL), vi("x")], [vi("y")]), "value 't' is produced twice \\(by 'a' and 'b'\\)")
    assert msg.endswith("(at gate.then_branch)")


def test_an_undefined_main_graph_output_is_refused_at_the_main_graph():
    msg = refused(model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y"), vi("z")]), "graph output 'z' is not defined")
    assert msg.endswith("(at main graph)")


def test_a_main_graph_initializer_of_unknown_type_is_refused_at_the_main_graph():
    m = model([helper.make_node("Identity", ["k"], ["y"])], [vi("x")], [vi("y")], [tensor("k", [1.0])])
    m.graph.initializer[0].data_type = 999
    assert refused(m, "initializer 'k' has unknown data type 999").endswith("(at main graph)")


def test_a_main_graph_cycle_is_refused_at_the_main_graph():
    cycle = [helper.make_node("Relu", ["b"], ["a"], name="p"), helper.make_node("Relu", ["a"], ["b"], name="q"), helper.make_node("Relu", ["x"], ["y"], name="r")]
    msg = refused(model(cycle, [vi("x")], [vi("y")]), "cycle through nodes 'p', 'q'")
    assert msg.endswith("; ONNX graphs must be acyclic (at main graph)")


# -- cycles ----------------------------------------------------------------------------------------


def test_a_cycle_is_found_even_when_more_nodes_are_outside_it_than_in_it():
    # two nodes in the cycle, three that are not: a sort that counted a node twice would finish them all
    nodes = [
        helper.make_node("Relu", ["b"], ["a"], name="p"),
        helper.make_node("Relu", ["a"], ["b"], name="q"),
        helper.make_node("Relu", ["x"], ["r1"], name="r"),
        helper.make_node("Relu", ["r1"], ["r2"], name="s"),
        helper.make_node("Relu", ["r2"], ["y"], name="u"),
    ]
    msg = refused(model(nodes, [vi("x")], [vi("y")]), "cycle through nodes 'p', 'q';")
    assert "'r'" not in msg and "'s'" not in msg and "'u'" not in msg
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model(nodes, [vi("x")], [vi("y")]), full_check=False)


def test_a_cycle_of_seven_nodes_names_six_and_an_ellipsis():
    n = 7
    nodes = [helper.make_node("Relu", [f"v{(k + 1) % n}"], [f"v{k}"], name=f"n{k}") for k in range(n)]
    msg = refused(model([*nodes, helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")]), "cycle")
    assert "'n0', 'n1', 'n2', 'n3', 'n4', 'n5' …;" in msg and "'n6'" not in msg


def test_a_cycle_of_six_nodes_names_them_all_without_an_ellipsis():
    n = 6
    nodes = [helper.make_node("Relu", [f"v{(k + 1) % n}"], [f"v{k}"], name=f"n{k}") for k in range(n)]
    msg = refused(model([*nodes, helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")]), "cycle")
    assert "'n0', 'n1', 'n2', 'n3', 'n4', 'n5';" in msg and "…" not in msg


# -- the nesting limit (docs/errors.md: "If/Loop/Scan nested deeper than 64") ---------------------------------


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


def test_ifs_nested_65_deep_are_refused_and_64_deep_are_not():
    refused(nested_ifs(65), "subgraphs nested 65 deep; rnnir analyses at most 64 levels of If/Loop/Scan")
    assert len(list(ModelIndex(nested_ifs(64), "m").scopes())) == 1 + 2 * 64


# -- required inputs -------------------------------------------------------------------------------


def gather(inputs):
    return model([helper.make_node("Gather", inputs, ["y"], axis=0, name="g")], [vi("x", [3]), vi("i", [], I64)], [vi("y")])


def test_a_gather_without_its_indices_is_refused():
    # Gather's schema: data and indices, both required
    msg = refused(gather(["x"]), "Gather node lacks its required input #1 \\(it has 1 input\\(s\\)\\)")
    assert msg.endswith("(at node 'g')")


def test_a_gather_whose_data_input_is_empty_is_refused():
    refused(gather(["", "i"]), "Gather node lacks its required input #0 \\(it has 2 input\\(s\\)\\)")


def test_a_gather_whose_indices_input_is_empty_is_refused():
    refused(gather(["x", ""]), "Gather node lacks its required input #1 \\(it has 2 input\\(s\\)\\)")


def test_a_gather_with_both_inputs_loads_through_rnnir_load():
    program = rnnir.load(gather(["x", "i"]))
    assert [o.name for o in program.outputs] == ["y"]
    with pytest.raises(rnnir.ModelError, match="lacks its required input #1"):
        rnnir.load(gather(["x"]))


# -- the default opset -----------------------------------------------------------------------------


def test_a_model_that_imports_no_default_opset_knows_no_standard_op():
    # only a custom domain imported: the standard domain is at "opset 0", where no op exists (onnx.checker refuses too)
    m = model([helper.make_node("Relu", ["x"], ["y"], name="act")], [vi("x")], [vi("y")], opsets=(("my.ops", 1),))
    msg = refused(m, "unknown op 'Relu' in the standard ONNX domain at opset 0")
    assert msg.endswith("(at node 'act')")
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)


def test_an_ai_onnx_node_in_a_model_that_imports_no_default_opset_is_refused():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="act", domain="ai.onnx")], [vi("x")], [vi("y")], opsets=(("my.ops", 1),))
    refused(m, "unknown op 'Relu' in the standard ONNX domain at opset 0")


def test_the_ai_onnx_opset_is_zero_when_no_default_opset_is_imported():
    m = model([helper.make_node("Fancy", ["x"], ["y"], domain="my.ops")], [vi("x")], [vi("y")], opsets=(("my.ops", 1),))
    assert ModelIndex(m, "m").opsets == {"my.ops": 1, "ai.onnx": 0}


def test_an_ai_onnx_node_uses_the_default_opset_near_miss():
    m = model([helper.make_node("Relu", ["x"], ["y"], domain="ai.onnx")], [vi("x")], [vi("y")], opsets=(("", 14),))
    assert ModelIndex(m, "m").opsets == {"": 14, "ai.onnx": 14}


# -- custom ops ------------------------------------------------------------------------------------


def test_a_custom_domain_op_named_loop_is_not_held_to_the_loop_body_rules():
    # a standard Loop with one input and one output needs a body of 1 input and 2 outputs; my.ops's Loop is opaque
    body = branch([helper.make_node("Identity", ["x"], ["o"])], [vi("o")])
    node = helper.make_node("Loop", ["x"], ["y"], domain="my.ops", name="lp", body=body)
    ix = ModelIndex(model([node], [vi("x")], [vi("y")], opsets=(("", 17), ("my.ops", 1))), "m")
    assert sorted(sc.branch_path for sc in ix.scopes()) == ["", "lp.body"]
    std = helper.make_node("Loop", ["", "", "x"], ["y"], name="lp", body=body)
    refused(model([std], [vi("x")], [vi("y")]), "Loop body has 0 input\\(s\\) and 1 output\\(s\\).*need 3 and 2")


def test_a_custom_domain_op_named_if_is_not_held_to_the_if_branch_rules():
    takes_input = branch([helper.make_node("Identity", ["p"], ["o"])], [vi("o"), vi("o")], inputs=[vi("p")])
    node = helper.make_node("If", ["c"], ["y"], domain="my.ops", name="gate", then_branch=takes_input, else_branch=takes_input)
    ModelIndex(model([node], [vi("c", [], BOOL)], [vi("y")], opsets=(("", 17), ("my.ops", 1))), "m")


def test_a_graphs_attribute_borrowing_an_undefined_name_is_refused_at_its_owner():
    # each subgraph of a GRAPHS attribute borrows names from the owner's graph, as a GRAPH attribute's does
    body = branch([helper.make_node("Relu", ["ghost"], ["o"])], [vi("o")])
    node = helper.make_node("Custom", ["x"], ["y"], domain="my.ops", name="cu")
    node.attribute.append(helper.make_attribute("bodies", [body]))
    msg = refused(model([node], [vi("x")], [vi("y")], opsets=(("", 17), ("my.ops", 1))), "node 'cu' reads 'ghost', which no node")
    assert msg.endswith("(at main graph)")


def test_outer_names_include_those_of_a_graphs_attribute():
    inner = branch([helper.make_node("Add", ["x", "k"], ["o"])], [vi("o")])
    node = helper.make_node("Custom", ["x"], ["u"], domain="my.ops")
    node.attribute.append(helper.make_attribute("bodies", [inner, branch([], [vi("w")])]))
    g = branch([node], [vi("u")])
    assert outer_names(g) == {"x", "k", "w"}


# -- attribute text --------------------------------------------------------------------------------


def test_a_standard_ops_string_attribute_that_is_not_utf8_is_refused():
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="constant")
    node.attribute[0].s = b"\xffonstant"
    m = model([node], [vi("x", [2])], [vi("y")], [tensor("pads", [0, 0], np.int64)])
    msg = refused(m, "attribute 'mode' value b'\\\\xffonstant' is not valid UTF-8 text, as ONNX requires")
    assert msg.endswith("(at node 'pad')")


def test_a_standard_ops_strings_attribute_that_is_not_utf8_is_refused():
    node = helper.make_node("StringNormalizer", ["x"], ["y"], name="sn", stopwords=["a", "b"])
    node.attribute[0].strings[1] = b"\xfe"
    m = model([node], [vi("x", [2], STRING)], [vi("y", [2], STRING)])
    msg = refused(m, "attribute 'stopwords' value b'\\\\xfe' is not valid UTF-8 text")
    assert msg.endswith("(at node 'sn')")


def test_a_custom_ops_string_attribute_that_is_not_utf8_is_refused():
    node = helper.make_node("Fancy", ["x"], ["y"], domain="my.ops", name="cu", mode="fast")
    node.attribute[0].s = b"f\xffst"
    msg = refused(model([node], [vi("x")], [vi("y")], opsets=(("", 17), ("my.ops", 1))), "attribute 'mode' value b'f\\\\xffst' is not valid UTF-8")
    assert msg.endswith("(at node 'cu')")


def test_a_custom_ops_utf8_string_attributes_are_fine_near_miss():
    node = helper.make_node("Fancy", ["x"], ["y"], domain="my.ops", name="cu", mode="fäst", modes=["ä", "b"], n=3)
    ModelIndex(model([node], [vi("x")], [vi("y")], opsets=(("", 17), ("my.ops", 1))), "m")


# -- names that are not UTF-8 ----------------------------------------------------------------------


def test_an_initializer_name_that_is_not_utf8_is_refused_as_an_initializer_name():
    m = model([helper.make_node("Identity", ["kw"], ["y"])], [vi("x")], [vi("y")], [tensor("kw", [1.0])])
    msg = refused(reparsed(m, b"kw", b"k\xff"), "initializer name b'k\\\\xff' is not valid UTF-8 text")
    assert msg.endswith("(at main graph)")


def test_a_graph_input_name_that_is_not_utf8_is_refused_as_a_value_name():
    m = model([helper.make_node("Identity", ["xin"], ["y"])], [vi("xin")], [vi("y")])
    msg = refused(reparsed(m, b"xin", b"x\xffn"), "value name b'x\\\\xffn' is not valid UTF-8 text")
    assert msg.endswith("(at main graph)")


def test_a_domain_that_is_not_utf8_is_refused():
    m = model([helper.make_node("Fancy", ["x"], ["y"], domain="qq.ops", name="cu")], [vi("x")], [vi("y")])
    msg = refused(reparsed(m, b"qq.ops", b"\xffq.ops"), "op type or domain b'\\\\xffq.ops' is not valid UTF-8 text")
    assert msg.endswith("(at node 'cu')")


def test_a_second_node_output_name_that_is_not_utf8_is_refused():
    # the bad name comes after a good one: a check of the first name alone would miss it
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"), helper.make_node("Relu", ["x"], ["zzbad"], name="second")]
    m = reparsed(model(nodes, [vi("x")], [vi("a")]), b"zzbad", b"zz\xffad")
    refused(m, "node output name b'zz\\\\xffad' is not valid UTF-8 text")


def test_the_only_node_output_name_that_is_not_utf8_is_refused():
    m = reparsed(model([helper.make_node("Relu", ["x"], ["zzbad"], name="only")], [vi("x")], [vi("x")]), b"zzbad", b"zz\xffad")
    refused(m, "node output name b'zz\\\\xffad' is not valid UTF-8 text")


def test_a_read_of_an_undefined_name_that_is_not_utf8_is_refused_as_an_input_name():
    m = model([helper.make_node("Relu", ["zzghost"], ["y"], name="r")], [vi("x")], [vi("y")])
    msg = refused(reparsed(m, b"zzghost", b"zz\xffhost"), "input name b'zz\\\\xffhost' is not valid UTF-8 text")
    assert msg.endswith("(at node 'r')")


# -- value info across scopes ----------------------------------------------------------------------


def shadowing_if():
    """A then branch whose own node output ``u`` and initializer ``w`` have the names of outer values with value info."""
    then_g = branch([helper.make_node("Add", ["x", "w"], ["u"]), helper.make_node("Identity", ["u"], ["t"])], [vi("t")], inits=[tensor("w", [2.0])])
    node = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then_g, else_branch=branch([], [vi("x")]))
    return model([node], [vi("c", [], BOOL), vi("x"), vi("w", [5])], [vi("y")], value_info=[vi("u", [7])])


def test_a_branch_node_output_hides_an_outer_value_info_of_its_name():
    ix = ModelIndex(shadowing_if(), "m")
    then_scope = ix.root.child(ix.root.nodes[0], "then_branch")
    assert then_scope.resolve("u").scope is then_scope
    assert then_scope.info("u") is None  # the branch's u has no value info; the outer u's shape [7] is another value's
    assert [d.dim_value for d in ix.root.info("u").type.tensor_type.shape.dim] == [7]


def test_a_branch_initializer_hides_an_outer_input_of_its_name():
    ix = ModelIndex(shadowing_if(), "m")
    then_scope = ix.root.child(ix.root.nodes[0], "then_branch")
    assert then_scope.resolve("w").kind == "initializer" and then_scope.info("w") is None
    else_scope = ix.root.child(ix.root.nodes[0], "else_branch")
    assert [d.dim_value for d in else_scope.info("w").type.tensor_type.shape.dim] == [5]  # near miss: the outer input


# -- attribute values ------------------------------------------------------------------------------


def test_attribute_value_of_an_empty_strings_attribute_is_an_empty_list():
    node = helper.make_node("Fancy", ["x"], ["y"], domain="my.ops")
    node.attribute.add(name="activations", type=onnx.AttributeProto.STRINGS)
    assert attribute_value(node, "activations") == []
    node.attribute.add(name="ints", type=onnx.AttributeProto.INTS)
    assert attribute_value(node, "ints") == []


def test_an_initializer_whose_name_is_not_utf8_is_refused_for_its_name_before_its_type():
    # one broken initializer, its name (not text) and its data type (999) both wrong: the name is what is read first
    m = model([helper.make_node("Identity", ["kw"], ["y"])], [vi("x")], [vi("y")], [tensor("kw", [1.0])])
    m.graph.initializer[0].data_type = 999
    msg = refused(reparsed(m, b"kw", b"k\xff"), "initializer name b'k\\\\xff' is not valid UTF-8 text")
    assert "data type" not in msg


def test_a_branch_reading_its_own_sparse_initializer_loads():
    # onnxruntime runs this model (the then branch gives [1, 0]); rnnir refused it as an undefined read of 'sv'
    # because a graph's sparse initializers did not count as its own definitions
    sparse = helper.make_sparse_tensor(tensor("sv", [1.0]), tensor("si", [0], np.int64), [2])
    then_g = branch([helper.make_node("Identity", ["sv"], ["t"])], [vi("t", [2])])
    then_g.sparse_initializer.append(sparse)
    node = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then_g, else_branch=branch([helper.make_node("Identity", ["x"], ["e"])], [vi("e", [2])]))
    index = ModelIndex(model([node], [vi("c", [], BOOL), vi("x", [2])], [vi("y", [2])]), "m")
    assert index.outer_names(then_g) == frozenset()
