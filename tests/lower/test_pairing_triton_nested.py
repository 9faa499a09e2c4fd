"""Triton ``config.pbtxt`` state entries with nested blocks (``initial_state: { ... }``): an entry's own
``input_name``/``output_name`` are read, never those of a block nested in it, wherever the block stands in the
entry; a stray ``}`` outside any entry is passed over. One table, row for row: the config text and the pairs
triton_pairs must read from it (composed by hand)."""

from __future__ import annotations

from rnnir.lower.pairing import _top_level_entries, triton_pairs


def _pairs(tmp_path, k, states):
    d = tmp_path / f"m{k}" / "1"
    d.mkdir(parents=True)
    (d / "model.onnx").write_bytes(b"")  # only its folder is read: the config beside it
    (d / "config.pbtxt").write_text("sequence_batching {\n  state [" + states + "]\n}\n")
    return triton_pairs(d / "model.onnx")


def test_an_entrys_own_names_and_never_a_nested_blocks(tmp_path):
    nested = '{input_name: "bogus" output_name: "zz" data_type: TYPE_FP32 dims: [1]}'
    table = [  # (the state list, the pairs)
        ('{input_name: "a" output_name: "p"}', {"a": "p"}),  # no space after the brace
        ('{input_name: "a" initial_state: ' + nested + ' output_name: "p"}', {"a": "p"}),  # block in the middle
        ('{initial_state: ' + nested + ' input_name: "a" output_name: "p"}', {"a": "p"}),  # block first
        ('{input_name: "a" output_name: "p" initial_state: ' + nested + '}', {"a": "p"}),  # block last
        ('{initial_state: ' + nested + '}, {input_name: "b" output_name: "q"}', {"b": "q"}),  # only a block: no pair
        ('{input_name: "a" initial_state: {x: {input_name: "deep"}} output_name: "p"}', {"a": "p"}),  # two levels down
    ]
    for k, (states, expected) in enumerate(table):
        assert _pairs(tmp_path, k, states) == expected, states
    # the entries' text: each its own, nested blocks blanked (one test function: the mutation tool runs the fastest first)
    assert _top_level_entries('{input_name: "a" initial_state: {input_name: "x"} output_name: "p"}') == [
        'input_name: "a" initial_state:   output_name: "p"'
    ]
    assert _top_level_entries(' } {a: 1} {b: {c: 2} d: 3}') == ["a: 1", "b:   d: 3"]  # a stray close brace first
