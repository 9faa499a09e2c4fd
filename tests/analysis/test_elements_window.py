"""Caches traced element by element (rnnir.analysis.elements): sliding windows on the time axis of a small static
cache, as GTCRN's conv_cache packs them, each window's layout checked by hand."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import rnnir
from rnnir.analysis.elements import element_slices
from rnnir.analysis.statekinds import END, Cut
from tests.support.onnx_models import const, model, vi

ROWS, COLS = 2, 3  # the cache's other axes: [ROWS, COLS, time]


def window_cache(segs=((1, 1), (1, 1)), frames=None, rows=None, old_from=None):
    """cache c [2, 3, T]: segment i keeps ``k`` old frames moved ``s`` toward the past (``c[..., p+s : p+s+k]``),
    then the newest ``s`` frames of a new value ``x_i * w_i`` [2, 3, frames] (all of them by default).

    ``rows``: the new frames of row 0 and row 1 come from two values (Concat on axis 0); ``old_from``: per segment,
    where its old frames start instead of ``p + s``."""
    t_len = sum(k + s for k, s in segs)
    nodes, inits, parts, p = [], [const("ax", [2]), const("big", [2**62]), const("ax0", [0])], [], 0
    for i, (k, s) in enumerate(segs):
        f = s if frames is None else frames
        start = p + s if old_from is None else old_from[i]
        inits += [const(f"a{i}", [start]), const(f"b{i}", [start + k]), const(f"n{i}", [f - s])]
        nodes += [helper.make_node("Slice", ["c", f"a{i}", f"b{i}", "ax"], [f"old{i}"])]
        if rows:
            nodes += [helper.make_node("Concat", [f"r0_{i}", f"r1_{i}"], [f"v{i}"], axis=0)]
        else:
            nodes += [helper.make_node("Mul", [f"x{i}", f"x{i}"], [f"v{i}"])]
        nodes += [helper.make_node("Slice", [f"v{i}", f"n{i}", "big", "ax"], [f"new{i}"])]
        parts += [f"old{i}", f"new{i}"]
        p += k + s
    nodes += [helper.make_node("Concat", parts, ["c_new"], axis=2), helper.make_node("ReduceSum", ["x0"], ["y"], keepdims=0)]
    ins = [vi("c", [ROWS, COLS, t_len])]
    for i, (_k, s) in enumerate(segs):
        f = s if frames is None else frames
        ins += [vi(f"r0_{i}", [1, COLS, f]), vi(f"r1_{i}", [1, COLS, f])] if rows else [vi(f"x{i}", [ROWS, COLS, f])]
    if rows:
        ins.append(vi("x0", [1]))
    m = model(nodes, ins, [vi("y", []), vi("c_new", [ROWS, COLS, t_len])], inits)
    # the new frames are no state: computed off the state path, they need a declared shape to get ids of their own
    m.graph.value_info.extend(vi(f"new{i}", [ROWS, COLS, s]) for i, (k, s) in enumerate(segs))
    return m


def window_of(m):
    prog = rnnir.load(m, pairs={"c": "c_new"})
    slot = prog.slot("c")
    (store,) = prog.stores_to(slot) if hasattr(prog, "stores_to") else [s for s in prog.stores if s.slot is slot]
    maps = element_slices(prog, slot, store.inputs[0])
    if maps is None:
        return None
    (sm,) = maps
    return sm.windows[""]


def test_two_windows_side_by_side_on_the_time_axis():
    w = window_of(window_cache(((1, 1), (1, 1))))
    assert (w.slot, w.axis, w.axes, w.segments, w.new_len) == ("c", 2, (0, 1, 2), ((0, 2), (2, 2)), 1)
    assert w.cut == Cut(2, 0, END, 1)  # several windows: the whole axis
    assert w.via == "Concat(c_new)"


def test_one_window_is_cut_to_its_length():
    w = window_of(window_cache(((2, 1),)))
    assert (w.segments, w.new_len, w.cut) == (((0, 3),), 1, Cut(2, -3, END, 1))


def test_windows_that_shift_by_different_counts_have_no_one_new_length():
    w = window_of(window_cache(((2, 1), (1, 2))))
    assert (w.segments, w.new_len) == (((0, 3), (3, 3)), None)


def test_the_newest_frames_of_a_longer_value():
    w = window_of(window_cache(((2, 1), (1, 2)), frames=3))  # Slice(v, -s:) of a 3-frame value
    assert (w.segments, w.new_len) == (((0, 3), (3, 3)), None)


def test_each_row_may_take_its_frames_from_a_value_of_its_own():
    # row 0's new frames come from r0, row 1's from r1: the second row repeats the layout with another value
    w = window_of(window_cache(((1, 1), (2, 1)), rows=True))
    assert (w.segments, w.new_len) == (((0, 2), (2, 3)), 1)


@pytest.mark.parametrize(
    "segs, old_from, frames",
    [
        (((1, 1), (1, 1)), [0, 3], None),  # the first window's old frame stays where it was: no shift
        (((1, 1), (1, 1)), [1, 2], None),  # the second window's old frame stays: shifted by 0
        (((2, 1),), [0], None),  # old frames kept in place, the newest frame dropped on top of them
        (((1, 2),), [1], None),  # old frame moved by 1 where the window brings 2 new frames
        (((1, 1), (1, 1)), None, 0),  # no frames in the new value: nothing to take the newest of
    ],
)
def test_what_is_no_window(segs, old_from, frames):
    if frames == 0:
        m = window_cache(segs)
        m.graph.value_info[0].type.tensor_type.shape.dim[2].dim_value = 2  # new0 says 2 frames, the cache takes 1
        assert window_of(m) is None
        return
    assert window_of(window_cache(segs, old_from=old_from)) is None


def test_new_frames_first_are_no_window():
    m = window_cache(((1, 1),))
    cat = m.graph.node[-2]
    cat.input[:] = list(reversed(cat.input))  # new ++ old: the window starts with a new frame
    assert window_of(m) is None


def test_stale_frames_in_the_new_part_are_no_window():
    m = window_cache(((1, 1),))
    cat = m.graph.node[-2]
    cat.input[:] = ["old0", "old0"]  # the "new" frame is the old one again
    assert window_of(m) is None


def test_an_old_frame_moved_along_another_axis_is_no_window():
    m = window_cache(((1, 1),))
    # old frames taken from the other row: c[::-1 on rows], then a window on time
    m.graph.node.insert(0, helper.make_node("Slice", ["c", "neg1", "lowest", "ax0", "neg1"], ["c_rev"]))
    m.graph.node[1].input[0] = "c_rev"
    m.graph.initializer.extend([const("neg1", [-1]), const("lowest", [-(2**62)])])
    assert window_of(m) is None


def test_frames_from_a_value_whose_rows_do_not_line_up_are_no_window():
    # the new value has one row where the cache has two: the second line finds no frame of it
    m = window_cache(((1, 1),))
    m.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 1
    m.graph.value_info[0].type.tensor_type.shape.dim[0].dim_value = 1
    m.graph.node.insert(2, helper.make_node("Expand", ["new0", "shape"], ["new0_wide"]))
    m.graph.node[-2].input[1] = "new0_wide"
    m.graph.initializer.append(const("shape", np.array([ROWS, COLS, 1])))
    assert window_of(m) is None


# -- _window_of on id arrays made by hand: each way a written-back cache is no window ------------------------------

from types import SimpleNamespace  # noqa: E402

from rnnir.analysis import elements  # noqa: E402
from rnnir.analysis.intarray import IntArray  # noqa: E402

SHAPE = (2, 4)  # two lines of four frames on axis 1


def _ids_with(new_shapes=((2, 1), (2, 1))):
    """A slot block c [2, 4] and new values' blocks (by default two of [2, 1], one per window)."""
    ids = elements._Ids(None)
    old = ids.block(("slot", "c"), SHAPE, slot="c")
    news = [ids.block(("value", str(k)), s) for k, s in enumerate(new_shapes)]
    return ids, old, news


def _written(old, news, rows=None):
    """c' row r = [c[r, 1], v0[r, 0], c[r, 3], v1[r, 0]]: two windows (0, 2) and (2, 2), each shifted by 1;
    ``rows`` replaces whole rows (lists of four ids)."""
    out = []
    for r in range(SHAPE[0]):
        out += [old.base + r * 4 + 1, news[0].base + r, old.base + r * 4 + 3, news[1].base + r]
    for r, row in (rows or {}).items():
        out[r * 4 : r * 4 + 4] = row
    return IntArray(SHAPE, out)


def _window(ids, out, shape=SHAPE):
    value = SimpleNamespace(producer=None, name="c_new")
    return elements._window_of(ids, SimpleNamespace(name="c"), shape, out, value)


def test_windows_made_by_hand_are_read_back():
    ids, old, news = _ids_with()
    w = _window(ids, _written(old, news))
    assert (w.axis, w.segments, w.new_len, w.cut) == (1, ((0, 2), (2, 2)), 1, Cut(1, 0, END, 1))
    assert (w.slot, w.via) == ("c", "c_new")
    # the second row from values of its own: another layout parse of the same windows
    ids, old, news = _ids_with(((2, 1), (2, 1), (1,), (1,)))
    row1 = [old.base + 5, news[2].base, old.base + 7, news[3].base]
    assert _window(ids, _written(old, news, {1: row1})).segments == ((0, 2), (2, 2))
    # one window of 3 old frames and 1 new: cut to the newest 4
    ids, old, news = _ids_with(((2, 1),))
    rows = {r: [old.base + r * 4 + 1, old.base + r * 4 + 2, old.base + r * 4 + 3, news[0].base + r] for r in (0, 1)}
    w = _window(ids, _written(old, news + news, rows))
    assert (w.segments, w.cut) == (((0, 4),), Cut(1, -4, END, 1))


def test_what_made_by_hand_is_no_window():
    ids, old, news = _ids_with()
    good = _written(old, news)
    o, a, b = old.base, news[0].base, news[1].base
    cases = {
        "another shape": (good, (4, 2)),
        "the windows' ids in another shape": (IntArray((4, 2), good.flat), SHAPE),
        "a line starting with a new frame": (_written(old, news, {0: [a, o + 1, o + 3, b]}), SHAPE),
        "an old frame kept in place": (_written(old, news, {0: [o, a, o + 3, b]}), SHAPE),
        "an old frame moved to the future": (_written(old, news, {1: [o + 4, b + 1, o + 7, b + 1]}), SHAPE),
        "an old frame from the other row": (_written(old, news, {1: [o + 1, a + 1, o + 3, b + 1]}), SHAPE),
        "an old frame moved past the line": (_written(old, news, {0: [o + 1, a, o + 4, b]}), SHAPE),
        "old frames where new ones belong": (_written(old, news, {0: [o + 1, o + 2, o + 3, b]}), SHAPE),
        "a new frame of the other row": (_written(old, news, {0: [o + 1, a + 1, o + 3, b]}), SHAPE),
        "the second row's new frame from the first row": (_written(old, news, {1: [o + 5, a, o + 7, b + 1]}), SHAPE),
        "the second row's old frame not moved": (_written(old, news, {1: [o + 4, a + 1, o + 7, b + 1]}), SHAPE),
        "two windows that differ per row": (_written(old, news, {1: [o + 6, o + 7, a + 1, b + 1]}), SHAPE),
        "a window cut short by the line's end": (_written(old, news, {0: [o + 2, o + 3, o + 3, a]}), SHAPE),
        "a frame of no block": (_written(old, news, {0: [o + 1, b + 5, o + 3, b]}), SHAPE),
        "a negative id": (_written(old, news, {0: [o + 1, -1, o + 3, b]}), SHAPE),
        "first element no old frame": (_written(old, news, {0: [b, a, o + 3, b]}), SHAPE),
    }
    for what, (out, shape) in cases.items():
        assert _window(ids, out, shape) is None, what
    assert _window(elements._Ids(None), good) is None  # no blocks at all
    assert _window(ids, good) is not None  # near miss of every case


def test_a_recurrent_result_or_another_slot_is_no_new_frame():
    ids, old, news = _ids_with()
    node_block = ids.block(("rec", "Y_h"), (2, 1), node=SimpleNamespace(), port="Y_h")
    other_slot = ids.block(("slot", "d"), (2, 1), slot="d")
    o, b = old.base, news[1].base
    assert _window(ids, _written(old, news, {0: [o + 1, node_block.base, o + 3, b]})) is None
    assert _window(ids, _written(old, news, {0: [o + 1, other_slot.base, o + 3, b]})) is None
    other = ids.block(("slot", "e"), SHAPE, slot="e")  # the windows of another slot of this shape: its own name
    w = _window(ids, _written(other, news))
    assert w is not None and w.slot == "e"
    ids2, old2, news2 = _ids_with()
    small = ids2.block(("slot", "f"), (2, 2), slot="f")
    assert _window(ids2, IntArray(SHAPE, [small.base + 1, news2[0].base, small.base + 3, news2[1].base] * 2)) is None


def test_new_frames_of_a_value_with_more_frames_or_fewer_axes():
    # v [2, 3]: the newest frame is v[r, 2]; v [1]: no row axis, the same frame for both rows; v [3, 1]: three rows
    ids, old, news = _ids_with(((2, 3), (1,), (3, 1)))
    o, a, b = old.base, news[0].base, news[1].base
    rows = {r: [o + r * 4 + 1, a + r * 3 + 2, o + r * 4 + 3, b] for r in (0, 1)}
    assert _window(ids, _written(old, news, rows)).segments == ((0, 2), (2, 2))
    wrong = {r: [o + r * 4 + 1, a + r * 3 + 1, o + r * 4 + 3, b] for r in (0, 1)}  # not the newest frame
    assert _window(ids, _written(old, news, wrong)) is None
    c = news[2].base  # rows 0 and 1 of a 3-row value: they line up, the extra row is never read
    assert _window(ids, _written(old, news, {r: [o + r * 4 + 1, c + r, o + r * 4 + 3, b] for r in (0, 1)})) is not None
