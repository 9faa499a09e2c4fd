"""Lowering's stages pinned down (mutation survivors of rnnir/lower/build.py and the stage modules: state, plan,
values, stores, suggest, tensors, policy). Each case is a small model built here whose expected IR or pairs are
read off the graph by hand."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import rnnir
from rnnir.analysis.suggest import suggested_pairs
from rnnir.ir.pairs import PairSource
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def _gru(name, h_in, prefix):
    return helper.make_node("GRU", ["x", prefix + "W", prefix + "R", "", "", h_in], [f"{name}_Y", f"{name}_Yh"], hidden_size=H, name=name)


def test_one_suggestion_per_input_and_output_when_two_ops_start_from_the_input():
    # feat starts two GRUs whose final states an unpaired output returns side by side: one suggestion, not one per op
    nodes = [_gru("a", "feat", "a"), _gru("b", "feat", "b"), helper.make_node("Concat", ["a_Yh", "b_Yh"], ["result"], axis=0)]
    m = model(nodes, [vi("x", [T, 1, I]), vi("feat", [1, 1, H])], [vi("result", [2, 1, H])], [*weights("GRU", prefix="a"), *weights("GRU", prefix="b")])
    prog = rnnir.load(m)
    assert prog.state_pairs == ()
    assert [(p.input, p.output, p.source) for p in suggested_pairs(prog)] == [("feat", "result", PairSource.DATAFLOW)]


def _plain_gru_model(graph_name):
    nodes = [_gru("gru", "h0", ""), helper.make_node("Identity", ["gru_Yh"], ["hn"])]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], weights("GRU"))
    m.graph.name = graph_name
    return m


def test_a_paired_output_is_never_suggested_again_for_another_input_of_its_op():
    # h0 -> hn pairs by name; seed (not named like state) starts the same LSTM's cell state. hn is paired already,
    # so no dataflow suggestion may pair seed with it
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "seed"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Identity", ["Yh"], ["hn"]),
    ]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H]), vi("seed", [1, 1, H])], [vi("hn", [1, 1, H])], weights("LSTM"))
    prog = rnnir.load(m)
    assert [(p.input, p.output) for p in prog.state_pairs] == [("h0", "hn")]
    assert suggested_pairs(prog) == ()


# -- entry=constant: which constant initial states become slots --------------------------------------------------


def _const_start_lstm(h_init_node=None, c_input=None):
    """An LSTM whose initial_h is the constant h_init (an initializer, or the given Constant node) and whose
    initial_c is ``c_input`` (absent when None); both final states are graph outputs."""
    ins = ["x", "W", "R", "", "", "h_init"] + ([c_input] if c_input is not None else [])
    nodes = [*([h_init_node] if h_init_node is not None else []), helper.make_node("LSTM", ins, ["Y", "y_final", "c_final"], hidden_size=H, name="lstm")]
    inits = [*weights("LSTM")]
    if h_init_node is None:
        inits.append(numpy_helper.from_array(np.full((1, 1, H), 0.5, np.float32), "h_init"))
    inputs = [vi("x", [T, 1, I])] + ([vi(c_input, [1, 1, H])] if c_input else [])
    return model(nodes, inputs, [vi("y_final", [1, 1, H]), vi("c_final", [1, 1, H])], inits)


def test_entry_constant_skips_an_absent_initial_state():
    prog = rnnir.load(_const_start_lstm(), entry="constant")  # initial_c not given at all: only h gets a slot
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h_init", "y_final", PairSource.CONSTANT)]
    assert [s.name for s in prog.slots] == ["h_init"]
    assert prog.slots[0].init.value.tolist() == [[[0.5] * H]]
    empty = rnnir.load(_const_start_lstm(c_input=""), entry="constant")  # initial_c given as the empty name
    assert [(p.input, p.output) for p in empty.state_pairs] == [("h_init", "y_final")]


def test_entry_constant_makes_a_slot_of_a_constant_node_but_not_of_one_it_cannot_fold():
    folded = helper.make_node("Constant", [], ["h_init"], value=numpy_helper.from_array(np.full((1, 1, H), 0.5, np.float32)))
    prog = rnnir.load(_const_start_lstm(folded), entry="constant")
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h_init", "y_final", PairSource.CONSTANT)]
    spelled = helper.make_node("Constant", [], ["h_init"], value_floats=[0.5] * H)  # not a `value` tensor: not read
    assert rnnir.load(_const_start_lstm(spelled), entry="constant").state_pairs == ()


def test_entry_constant_leaves_an_initial_state_kept_in_external_data(tmp_path):
    m = _const_start_lstm()
    path = tmp_path / "m.onnx"
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    assert rnnir.load(path, entry="constant").state_pairs == ()  # its bytes are not read: no slot to start it from
    inline = _const_start_lstm()  # (onnx.save moved m's tensors out in place)
    assert [(p.input, p.output) for p in rnnir.load(inline, entry="constant").state_pairs] == [("h_init", "y_final")]  # near-miss


def test_a_dataflow_pair_needs_the_input_to_start_the_very_op_whose_final_state_the_output_returns():
    # feat starts GRU a (returned as a_out), other starts GRU b (returned as result): each input is paired with
    # its own op's output only, not with the other op's (position would pair them too, the other way round here)
    nodes = [
        _gru("a", "feat", "a"),
        _gru("b", "other", "b"),
        helper.make_node("Identity", ["a_Yh"], ["a_out"]),
        helper.make_node("Identity", ["b_Yh"], ["result"]),
    ]
    m = model(
        nodes,
        [vi("x", [T, 1, I]), vi("feat", [1, 1, H]), vi("other", [1, 1, H])],
        [vi("a_out", [1, 1, H]), vi("result", [1, 1, H])],
        [*weights("GRU", prefix="a"), *weights("GRU", prefix="b")],
    )
    prog = rnnir.load(m)
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("feat", "a_out", PairSource.DATAFLOW), ("other", "result", PairSource.DATAFLOW)]
    assert suggested_pairs(prog) == ()
    m.graph.output.reverse()  # near-miss: listed the other way round, the pairs stay with their own op
    assert [(p.input, p.output) for p in rnnir.load(m).state_pairs] == [("feat", "a_out"), ("other", "result")]


def _fed_twice(joint):
    """feat starts GRU a through an Identity (so it is a state-fed input) and GRU b through ``joint`` (feat, h0)
    (None: b starts from h0 itself); h0 is a declared slot, so the joint op is built; the only output returns b's
    final state."""
    nodes = [
        helper.make_node("Identity", ["feat"], ["feat_a"]),
        helper.make_node(joint or "Identity", ["feat", "h0"] if joint else ["h0"], ["feat_b"], **({"axis": 2} if joint == "Concat" else {})),
        _gru("a", "feat_a", "a"),
        _gru("b", "feat_b" if joint else "h0", "b"),
        helper.make_node("Identity", ["b_Yh"], ["result"]),
    ]
    half = H // 2 if joint == "Concat" else H
    m = model(nodes, [vi("x", [T, 1, I]), vi("feat", [1, 1, half]), vi("h0", [1, 1, half])], [vi("result", [1, 1, H])], [*weights("GRU", prefix="a"), *weights("GRU", prefix="b")])
    return rnnir.load(m, pairs={"h0": None})


def test_a_suggestion_walks_back_through_layout_ops_only():
    assert suggested_pairs(_fed_twice("Mul")) == ()  # feat is scaled by the state before it starts b: not handed back
    assert suggested_pairs(_fed_twice(None)) == ()  # b starts from the slot's load: the walk stops there
    # near-miss: feat is the first part of a Concat that starts b, so b's initial state holds feat as it came in
    assert [(p.input, p.output) for p in suggested_pairs(_fed_twice("Concat"))] == [("feat", "result")]


def test_lower_without_a_policy_fans_the_final_state_out():
    from rnnir.ir import Store
    from rnnir.lower import Policy, lower, read_model

    def stores(prog):
        return sorted((st.dest.name, st.inputs[0].name) for st in prog.nodes if isinstance(st, Store))

    # h0 -> hn pairs by name: the slot store and the output store both read hn itself
    assert stores(lower(read_model(_plain_gru_model("g")))) == [("h0", "hn"), ("hn", "hn")]
    chained = lower(read_model(_plain_gru_model("g")), None, Policy(exit="chain"))  # near-miss: another policy
    assert stores(chained) == [("h0", "hn"), ("hn", "store.h0")]


# -- store placement from a recorded structure ---------------------------------------------------------------------


def _lower_with(structure):
    from rnnir.lower import Policy, lower, read_model

    return lower(read_model(_plain_gru_model("g")), None, Policy(), structure=structure)


def _structure(slots=("h0",), stores=(("s", "slot:h0", "hn", False), ("o", "out:hn", "hn", False)), alias_of=None, waits=None, order=()):
    from rnnir.ir import StoreResult
    from rnnir.ir.structure import SlotFacts, StoreFact, StoreStructure

    facts = [StoreFact(i, d, r, chained, StoreResult.TOKEN if d.startswith("slot:") else StoreResult.VALUE) for i, d, r, chained in stores]
    return StoreStructure(
        slots={s: SlotFacts(alias_of=alias_of) for s in slots},
        outputs=["hn"],
        stores=facts,
        waits=[f.id for f in facts] if waits is None else list(waits),
        order=list(order),
    )


def test_a_recorded_structure_places_exactly_its_stores():
    from rnnir.ir import Store

    prog = _lower_with(_structure(stores=(("s", "slot:h0", "hn", False), ("o", "out:hn", "s", True)), order=[("s", "o")]))
    stores = {st.dest.name: st for st in prog.nodes if isinstance(st, Store)}
    assert sorted(stores) == ["h0", "hn"]
    assert stores["hn"].inputs[0] is stores["h0"].outputs[0]  # the output store reads the slot store's result (a chain)
    assert [v.name for v in prog.returns[0].inputs] == [stores["h0"].outputs[0].name, stores["hn"].outputs[0].name]
    fanned = _structure(order=[("o", "s")])  # the output store before the slot store: an order the data does not give
    prog = _lower_with(fanned)
    stores = {st.dest.name: st for st in prog.nodes if isinstance(st, Store)}
    assert prog.graph.has_edge(stores["hn"].id, stores["h0"].id) and not prog.graph.has_edge(stores["h0"].id, stores["hn"].id)
    unordered = _lower_with(_structure(waits=["o"]))
    stores = {st.dest.name: st for st in unordered.nodes if isinstance(st, Store)}
    assert not unordered.graph.has_edge(stores["hn"].id, stores["h0"].id)  # near-miss: no order recorded
    assert [v.producer.dest.name for v in unordered.returns[0].inputs] == ["hn"]  # the Return waits for "o" only


@pytest.mark.parametrize(
    ("structure", "named"),
    [
        (dict(slots=("h0", "ghost")), "slot 'ghost'"),
        (dict(stores=(("s", "slot:h0", "hn", False), ("o", "out:elsewhere", "hn", False))), "out:elsewhere"),
        (dict(stores=(("s", "slot:h0", "hn", False), ("o", "out:hn", "nothing", True))), "nothing"),
        (dict(waits=("s", "never")), "never"),
        (dict(alias_of="out:gone"), "out:gone"),
        (dict(stores=(("s", "slot:h0", "", False),), waits=("s",)), "value ''"),  # a store reading no value at all
    ],
)
def test_a_recorded_structure_naming_what_the_graph_lacks_is_a_clear_error(structure, named):
    with pytest.raises(rnnir.ModelError, match=f"names {named}.*which the graph does not have"):
        _lower_with(_structure(**structure))


# -- external values: what a state-path node reads from outside the state -------------------------------------------


@pytest.mark.parametrize(("elements", "kept"), [(4096, True), (4097, False)])
def test_a_constant_read_on_the_state_path_keeps_its_data_up_to_4096_elements(elements, kept):
    offsets = np.arange(elements, dtype=np.float32)
    nodes = [helper.make_node("Add", ["h0", "offsets"], ["h_in"]), _gru("gru", "h_in", ""), helper.make_node("Identity", ["gru_Yh"], ["hn"])]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], [*weights("GRU"), numpy_helper.from_array(offsets, "offsets")])
    ext = rnnir.load(m).externals["offsets"]
    assert ext.type.shape == (elements,) and ext.type.dtype == "float32"  # the type is kept either way
    assert ext.has_const is kept
    if kept:
        assert ext.const.tolist() == offsets.tolist()
