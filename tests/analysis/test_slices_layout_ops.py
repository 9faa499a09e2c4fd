"""Slice tracing through layout ops no other test exercised (mutation survivors of rnnir/slices.py): Transpose that
keeps or moves the packing axis, Reshape that keeps or regroups it, Slice with a negative step. The packed LSTM state
is state[2, 1, H] = (h, c); each expectation follows from what the op does to axis 0, checked with numpy where it is
about indices."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes

H, I, T = 4, 3, 5
F32 = TensorProto.FLOAT


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def weights():
    rng = np.random.default_rng(3)
    return [
        numpy_helper.from_array(rng.standard_normal((1, 4 * H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, 4 * H, H)).astype(np.float32), "R"),
    ]


def packed(entry, exit_, inits=()):
    """state -> entry nodes -> 'packed' -> Split -> (h0, c0) -> LSTM -> exit nodes from Yh, Yc -> stateN."""
    nodes = [
        *entry,
        helper.make_node("Split", ["packed", "sizes"], ["h0", "c0"], axis=0),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        *exit_,
    ]
    m = helper.make_model(
        helper.make_graph(nodes, "m", [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("stateN", [2, 1, H])], [*weights(), const("sizes", [1, 1]), *inits]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    return m


CONCAT = [helper.make_node("Concat", ["Yh", "Yc"], ["stateN"], axis=0)]


def mapping(m):
    prog = rnnir.load(m)
    return {s.label: ([(e.port, e.note) for e in s.entry], [e.port for e in s.exit]) for s in prog.state_pairs[0].slices}, passes.run(prog)


TRACED = {"state[0]": ([("initial_h", "")], ["Y_h"]), "state[1]": ([("initial_c", "")], ["Y_c"])}


def test_a_transpose_that_keeps_axis_0_keeps_the_slices():
    got, diags = mapping(packed([helper.make_node("Transpose", ["state"], ["packed"], perm=[0, 1, 2])], CONCAT))
    assert got == TRACED and diags == []


def test_a_transpose_that_moves_axis_0_loses_the_slices():
    # [2,1,H] -> perm [1,0,2] -> [1,2,H]: Split along axis 0 of that is no longer h/c
    got, _ = mapping(packed([helper.make_node("Transpose", ["state"], ["packed"], perm=[1, 0, 2])], CONCAT))
    assert got != TRACED
    assert all(note == "derived" for entry, _ in got.values() for _, note in entry)


@pytest.mark.parametrize(("shape", "traced"), [([2, 1, H], True), ([2, H], True), ([1, 2, H], False), ([4, 1, 2], False)])
def test_a_reshape_keeps_the_slices_only_when_axis_0_keeps_its_size(shape, traced):
    entry = [helper.make_node("Reshape", ["state", "shape"], ["packed"])]
    got, _ = mapping(packed(entry, CONCAT, [const("shape", shape)]))
    assert (got == TRACED) is traced


def test_a_slice_with_a_negative_step_reverses_the_slices():
    assert np.arange(2)[slice(1, -3, -1)].tolist() == [1, 0]  # ONNX Slice clamps like Python slicing
    rev = const("s1", [1]), const("e1", [-3]), const("a0", [0]), const("m1", [-1])
    entry = [helper.make_node("Slice", ["state", "s1", "e1", "a0", "m1"], ["packed"])]  # packed = (state[1], state[0])
    right = [helper.make_node("Concat", ["Yh", "Yc"], ["both"], axis=0), helper.make_node("Slice", ["both", "s1", "e1", "a0", "m1"], ["stateN"])]
    got, diags = mapping(packed(entry, right, rev))
    assert got == {"state[0]": ([("initial_c", "")], ["Y_c"]), "state[1]": ([("initial_h", "")], ["Y_h"])}
    assert diags == []
    _, diags = mapping(packed(entry, CONCAT, rev))  # written back unreversed: h and c swapped
    assert [d.code for d in diags] == ["SD002"]


@pytest.mark.parametrize(("start", "end", "label"), [(0, 1, "state[0]"), (1, 2, "state[1]"), (-1, 2**62, "state[1]"), (-2, -1, "state[0]")])
def test_a_slice_of_the_packed_state_feeds_the_slice_it_keeps(start, end, label):
    # state[start:end] (one slice, by numpy's reading of the bounds) is the LSTM's initial_h; c starts from zeros
    assert np.arange(2)[start:end].tolist() == [int(label[-2])]
    nodes = [
        helper.make_node("Slice", ["state", "s", "e", "a0"], ["h0"]),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm"),
        helper.make_node("Concat", ["Yh", "Yc"], ["stateN"], axis=0),
    ]
    inits = [*weights(), const("s", [start]), const("e", [end]), const("a0", [0])]
    m = helper.make_model(
        helper.make_graph(nodes, "m", [vi("x", [T, 1, I]), vi("state", [2, 1, H])], [vi("stateN", [2, 1, H])], inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    entries = {s.label: [e.port for e in s.entry] for s in rnnir.load(m).state_pairs[0].slices}
    assert [lab for lab, ports in entries.items() if "initial_h" in ports] == [label]
