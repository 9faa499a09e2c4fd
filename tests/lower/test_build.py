"""Lowering ONNX to the IR, piece by piece (mutation survivors of rnnir/lower/build.py): value types and small
constants, names made unique per branch, attributes, the policies, pairs the lowering adds (unreturned state inputs,
dataflow suggestions), and the store structure an export records. Expectations come from the ONNX graph read by hand."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.analysis.slices import slice_maps
from rnnir.analysis.suggest import suggested_pairs
from rnnir.ir import Compute, LoadSlot, Recurrent, StoreResult, TensorType
from rnnir.ir.pairs import PairSource
from rnnir.lower.build import Policy
from rnnir.lower.tensors import plain_attrs as _plain_attrs
from rnnir.lower.tensors import small_array as _small_array
from rnnir.lower.tensors import tensor_type

H, I, T = 4, 3, 5
F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def weights(kind="GRU", prefix=""):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    rng = np.random.default_rng(0)
    return [
        const(prefix + "W", rng.standard_normal((1, gates * H, I))),
        const(prefix + "R", rng.standard_normal((1, gates * H, H))),
    ]


def model(nodes, inputs, outputs, inits=(), metadata=None):
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits)), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    for k, v in (metadata or {}).items():
        m.metadata_props.add(key=k, value=v if isinstance(v, str) else json.dumps(v))
    return m


def gru_model(tail=(), h_in="h0", out="hn", extra_outputs=(), metadata=None):
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", h_in], ["Y", "Yh"], hidden_size=H, name="gru"), *tail]
    if not tail:
        nodes.append(helper.make_node("Identity", ["Yh"], [out]))
    return model(nodes, [vi("x", [T, 1, I]), vi(h_in, [1, 1, H])], [vi(out, [1, 1, H]), *extra_outputs], weights(), metadata)


# -- types and constants --------------------------------------------------------------------------


def test_tensor_type_reads_dtype_and_dims():
    assert tensor_type(vi("a", ["B", 1, None], F32)) == TensorType("float32", ("B", 1, None))
    assert tensor_type(vi("a", [2], I64)) == TensorType("int64", (2,))
    assert tensor_type(vi("a", None, F32)) == TensorType("float32", None)  # no shape at all
    assert tensor_type(vi("a", [], BOOL)) == TensorType("bool", ())  # a scalar
    assert tensor_type(None) == TensorType()
    assert tensor_type(helper.make_tensor_sequence_value_info("s", F32, [1])) == TensorType()
    no_type = onnx.ValueInfoProto(name="a")
    no_type.type.tensor_type.SetInParent()
    assert tensor_type(no_type) == TensorType(None, None)


def test_tensor_type_of_a_dtype_numpy_cannot_hold_is_named_after_onnx():
    t = tensor_type(vi("a", [1], TensorProto.STRING))
    assert t.dtype == "object"
    bf = tensor_type(vi("a", [1], TensorProto.BFLOAT16))
    assert bf.dtype is not None


def test_small_array_keeps_constants_up_to_4096_elements():
    assert _small_array(const("k", np.arange(4096))).shape == (4096,)
    assert _small_array(const("k", np.arange(4097))) is None
    assert _small_array(const("k", np.ones((64, 65)))) is None  # counted over all dims: 4160
    assert _small_array(const("k", 3.0)).tolist() == 3.0
    ext = const("k", [1.0])
    ext.data_location = TensorProto.EXTERNAL
    assert _small_array(ext) is None
    broken = const("k", [1.0, 2.0])
    broken.dims[:] = [3]  # claims 3 values, holds 2
    assert _small_array(broken) is None


def test_plain_attrs_decode_text_keep_small_tensors_and_skip_graphs():
    node = helper.make_node(
        "Custom",
        ["x"],
        ["y"],
        mode="nearest",
        names=["a", "b"],
        k=3,
        fs=[0.5],
        value=const("v", [1.0, 2.0]),
        body=helper.make_graph([], "b", [], []),
    )
    big = helper.make_attribute("big", const("b", np.zeros(5000)))
    node.attribute.append(big)
    attrs = _plain_attrs(node)
    assert set(attrs) == {"mode", "names", "k", "fs", "value"}
    assert attrs["mode"] == "nearest" and attrs["names"] == ["a", "b"] and attrs["k"] == 3 and attrs["fs"] == [0.5]
    assert attrs["value"].tolist() == [1.0, 2.0]


def test_constants_of_the_state_path_keep_their_values_from_initializers_and_constant_nodes():
    tail = [
        helper.make_node("Constant", [], ["shape"], value=const("s", [1, 1, H], np.int64)),
        helper.make_node("Reshape", ["Yh", "shape"], ["r"]),
        helper.make_node("Add", ["r", "bias"], ["hn"]),
    ]
    m = gru_model(tail)
    m.graph.initializer.append(const("bias", np.full((1, 1, H), 0.5)))
    prog = rnnir.load(m)
    reshape = next(n for n in prog.nodes if getattr(n, "op", "") == "Reshape")
    add = next(n for n in prog.nodes if getattr(n, "op", "") == "Add")
    assert reshape.inputs[1].const.tolist() == [1, 1, H] and reshape.inputs[1].type == TensorType("int64", (3,))
    assert np.all(add.inputs[1].const == 0.5) and add.inputs[1].type == TensorType("float32", (1, 1, H))
    x = next(n for n in prog.recurrents).inputs[0]
    assert x.const is None and x.type == TensorType("float32", (T, 1, I))  # a graph input: its declared type


def test_a_recurrent_op_without_hidden_size_is_a_model_error():
    m = gru_model()
    gru = m.graph.node[0]
    for a in list(gru.attribute):
        if a.name == "hidden_size":
            gru.attribute.remove(a)
    with pytest.raises(rnnir.ModelError, match="GRU node has no hidden_size attribute") as ei:
        rnnir.load(m)
    assert "gru" in str(ei.value)


def test_recurrent_attributes_are_carried_over():
    n = helper.make_node(
        "LSTM", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="lstm", direction="reverse", clip=2.0,
        activations=["Sigmoid", "Tanh", "Relu"], activation_alpha=[0.5], activation_beta=[0.25], input_forget=1,
    )
    m = model([n, helper.make_node("Identity", ["Yh"], ["hn"])], [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], weights("LSTM"))
    (rec,) = rnnir.load(m).recurrents
    assert (rec.kind, rec.direction, rec.hidden_size, rec.layout, rec.clip, rec.input_forget, rec.linear_before_reset) == ("LSTM", "reverse", H, 0, 2.0, 1, 0)
    assert rec.activations == ("Sigmoid", "Tanh", "Relu") and rec.activation_alpha == (0.5,) and rec.activation_beta == (0.25,)
    assert len(rec.outputs) == 3 and rec.outputs[2] is None  # Y_c not asked for
    assert len(rec.inputs) == 8 and rec.inputs[6] is None


def test_a_gru_with_linear_before_reset_and_layout_1():
    n = helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["", "Yh"], hidden_size=H, name="gru", linear_before_reset=1, layout=1)
    m = model([n, helper.make_node("Identity", ["Yh"], ["hn"])], [vi("x", [1, T, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], weights())
    (rec,) = rnnir.load(m).recurrents
    assert (rec.linear_before_reset, rec.layout, rec.activations, rec.clip) == (1, 1, None, None)
    assert rec.outputs[0] is None


# -- names ----------------------------------------------------------------------------------------


def test_a_name_used_in_two_branches_gets_the_branch_in_its_ir_name():
    def body(tag):
        return helper.make_graph([helper.make_node("Identity", ["h0"], ["v"]), helper.make_node("Identity", ["v"], [tag])], tag, [], [vi(tag, [1, 1, H])])

    nodes = [
        helper.make_node("If", ["go"], ["h_init"], then_branch=body("t"), else_branch=body("e"), name="gate"),
        helper.make_node("GRU", ["x", "W", "R", "", "", "h_init"], ["Y", "hn"], hidden_size=H, name="gru"),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), vi("go", [], BOOL)], [vi("hn", [1, 1, H])], weights())
    prog = rnnir.load(m)
    names = sorted(v.name for n in prog.nodes for v in getattr(n, "outputs", []) if v is not None and v.name.startswith("v"))
    assert names in (["v", "v@gate.else_branch"], ["v", "v@gate.then_branch"])  # the second one built names its branch


def test_a_third_use_of_a_name_in_the_same_branch_is_numbered():
    from rnnir.ir import LoadKind, Program
    from rnnir.lower.recognise import Recognised
    from rnnir.lower.scope import ModelIndex
    from rnnir.lower.state import DeclaredState
    from rnnir.lower.values import ValueBuilder

    index = ModelIndex(gru_model(), "m")
    builder = ValueBuilder(Program("m"), index, DeclaredState((), {}, {}, ()), Recognised(), LoadKind.COPY)
    assert [builder.fresh_name("v", index.root) for _ in range(4)] == ["v", "v@", "v@#1", "v@#2"]


# -- policies -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "exit_", "message"), [("sideways", "fanout", "entry policy"), ("dynamic", "twice", "exit policy")])
def test_an_unknown_policy_is_refused(entry, exit_, message):
    with pytest.raises(ValueError, match=message):
        Policy.named(entry=entry, exit=exit_)
    with pytest.raises(ValueError):
        Policy(entry=entry, exit=exit_)


@pytest.mark.parametrize(("entry", "exit_"), [("dynamic", "fanout"), ("constant", "chain"), ("dynamic", "reuse-single-store")])
def test_known_policies_near_miss(entry, exit_):
    assert Policy(entry=entry, exit=exit_).exit == exit_


def test_the_fanout_policy_stores_the_final_state_into_the_slot_and_the_output():
    prog = rnnir.load(gru_model())
    slot = prog.slot("h0")
    (slot_store,) = prog.stores_to(slot)
    (out_store,) = prog.stores_to(prog.output("hn"))
    assert slot_store.value is out_store.value
    assert (slot_store.result, out_store.result) == (StoreResult.TOKEN, StoreResult.VALUE)
    assert isinstance(prog.loads_of(slot)[0], LoadSlot)
    assert prog.returns[0].inputs == (slot_store.outputs[0], out_store.outputs[0])


def test_the_chain_policy_hands_the_slot_store_result_to_the_output_store():
    prog = rnnir.load(gru_model(), exit="chain")
    (slot_store,) = prog.stores_to(prog.slot("h0"))
    (out_store,) = prog.stores_to(prog.output("hn"))
    assert out_store.value is slot_store.outputs[0] and slot_store.result is StoreResult.ALIAS
    assert prog.returns[0].inputs == (slot_store.outputs[0], out_store.outputs[0])


def test_an_output_no_pair_returns_is_stored_only_when_computed_here():
    # Y comes from the recurrent op: stored as a value; "x_out" is the graph input x itself: nothing to store
    tail = [helper.make_node("Identity", ["Yh"], ["hn"]), helper.make_node("Identity", ["Y"], ["y"])]
    m = gru_model(tail, extra_outputs=[vi("y", [T, 1, 1, H])])
    m.graph.output.append(vi("x", [T, 1, I]))
    prog = rnnir.load(m)
    assert [s.result for s in prog.stores_to(prog.output("y"))] == [StoreResult.VALUE]
    assert prog.stores_to(prog.output("x")) == []


# -- pairs the lowering adds ----------------------------------------------------------------------


def test_a_state_named_input_feeding_an_initial_state_without_an_output_is_an_unwritten_pair():
    # y_final is twice the final state: computed from it, not the state itself, so neither names nor dataflow pair it
    m = gru_model(tail=[helper.make_node("Mul", ["Yh", "two"], ["y_final"])], out="y_final")
    m.graph.initializer.append(const("two", 2.0))
    (pair,) = rnnir.load(m).state_pairs
    assert (pair.input, pair.output, pair.source) == ("h0", None, PairSource.NAME)
    assert "feeds a recurrent initial state" in pair.reason
    # near-miss: y_final is the final state itself (through Identity): the dataflow pairs it
    (pair,) = rnnir.load(gru_model(out="y_final")).state_pairs
    assert (pair.input, pair.output, pair.source) == ("h0", "y_final", PairSource.DATAFLOW)


def test_an_input_not_named_like_state_is_paired_by_dataflow_with_the_output_returning_its_final_state():
    m = gru_model(h_in="feat", out="result")
    prog = rnnir.load(m)
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("feat", "result", PairSource.DATAFLOW)]
    assert suggested_pairs(prog) == ()


def test_no_suggestion_when_the_output_is_not_the_ops_final_state_or_the_input_is_computed_on():
    # the output reads Y (not a state the input reaches through the op's initial state)... it still names the op:
    tail = [helper.make_node("Identity", ["Yh"], ["result"])]
    scaled = model(
        [helper.make_node("Mul", ["feat", "two"], ["f2"]), helper.make_node("GRU", ["x", "W", "R", "", "", "f2"], ["Y", "Yh"], hidden_size=H, name="gru"), *tail],
        [vi("x", [T, 1, I]), vi("feat", [1, 1, H])],
        [vi("result", [1, 1, H])],
        [*weights(), const("two", 2.0)],
    )
    assert suggested_pairs(rnnir.load(scaled)) == ()  # feat is scaled before it enters: not a layout-only path


def test_state_inputs_reached_through_layout_ops_and_if_joins_are_found():
    then_g = helper.make_graph([helper.make_node("Identity", ["h0"], ["t"])], "t", [], [vi("t", [1, 1, H])])
    else_g = helper.make_graph([helper.make_node("Identity", ["hz"], ["e"])], "e", [], [vi("e", [1, 1, H])])
    nodes = [
        helper.make_node("If", ["go"], ["h_if"], then_branch=then_g, else_branch=else_g, name="gate"),
        helper.make_node("Concat", ["h_if"], ["h_cat"], axis=0),
        helper.make_node("GRU", ["x", "W", "R", "", "", "h_cat"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Identity", ["Yh"], ["out"]),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), vi("hz", [1, 1, H]), vi("go", [], BOOL)], [vi("out", [1, 1, H])], weights())
    prog = rnnir.load(m)
    assert [(p.input, p.output) for p in prog.state_pairs] == [("h0", None)]  # hz is not named like state


def test_an_unnamed_input_feeding_the_initial_state_is_paired_with_the_output_returning_the_final_state():
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "hz"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Relu", ["x"], ["other"]),
        helper.make_node("Identity", ["Yh"], ["out"]),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("hz", [1, 1, H])], [vi("out", [1, 1, H]), vi("other", [T, 1, I]), vi("x_back", [T, 1, I])], weights())
    m.graph.node.append(helper.make_node("Identity", ["x"], ["x_back"]))
    prog = rnnir.load(m)
    # other and x_back are not the GRU's final state; x is its X (a sequence), never state
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("hz", "out", PairSource.DATAFLOW)]
    assert prog.state_pairs[0].reason == "'hz' starts initial_h -> Y_h of 'gru', whose final value 'out' returns"
    assert suggested_pairs(prog) == ()


def test_declared_pairs_are_the_whole_contract():
    m = gru_model(out="y_final")
    prog = rnnir.load(m, pairs={"h0": "y_final"})
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h0", "y_final", PairSource.DECLARED)]
    prog = rnnir.load(gru_model(h_in="h1", out="hn"), pairs={"h1": None})
    assert [(p.input, p.output) for p in prog.state_pairs] == [("h1", None)]  # no name or position guess for hn


def test_a_slot_takes_its_input_default_as_a_constant_initial_value():
    m = gru_model()
    m.graph.initializer.append(const("h0", np.full((1, 1, H), 0.5)))
    slot = rnnir.load(m).slot("h0")
    assert slot.init.kind == "constant" and np.all(slot.init.value == 0.5)
    assert rnnir.load(gru_model()).slot("h0").init.kind == "zeros"


def test_the_entry_constant_policy_only_takes_a_constant_whose_final_state_is_returned_unpaired():
    nodes = [
        helper.make_node("Constant", [], ["c_init"], value=const("ci", np.full((1, 1, H), 0.25))),
        helper.make_node("GRU", ["x", "W", "R", "", "", "c_init"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("GRU", ["x", "W", "R", "", "", "k_init"], ["Y2", "Yh2"], hidden_size=H, name="gru2"),
    ]
    m = model(nodes, [vi("x", [T, 1, I])], [vi("Yh", [1, 1, H])], [*weights(), const("k_init", np.zeros((1, 1, H)))])
    prog = rnnir.load(m, entry="constant")
    # gru2's final state is not a graph output: its constant stays a constant
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("c_init", "Yh", PairSource.CONSTANT)]
    assert np.all(prog.slot("c_init").init.value == 0.25)
    rec = next(r for r in prog.recurrents if r.onnx_node.name == "gru")
    assert isinstance(rec.port("initial_h").producer, LoadSlot)


# -- the part of the graph that becomes IR --------------------------------------------------------


def test_only_state_carrying_nodes_become_ir_and_outputs_reading_no_state_are_left_out():
    nodes = [
        helper.make_node("Relu", ["x"], ["xr"], name="pre"),
        helper.make_node("GRU", ["xr", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Identity", ["Yh"], ["hn"], name="back"),
        helper.make_node("Relu", ["Y"], ["y1"], name="post1"),
        helper.make_node("Relu", ["y1"], ["feat"], name="post"),  # downstream of the op, not of the state: left out
        helper.make_node("Transpose", ["Yh"], ["hT"], perm=[1, 0, 2], name="view"),  # a layout op of the final state: kept
        helper.make_node("Sigmoid", ["h0"], ["gate"], name="reader"),  # reads the live-in state: kept
    ]
    m = model(
        nodes,
        [vi("x", [T, 1, I]), vi("h0", [1, 1, H])],
        [vi("hn", [1, 1, H]), vi("feat", [T, 1, 1, H]), vi("hT", [1, 1, H]), vi("gate", [1, 1, H])],
        weights(),
    )
    prog = rnnir.load(m)
    ops = sorted(n.provenance.node for n in prog.nodes if isinstance(n, (Compute, Recurrent)))
    assert ops == ["back", "gru", "reader", "view"]


def test_a_stacked_pair_of_ops_both_become_ir_with_the_second_reading_the_first():
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="g1"),
        helper.make_node("GRU", ["x", "W", "R", "", "", "Yh"], ["Y2", "Yh2"], hidden_size=H, name="g2"),
        helper.make_node("Identity", ["Yh2"], ["hn"]),
    ]
    prog = rnnir.load(model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], weights()))
    g1, g2 = sorted(prog.recurrents, key=lambda r: r.onnx_node.name)
    assert g2.port("initial_h") is g1.port("Y_h")
    assert [e.port for e in slice_maps(prog).declared[0].slices[0].entry] == ["initial_h"]


def test_an_empty_list_attribute_stays_an_empty_list():
    node = helper.make_node("Custom", ["x"], ["y"])
    node.attribute.append(onnx.AttributeProto(name="ks", type=onnx.AttributeProto.INTS))
    assert _plain_attrs(node) == {"ks": []}


def test_an_input_with_a_default_on_the_state_path_is_no_constant():
    # bias is a graph input with an initializer: the caller may override it, so its default is no constant
    tail = [helper.make_node("Add", ["Yh", "bias"], ["hn"])]
    m = gru_model(tail)
    m.graph.input.append(vi("bias", [1, 1, H]))
    m.graph.initializer.append(const("bias", np.full((1, 1, H), 0.5)))
    prog = rnnir.load(m)
    add = next(n for n in prog.nodes if getattr(n, "op", "") == "Add")
    assert add.inputs[1].const is None and add.inputs[1].type == TensorType("float32", (1, 1, H))


def test_a_loops_result_carrying_state_is_followed_through_the_ops_after_it():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc_in", "h0"], ["acc_out"])],
        "body",
        [vi("iter", [], TensorProto.INT64), vi("cond_in", [], BOOL), vi("acc_in", [1, 1, H])],
        [vi("cond_out", [], BOOL), vi("acc_out", [1, 1, H])],
    )
    nodes = [helper.make_node("Loop", ["trip", "", "zero"], ["acc"], body=body, name="loop"), helper.make_node("Identity", ["acc"], ["hn"], name="after")]
    m = model(nodes, [vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], [const("trip", np.array(3, np.int64)), const("zero", np.zeros((1, 1, H)))])
    prog = rnnir.load(m)
    assert {n.provenance.node for n in prog.nodes if isinstance(n, Compute)} == {"loop", "after"}
    assert slice_maps(prog).declared[0].slices[0].exit_kind == {"": "derived"}


def test_every_constant_the_lowering_makes_for_a_recognised_recurrence_has_its_arrays_type():

    from tests.support.cell_models import lstm_loop, unrolled_lstm

    for m in (unrolled_lstm(), lstm_loop()):
        prog = rnnir.load(m)
        assert prog.recurrents, "the recurrence is recognised"
        made = [v for n in prog.nodes for v in getattr(n, "inputs", []) if v is not None and v.const is not None and v.producer is None]
        assert made
        for v in made:
            assert v.type.shape == tuple(np.asarray(v.const).shape), v.name
