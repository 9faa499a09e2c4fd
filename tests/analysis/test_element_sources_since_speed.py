"""Where the element tracer's ids come from (rnnir.analysis.elements, off numpy since the lint-speed change): an
index initializer too large for the IR to keep is read from the model (checked against onnx.reference), a recurrent
op's output that is no final state is unknown, and a cache whose first element is not its own slot's is no window."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rnnir
from rnnir.analysis import elements
from rnnir.analysis.intarray import IntArray
from tests.support.onnx_models import model, vi
from tests.support.recurrent_op_models import H, I, T, weights


def test_a_scatter_index_too_large_for_the_ir_is_read_from_the_model():
    rng = np.random.default_rng(5)
    rows = 2100  # 4200 index numbers: more than lowering keeps as a constant
    where = np.stack([rng.integers(-2, 2, rows), rng.integers(-3, 3, rows)], axis=1).astype(np.int64)
    pick = rng.integers(0, 6, rows).astype(np.int64)
    nodes = [
        helper.make_node("Identity", ["c"], ["c_new"]),
        helper.make_node("Reshape", ["c", "six_rows"], ["c6"]),
        helper.make_node("Gather", ["c6", "pick"], ["upd"], axis=0),  # [rows, 4]: row i is c6[pick[i]]
        helper.make_node("ScatterND", ["c", "where", "upd"], ["scattered"]),
    ]
    inits = [numpy_helper.from_array(where, "where"), numpy_helper.from_array(pick, "pick"),
             numpy_helper.from_array(np.array([6, 4], np.int64), "six_rows")]
    m = model(nodes, [vi("c", [2, 3, 4])], [vi("c_new", [2, 3, 4]), vi("scattered", [2, 3, 4])], inits)
    want = ReferenceEvaluator(m).run(["scattered"], {"c": np.arange(24, dtype=np.float32).reshape(2, 3, 4)})[0]
    prog = rnnir.load(m, pairs={"c": "c_new"})
    (store,) = prog.stores_to(prog.output("scattered"))
    assert not store.inputs[0].producer.inputs[1].has_const  # the index is the model's, not the IR's
    ids = elements._Ids(prog)
    got = ids.ids(store.inputs[0])
    base = ids.by_source[("slot", "c")].base
    assert got.shape == (2, 3, 4) and [i - base for i in got.flat] == [int(x) for x in want.ravel()]


def test_a_recurrent_output_that_is_no_final_state_is_unknown():
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "hn"], hidden_size=H, name="gru")]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("Y", [T, 1, 1, H]), vi("hn", [1, 1, H])], weights("GRU"))
    prog = rnnir.load(m, pairs={"h0": "hn"})
    ids = elements._Ids(prog)
    (y,) = prog.stores_to(prog.output("Y"))
    (hn,) = prog.stores_to(prog.slot("h0"))
    ys = ids.ids(y.inputs[0])
    assert ys.shape == (T, 1, 1, H) and set(ys.flat) == {elements.UNKNOWN}
    final = ids.ids(hn.inputs[0])
    block, at = ids.owner(final.flat[0])
    assert block.node is not None and (block.port, at) == ("Y_h", 0)
    assert final.flat == list(range(block.base, block.base + H))


def test_a_cache_that_starts_with_no_frame_of_its_own_slot_is_no_window():
    ids = elements._Ids(None)
    ids.block(("slot", "c"), (1, 4), slot="c")
    like_a_slot = ids.block(("value", "v"), (1, 4))  # a value shaped as the slot: its frames are no old frames
    other_slot = ids.block(("slot", "d"), (1, 5), slot="d")  # another slot's frames
    x = ids.block(("value", "x"), (1, 1))
    value = SimpleNamespace(producer=None, name="c_new")
    for src in (like_a_slot, other_slot):
        out = IntArray((1, 4), [src.base + 1, src.base + 2, src.base + 3, x.base])  # shifted by one, a new frame
        assert elements._window_of(ids, SimpleNamespace(name="c"), (1, 4), out, value) is None
    # near miss: the same write of c's own frames is a window
    c = ids.by_source[("slot", "c")]
    out = IntArray((1, 4), [c.base + 1, c.base + 2, c.base + 3, x.base])
    w = elements._window_of(ids, SimpleNamespace(name="c"), (1, 4), out, value)
    assert w is not None and (w.slot, w.axis, w.segments, w.new_len) == ("c", 1, ((0, 4),), 1)


def test_a_cache_that_keeps_a_row_as_it_was_is_no_window():
    # row 0 is written as two windows, row 1 is kept as it was (its frames do not move): not every line is a window
    ids = elements._Ids(None)
    c = ids.block(("slot", "c"), (2, 4), slot="c")
    v0, v1 = ids.block(("value", "v0"), (2, 1)), ids.block(("value", "v1"), (2, 1))
    value = SimpleNamespace(producer=None, name="c_new")
    row0 = [c.base + 1, v0.base, c.base + 3, v1.base]
    for row1 in ([c.base + 4, c.base + 5, c.base + 6, c.base + 7], [c.base + 5, v0.base + 1, c.base + 6, c.base + 7],
                 [c.base + 5, v0.base + 1, c.base + 7, c.base + 7]):
        out = IntArray((2, 4), row0 + row1)
        assert elements._window_of(ids, SimpleNamespace(name="c"), (2, 4), out, value) is None, row1
    # near miss: row 1 written as row 0 is
    out = IntArray((2, 4), row0 + [c.base + 5, v0.base + 1, c.base + 7, v1.base + 1])
    w = elements._window_of(ids, SimpleNamespace(name="c"), (2, 4), out, value)
    assert w is not None and w.segments == ((0, 2), (2, 2))


def _gru_state(direction):
    dirs = 2 if direction == "bidirectional" else 1
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "hn"], hidden_size=H, direction=direction, name="gru")]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [dirs, 1, H])], [vi("hn", [dirs, 1, H])], weights("GRU", directions=dirs))


def test_a_slice_read_by_both_directions_of_an_op_names_no_one_direction():
    for direction, want in (("bidirectional", None), ("forward", 0)):
        prog = rnnir.load(_gru_state(direction), pairs={"h0": "hn"})
        slot = prog.slot("h0")
        (store,) = prog.stores_to(slot)
        (sm,) = elements.element_slices(prog, slot, store.inputs[0])
        assert [(e.port, e.direction) for e in sm.entry] == [("initial_h", want)], direction
        assert [(x.port, x.direction) for x in sm.exit] == [("Y_h", want)], direction
