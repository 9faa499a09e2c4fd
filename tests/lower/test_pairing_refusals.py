"""Pairing by name and by position refuses what is not state (issue 15): a name rule alone is not enough when the
types disagree and the name does not look like state; position needs rank >= 2 and identical types."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from rnnir.ir.pairs import PairSource
from rnnir.lower.pairing import _compatible, find_pairs, graph_io, looks_like_state

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def identity_model(ins, outs, inits=()):
    """Each output i is computed from input i (Neg: a name pair of names not like state needs state to flow between
    them, not the input handed back); shapes as declared, which is all pairing reads of the types."""
    nodes = [helper.make_node("Neg", [i.name], [o.name]) for i, o in zip(ins, outs)]
    m = helper.make_model(helper.make_graph(nodes, "m", ins, outs, initializer=list(inits)), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def pairs_of(ins, outs, inits=()):
    return [(p.input, p.output, p.source) for p in find_pairs(identity_model(ins, outs, inits), label="m")]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("h", True),
        ("c0", True),
        ("enc.hidden", True),
        ("lstm_h0", True),
        ("cache_k", True),
        ("past_value", True),
        ("state3", True),
        ("features_h", True),
        ("feat", False),
        ("chunk", False),
        ("hop", False),
        ("x", False),
        ("audio_in", False),
    ],
)
def test_which_names_look_like_state(name, expected):
    assert looks_like_state(name) is expected


@pytest.mark.parametrize(
    ("in_shape", "out_shape", "in_type", "out_type", "paired"),
    [
        ([1, 4], [1, 4], F32, F32, True),
        (["B", 4], ["B", 4], F32, F32, True),
        (["B", 4], [1, 4], F32, F32, True),  # a symbolic dim agrees with any size
        ([1, 4], [1, 8], F32, F32, False),  # trailing dim differs
        ([1, 4], [1, 1, 4], F32, F32, False),  # rank differs
        ([1, 4], [1, 4], F32, I64, False),  # dtype differs
    ],
)
def test_name_rule_needs_compatible_types_when_the_name_does_not_look_like_state(in_shape, out_shape, in_type, out_type, paired):
    ins = [vi("x", [1]), vi("feat_in", in_shape, in_type)]
    outs = [vi("y", [1]), vi("feat_out", out_shape, out_type)]
    got = pairs_of(ins, outs)
    assert got == ([("feat_in", "feat_out", PairSource.NAME)] if paired else [])


@pytest.mark.parametrize(("out_shape", "out_type"), [([1, 8], F32), ([1, 1, 4], F32), ([1, 4], I64)])
def test_name_rule_keeps_a_state_named_pair_whose_types_differ(out_shape, out_type):
    # h_in -> h_out names a state: the mismatch is a finding (SD005), not a reason to drop the pair
    ins = [vi("x", [1]), vi("h_in", [1, 4])]
    outs = [vi("y", [1]), vi("h_out", out_shape, out_type)]
    (pair,) = find_pairs(identity_model(ins, outs), label="m")
    assert (pair.input, pair.output, pair.source) == ("h_in", "h_out", PairSource.NAME)
    assert pair.reason.endswith("(types differ)")


def test_compatible_types_pair_without_the_types_differ_note():
    (pair,) = find_pairs(identity_model([vi("x", [1]), vi("h_in", [1, 4])], [vi("y", [1]), vi("h_out", [1, 4])]), label="m")
    assert pair.reason == "naming convention 'h_in' -> 'h_out'"


@pytest.mark.parametrize(
    ("a", "b", "paired"),
    [
        (vi("a", [2, 1, 4]), vi("b", [2, 1, 4]), True),
        (vi("a", ["B", 4]), vi("b", ["B", 4]), True),
        (vi("a", [4]), vi("b", [4]), False),  # rank 1 is no state shape
        (vi("a", [2, 1, 4]), vi("b", [2, 1, 8]), False),
        (vi("a", [2, 1, 4]), vi("b", [2, 4]), False),
        (vi("a", [2, 1, 4]), vi("b", [2, 1, 4], I64), False),
        (vi("a", ["B", 4]), vi("b", ["N", 4]), False),  # other symbols: not the same type
    ],
)
def test_position_pairs_only_identical_state_shaped_leftovers(a, b, paired):
    got = pairs_of([vi("x", [1]), a], [vi("y", [1]), b])
    assert got == ([("a", "b", PairSource.POSITION)] if paired else [])


def test_position_needs_the_leftovers_to_line_up_one_to_one():
    ins = [vi("x", [1]), vi("a", [2, 4]), vi("b", [2, 4])]
    outs = [vi("y", [1]), vi("p", [2, 4]), vi("q", [2, 4])]
    assert pairs_of(ins, outs) == [("a", "p", PairSource.POSITION), ("b", "q", PairSource.POSITION)]
    assert pairs_of(ins, outs[:2]) == []  # two inputs left, one output: no guessing


def test_position_skips_inputs_with_an_initializer_default_and_the_first_input_and_output():
    import numpy as np
    from onnx import numpy_helper

    ins = [vi("x", [2, 4]), vi("a", [2, 4]), vi("w", [2, 4])]
    outs = [vi("y", [2, 4]), vi("p", [2, 4])]
    w = numpy_helper.from_array(np.zeros((2, 4), np.float32), "w")
    assert pairs_of(ins, outs, [w]) == [("a", "p", PairSource.POSITION)]


def test_compatible_ignores_unknown_dtype_rank_and_dims_but_not_known_differences():
    ins, outs = graph_io(identity_model([vi("u", None), vi("k", [0, 4])], [vi("v", [1, 4]), vi("w", [3, 4])]))
    u, k = ins
    v, w = outs
    assert _compatible(u, v)  # no shape at all: nothing to disagree with
    assert _compatible(k, w)  # a 0 dim is unknown
    assert not _compatible(v, w)


def test_an_output_taken_by_one_name_pair_is_not_taken_again_by_a_state_named_input():
    # h_in -> h_out (compatible) first; h -> h_out would be a "types differ" pair, but h_out is taken
    ins = [vi("x", [1]), vi("h_in", [1, 4]), vi("h", [1, 8])]
    outs = [vi("y", [1]), vi("h_out", [1, 4])]
    assert pairs_of(ins, outs) == [("h_in", "h_out", PairSource.NAME)]


def test_an_output_paired_by_metadata_is_not_paired_again_by_name():
    from rnnir.onnxio.metadata import META_PAIRS

    m = identity_model([vi("x", [1]), vi("a", [1, 4]), vi("b_in", [1, 4])], [vi("y", [1]), vi("b_out", [1, 4]), vi("z", [4])])
    m.metadata_props.add(key=META_PAIRS, value='{"a": "b_out"}')
    got = [(p.input, p.output, p.source) for p in find_pairs(m, label="m")]
    assert got == [("a", "b_out", PairSource.METADATA)]


@pytest.mark.parametrize("raw", ['{"h0": 5}', '["h0", "hn"]', '{"h0": ["hn"]}', "not json"])
def test_malformed_pair_metadata_is_a_model_error(raw):
    from rnnir import ModelError
    from rnnir.onnxio.metadata import META_PAIRS

    m = identity_model([vi("x", [1]), vi("h0", [1, 4])], [vi("y", [1]), vi("hn", [1, 4])])
    m.metadata_props.add(key=META_PAIRS, value=raw)
    with pytest.raises(ModelError, match="is not valid"):
        find_pairs(m, label="m")


def test_pair_metadata_with_no_output_is_a_pair_without_output():
    from rnnir.onnxio.metadata import META_PAIRS

    m = identity_model([vi("x", [1]), vi("h0", [1, 4])], [vi("y", [1]), vi("hn", [1, 4])])
    m.metadata_props.add(key=META_PAIRS, value='{"h0": null}')
    assert pairs_of_model(m) == [("h0", None, PairSource.METADATA)]


def pairs_of_model(m):
    return [(p.input, p.output, p.source) for p in find_pairs(m, label="m")]


def test_position_refuses_an_unknown_dtype_against_a_known_one():
    # elem_type 0 (undefined) is no evidence of the same type: position needs equal dtypes, not merely compatible ones
    assert pairs_of([vi("x", [1]), vi("a", [2, 4], 0)], [vi("y", [1]), vi("b", [2, 4])]) == []


def test_graph_io_of_a_value_that_is_no_tensor_has_no_dtype_or_shape():
    seq = helper.make_tensor_sequence_value_info("s", F32, [2])
    m = identity_model([vi("x", [1])], [vi("y", [1])])
    m.graph.input.append(seq)
    ins, _ = graph_io(m)
    assert (ins[1].name, ins[1].dtype, ins[1].rank, ins[1].dims) == ("s", 0, None, None)
