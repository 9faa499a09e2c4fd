"""The slice tracer op by op (mutation survivors of rnnir/slices.py): each case builds a small IR with the Builder
and asks where an element of the result comes from. The expectations are what the ONNX op does to axis 0 of its
data (checked with numpy where they are about indices), not what the tracer happened to answer."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rnnir
from rnnir.slices import CONST, EXTERNAL, Abs, Origin, Ref, Tracer, derived, exact

H, I, T = 4, 3, 5
STATE = Origin.of_slot("state")


def packed_state(shape=(2, 1, H)):
    b = rnnir.Builder("m")
    slot = b.slot("state", "float32", shape)
    return b, slot, b.load(slot, name="state_v")


def rnn(b, direction="forward", layout=0, initial_h=None, kind="GRU"):
    dirs = 2 if direction == "bidirectional" else 1
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    x = b.input(f"x{len(b._names)}", "float32", (T, 1, I))
    w = b.const(f"W{len(b._names)}", np.zeros((dirs, gates * H, I), np.float32))
    r = b.const(f"R{len(b._names)}", np.zeros((dirs, gates * H, H), np.float32))
    return b.recurrent(kind, x, w, r, initial_h=initial_h, hidden_size=H, direction=direction, layout=layout, name="rec")


def i64(*values):
    return np.array(values if len(values) != 1 else values[0], np.int64)


def traced(b, value):
    return Tracer(b.build()).trace(value)


def slots(a: Abs):
    """The slot indices a traced value's elements come from (None: the whole value)."""
    if a.elems is not None:
        return [r.index for r in a.elems]
    assert a.whole is not None
    return a.whole.index


# -- sizes ----------------------------------------------------------------------------------------


def test_size0_reads_the_slot_dim_at_the_depth_of_the_next_index():
    b, slot, _ = packed_state((2, 3, H))
    tr = Tracer(b.build())
    assert tr.size0(Ref(STATE)) == 2
    assert tr.size0(Ref(STATE, (0,))) == 3
    assert tr.size0(Ref(STATE, (0, 1))) == H
    assert tr.size0(Ref(STATE, (0, 1, 2))) is None  # past the last axis
    assert tr.size0(Ref(Origin.of_slot("nope"))) is None


@pytest.mark.parametrize("shape", [("B", 1, H), (None, 1, H), (0, 1, H)])
def test_size0_of_a_symbolic_unknown_or_empty_dim_is_unknown(shape):
    b, _, _ = packed_state(shape)
    assert Tracer(b.build()).size0(Ref(STATE)) is None


def test_size0_of_a_slot_without_a_shape_is_unknown():
    b = rnnir.Builder("m")
    b.load(b.slot("state", "float32", None))
    assert Tracer(b.build()).size0(Ref(STATE)) is None


@pytest.mark.parametrize(
    ("direction", "layout", "yh0", "y0", "y1"),
    [
        ("forward", 0, 1, None, 1),
        ("bidirectional", 0, 2, None, 2),
        ("bidirectional", 1, None, None, None),  # layout=1: Y_h is [batch, directions, hidden], Y is [batch, seq, dir, hidden]
    ],
)
def test_size0_of_recurrent_ports(direction, layout, yh0, y0, y1):
    b = rnnir.Builder("m")
    _y, _yh = rnn(b, direction, layout)
    prog = b.build()
    (rec,) = prog.recurrents
    tr = Tracer(prog)
    assert tr.size0(Ref(Origin.of_port(rec.id, "Y_h"))) == yh0
    assert tr.size0(Ref(Origin.of_port(rec.id, "Y_h"), (0,))) is None  # batch: not known to the tracer
    assert tr.size0(Ref(Origin.of_port(rec.id, "Y"))) == y0  # the time axis
    assert tr.size0(Ref(Origin.of_port(rec.id, "Y"), (0,))) == y1
    assert tr.size0(Ref(Origin.of_port(rec.id, "Y"), (0, 0))) is None


def test_to_elems_splits_a_whole_value_by_its_known_size_or_the_size_asked_for():
    b, _, _ = packed_state(("B", 1, H))
    tr = Tracer(b.build())
    whole = exact(Ref(STATE))
    assert tr.to_elems(whole) is None
    assert tr.to_elems(whole, 3) == (Ref(STATE, (0,)), Ref(STATE, (1,)), Ref(STATE, (2,)))
    assert tr.to_elems(whole, 257) is None  # more than the tracer follows element by element
    assert len(tr.to_elems(whole, 256)) == 256
    assert tr.to_elems(derived(whole)) is None
    assert tr.to_elems(exact(elems=(Ref(STATE, (1,)),)), 5) == (Ref(STATE, (1,)),)


def test_to_elems_never_splits_a_layout_1_port_by_directions():
    b = rnnir.Builder("m")
    rnn(b, "bidirectional", layout=1)
    prog = b.build()
    (rec,) = prog.recurrents
    tr = Tracer(prog)
    assert tr.to_elems(exact(Ref(Origin.of_port(rec.id, "Y_h"))), 2) is None
    # the same port one index deeper is not the batch axis any more: the size asked for is used
    assert tr.to_elems(exact(Ref(Origin.of_port(rec.id, "Y_h"), (0,))), 2) == (Ref(Origin.of_port(rec.id, "Y_h"), (0, 0)), Ref(Origin.of_port(rec.id, "Y_h"), (0, 1)))


def test_canon_drops_trailing_indices_into_size_1_axes_only():
    b, _, _ = packed_state((2, 1, H))
    tr = Tracer(b.build())
    assert tr.canon(Ref(STATE, (1, 0))) == Ref(STATE, (1,))
    assert tr.canon(Ref(STATE, (1, -1))) == Ref(STATE, (1,))
    assert tr.canon(Ref(STATE, (1,))) == Ref(STATE, (1,))  # axis 0 has 2 entries
    assert tr.canon(Ref(STATE, (1, 0, 2))) == Ref(STATE, (1, 0, 2))  # axis 2 has H entries
    b1, _, _ = packed_state((1, 1, H))
    tr1 = Tracer(b1.build())
    assert tr1.canon(Ref(STATE, (0, 0))) == Ref(STATE)
    assert tr1.canon(Ref(STATE, (0, 1))) == Ref(STATE, (0, 1))  # index 1 of a size-1 axis is not that axis' one entry


# -- leaves ---------------------------------------------------------------------------------------


def test_leaves_a_slot_load_a_recurrent_port_a_constant_and_an_outside_value():
    b, _, s = packed_state()
    y, yh = rnn(b)
    c = b.const("k", np.ones(3, np.float32))
    x = b.input("feat", "float32", (3,))
    prog = b.build()
    (rec,) = prog.recurrents
    tr = Tracer(prog)
    assert tr.trace(s) == exact(Ref(STATE))
    assert tr.trace(yh) == exact(Ref(Origin.of_port(rec.id, "Y_h")))
    assert tr.trace(y) == exact(Ref(Origin.of_port(rec.id, "Y")))
    assert tr.trace(c) is CONST
    assert tr.trace(x) is EXTERNAL
    assert tr.trace(None) is CONST


# -- stores ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("result", "same"), [("alias", True), ("value", True), ("token", False)])
def test_a_store_result_is_the_stored_value_unless_it_is_a_token(result, same):
    b, slot, s = packed_state()
    res = b.store(s, slot, result)
    got = traced(b, res)
    assert got == (exact(Ref(STATE)) if same else Abs("derived", origins=frozenset({STATE})))


# -- ops that rearrange axis 0 ----------------------------------------------------------------------


@pytest.mark.parametrize(("index", "expected"), [(0, (0,)), (1, (1,)), (-1, (1,)), (-2, (0,))])
def test_gather_of_a_scalar_index_picks_that_entry_counting_negatives_from_the_end(index, expected):
    assert np.arange(2)[index] == expected[0]
    b, _, s = packed_state()
    g = b.compute("Gather", [s, b.const("i", i64(index))], attributes={"axis": 0})
    assert traced(b, g) == exact(Ref(STATE, expected))


def test_gather_of_a_negative_scalar_index_on_an_unknown_size_keeps_it_negative():
    b, _, s = packed_state(("B", 1, H))
    g = b.compute("Gather", [s, b.const("i", i64(-1))], attributes={"axis": 0})
    assert traced(b, g) == exact(Ref(STATE, (-1,)))


@pytest.mark.parametrize(("indices", "expected"), [([1, 0], [(1,), (0,)]), ([-1, 0, -2], [(1,), (0,), (0,)])])
def test_gather_of_an_index_list_picks_those_entries(indices, expected):
    assert [(int(k),) for k in np.arange(2)[indices]] == expected
    b, _, s = packed_state()
    g = b.compute("Gather", [s, b.const("i", np.array(indices, np.int64))], attributes={"axis": 0})
    assert slots(traced(b, g)) == expected


def test_gather_of_elements_already_split_picks_among_them():
    b, _, s = packed_state()
    rev = b.compute("Gather", [s, b.const("r", i64(1, 0))], attributes={"axis": 0})  # (state[1], state[0])
    one = b.compute("Gather", [rev, b.const("i", i64(0))], attributes={"axis": 0})
    two = b.compute("Gather", [rev, b.const("j", i64(1, 1))], attributes={"axis": 0})
    prog = b.build()
    tr = Tracer(prog)
    assert tr.trace(one) == exact(Ref(STATE, (1,)))
    assert slots(tr.trace(two)) == [(0,), (0,)]


def test_gather_along_another_axis_keeps_the_entries_partially():
    b, _, s = packed_state()
    g = b.compute("Gather", [s, b.const("i", i64(0))], attributes={"axis": 2})
    got = traced(b, g)
    assert (got.kind, got.whole, got.partial) == ("exact", Ref(STATE), True)


def test_gather_with_a_computed_index_or_a_2d_index_is_derived():
    b, _, s = packed_state()
    idx = b.input("k", "int64", ())
    g = b.compute("Gather", [s, idx], attributes={"axis": 0})
    g2 = b.compute("Gather", [s, b.const("m", np.zeros((1, 1), np.int64))], attributes={"axis": 0})
    tr = Tracer(b.build())
    assert tr.trace(g) == Abs("derived", origins=frozenset({STATE}))
    assert tr.trace(g2) == Abs("derived", origins=frozenset({STATE}))


def test_gather_along_axis_minus_3_of_a_rank_3_value_is_axis_0():
    b = rnnir.Builder("m")
    slot = b.slot("state", "float32", (2, 1, H))
    s = b.load(slot, name="state_v")
    g = b.compute("Gather", [s, b.const("i", i64(1))], attributes={"axis": -3})
    g2 = b.compute("Gather", [s, b.const("j", i64(1))], attributes={"axis": -1})
    tr = Tracer(b.build())
    assert tr.trace(g) == exact(Ref(STATE, (1,)))
    assert tr.trace(g2).partial is True and tr.trace(g2).whole == Ref(STATE)


def split(b, value, n, axis=0, sizes=None, attr=False):
    attrs = {"axis": axis}
    inputs = [value]
    if sizes is not None and attr:
        attrs["split"] = sizes
    elif sizes is not None:
        inputs.append(b.const(f"sizes{len(b._names)}", np.array(sizes, np.int64)))
    return b.compute("Split", inputs, outputs=n, attributes=attrs)


@pytest.mark.parametrize(("sizes", "attr"), [(None, False), ([1, 2], False), ([1, 2], True)])
def test_split_hands_each_output_its_run_of_entries(sizes, attr):
    b, _, s = packed_state((3, 1, H))
    if sizes is None:
        outs = split(b, s, 3)
        expected = [[(0,)], [(1,)], [(2,)]]
    else:
        outs = split(b, s, 2, sizes=sizes, attr=attr)
        expected = [[(0,)], [(1,), (2,)]]
    assert [list(map(tuple, part)) for part in np.split(np.arange(3)[:, None], np.cumsum([len(e) for e in expected])[:-1])] == expected
    tr = Tracer(b.build())
    assert [slots(tr.trace(o)) for o in outs] == expected


def test_split_into_unequal_parts_without_sizes_is_derived():
    b, _, s = packed_state((3, 1, H))
    outs = split(b, s, 2)
    tr = Tracer(b.build())
    assert all(tr.trace(o).kind == "derived" for o in outs)


def test_split_along_another_axis_keeps_the_whole_value_partially():
    b, _, s = packed_state()
    outs = split(b, s, 2, axis=2, sizes=[2, 2])
    tr = Tracer(b.build())
    assert [(tr.trace(o).whole, tr.trace(o).partial) for o in outs] == [(Ref(STATE), True)] * 2


def test_split_of_a_value_of_unknown_size_is_derived():
    b, _, s = packed_state(("B", 1, H))
    outs = split(b, s, 2)
    tr = Tracer(b.build())
    assert all(tr.trace(o).kind == "derived" for o in outs)


def test_concat_lists_the_entries_of_each_part_in_order_and_skips_absent_inputs():
    b, _, s = packed_state()
    h, c = split(b, s, 2)
    cat = b.compute("Concat", [c, None, h], attributes={"axis": 0})
    got = traced(b, cat)
    assert slots(got) == [(1,), (0,)]
    assert (got.changed, got.partial) == (False, False)


def test_concat_along_another_axis_is_derived():
    b, _, s = packed_state()
    h, c = split(b, s, 2)
    cat = b.compute("Concat", [h, c], attributes={"axis": 1})
    assert traced(b, cat).kind == "derived"


def test_concat_along_axis_minus_3_is_axis_0_even_when_only_the_output_knows_the_rank():
    b, _, s = packed_state()
    h, c = split(b, s, 2)
    cat = b.compute("Concat", [c, h], attributes={"axis": -3}, types=[rnnir.ir.TensorType("float32", (2, 1, H))])
    assert slots(traced(b, cat)) == [(1,), (0,)]


def test_concat_keeps_a_part_changed_or_partial():
    b, _, s = packed_state()
    h, c = split(b, s, 2)
    h2 = b.compute("Add", [h, b.const("one", np.ones((1, 1, H), np.float32))])
    c2 = b.compute("Gather", [c, b.const("i", i64(0))], attributes={"axis": 2})
    got = traced(b, b.compute("Concat", [h2, c], attributes={"axis": 0}))
    assert (got.changed, got.partial) == (True, False)
    b2, _, s2 = packed_state()
    h, c = split(b2, s2, 2)
    c2 = b2.compute("Gather", [c, b2.const("i", i64(0))], attributes={"axis": 2})
    got = traced(b2, b2.compute("Concat", [h, c2], attributes={"axis": 0}))
    assert (got.changed, got.partial) == (False, True)


def test_concat_with_a_part_of_unknown_size_is_derived():
    b, _, s = packed_state(("B", 1, H))
    h = b.compute("Gather", [s, b.const("i", i64(0, 1))], attributes={"axis": 0})
    cat = b.compute("Concat", [h, s], attributes={"axis": 0})
    assert traced(b, cat).kind == "derived"


@pytest.mark.parametrize(("start", "end", "step", "size"), [(0, 2, 1, 2), (1, 2, 1, 2), (-1, 2**62, 1, 2), (2, -4, -1, 3), (0, 3, 2, 3)])
def test_slice_keeps_the_entries_numpy_keeps(start, end, step, size):
    expected = [(int(i),) for i in np.arange(size)[start:end:step]]
    b, _, s = packed_state((size, 1, H))
    consts = [b.const(n, i64([v])) for n, v in (("s", start), ("e", end), ("a", 0), ("t", step))]
    sl = b.compute("Slice", [s, *consts])
    got = traced(b, sl)
    if expected == [(i,) for i in range(size)]:
        assert got == exact(Ref(STATE))  # the whole axis: the value as it is
    else:
        assert slots(got) == expected


def test_slice_with_attributes_opset_1_style():
    b, _, s = packed_state((3, 1, H))
    sl = b.compute("Slice", [s], attributes={"starts": [1], "ends": [3], "axes": [0]})
    sl2 = b.compute("Slice", [s], attributes={"starts": [0], "ends": [2]})  # axes default to 0, 1, ...
    tr = Tracer(b.build())
    assert slots(tr.trace(sl)) == [(1,), (2,)]
    assert slots(tr.trace(sl2)) == [(0,), (1,)]


def test_slice_along_another_axis_is_partial_and_of_split_entries_picks_among_them():
    b, _, s = packed_state((3, 1, H))
    rev = b.compute("Gather", [s, b.const("r", i64(2, 1, 0))], attributes={"axis": 0})
    # axis 2 from 1 to 3 (not axis 0: the entries stay), then axis 0 from 0 to 2
    sl = b.compute("Slice", [rev, b.const("s", i64([1, 0])), b.const("e", i64([3, 2])), b.const("a", i64([2, 0]))])
    got = traced(b, sl)
    assert slots(got) == [(2,), (1,)] and got.partial is True


@pytest.mark.parametrize(("start", "end", "expected"), [(-1, 2**62, [(-1,)]), (0, 2, [(0,), (1,)]), (0, 2**62, None), (-1, 5, "derived")])
def test_slice_of_an_unknown_size(start, end, expected):
    b, _, s = packed_state(("B", 1, H))
    sl = b.compute("Slice", [s, b.const("s", i64([start])), b.const("e", i64([end])), b.const("a", i64([0]))])
    got = traced(b, sl)
    if expected is None:
        assert got == exact(Ref(STATE))  # from 0 to the end: all of it
    elif expected == "derived":
        assert got.kind == "derived"
    else:
        assert slots(got) == expected


def test_slice_with_computed_bounds_is_derived():
    b, _, s = packed_state()
    sl = b.compute("Slice", [s, b.input("st", "int64", (1,)), b.const("e", i64([1]))])
    assert traced(b, sl).kind == "derived"


@pytest.mark.parametrize(("axes", "expected"), [([0], "whole"), ([1], "same"), (None, "whole"), ([-3], "whole")])
def test_squeeze_of_a_single_entry(axes, expected):
    # state[2,1,H] -> Gather([0]) -> [1,1,H]: one entry; squeezing axis 0 leaves state[0] itself
    b, _, s = packed_state()
    one = b.compute("Gather", [s, b.const("i", i64([0]))], attributes={"axis": 0}, types=[rnnir.ir.TensorType("float32", (1, 1, H))])
    inputs = [one] + ([b.const("ax", np.array(axes, np.int64))] if axes is not None else [])
    sq = b.compute("Squeeze", inputs)
    got = traced(b, sq)
    assert got == (exact(Ref(STATE, (0,))) if expected == "whole" else exact(elems=(Ref(STATE, (0,)),)))


def test_squeeze_of_two_entries_along_axis_0_is_derived_and_of_a_whole_value_is_that_value():
    b, _, s = packed_state()
    two = b.compute("Gather", [s, b.const("i", i64([0, 1]))], attributes={"axis": 0})
    sq = b.compute("Squeeze", [two, b.const("ax", i64([0]))])
    sq_whole = b.compute("Squeeze", [s, b.const("ax1", i64([1]))])
    tr = Tracer(b.build())
    assert tr.trace(sq).kind == "derived"
    assert tr.trace(sq_whole) == exact(Ref(STATE))


@pytest.mark.parametrize(("axes", "attr"), [([0], False), ([0], True), ([1], False)])
def test_unsqueeze_at_axis_0_makes_one_entry_of_the_whole_value(axes, attr):
    b, _, s = packed_state()
    h = b.compute("Gather", [s, b.const("i", i64(1))], attributes={"axis": 0})
    if attr:
        u = b.compute("Unsqueeze", [h], attributes={"axes": axes})
    else:
        u = b.compute("Unsqueeze", [h, b.const("ax", np.array(axes, np.int64))])
    got = traced(b, u)
    assert got == (exact(elems=(Ref(STATE, (1,)),)) if axes == [0] else exact(Ref(STATE, (1,))))


def test_unsqueeze_of_one_entry_keeps_it_and_of_two_entries_or_unknown_axes_is_derived():
    b, _, s = packed_state()
    one = b.compute("Gather", [s, b.const("i", i64([1]))], attributes={"axis": 0})
    two = b.compute("Gather", [s, b.const("j", i64([1, 0]))], attributes={"axis": 0})
    u1 = b.compute("Unsqueeze", [one, b.const("ax", i64([0]))])
    u2 = b.compute("Unsqueeze", [two, b.const("ax2", i64([0]))])
    u3 = b.compute("Unsqueeze", [s, b.input("axes", "int64", (1,))])
    tr = Tracer(b.build())
    assert tr.trace(u1) == exact(elems=(Ref(STATE, (1,)),))
    assert tr.trace(u2).kind == "derived"
    assert tr.trace(u3).kind == "derived"


@pytest.mark.parametrize(("perm", "kept"), [([0, 2, 1], True), ([1, 0, 2], False), (None, False)])
def test_transpose_keeps_the_value_only_when_axis_0_stays_first(perm, kept):
    b, _, s = packed_state()
    t = b.compute("Transpose", [s], attributes={"perm": perm} if perm is not None else {})
    assert (traced(b, t) == exact(Ref(STATE))) is kept


@pytest.mark.parametrize(("shape", "expected"), [([1, 1, H], "elems"), ([1, H], "elems"), ([H], "whole"), (None, "whole")])
def test_reshape_of_a_single_entry(shape, expected):
    b, _, s = packed_state()
    one = b.compute("Gather", [s, b.const("i", i64([1]))], attributes={"axis": 0})
    shape_v = b.const("shape", np.array(shape, np.int64)) if shape is not None else b.input("shape", "int64", (3,))
    r = b.compute("Reshape", [one, shape_v])
    got = traced(b, r)
    assert got == (exact(elems=(Ref(STATE, (1,)),)) if expected == "elems" else exact(Ref(STATE, (1,))))


def test_reshape_of_a_whole_value_with_one_entry_on_axis_0():
    b, _, s = packed_state((1, 1, H))
    r = b.compute("Reshape", [s, b.const("shape", i64([1, H]))])
    r2 = b.compute("Reshape", [s, b.const("shape2", i64([H]))])
    tr = Tracer(b.build())
    assert tr.trace(r) == exact(elems=(Ref(STATE),))
    assert tr.trace(r2) == exact(Ref(STATE))


def test_reshape_of_several_entries_with_unknown_shape_is_derived():
    b, _, s = packed_state()
    r = b.compute("Reshape", [s, b.input("dyn", "int64", (3,))])
    two = b.compute("Gather", [s, b.const("j", i64([1, 0]))], attributes={"axis": 0})
    r2 = b.compute("Reshape", [two, b.const("shape", i64([2, H]))])
    r3 = b.compute("Reshape", [two, b.const("shape3", i64([H, 2]))])
    tr = Tracer(b.build())
    assert tr.trace(r).kind == "derived"
    assert slots(tr.trace(r2)) == [(1,), (0,)]
    assert tr.trace(r3).kind == "derived"


@pytest.mark.parametrize(("op", "to", "cast"), [("Cast", 10, "10"), ("CastLike", None, "like"), ("Identity", None, None)])
def test_cast_records_its_target_and_keeps_the_entries(op, to, cast):
    b, _, s = packed_state()
    inputs = [s, b.const("like", np.zeros(1, np.float16))] if op == "CastLike" else [s]
    c = b.compute(op, inputs, attributes={"to": to} if to is not None else {})
    got = traced(b, c)
    assert (got.kind, got.whole, got.cast) == ("exact", Ref(STATE), cast)


def test_a_cast_after_a_partial_and_changed_value_keeps_both_marks():
    b, _, s = packed_state()
    p = b.compute("Gather", [s, b.const("i", i64(0))], attributes={"axis": 2})
    ch = b.compute("Mul", [p, b.const("two", np.float32(2))])
    c = b.compute("Cast", [ch], attributes={"to": 1})
    got = traced(b, c)
    assert (got.whole, got.partial, got.changed, got.cast) == (Ref(STATE), True, True, "1")


# -- elementwise ops, shape-only ops, If ------------------------------------------------------------


def test_an_elementwise_op_with_one_state_operand_keeps_positions_and_marks_values_changed():
    b, _, s = packed_state()
    add = b.compute("Add", [s, b.const("one", np.ones((1,), np.float32))])
    both = b.compute("Add", [s, s])
    tr = Tracer(b.build())
    got = tr.trace(add)
    assert (got.kind, got.whole, got.changed) == ("exact", Ref(STATE), True)
    assert tr.trace(both) == Abs("derived", origins=frozenset({STATE}))


def test_an_elementwise_op_with_two_state_operands_or_a_non_elementwise_op_is_derived():
    b = rnnir.Builder("m")
    a = b.load(b.slot("a", "float32", (1, H)))
    c = b.load(b.slot("c", "float32", (1, H)))
    add = b.compute("Add", [a, c])
    mm = b.compute("MatMul", [a, b.const("w", np.ones((H, H), np.float32))])
    tr = Tracer(b.build())
    assert tr.trace(add) == Abs("derived", origins=frozenset({Origin.of_slot("a"), Origin.of_slot("c")}))
    assert tr.trace(mm) == Abs("derived", origins=frozenset({Origin.of_slot("a")}))


def test_a_shape_only_op_depends_on_no_state():
    b, _, s = packed_state()
    shape = b.compute("Shape", [s])
    z = b.compute("ConstantOfShape", [shape])
    tr = Tracer(b.build())
    assert tr.trace(shape) is CONST and tr.trace(z) is CONST


def test_an_op_on_constants_only_is_constant():
    b = rnnir.Builder("m")
    b.load(b.slot("state", "float32", (1, H)))
    v = b.compute("Add", [b.const("a", np.ones(1, np.float32)), b.const("b", np.ones(1, np.float32))])
    assert traced(b, v) is CONST


def test_if_with_the_same_value_in_both_branches_is_that_value_and_otherwise_alternatives():
    b, _, s = packed_state()
    go = b.input("go", "bool", ())
    h, c = split(b, s, 2)
    same = b.if_(go, [h], [h])
    alt = b.if_(go, [h], [c])
    tr = Tracer(b.build())
    assert tr.trace(same) == exact(elems=(Ref(STATE, (0,)),))
    got = tr.trace(alt)
    assert got.kind == "alt"
    assert [(path, slots(a)) for path, a in got.alts] == [(("then_branch",), [(0,)]), (("else_branch",), [(1,)])]
    assert got.all_origins() == frozenset({STATE})


def test_layout_ops_on_if_alternatives_run_per_branch_and_pair_operands_of_the_same_branch():
    b, _, s = packed_state()
    go = b.input("go", "bool", ())
    h, c = split(b, s, 2)
    hc, ch = b.if_(go, [h, c], [c, h])
    cat = b.compute("Concat", [hc, ch], attributes={"axis": 0})
    add = b.compute("Add", [hc, b.const("one", np.ones(1, np.float32))])
    tr = Tracer(b.build())
    got = tr.trace(cat)
    assert [(path, slots(a)) for path, a in got.alts] == [(("then_branch",), [(0,), (1,)]), (("else_branch",), [(1,), (0,)])]
    added = tr.trace(add)
    assert [(path, a.changed) for path, a in added.alts] == [(("then_branch",), True), (("else_branch",), True)]


def test_operands_from_two_different_ifs_do_not_pair_up_branch_by_branch():
    b, _, s = packed_state()
    go = b.input("go", "bool", ())
    h, c = split(b, s, 2)
    first = b.if_(go, [h], [c])
    inner = b.if_(go, [c], [h])
    # a second If whose branch paths differ from the first's (nested under a region of its own)
    node = b.program.nodes[-1]  # regions are frozen: the node gets new ones (a write the program's version sees)
    node.regions = {name: dataclasses.replace(region, path=("other", name)) for name, region in node.regions.items()}
    cat = b.compute("Concat", [first, inner], attributes={"axis": 0})
    got = traced(b, cat)
    assert got == derived(exact(Ref(STATE)))
    assert got.kind == "derived"


def test_a_non_layout_op_on_alternatives_is_derived_from_every_branch():
    b, _, s = packed_state()
    go = b.input("go", "bool", ())
    h, c = split(b, s, 2)
    alt = b.if_(go, [h], [c])
    mm = b.compute("MatMul", [alt, b.const("w", np.ones((H, H), np.float32))])
    assert traced(b, mm) == Abs("derived", origins=frozenset({STATE}))


def test_concat_of_an_alternative_and_a_plain_value_runs_per_branch():
    b, _, s = packed_state((3, 1, H))
    go = b.input("go", "bool", ())
    a, bb, c = split(b, s, 3)
    alt = b.if_(go, [a], [bb])
    cat = b.compute("Concat", [alt, c], attributes={"axis": 0})
    got = traced(b, cat)
    assert [(path, slots(x)) for path, x in got.alts] == [(("then_branch",), [(0,), (2,)]), (("else_branch",), [(1,), (2,)])]


# -- negative axes of Squeeze and Unsqueeze ---------------------------------------------------------


def test_squeeze_of_a_negative_axis_counts_from_the_data_rank():
    # state[2,3,H] -> Gather([0]) -> [1,3,H]: axis -3 is axis 0, so Squeeze gives state[0] ([3,H]), whose entry 2 is state[0,2]
    assert np.squeeze(np.zeros((1, 3, H)), axis=-3).shape == (3, H)
    b, _, s = packed_state((2, 3, H))
    one = b.compute("Gather", [s, b.const("i", i64([0]))], attributes={"axis": 0}, types=[rnnir.ir.TensorType("float32", (1, 3, H))])
    sq = b.compute("Squeeze", [one, b.const("ax", i64([-3]))], types=[rnnir.ir.TensorType("float32", (3, H))])
    row = b.compute("Gather", [sq, b.const("k", i64(2))], attributes={"axis": 0})
    tr = Tracer(b.build())
    assert tr.trace(sq) == exact(Ref(STATE, (0,)))
    assert tr.trace(row) == exact(Ref(STATE, (0, 2)))


def test_squeeze_of_the_last_axis_keeps_the_entries_of_axis_0():
    # state[2,1,1] -> Squeeze(-1) -> [2,1]: axis 0 still holds state[0] and state[1]
    b, _, s = packed_state((2, 1, 1))
    two = b.compute("Gather", [s, b.const("i", i64([1, 0]))], attributes={"axis": 0}, types=[rnnir.ir.TensorType("float32", (2, 1, 1))])
    sq = b.compute("Squeeze", [two, b.const("ax", i64([-1]))])
    assert slots(traced(b, sq)) == [(1,), (0,)]


def test_unsqueeze_of_a_negative_axis_counts_from_the_output_rank():
    # state[2,1,H] -> Gather(0) -> [1,H]; Unsqueeze(-3) -> [1,1,H]: a new axis 0 holding the one entry state[0]
    assert np.expand_dims(np.zeros((1, H)), -3).shape == (1, 1, H)
    b, _, s = packed_state()
    h = b.compute("Gather", [s, b.const("i", i64(0))], attributes={"axis": 0}, types=[rnnir.ir.TensorType("float32", (1, H))])
    u = b.compute("Unsqueeze", [h, b.const("ax", i64([-3]))])
    u_last = b.compute("Unsqueeze", [h, b.const("ax2", i64([-1]))])
    tr = Tracer(b.build())
    assert tr.trace(u) == exact(elems=(Ref(STATE, (0,)),))
    assert tr.trace(u_last) == exact(Ref(STATE, (0,)))


# -- per-pair slice maps --------------------------------------------------------------------------


def slice_maps(prog):
    (pair,) = prog.state_pairs
    return {
        s.label: {
            "entry": [(e.port, e.direction, e.branch, e.note) for e in s.entry],
            "exit": [(e.port, e.direction, e.branch, e.step, e.note) for e in s.exit],
            "kind": dict(s.exit_kind),
            "refs": dict(s.exit_slot_refs),
        }
        for s in pair.slices
    }


def writes_back(b, slot, value):
    b.store(value, slot)
    b.store(value, b.output("stateN", "float32", slot.type.shape))
    return b.build()


def test_a_layout_1_op_reading_the_whole_slot_is_one_entry_without_a_direction_in_its_branch():
    b = rnnir.Builder("m")
    slot = b.slot("state", "float32", (1, 1, H))
    _y, yh = rnn(b, layout=1, initial_h=b.load(slot))
    yh.producer.provenance = rnnir.ir.Provenance(node="rec", branch=("gate.then_branch",))
    maps = slice_maps(writes_back(b, slot, yh))
    assert maps["state"]["entry"] == [("initial_h", None, ("gate.then_branch",), "")]


def test_entries_through_if_alternatives_name_the_branch_each_slice_enters_on():
    b, slot, s = packed_state()
    go = b.input("go", "bool", ())
    h, c = split(b, s, 2)
    init = b.if_(go, [h], [c])
    _y, yh = rnn(b, initial_h=init)
    ret = b.compute("Concat", [yh, yh], attributes={"axis": 0})
    maps = slice_maps(writes_back(b, slot, ret))
    assert maps["state[0]"]["entry"] == [("initial_h", 0, ("then_branch",), "")]
    assert maps["state[1]"]["entry"] == [("initial_h", 0, ("else_branch",), "")]


@pytest.mark.parametrize(("indices", "note"), [
    ([3, 2, 1, 0], "partial"),  # hidden units reversed on the way in, Y_h written back as it is: not where they were read
    ([0, 1, 2, 3], ""),  # every index in order of a static [1, 1, 4] state: the state itself, exact element by element
])
def test_an_entry_through_a_gather_along_another_axis(indices, note):
    b, slot, s = packed_state((1, 1, H))
    part = b.compute("Gather", [s, b.const("i", i64(indices))], attributes={"axis": 2})
    _y, yh = rnn(b, initial_h=part)
    maps = slice_maps(writes_back(b, slot, yh))
    assert maps["state"]["entry"] == [("initial_h", 0, (), note)]


def test_an_entry_computed_from_the_slot_is_derived():
    b, slot, s = packed_state((1, 1, H))
    mixed = b.compute("MatMul", [s, b.const("w", np.ones((H, H), np.float32))])
    _y, yh = rnn(b, initial_h=mixed)
    maps = slice_maps(writes_back(b, slot, yh))
    assert maps["state"]["entry"] == [("initial_h", None, (), "derived")]


@pytest.mark.parametrize(Origin.of_port("kind", "step"), [("Y_h", "final", None), ("Y", "sequence", "all")])
def test_the_written_back_port_is_a_final_state_or_a_sequence(port, kind, step):
    b, slot, s = packed_state(("B", 1, H))  # a slot of unknown length: the written-back value is taken whole
    y, yh = rnn(b, initial_h=s)
    maps = slice_maps(writes_back(b, slot, yh if port == "Y_h" else y))
    assert maps["state"]["exit"] == [(port, 0, (), step, "")]
    assert maps["state"]["kind"] == {"": kind}


@pytest.mark.parametrize(("step", "label"), [(-1, "last"), (0, "first"), (2, "t=2")])
def test_a_step_of_y_written_back_is_named_by_its_position(step, label):
    b, slot, s = packed_state((1, 1, H))
    y, _yh = rnn(b, initial_h=s)
    yt = b.compute("Gather", [y, b.const("t", i64(step))], attributes={"axis": 0})
    maps = slice_maps(writes_back(b, slot, yt))
    assert maps["state"]["exit"] == [("Y", 0, (), label, "")]


def test_y_of_a_bidirectional_op_at_one_step_names_each_direction():
    b, slot, s = packed_state((2, 1, H))
    y, _yh = rnn(b, "bidirectional", initial_h=s)
    last = b.compute("Gather", [y, b.const("t", i64(-1))], attributes={"axis": 0})  # [2, 1, H]: one entry per direction
    maps = slice_maps(writes_back(b, slot, last))
    assert [maps[k]["exit"] for k in ("state[0]", "state[1]")] == [[("Y", 0, (), "last", "")], [("Y", 1, (), "last", "")]]


def test_a_final_state_changed_on_the_way_back_is_derived_but_still_names_its_port():
    b, slot, s = packed_state((1, 1, H))
    _y, yh = rnn(b, initial_h=s)
    scaled = b.compute("Mul", [yh, b.const("two", np.float32(2))])
    maps = slice_maps(writes_back(b, slot, scaled))
    assert maps["state"]["exit"] == [("Y_h", 0, (), None, "derived")]
    assert maps["state"]["kind"] == {"": "derived"}


def test_a_slot_changed_on_the_way_back_is_derived_without_a_port():
    b, slot, s = packed_state((1, 1, H))
    rnn(b, initial_h=s)
    scaled = b.compute("Mul", [s, b.const("two", np.float32(2))])
    maps = slice_maps(writes_back(b, slot, scaled))
    assert maps["state"]["exit"] == [] and maps["state"]["kind"] == {"": "derived"}


def test_slices_handed_back_swapped_are_passthroughs_naming_the_slice_they_came_from():
    b, slot, s = packed_state()
    h, c = split(b, s, 2)
    _y, yh = rnn(b, initial_h=h)
    back = b.compute("Concat", [c, h], attributes={"axis": 0})
    maps = slice_maps(writes_back(b, slot, back))
    assert maps["state[0]"]["kind"] == {"": "passthrough"} and maps["state[0]"]["refs"] == {"": ("state", (1,))}
    assert maps["state[1]"]["kind"] == {"": "passthrough"} and maps["state[1]"]["refs"] == {"": ("state", (0,))}


def test_a_constant_written_back_marks_every_slice_constant():
    b, slot, s = packed_state()
    h, c = split(b, s, 2)
    rnn(b, initial_h=h)
    rnn(b, initial_h=c)
    maps = slice_maps(writes_back(b, slot, b.const("zeros", np.zeros((2, 1, H), np.float32))))
    assert {k: m["kind"] for k, m in maps.items()} == {"state[0]": {"": "constant"}, "state[1]": {"": "constant"}}


def test_a_value_derived_from_final_states_names_the_ports_for_every_slice():
    b, slot, s = packed_state()
    h, c = split(b, s, 2)
    _y, yh = rnn(b, initial_h=h)
    rnn(b, initial_h=c)
    mixed = b.compute("MatMul", [b.compute("Concat", [yh, yh], attributes={"axis": 0}), b.const("w", np.ones((H, H), np.float32))])
    maps = slice_maps(writes_back(b, slot, mixed))
    for label in ("state[0]", "state[1]"):
        assert maps[label]["kind"] == {"": "derived"}
        assert maps[label]["exit"] == [("Y_h", 0, (), None, "derived")]


def test_a_write_back_of_unknown_layout_is_one_exit_for_the_whole_slot():
    b, slot, s = packed_state()
    h, _c = split(b, s, 2)
    _y, yh = rnn(b, initial_h=h)
    three = b.compute("Concat", [yh, yh, yh], attributes={"axis": 0})  # three entries for a slot of two
    maps = slice_maps(writes_back(b, slot, three))
    assert maps["state"]["kind"] == {"": "unknown"} and maps["state"]["exit"] == []


def test_a_write_back_by_if_branch_records_a_kind_per_branch():
    b, slot, s = packed_state((1, 1, H))
    go = b.input("go", "bool", ())
    _y, yh = rnn(b, initial_h=s)
    back = b.if_(go, [yh], [s])
    maps = slice_maps(writes_back(b, slot, back))
    assert maps["state"]["kind"] == {"then_branch": "final", "else_branch": "passthrough"}
    assert maps["state"]["exit"] == [("Y_h", 0, ("then_branch",), None, "")]


@pytest.mark.parametrize(("op", "plain"), [("Add", True), ("Identity", False), ("MatMulPort", False)])
def test_a_plain_recurrence_records_the_path_from_the_load_to_the_stored_value(op, plain):
    b, slot, s = packed_state((1, 1, H))
    if op == "MatMulPort":
        _y, yh = rnn(b, initial_h=s)
        v = b.compute("Add", [s, yh], name="mix")
    else:
        v = b.compute(op, [s, b.const("one", np.float32(1))] if op == "Add" else [s], name="step")
    prog = writes_back(b, slot, v)
    path = prog.state_pairs[0].plain_recurrence
    if plain:
        assert path == [prog.loads_of(slot)[0].describe(), v.producer.describe()]
    else:
        assert path is None


def test_the_entries_of_an_initial_state_are_numbered_along_its_first_axis():
    # a one-direction op handed both entries of state[2,1,H]: entry d of initial_h is state[d]
    b, slot, s = packed_state()
    _y, yh = rnn(b, initial_h=s)
    maps = slice_maps(writes_back(b, slot, b.compute("Concat", [yh, yh], attributes={"axis": 0})))
    assert [maps[k]["entry"] for k in ("state[0]", "state[1]")] == [[("initial_h", 0, (), "")], [("initial_h", 1, (), "")]]


def test_a_negative_axis_is_counted_from_the_data_rank_not_the_indices_rank():
    # data of unknown rank: axis -1 cannot be placed; the indices' rank (1) says nothing about the data's
    b = rnnir.Builder("m")
    slot = b.slot("state", "float32", None)
    s = b.load(slot, name="state_v")
    g = b.compute("Gather", [s, b.const("i", i64([1]))], attributes={"axis": -1})
    got = traced(b, g)
    assert (got.whole, got.partial) == (Ref(STATE), True)


def test_split_without_an_axis_splits_axis_0():
    b, _, s = packed_state()
    h, c = b.compute("Split", [s, b.const("sizes", i64(1, 1))], outputs=2)
    tr = Tracer(b.build())
    assert (slots(tr.trace(h)), slots(tr.trace(c))) == ([(0,)], [(1,)])


def test_the_value_written_back_is_read_from_the_paired_outputs_store_not_a_slot_of_that_name():
    # slot a lives in output "b" (no store of its own); a slot also called "b" has its own store
    from rnnir.slices import slot_store_value

    b = rnnir.Builder("m")
    sa = b.slot("a", "float32", (1, 1, H))
    sb = b.slot("b", "float32", (1, 1, H))
    _y, yh = rnn(b)
    la = b.load(sa, name="la")
    b.load(sb, name="lb")
    b.store(yh, sb)
    b.store(la, b.output("b", "float32", (1, 1, H)))
    prog = b.build()
    assert [s.to_slot for s in prog.stores] == [True, False]  # the slot's store comes first: it must be passed over
    assert slot_store_value(prog, sa, "b") is la
    assert slot_store_value(prog, sb, None) is yh
    assert slot_store_value(prog, sa, None) is None
