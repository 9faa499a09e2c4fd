"""The element tracer's ops (rnnir.analysis.elements) on packed states: each way of writing two GRUs' states back
into one slot gives the slices read off the graph by hand (which GRU reads which elements, whose final state lands
there), and swapping the writes swaps the exits."""

from __future__ import annotations

import rnnir
from rnnir.analysis.elements import element_slices
from tests.rules.test_catalogue import packed_grus


def _slices(m):
    prog = rnnir.load(m)
    slot = prog.slot("state")
    (store,) = prog.stores_to(slot)
    maps = element_slices(prog, slot, store.inputs[0])
    assert maps is not None
    return [(sm.label, [(e.onnx_node, e.port) for e in sm.entry], [(x.onnx_node, x.port) for x in sm.exit]) for sm in maps]


def test_each_write_back_of_two_packed_grus_gives_one_slice_per_gru():
    halves = ("state[0][:, 0:4]", "state[0][:, 4:8]")
    rows = ("state[0]", "state[1]")
    for write, labels in (("scatter", halves), ("concat", halves), ("where", halves), ("rows", rows)):
        got = _slices(packed_grus(write))
        assert [label for label, _, _ in got] == list(labels), write
        assert [entry for _, entry, _ in got] == [[("gru_a", "initial_h")], [("gru_b", "initial_h")]], write
        assert [x for _, _, x in got] == [[("gru_a", "Y_h")], [("gru_b", "Y_h")]], write
        swapped = [x for _, _, x in _slices(packed_grus(write, order=(1, 0)))]
        assert swapped == [[("gru_b", "Y_h")], [("gru_a", "Y_h")]], write
