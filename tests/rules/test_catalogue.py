"""Every rule of the catalogue, each with a program that triggers it and a near miss that must not.

Programs are built in the test: with ``rnnir.Builder`` (IR level) or as small
ONNX graphs with ``onnx.helper`` and lowered with ``rnnir.load``.  The
expectations come from what each graph does to its state, read off the graph
by hand (the comment above each model says it), never from the passes.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir import Provenance, QuantParams, TensorType

H, I, T = 4, 3, 5
F32 = TensorProto.FLOAT


# -- helpers -------------------------------------------------------------------------------------


def codes(diags, severity=None):
    return sorted({d.code for d in diags if severity is None or d.severity.value == severity})


def only(diags, code):
    found = [d for d in diags if d.code == code]
    assert found, f"expected {code}, got {[(d.code, d.message) for d in diags]}"
    return found


def errors(diags):
    return [d for d in diags if d.severity is passes.Severity.ERROR]


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def weights(kind, directions=1, hidden=H, prefix=""):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((directions, gates * hidden, I)).astype(np.float32)
    r = rng.standard_normal((directions, gates * hidden, hidden)).astype(np.float32)
    return [numpy_helper.from_array(w, prefix + "W"), numpy_helper.from_array(r, prefix + "R")]


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def packed_lstm(concat=("Yh", "Yc"), tail=None, out_dtype=F32, extra_inits=()):
    """x[T,1,I], state[2,1,H]: state[0] -> initial_h, state[1] -> initial_c; stateN = Concat(concat)."""
    nodes = [
        helper.make_node("Gather", ["state", "i0"], ["g0"], axis=0),
        helper.make_node("Gather", ["state", "i1"], ["g1"], axis=0),
        helper.make_node("Unsqueeze", ["g0", "ax0"], ["h0"]),
        helper.make_node("Unsqueeze", ["g1", "ax0"], ["c0"]),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Squeeze", ["Y", "ax1"], ["y"]),
    ]
    nodes += tail if tail is not None else [helper.make_node("Concat", list(concat), ["stateN"], axis=0)]
    inits = [const("i0", 0), const("i1", 1), const("ax0", [0]), const("ax1", [1]), *weights("LSTM"), *extra_inits]
    return model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("y", [T, 1, H]), vi("stateN", [2, 1, H], out_dtype)], inits)


def gru(tail, *, direction="forward", seq_lens=False, h_shape=(1, 1, H), hn_shape=None, hn_dtype=F32, extra_inits=(), gru_init="h0"):
    """x[T,1,I], h0 -> GRU 'gru' -> Y, Yh; ``tail`` nodes make hn from them."""
    d = 2 if direction == "bidirectional" else 1
    ins = ["x", "W", "R", "", "lens" if seq_lens else "", gru_init]
    nodes = [helper.make_node("GRU", ins, ["Y", "Yh"], hidden_size=H, direction=direction, name="gru"), *tail]
    inits = [*weights("GRU", d), *extra_inits]
    inputs = [vi("x", [T, 1, I]), vi("h0", list(h_shape))]
    if seq_lens:
        inputs.append(vi("lens", [1], TensorProto.INT32))
    outs = [vi("Y", [T, d, 1, H]), vi("hn", list(hn_shape or h_shape), hn_dtype)]
    return model(nodes, inputs, outs, inits)


def rnn_builder(name="cell", load="copy", hidden=H, slot_shape=(1, 1, H)):
    b = rnnir.Builder(name)
    h = b.slot("h", "float32", slot_shape)
    x = b.input("x", "float32", (T, 1, I))
    h0 = b.load(h, load)
    rng = np.random.default_rng(1)
    w = b.const("W", rng.standard_normal((1, hidden, I)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, hidden, hidden)).astype(np.float32))
    y, hn = b.recurrent("RNN", x, w, r, initial_h=h0, hidden_size=hidden, name="rnn")
    return b, h, h0, y, hn


# -- SD001 slot-never-written --------------------------------------------------------------------


def test_state_input_without_output_is_SD001():
    # h0 feeds the GRU's initial_h, but only Y is returned: nothing carries the state to the next call
    m = gru([], hn_shape=None)
    m.graph.output.pop()  # drop hn
    prog = rnnir.load(m)
    d = only(passes.run(prog), "SD001")[0]
    assert d.slot == "h0" and "no graph output returns" in d.message and "'gru'" in d.message


def test_state_returned_from_final_state_is_not_SD001():
    prog = rnnir.load(gru([helper.make_node("Identity", ["Yh"], ["hn"])]))
    assert passes.run(prog) == []


def test_incoming_state_handed_straight_back_is_SD001():
    prog = rnnir.load(packed_lstm(tail=[helper.make_node("Identity", ["state"], ["stateN"])]))
    diags = passes.run(prog)
    assert codes(errors(diags)) == ["SD001"]
    assert "handed straight back" in only(diags, "SD001")[0].message


def test_ir_slot_loaded_but_never_stored_is_SD001():
    b, h, h0, y, hn = rnn_builder()
    b.store(y, b.output("y"))
    diags = passes.run(b.build())
    assert codes(errors(diags)) == ["SD001"]


def test_reset_branch_starting_from_zeros_is_not_SD001_nor_SD003():
    # If(cond): then the LSTM runs from the slot, else a second LSTM starts from zeros (silero's decoder/If_1)
    b = rnnir.Builder("reset")
    s = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    cond = b.input("cond", "bool", ())
    h0 = b.load(s)
    w, r = b.const("W", np.ones((1, H, I), np.float32)), b.const("R", np.ones((1, H, H), np.float32))
    _, live = b.recurrent("RNN", x, w, r, initial_h=h0, hidden_size=H, name="rnn")
    _, fresh = b.recurrent("RNN", x, w, r, initial_h=b.const("zeros", np.zeros((1, 1, H), np.float32)), hidden_size=H, name="rnn_reset")
    hn = b.if_(cond, [live], [fresh], name="If_1")
    b.store(hn, s)
    b.store(hn, b.output("hn"))
    assert passes.run(b.build()) == []


# -- SD002 wrong-slot ----------------------------------------------------------------------------


def test_hc_swap_in_packed_state_is_SD002():
    diags = passes.run(rnnir.load(packed_lstm(concat=("Yc", "Yh"))))
    found = only(diags, "SD002")
    assert codes(errors(diags)) == ["SD002"]
    msg = " ".join(d.message for d in found)
    assert "state[0] (initial_h of LSTM 'lstm')" in msg and "Y_c" in msg


def test_packed_state_in_order_is_clean():
    assert passes.run(rnnir.load(packed_lstm())) == []


def test_swapped_layers_are_SD002():
    # two stacked GRUs read h0[0:1] and h0[1:2]; hn = Concat(H1, H0) puts layer 1's state in layer 0's slice
    def two_layer(order):
        nodes = [
            helper.make_node("Slice", ["h0", "s0", "e1", "ax0"], ["h_l0"]),
            helper.make_node("Slice", ["h0", "s1", "e2", "ax0"], ["h_l1"]),
            helper.make_node("GRU", ["x", "W", "R", "", "", "h_l0"], ["Y0", "H0"], hidden_size=H, name="gru0"),
            helper.make_node("Squeeze", ["Y0", "ax1"], ["x1"]),
            helper.make_node("GRU", ["x1", "W1", "R1", "", "", "h_l1"], ["Y1", "H1"], hidden_size=H, name="gru1"),
            helper.make_node("Concat", list(order), ["hn"], axis=0),
        ]
        w1 = [numpy_helper.from_array(np.ones((1, 3 * H, H), np.float32), n) for n in ("W1", "R1")]
        inits = [const("s0", [0]), const("s1", [1]), const("e1", [1]), const("e2", [2]), const("ax0", [0]), const("ax1", [1])]
        return model(nodes, [vi("x", [T, 1, I]), vi("h0", [2, 1, H])], [vi("Y1", [T, 1, 1, H]), vi("hn", [2, 1, H])], [*inits, *weights("GRU"), *w1])

    assert passes.run(rnnir.load(two_layer(("H0", "H1")))) == []
    diags = passes.run(rnnir.load(two_layer(("H1", "H0"))))
    assert codes(errors(diags)) == ["SD002"]
    assert any("'gru1'" in d.message and "h0[0]" in d.message for d in diags)


def test_swapped_directions_are_SD002_and_SD006():
    # bidirectional GRU; hn = Concat(Yh[1], Yh[0]): each direction resumes from the other's state
    swap = [
        helper.make_node("Gather", ["Yh", "i1"], ["b"], axis=0),
        helper.make_node("Gather", ["Yh", "i0"], ["f"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["bu"]),
        helper.make_node("Unsqueeze", ["f", "ax0"], ["fu"]),
        helper.make_node("Concat", ["bu", "fu"], ["hn"], axis=0),
    ]
    inits = [const("i0", 0), const("i1", 1), const("ax0", [0])]
    diags = passes.run(rnnir.load(gru(swap, direction="bidirectional", h_shape=(2, 1, H), extra_inits=inits)))
    assert codes(errors(diags)) == ["SD002"]
    assert "SD006" in codes(diags)


def test_hn_cn_outputs_swapped_across_two_slots_is_SD002():
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Identity", ["Yc"], ["hn"]),
        helper.make_node("Identity", ["Yh"], ["cn"]),
    ]
    shape = [1, 1, H]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", shape), vi("c0", shape)], [vi("Y", [T, 1, 1, H]), vi("hn", shape), vi("cn", shape)], weights("LSTM"))
    diags = passes.run(rnnir.load(m))
    assert codes(errors(diags)) == ["SD002"]
    assert {d.slot for d in only(diags, "SD002")} == {"h0", "c0"}
    assert any("belongs to slot 'c0'" in d.message for d in diags)


# -- SD003 not-final-state -----------------------------------------------------------------------


def _gather_y(step):
    # Y[T, 1, B, H] -> Gather(step, axis 0) -> [1, B, H]
    return [helper.make_node("Gather", ["Y", "t"], ["hn"], axis=0)], [const("t", step)]


def test_first_step_of_forward_op_is_SD003():
    tail, inits = _gather_y(0)
    diags = passes.run(rnnir.load(gru(tail, extra_inits=inits)))
    assert codes(errors(diags)) == ["SD003"]
    assert "'first'" in only(diags, "SD003")[0].message


def test_last_step_of_forward_op_is_clean():
    tail, inits = _gather_y(-1)
    assert passes.run(rnnir.load(gru(tail, extra_inits=inits))) == []


def test_final_state_of_an_op_that_never_read_the_slot_is_SD003():
    # a second GRU starts from zeros (no If): its final state is written back, the first GRU's is dropped
    tail = [helper.make_node("GRU", ["x", "W", "R"], ["Y2", "Yh2"], hidden_size=H, name="gru_fresh"), helper.make_node("Identity", ["Yh2"], ["hn"])]
    diags = passes.run(rnnir.load(gru(tail)))
    assert codes(errors(diags)) == ["SD003"]
    assert "never read this slot" in only(diags, "SD003")[0].message


def test_constant_written_back_is_SD003():
    tail = [helper.make_node("Identity", ["zeros"], ["hn"])]
    diags = passes.run(rnnir.load(gru(tail, extra_inits=[const("zeros", np.zeros((1, 1, H)), np.float32)])))
    assert codes(errors(diags)) == ["SD003"]


def test_final_state_plus_a_zero_constant_is_the_final_state():
    # silero_vad_16k_op15: stateN = Add(Concat(hn, cn), zero) -- x + 0 is exactly x: verified, no finding
    tail = [helper.make_node("Add", ["Yh", "zero"], ["hn"], name="plus_zero")]
    diags = passes.run(rnnir.load(gru(tail, extra_inits=[const("zero", np.zeros(1), np.float32)])))
    assert diags == []


@pytest.mark.parametrize("op, value, first", [("Mul", 1.0, False), ("Mul", 1.0, True), ("Div", 1.0, False), ("Sub", 0.0, False)])
def test_final_state_through_a_neutral_constant_is_the_final_state(op, value, first):
    ins = ["one", "Yh"] if first else ["Yh", "one"]
    diags = passes.run(rnnir.load(gru([helper.make_node(op, ins, ["hn"], name="neutral")], extra_inits=[const("one", [value], np.float32)])))
    assert diags == []


@pytest.mark.parametrize("op, ins, value", [
    ("Add", ["Yh", "c"], 1e-3),  # not zero
    ("Mul", ["Yh", "c"], 0.5),  # const_ints would read 0.5 as 0: the float check must refuse it
    ("Sub", ["c", "Yh"], 0.0),  # 0 - x is -x
    ("Div", ["c", "Yh"], 1.0),  # 1 / x
])
def test_final_state_through_a_non_neutral_constant_stays_unverified(op, ins, value):
    diags = passes.run(rnnir.load(gru([helper.make_node(op, ins, ["hn"], name="not_neutral")], extra_inits=[const("c", [value], np.float32)])))
    assert [(d.code, d.severity.value) for d in diags] == [("SD009", "info")]
    assert "passes through" in diags[0].message


def test_a_zero_constant_that_broadcasts_the_state_bigger_is_no_identity():
    # Yh [1,1,H] + zeros[2,1,H] is two copies of Yh: not the state's own shape
    tail = [helper.make_node("Add", ["Yh", "zero"], ["hn"], name="widen")]
    diags = passes.run(rnnir.load(gru(tail, hn_shape=(2, 1, H), extra_inits=[const("zero", np.zeros((2, 1, H)), np.float32)])))
    assert diags and all(d.code != "SD009" or "passes through" in d.message for d in diags)
    assert passes.verify(rnnir.load(gru(tail, hn_shape=(2, 1, H), extra_inits=[const("zero", np.zeros((2, 1, H)), np.float32)]))).slices[0].verdict.value != "verified"


def _zero_term(mul_other, other_input):
    """hn = Yh + Cast(other * 0): silero op15's zero term, with ``other`` a graph input or a constant."""
    tail = [helper.make_node("Mul", [mul_other, "zero_i"], ["prod"], name="times_zero"),
            helper.make_node("Cast", ["prod"], ["zf"], to=TensorProto.FLOAT, name="to_float"),
            helper.make_node("Add", ["Yh", "zf"], ["hn"], name="plus_term")]
    m = gru(tail, extra_inits=[const("zero_i", 0, np.int64 if other_input is None or other_input[1] != F32 else np.float32)])
    if other_input is not None:
        m.graph.input.append(vi(*other_input))
    return m


def test_an_integer_input_times_zero_is_a_proven_zero_term():
    diags = passes.run(rnnir.load(_zero_term("sr", ("sr", [], TensorProto.INT64))))
    assert diags == []


def test_a_float_input_times_zero_is_not_proven_zero():
    # y * 0 is NaN for y = inf or NaN: a float input may be either, so the term stays unknown
    diags = passes.run(rnnir.load(_zero_term("y", ("y", [], F32))))
    assert [(d.code, d.severity.value) for d in diags] == [("SD009", "info")]


def test_value_derived_from_output_sequence_is_SD003_warning():
    tail = [helper.make_node("ReduceMean", ["Y"], ["m"], keepdims=1, axes=[0]), helper.make_node("Add", ["Yh", "m"], ["hn_"]),
            helper.make_node("Reshape", ["hn_", "shape"], ["hn"])]
    diags = passes.run(rnnir.load(gru(tail, extra_inits=[const("shape", [1, 1, H])])))
    assert [(d.code, d.severity.value) for d in diags] == [("SD003", "warning")]


# -- SD004 slot-written-twice --------------------------------------------------------------------


def test_two_stores_to_one_slot_is_SD004():
    b, h, h0, y, hn = rnn_builder()
    b.store(hn, h)
    b.store(y, h)
    b.store(hn, b.output("hn"))
    diags = passes.run(b.build())
    assert "SD004" in codes(diags)
    assert len(only(diags, "SD004")[0].locations) == 2


def test_stores_in_the_two_alternatives_of_one_if_are_not_SD004():
    b, h, h0, y, hn = rnn_builder()
    b.store(hn, h)
    b.store(hn, h)
    b.store(hn, b.output("hn"))
    prog = b.build()
    first, second = [st for st in prog.stores if st.to_slot]
    first.provenance = Provenance(branch=("If_1.then_branch",))
    second.provenance = Provenance(branch=("If_1.else_branch",))
    assert "SD004" not in codes(passes.run(prog))
    second.provenance = Provenance(branch=("If_2.else_branch",))  # another If: both may run
    assert "SD004" in codes(passes.run(prog))


# -- SD005 state-type-mismatch -------------------------------------------------------------------


def test_state_returned_as_float16_is_SD005():
    tail = [helper.make_node("Concat", ["Yh", "Yc"], ["s32"], axis=0), helper.make_node("Cast", ["s32"], ["stateN"], to=TensorProto.FLOAT16)]
    diags = passes.run(rnnir.load(packed_lstm(tail=tail, out_dtype=TensorProto.FLOAT16)))
    assert codes(errors(diags)) == ["SD005"]
    d = only(diags, "SD005")[0]
    assert "dtype" in d.message and "float16" in d.message and "Cast" in d.message


def test_cast_to_the_slot_dtype_is_not_SD005():
    tail = [helper.make_node("Concat", ["Yh", "Yc"], ["s32"], axis=0), helper.make_node("Cast", ["s32"], ["stateN"], to=TensorProto.FLOAT)]
    assert passes.run(rnnir.load(packed_lstm(tail=tail))) == []


def test_batch_mismatch_is_SD005_but_symbolic_dims_are_not():
    ident = [helper.make_node("Identity", ["Yh"], ["hn"])]
    diags = passes.run(rnnir.load(gru(ident, h_shape=(1, 2, H), hn_shape=(1, 3, H))))
    assert codes(errors(diags)) == ["SD005"] and "batch" in only(diags, "SD005")[0].message
    assert passes.run(rnnir.load(gru(ident, h_shape=(1, "B", H), hn_shape=(1, "N", H)))) == []


def test_hidden_size_mismatch_is_SD005():
    b, h, h0, y, hn = rnn_builder(slot_shape=(1, 1, 2 * H))
    b.store(hn, h)
    b.store(hn, b.output("hn"))
    d = only(passes.run(b.build()), "SD005")[0]
    assert "hidden size" in d.message and f"hidden_size is {H}" in d.message


def test_bidirectional_state_into_one_direction_slot_is_SD005():
    ident = [helper.make_node("Identity", ["Yh"], ["hn"])]
    diags = passes.run(rnnir.load(gru(ident, direction="bidirectional", h_shape=(1, 1, H), hn_shape=(1, 1, H))))
    assert any(d.code == "SD005" and "directions" in d.message for d in diags)


def test_quantization_and_layout_mismatches_are_SD005():
    b, h, h0, y, hn = rnn_builder()
    b.store(hn, h)
    b.store(hn, b.output("hn"))
    prog = b.build()
    assert passes.run(prog) == []
    h.type = TensorType("float32", (1, 1, H), layout="batch_first", quant=QuantParams((0.1,), (0,)))
    (d,) = only(passes.run(prog), "SD005")
    assert d.data["aspects"] == ["layout", "quantization"]


# -- SD006 reverse-state-persisted ---------------------------------------------------------------


@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_reverse_state_persisted_is_SD006_warning_only(direction):
    d = 2 if direction == "bidirectional" else 1
    diags = passes.run(rnnir.load(gru([helper.make_node("Identity", ["Yh"], ["hn"])], direction=direction, h_shape=(d, 1, H))))
    assert [(x.code, x.severity.value) for x in diags] == [("SD006", "warning")]


def test_forward_state_persisted_is_not_SD006():
    assert passes.run(rnnir.load(gru([helper.make_node("Identity", ["Yh"], ["hn"])]))) == []


# -- SD007 state-ignored -------------------------------------------------------------------------


def test_op_started_from_zeros_instead_of_state_is_SD007():
    m = gru([helper.make_node("Identity", ["Yh"], ["hn"])], gru_init="")
    diags = passes.run(rnnir.load(m))
    assert codes(errors(diags)) == ["SD007"]
    assert "zeros (no initial_h input)" in only(diags, "SD007")[0].message


def test_op_started_from_a_constant_is_SD007():
    m = gru([helper.make_node("Identity", ["Yh"], ["hn"])], gru_init="h_const", extra_inits=[const("h_const", np.zeros((1, 1, H)), np.float32)])
    diags = passes.run(rnnir.load(m))
    assert codes(errors(diags)) == ["SD007"]
    assert "'h_const'" in only(diags, "SD007")[0].message


def test_plain_op_recurrence_is_not_SD007_but_unverified_at_its_first_op():
    # h_t = 0.5 * h_{t-1} + x, written with Mul/Add: no recurrent node carries it, so nothing is verified
    nodes = [helper.make_node("Mul", ["h0", "half"], ["m"], name="m"), helper.make_node("Add", ["m", "x"], ["hn"], name="a")]
    m = model(nodes, [vi("x", [1, 1, H]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], [const("half", np.float32(0.5), np.float32)])
    prog = rnnir.load(m)
    (d,) = passes.run(prog)
    assert prog.state_pairs and (d.code, d.severity, d.slot) == ("SD009", passes.Severity.INFO, "h0")
    assert "Mul 'm'" in d.message and d.locations[0].onnx_node == "m"


# -- SD008 seq-lens-last-step --------------------------------------------------------------------


def test_last_step_of_y_with_sequence_lens_is_SD008():
    tail, inits = _gather_y(-1)
    diags = passes.run(rnnir.load(gru(tail, seq_lens=True, extra_inits=inits)))
    assert codes(errors(diags)) == ["SD008"]


def test_final_state_with_sequence_lens_is_not_SD008():
    diags = passes.run(rnnir.load(gru([helper.make_node("Identity", ["Yh"], ["hn"])], seq_lens=True)))
    assert diags == []


# -- AL001 chained-output-store ------------------------------------------------------------------


@pytest.mark.parametrize("result", ["token", "alias", "value"])
def test_output_stored_from_slot_store_result_is_AL001(result):
    b, h, h0, y, hn = rnn_builder()
    r = b.store(hn, h, result)
    b.store(r, b.output("hn"), "value")
    diags = passes.run(b.build())
    assert codes(errors(diags)) == ["AL001"]
    assert result.upper() not in ("",) and "chain" in only(diags, "AL001")[0].message


def test_fanout_stores_are_not_AL001():
    b, h, h0, y, hn = rnn_builder()
    b.store(hn, h)
    b.store(hn, b.output("hn"), "value")
    assert passes.run(b.build()) == []


def test_lowering_policies_chain_reuse_and_fanout():
    m = packed_lstm()
    assert codes(passes.run(rnnir.load(m, exit="chain"))) == ["AL001"]
    assert codes(passes.run(rnnir.load(m, exit="reuse-single-store"))) == ["AL002"]
    assert passes.run(rnnir.load(m)) == []


# -- AL002 output-aliases-slot -------------------------------------------------------------------


def test_view_load_stored_as_output_alias_is_AL002():
    b, h, h0, y, hn = rnn_builder(load="view")
    b.store(hn, h)
    b.store(h0, b.output("h_prev"), "alias")
    b.build()
    assert "AL002" in codes(passes.run(b.program))


def test_copy_load_stored_as_output_alias_is_not_AL002():
    b, h, h0, y, hn = rnn_builder(load="copy")
    b.store(hn, h)
    b.store(h0, b.output("h_prev"), "alias")
    assert "AL002" not in codes(passes.run(b.build()))


# -- AL003 shared-slot-storage -------------------------------------------------------------------


def _two_slots(address_c="", alias=False):
    b = rnnir.Builder("two")
    hs = b.slot("h", "float32", (1, 1, H), address="arena:0")
    cs = b.slot("c", "float32", (1, 1, H), address=address_c, alias_of=hs if alias else None)
    x = b.input("x", "float32", (T, 1, I))
    w, r = b.const("W", np.ones((1, 4 * H, I), np.float32)), b.const("R", np.ones((1, 4 * H, H), np.float32))
    _, yh, yc = b.recurrent("LSTM", x, w, r, initial_h=b.load(hs), initial_c=b.load(cs), hidden_size=H, name="lstm")
    b.store(yh, hs)
    b.store(yc, cs)
    return b.build()


def test_two_slots_at_one_address_are_AL003():
    d = only(passes.run(_two_slots(address_c="arena:0")), "AL003")
    assert len(d) == 1 and d[0].data["slots"] == ["h", "c"]


def test_slot_declared_alias_of_another_is_AL003():
    assert "AL003" in codes(passes.run(_two_slots(alias=True)))


def test_slots_with_distinct_storage_are_not_AL003():
    assert passes.run(_two_slots(address_c="arena:16")) == []


# -- OR001 return-before-store -------------------------------------------------------------------


def test_return_not_waiting_for_slot_store_is_OR001():
    b, h, h0, y, hn = rnn_builder()
    b.store(hn, h)
    out = b.store(hn, b.output("hn"), "value")
    b.ret(out, layer="device")
    d = only(passes.run(b.build()), "OR001")[0]
    assert "a device event at the end of the call" in d.message and d.slot == "h"


def test_return_waiting_through_happens_before_is_not_OR001():
    b, h, h0, y, hn = rnn_builder()
    s = b.store(hn, h)
    out = b.store(hn, b.output("hn"), "value")
    b.order(s, out)  # the slot store happens before the output store, which the Return waits for
    b.ret(out)
    assert passes.run(b.build()) == []


def test_return_ordered_by_nobody_is_OR001():
    b, h, h0, y, hn = rnn_builder()
    s = b.store(hn, h)
    b.ret(s, layer="none")
    assert "OR001" in codes(passes.run(b.build()))


def _record_stores(m, stores, waits=None, layer="runtime", view=()):
    """``m`` with its store structure recorded as an export records it: the IR text in ``rnnir.ir`` metadata.

    ``stores`` are ``(id, dest, ONNX value read)``; ``waits`` the store ids the Return waits for (all by default)."""
    from rnnir.ir import OrderingLayer, StoreResult
    from rnnir.ir.structure import SlotFacts, StoreFact, StoreStructure
    from rnnir.ir.text import print_program
    from rnnir.lower import Policy, lower, read_model

    facts = [StoreFact(i, d, v, False, StoreResult.TOKEN if d.startswith("slot:") else StoreResult.VALUE) for i, d, v in stores]
    structure = StoreStructure(
        slots={d[5:]: SlotFacts(view_load=d[5:] in view) for _, d, _ in stores if d.startswith("slot:")},
        outputs=[o.name for o in m.graph.output],
        stores=facts,
        waits=[f.id for f in facts] if waits is None else list(waits),
        layer=OrderingLayer(layer),
    )
    text = print_program(lower(read_model(m), None, Policy(), structure=structure))
    helper.set_model_props(m, {"rnnir.ir": text})
    return m


def test_recorded_return_without_slot_store_is_OR001():
    stores = [("s", "slot:state", "stateN"), ("o", "out:stateN", "stateN"), ("y", "out:y", "y")]
    m = _record_stores(packed_lstm(), stores, waits=["o", "y"], layer="caller")
    assert codes(passes.run(rnnir.load(m))) == ["OR001"]
    m = _record_stores(packed_lstm(), stores, waits=["o", "y", "s"], layer="caller")
    assert passes.run(rnnir.load(m)) == []


def test_the_json_store_structure_of_rnnir_0_1_is_refused_with_what_to_do():
    m = packed_lstm()
    helper.set_model_props(m, {"rnnir.program": "{}"})
    with pytest.raises(rnnir.ModelError, match="no longer read; export the program again with rnnir.export"):
        rnnir.load(m)


def test_recorded_ir_text_naming_a_value_the_graph_lacks_is_a_clear_error():
    m = _record_stores(packed_lstm(), [("s", "slot:state", "stateN"), ("o", "out:stateN", "stateN")])
    text = {p.key: p.value for p in m.metadata_props}["rnnir.ir"]
    helper.set_model_props(m, {"rnnir.ir": text.replace("(%stateN)", "(%gone)")})
    with pytest.raises(rnnir.ModelError, match="rnnir.ir"):
        rnnir.load(m)


# -- OR002 write-before-last-read ----------------------------------------------------------------


def _echo(load, ordered=False):
    b, h, h0, y, hn = rnn_builder(load=load)
    echo = b.store(h0, b.output("h_prev"), "value")  # reads the live-in value
    s = b.store(hn, h)
    if ordered:
        b.order(echo, s)
    b.store(hn, b.output("hn"), "value")
    return b.build()


def test_view_load_read_after_slot_store_may_run_is_OR002():
    d = only(passes.run(_echo("view")), "OR002")[0]
    assert d.slot == "h" and "write-after-read" in d.message


def test_copy_load_is_never_OR002():
    assert passes.run(_echo("copy")) == []


def test_view_load_with_reader_ordered_before_store_is_not_OR002():
    assert passes.run(_echo("view", ordered=True)) == []


def test_recorded_view_load_with_echo_output_is_OR002():
    def model():
        m = packed_lstm()
        m.graph.node.append(helper.make_node("Identity", ["state"], ["state_echo"]))
        m.graph.output.append(vi("state_echo", [2, 1, H]))
        return m

    stores = [("s", "slot:state", "stateN"), ("o", "out:stateN", "stateN"), ("e", "out:state_echo", "state_echo")]
    assert codes(passes.run(rnnir.load(_record_stores(model(), stores, view=("state",))))) == ["OR002"]
    assert passes.run(rnnir.load(_record_stores(model(), stores))) == []


# -- layout=1 (batch-first states) ---------------------------------------------------------------


def _layout1_gru(direction="forward", batch=2, h_dirs=None):
    d = 2 if direction == "bidirectional" else 1
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, layout=1, direction=direction, name="gru"),
        helper.make_node("Identity", ["Yh"], ["hn"]),
    ]
    state = [batch, h_dirs or d, H]  # layout=1: [batch, directions, hidden]
    return model(nodes, [vi("x", [batch, T, I]), vi("h0", state)], [vi("Y", [batch, T, d, H]), vi("hn", state)], weights("GRU", d))


@pytest.mark.parametrize("batch", [1, 2, "B"])
def test_layout1_state_axis0_is_batch_not_directions(batch):
    # a correct batch-first GRU: splitting its state by batch entries would invent a wrong-slot finding
    assert passes.run(rnnir.load(_layout1_gru(batch=batch))) == []


def test_layout1_bidirectional_state_is_SD006_only():
    assert codes(passes.run(rnnir.load(_layout1_gru("bidirectional")))) == ["SD006"]


# -- caches: sliding windows, append-only, feature caches (rnnir.analysis.statekinds) -------------------------


def window_model(*, starts=-3, ends=2**63 - 1, axis=1, slice_axis=1, cache_shape=(1, 3, 2), crossed=False, new_first=False, tail=None):
    """Two caches c0, c1 [1, 3, 2]: each c' = Slice(Concat(c, x * w, axis=1), starts=-3): the newest 3 frames."""
    nodes, inits = [], [const("w", np.float32(2.0), np.float32)]
    for k in (0, 1):
        parts = [f"new{k}", f"c{k}"] if new_first and k == 1 else [f"c{k}", f"new{k}"]
        nodes += [helper.make_node("Mul", ["x", "w"], [f"new{k}"], name=f"frames{k}"),
                  helper.make_node("Concat", parts, [f"cat{k}"], axis=axis, name=f"cat{k}")]
        src = "cat0" if crossed and k == 1 else f"cat{k}"
        nodes.append(helper.make_node("Slice", [src, f"s{k}", f"e{k}", f"a{k}"], [f"c{k}_new"], name=f"window{k}"))
        inits += [const(f"s{k}", [starts if k == 1 else -3]), const(f"e{k}", [ends if k == 1 else 2**63 - 1]),
                  const(f"a{k}", [slice_axis if k == 1 else 1])]
    nodes += [helper.make_node("ReduceSum", ["cat0"], ["y"], keepdims=0, name="use")] + list(tail or [])
    ins = [vi("x", [1, "T", 2]), vi("c0", list(cache_shape)), vi("c1", list(cache_shape))]
    outs = [vi("y", []), vi("c0_new", [1, None, 2]), vi("c1_new", [1, None, 2])]
    return model(nodes, ins, outs, inits)


def test_sliding_window_keeping_the_newest_frames_is_verified():
    prog = rnnir.load(window_model())
    assert [(p.input, p.output) for p in prog.state_pairs] == [("c0", "c0_new"), ("c1", "c1_new")]
    assert passes.run(prog) == []
    assert [s.verdict.value for s in passes.verify(prog).slices] == ["verified", "verified"]


def test_window_of_another_cache_is_SD002():
    diags = passes.run(rnnir.load(window_model(crossed=True)))
    assert [(d.code, d.slot) for d in errors(diags)] == [("SD002", "c1")]
    assert "the window of slot 'c0'" in errors(diags)[0].message


@pytest.mark.parametrize("kw, words", [
    ({"starts": -4}, "1 stale frame(s) too many"),
    ({"starts": -2}, "1 frame(s) too few"),
    ({"starts": -4, "ends": -1}, "newest 1 frame(s) of cache ++ new dropped"),
    ({"slice_axis": 2, "starts": -1}, "cut on axis 2, not on axis 1"),
    ({"new_first": True}, "the stalest, not the newest"),  # new ++ cache, then its last 3 frames
    ({"new_first": True, "starts": 0, "ends": 4}, "1 stale frame(s) too many"),
])
def test_window_keeping_the_wrong_frames_is_SD003(kw, words):
    diags = passes.run(rnnir.load(window_model(**kw)))
    assert [(d.code, d.slot) for d in errors(diags)] == [("SD003", "c1")]
    assert words in errors(diags)[0].message


@pytest.mark.parametrize("kw", [
    {"slice_axis": -2},
    {"ends": 2**62},
    {"new_first": True, "starts": 0, "ends": 3},  # time kept newest first: the first 3 frames of new ++ cache
])
def test_same_window_spelled_differently_is_verified(kw):
    assert passes.run(rnnir.load(window_model(**kw))) == []


def test_window_whose_end_depends_on_the_frame_count_is_unverified():
    # ends=5 keeps the newest 3 frames only when a call brings exactly 2: neither proven right nor wrong
    diags = passes.run(rnnir.load(window_model(starts=2, ends=5)))
    assert [(d.code, d.severity.value, d.slot) for d in diags] == [("SD009", "info", "c1")]


@pytest.mark.parametrize("past_len, total", [(3, 5), ("P", "P_plus_2")])
def test_append_only_cache_is_verified_and_its_growth_is_no_SD005(past_len, total):
    # present = Concat(past, k, axis=1), static or symbolic length: grows by design, never "batch 5 vs 3"
    nodes = [helper.make_node("Concat", ["past", "k"], ["present"], axis=1, name="append")]
    m = model(nodes, [vi("past", [1, past_len, 2]), vi("k", [1, 2, 2])], [vi("present", [1, total, 2])])
    prog = rnnir.load(m, pairs={"past": "present"})
    assert passes.run(prog) == []
    (sm,) = slice_maps(prog).declared[0].slices
    assert [w.axis for w in sm.windows.values()] == [1]


def test_a_cache_passed_through_unchanged_is_no_append():
    # near miss: present = past is handed straight back (SD001), not a growing cache
    m = model([helper.make_node("Identity", ["past"], ["present"])], [vi("past", [1, 3, 2])], [vi("present", [1, 3, 2])])
    assert "SD001" in codes(passes.run(rnnir.load(m, pairs={"past": "present"})))


def test_feature_cache_computed_from_itself_is_unverified_never_SD003_or_SD007():
    # f' = Relu(f) * 0.5 + x: no recurrence reads f, the write-back is computed -- nothing provable either way
    nodes = [helper.make_node("Relu", ["f"], ["r"]), helper.make_node("Mul", ["r", "half"], ["m"]), helper.make_node("Add", ["m", "x"], ["f_out"])]
    m = model(nodes, [vi("x", [1, 4]), vi("f", [1, 4])], [vi("f_out", [1, 4])], [const("half", np.float32(0.5), np.float32)])
    diags = passes.run(rnnir.load(m, pairs={"f": "f_out"}))
    assert [(d.code, d.severity.value) for d in diags] == [("SD009", "info")]


def test_state_written_from_nothing_it_reads_is_still_SD003():
    # near miss of the feature cache: the write-back depends on no state at all -- every call restarts
    m = model([helper.make_node("Relu", ["x"], ["f_out"])], [vi("x", [1, 4]), vi("f", [1, 4])], [vi("f_out", [1, 4])])
    assert "SD003" in codes(errors(passes.run(rnnir.load(m, pairs={"f": "f_out"}))))


# -- packed states on inner axes, element by element (rnnir.analysis.elements) ------------------------------


def packed_grus(write="scatter", order=(0, 1)):
    """state[1, 1, 2H]: two GRUs of hidden H side by side on the last axis, read by Slice, written back by
    ScatterElements (``write="scatter"``), Concat on the last axis, or Where on a constant condition."""
    nodes = [helper.make_node("Slice", ["state", "z", "h", "last"], ["h0a"]), helper.make_node("Slice", ["state", "h", "hh", "last"], ["h0b"]),
             helper.make_node("GRU", ["x", "W", "R", "", "", "h0a"], ["Ya", "Yha"], hidden_size=H, name="gru_a"),
             helper.make_node("GRU", ["x", "W", "R", "", "", "h0b"], ["Yb", "Yhb"], hidden_size=H, name="gru_b")]
    ys = ["Yha", "Yhb"]
    first, second = ys[order[0]], ys[order[1]]
    inits = [*weights("GRU"), const("z", [0]), const("h", [H]), const("hh", [2 * H]), const("last", [2])]
    if write == "concat":
        nodes.append(helper.make_node("Concat", [first, second], ["stateN"], axis=2))
    elif write == "scatter":
        idx = np.tile(np.arange(H), (1, 1, 1))
        inits += [const("ia", idx), const("ib", idx + H)]
        nodes += [helper.make_node("ScatterElements", ["state", "ia", first], ["s1"], axis=2),
                  helper.make_node("ScatterElements", ["s1", "ib", second], ["stateN"], axis=2)]
    elif write == "rows":  # GTCRN's way: each GRU's h written as a row of a [2, 1, H] state by ScatterND
        return _rows_model(first, second)
    else:  # where: the condition picks the GRUs' halves everywhere
        cond = np.ones((1, 1, 2 * H), dtype=bool)
        inits.append(numpy_helper.from_array(cond, "all"))
        nodes += [helper.make_node("Concat", [first, second], ["both"], axis=2), helper.make_node("Where", ["all", "both", "state"], ["stateN"])]
    return model(nodes, [vi("x", [T, 1, I]), vi("state", [1, 1, 2 * H])], [vi("stateN", [1, 1, 2 * H])], inits)


def _rows_model(first: str, second: str):
    """state[2, 1, H]: state[0] -> gru_a, state[1] -> gru_b (Gather), written back row by row by ScatterND."""
    nodes = [helper.make_node("Gather", ["state", "r0"], ["h0a"], axis=0), helper.make_node("Gather", ["state", "r1"], ["h0b"], axis=0),
             helper.make_node("Unsqueeze", ["h0a", "ax0"], ["ua"]), helper.make_node("Unsqueeze", ["h0b", "ax0"], ["ub"]),
             helper.make_node("GRU", ["x", "W", "R", "", "", "ua"], ["Ya", "Yha"], hidden_size=H, name="gru_a"),
             helper.make_node("GRU", ["x", "W", "R", "", "", "ub"], ["Yb", "Yhb"], hidden_size=H, name="gru_b"),
             helper.make_node("ScatterND", ["state", "i0", first], ["s1"]), helper.make_node("ScatterND", ["s1", "i1", second], ["stateN"])]
    inits = [*weights("GRU"), const("r0", 0), const("r1", 1), const("ax0", [0]), const("i0", [[0]]), const("i1", [[1]])]
    m = model(nodes, [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("stateN", [2, 1, H])], inits)
    m.graph.value_info.extend([vi("Yha", [1, 1, H]), vi("Yhb", [1, 1, H])])
    return m


def test_gru_states_written_back_row_by_row_are_verified_and_swapped_rows_are_SD002():
    prog = rnnir.load(packed_grus("rows"))
    assert passes.run(prog) == []
    assert {s.slice: s.verdict.value for s in passes.verify(prog).slices} == {"state[0]": "verified", "state[1]": "verified"}
    swapped = passes.run(rnnir.load(packed_grus("rows", order=(1, 0))))
    assert [(d.code, d.slot) for d in errors(swapped)] == [("SD002", "state")]


@pytest.mark.parametrize("write", ["scatter", "concat", "where"])
def test_grus_packed_on_the_hidden_axis_are_verified_per_gru(write):
    prog = rnnir.load(packed_grus(write))
    assert passes.run(prog) == []
    assert {s.slice: s.verdict.value for s in passes.verify(prog).slices} == {"state[0][:, 0:4]": "verified", "state[0][:, 4:8]": "verified"}


@pytest.mark.parametrize("write", ["scatter", "concat", "where"])
def test_grus_packed_on_the_hidden_axis_swapped_is_SD002(write):
    diags = passes.run(rnnir.load(packed_grus(write, order=(1, 0))))
    assert [(d.code, d.slot) for d in errors(diags)] == [("SD002", "state")]


def test_a_recurrence_reading_a_window_of_its_state_still_reads_the_slot():
    # initial_h = Slice(Concat(h0, zeros, axis=0), 1:): the slot reaches the GRU (derived), so returning Y_h is no
    # SD007 "state ignored" -- the window is an entry here, not a cache written back
    tail = [helper.make_node("Identity", ["Yh"], ["hn"])]
    m = gru(tail, gru_init="h0w")
    m.graph.node.insert(0, helper.make_node("Concat", ["h0", "pad"], ["cat"], axis=0))
    m.graph.node.insert(1, helper.make_node("Slice", ["cat", "one", "big", "zero_ax"], ["h0w"]))
    m.graph.initializer.extend([const("pad", np.zeros((1, 1, H)), np.float32), const("one", [1]), const("big", [2**62]), const("zero_ax", [0])])
    diags = passes.run(rnnir.load(m))
    assert "SD007" not in codes(diags) and "SD010" not in codes(diags)


# a static state (traced element by element too) and a symbolic batch (the slice tracer alone)
@pytest.mark.parametrize("cond, verified, batch", [(True, True, 1), (True, True, "B"), (False, False, 1)])
def test_where_on_a_constant_condition_picks_its_operand(cond, verified, batch):
    # hn = Where(cond, Yh, zeros): all true is Yh itself (verified); all false writes zeros back (SD003)
    tail = [helper.make_node("Where", ["cond", "Yh", "zeros"], ["hn"], name="pick")]
    inits = [numpy_helper.from_array(np.full((1, 1, H), cond), "cond"), const("zeros", np.zeros((1, 1, H)), np.float32)]
    m = gru(tail, h_shape=(1, batch, H), extra_inits=inits)
    m.graph.value_info.append(vi("Yh", [1, batch, H]))
    diags = passes.run(rnnir.load(m))
    assert (diags == []) is verified
    if not verified:
        assert "SD003" in codes(errors(diags))


def test_where_on_a_mixed_constant_condition_is_not_an_identity():
    tail = [helper.make_node("Where", ["cond", "Yh", "zeros"], ["hn"], name="pick")]
    inits = [numpy_helper.from_array(np.array([[[True, False, True, True]]]), "cond"), const("zeros", np.zeros((1, 1, H)), np.float32)]
    m = gru(tail, extra_inits=inits)
    m.graph.value_info.append(vi("Yh", [1, 1, H]))
    assert passes.verify(rnnir.load(m)).slices[0].verdict.value != "verified"
