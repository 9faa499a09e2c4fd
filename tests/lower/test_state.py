"""Declaring the state (rnnir/lower/state.py, lowering's first stage), pinned through the public lowering: which
inputs count as feeding a recurrent initial state (the walk back through layout-only ops, Concat's every part and
nested scopes), and which constant initial states the ``constant`` entry policy makes slots. Each model is built
here; the expected pairs and slots are read off the graph by hand (ONNX semantics: an empty input name is an
absent input; only a node's own inputs and outputs are its ports)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.ir.pairs import PairSource
from tests.support.recurrent_op_models import H, I, T, model, shadowing_loop_model, vi, weights


def _gru(h_in, name="gru"):
    return helper.make_node("GRU", ["x", "W", "R", "", "", h_in], [f"{name}_Y", f"{name}_Yh"], hidden_size=H, name=name)


def _unreturned(prog):
    """The pairs lowering added for state-named inputs that no output returns: input -> (output, source, reason)."""
    return {p.input: (p.output, p.source, p.reason) for p in prog.state_pairs}


def _reason(name):
    return f"{name!r} is named like state and feeds a recurrent initial state, but no output matches it"


# -- which inputs feed a recurrent initial state ------------------------------------------------------------------


def test_every_part_of_a_concat_feeds_the_initial_state_but_a_reshapes_shape_does_not():
    # h_a and h_b are both halves of the GRU's initial state; no output returns either
    nodes = [helper.make_node("Concat", ["h_a", "h_b"], ["h_in"], axis=2), _gru("h_in")]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h_a", [1, 1, H // 2]), vi("h_b", [1, 1, H // 2])], [vi("gru_Y", [T, 1, 1, H])], weights("GRU"))
    prog = rnnir.load(m)
    assert _unreturned(prog) == {n: (None, PairSource.NAME, _reason(n)) for n in ("h_a", "h_b")}
    assert sorted(s.name for s in prog.slots) == ["h_a", "h_b"]
    # three parts, the state-named one last (not only the second part is walked)
    nodes = [helper.make_node("Concat", ["pad", "", "h_b"], ["h_in"], axis=2), _gru("h_in")]
    m = model(nodes, [vi("x", [T, 1, I]), vi("pad", [1, 1, H // 2]), vi("h_b", [1, 1, H // 2])], [vi("gru_Y", [T, 1, 1, H])], weights("GRU"))
    assert _unreturned(rnnir.load(m)) == {"h_b": (None, PairSource.NAME, _reason("h_b"))}
    # near-miss: a Reshape's second input is its target shape, not part of the state, however it is named
    nodes = [helper.make_node("Reshape", ["h0", "h_shape"], ["h_in"]), _gru("h_in")]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [H]), vi("h_shape", [3], TensorProto.INT64)], [vi("gru_Y", [T, 1, 1, H])], weights("GRU"))
    assert _unreturned(rnnir.load(m)) == {"h0": (None, PairSource.NAME, _reason("h0"))}


def test_a_concat_without_inputs_before_the_initial_state_is_lowered_without_a_traceback():
    # onnx.checker would refuse the empty Concat, rnnir's own validation does not: lowering must still finish, and
    # nothing state-named reaches the GRU
    nodes = [helper.make_node("Concat", [], ["h_in"], axis=2), _gru("h_in"), helper.make_node("Identity", ["gru_Yh"], ["result"])]
    m = model(nodes, [vi("x", [T, 1, I])], [vi("result", [1, 1, H])], weights("GRU"))
    prog = rnnir.load(m)
    assert prog.state_pairs == () and prog.slots == ()


def test_a_state_reaching_the_initial_state_along_many_shared_paths_is_walked_once():
    # 40 levels of Concat(prev, prev) -> Slice: 2**40 paths lead back to h0, 120 definitions. A walk that revisited a
    # definition would never finish; one that visits each once takes milliseconds
    nodes = []
    prev = "h0"
    for k in range(40):
        nodes.append(helper.make_node("Concat", [prev, prev], [f"twice{k}"], axis=0))
        nodes.append(helper.make_node("Slice", [f"twice{k}", "zero", "one"], [f"once{k}"]))
        prev = f"once{k}"
    nodes.append(_gru(prev))
    bounds = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("one", 1))]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("gru_Y", [T, 1, 1, H])], [*weights("GRU"), *bounds])
    assert _unreturned(rnnir.load(m)) == {"h0": (None, PairSource.NAME, _reason("h0"))}


def test_a_loop_body_input_sharing_a_main_graph_inputs_name_is_not_that_input():
    # the Loop's body declares its own `hidden` (the carried value, started from the constant h_start) and starts a GRU
    # from it; the main graph's `hidden` only feeds a Mul, so it reaches no initial state (onnxruntime runs this model)
    m = shadowing_loop_model("scaled")
    prog = rnnir.load(m)
    assert prog.state_pairs == () and prog.slots == ()


# -- entry=constant: which initial states become slots ------------------------------------------------------------


def _lstm(h_in, c_in, outputs, extra_nodes=(), inits=(), inputs=()):
    nodes = [*extra_nodes, helper.make_node("LSTM", ["x", "W", "R", "", "", h_in, c_in], outputs, hidden_size=H, name="lstm")]
    graph_outputs = [vi(o, [1, 1, H]) for o in outputs[1:] if o]
    return model(nodes, [vi("x", [T, 1, I]), *inputs], graph_outputs, [*weights("LSTM"), *inits])


def _full(name, value):
    return numpy_helper.from_array(np.full((1, 1, H), value, np.float32), name)


def test_entry_constant_leaves_graph_inputs_to_their_own_pairing():
    # h0 -> hn pair by name; seed (an input not named like state, with an overridable default) starts the cell state
    # and result returns it, so the dataflow pairs them: both are graph inputs, so neither becomes a constant slot
    m = _lstm("h0", "seed", ["Y", "hn", "result"], inits=[_full("seed", 0.25)], inputs=[vi("h0", [1, 1, H]), vi("seed", [1, 1, H])])
    prog = rnnir.load(m, entry="constant")
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h0", "hn", PairSource.NAME), ("seed", "result", PairSource.DATAFLOW)]
    assert [s.name for s in prog.slots] == ["h0", "seed"]


def test_entry_constant_skips_a_state_whose_final_output_the_op_does_not_have():
    # both initial states are constants, but the LSTM lists only Y and Y_h: Y_c is absent, so only h gets a slot
    m = _lstm("h_init", "c_init", ["Y", "h_final"], inits=[_full("h_init", 0.5), _full("c_init", -0.5)])
    prog = rnnir.load(m, entry="constant")
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h_init", "h_final", PairSource.CONSTANT)]
    assert [s.name for s in prog.slots] == ["h_init"]
    assert prog.slots[0].init.value.tolist() == [[[0.5] * H]]


def test_entry_constant_does_not_pair_an_output_a_declaration_already_pairs():
    # a stateless export: the declared h0 -> hn contract stands, though the GRU really starts from the zeros h_zero
    def stateless(final):
        nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h_zero"], ["Y", final], hidden_size=H, name="gru")]
        return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi(final, [1, 1, H])], [*weights("GRU"), _full("h_zero", 0.0)])

    prog = rnnir.load(stateless("hn"), pairs={"h0": "hn"}, entry="constant")
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h0", "hn", PairSource.DECLARED)]
    assert [s.name for s in prog.slots] == ["h0"]
    # near-miss: an output nothing pairs, and no declaration: the constant start becomes the slot
    prog = rnnir.load(stateless("result"), entry="constant")
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h_zero", "result", PairSource.CONSTANT)]


def test_entry_constant_reads_a_constant_nodes_value_only_from_a_constant():
    # ConstantOfShape's `value` is its one-element fill, not the initial state: the start is no constant slot
    fill = helper.make_node("ConstantOfShape", ["state_shape"], ["h_init"], value=numpy_helper.from_array(np.array([0.5], np.float32)))
    shape = numpy_helper.from_array(np.array([1, 1, H], np.int64), "state_shape")
    nodes = [fill, helper.make_node("GRU", ["x", "W", "R", "", "", "h_init"], ["Y", "h_final"], hidden_size=H, name="gru")]
    m = model(nodes, [vi("x", [T, 1, I])], [vi("h_final", [1, 1, H])], [*weights("GRU"), shape])
    assert rnnir.load(m, entry="constant").state_pairs == ()


def test_an_absent_initial_state_is_not_the_initializer_with_the_empty_name():
    # an empty input name means "absent" (onnx.checker refuses an initializer without a name, rnnir lints it anyway):
    # the GRU starts from zeros, not from the stray tensor, so there is no constant start to make a slot of
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", ""], ["Y", "h_final"], hidden_size=H, name="gru")]
    m = model(nodes, [vi("x", [T, 1, I])], [vi("h_final", [1, 1, H])], [*weights("GRU"), _full("", 0.5)])
    assert rnnir.load(m, entry="constant").state_pairs == ()
