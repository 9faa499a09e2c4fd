"""Pairing (rnnir/lower/pairing.py), the cases its full mutation run left unpinned. A parametrized test runs one case
per mutant, so each behaviour here is one test function over its whole table: name pairs between inputs and outputs
whose dtype, rank or dims are unknown on one side, refused when both are known and differ and the name does not look
like state; position refusing rank-1, unknown-rank and other-symbol leftovers; the name rules that start with a literal
(in_ -> out_, past_ -> present_); malformed pair metadata; Triton's 1 MiB config limit and a config that vanishes; and
the pairs a partial declaration leaves out. Every expected pair is read off the graph's names and types by hand."""

from __future__ import annotations

import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from rnnir import ModelError
from rnnir.ir.pairs import PairSource
from rnnir.lower import find_pairs
from rnnir.lower.pairing import left_out_pair_warnings, left_out_pairs
from rnnir.onnxio.metadata import META_PAIRS

F32, I64, UNDEFINED = TensorProto.FLOAT, TensorProto.INT64, TensorProto.UNDEFINED
NAME, POSITION = PairSource.NAME, PairSource.POSITION


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(ins, outs, inits=(), meta=None):
    """Output i is computed from input i (Neg: a name pair of names not like state needs state to flow between them);
    pairing reads only the graph's inputs and outputs as declared."""
    nodes = [helper.make_node("Neg", [i.name], [o.name]) for i, o in zip(ins, outs)]
    m = helper.make_model(helper.make_graph(nodes, "m", ins, outs, initializer=list(inits)), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    if meta is not None:
        m.metadata_props.add(key=META_PAIRS, value=meta)
    return m


def pairs(m, **kw):
    return [(p.input, p.output, p.source) for p in find_pairs(m, label="m", **kw)]


def io_pairs(state_in, state_out):
    """The pairs of a model x, <state_in> -> y, <state_out>: the first input and output are never state."""
    return pairs(model([vi("x", [1]), state_in], [vi("y", [1]), state_out]))


# -- names: what is unknown on one side does not disagree; what is known and differs does --------------


def test_a_name_pair_of_a_plain_name_is_kept_when_one_side_is_unknown_and_dropped_when_both_known_differ():
    table = [
        # (input, output, paired by name)
        (vi("feat_in", [1, 4], UNDEFINED), vi("feat_out", [1, 4]), True),  # dtype unknown on the input's side
        (vi("feat_in", [1, 4]), vi("feat_out", [1, 4], UNDEFINED), True),  # ... on the output's side
        (vi("feat_in", [1, 4]), vi("feat_out", [1, 4], I64), False),  # both known, different
        (vi("feat_in", [1, 4]), vi("feat_out", None), True),  # the output has no shape: no rank, no dims
        (vi("feat_in", None), vi("feat_out", [1, 4]), True),
        (vi("feat_in", [1, 4]), vi("feat_out", [1, 4, 1]), False),  # rank 2 against 3, the first dims equal
        (vi("feat_in", [1, 4, 1]), vi("feat_out", [1, 4]), False),
        (vi("feat_in", ["B", 4]), vi("feat_out", [1, 4]), True),  # a symbol against a size
        (vi("feat_in", [1, 4]), vi("feat_out", ["B", 4]), True),
        (vi("feat_in", [0, 4]), vi("feat_out", [3, 4]), True),  # a 0 dim is unknown
        (vi("feat_in", [1, 4]), vi("feat_out", [1, 8]), False),  # a trailing dim differs
    ]
    for a, b, paired in table:
        expected = [("feat_in", "feat_out", NAME)] if paired else []
        assert io_pairs(a, b) == expected, (a, b)


def test_a_state_named_input_keeps_its_first_name_pair_even_when_the_types_differ():
    # h's candidates start h_out, h_n; both are outputs here and both of another shape: h -> h_out only, once
    ins = [vi("x", [1]), vi("h", [1, 4])]
    outs = [vi("y", [1]), vi("h_out", [1, 8]), vi("h_n", [1, 8])]
    (p,) = find_pairs(model(ins, outs), label="m")
    assert (p.input, p.output, p.source, p.reason) == ("h", "h_out", NAME, "naming convention 'h' -> 'h_out' (types differ)")


def test_name_rules_whose_output_starts_with_a_literal_pair_by_name_before_position():
    # without the rule each pair would still be taken by position (same type); the source says which rule took it
    for stem_in, stem_out in [("in_feat", "out_feat"), ("past_key", "present_key"), ("cache_k", "new_cache_k"), ("cached_v", "new_cached_v")]:
        got = pairs(model([vi("x", [1]), vi(stem_in, [1, 4])], [vi("y", [1]), vi(stem_out, [1, 4])]))
        assert got == [(stem_in, stem_out, NAME)], stem_in


# -- position -----------------------------------------------------------------------------------------


def test_position_needs_a_known_rank_of_at_least_two_the_same_dtype_and_for_plain_names_the_same_symbols():
    table = [
        (vi("a", [2, 4]), vi("b", [2, 4]), True),
        (vi("a", [4]), vi("b", [4]), False),  # rank 1 is no state shape
        (vi("a", None), vi("b", [2, 4]), False),  # unknown rank
        (vi("a", [2, 4]), vi("b", None), False),
        (vi("a", [2, 4]), vi("b", [2, 4, 1]), False),
        (vi("a", [2, 4], UNDEFINED), vi("b", [2, 4]), False),
        (vi("a", ["B", 4]), vi("b", ["N", 4]), False),  # another symbol, and "a" says nothing of state
        (vi("hidden", ["B", 4]), vi("b", ["N", 4]), True),  # named like state: another symbol is the same batch
        (vi("hidden", [1, 4]), vi("b", ["N", 4]), False),  # but never a symbol against a size
        (vi("hidden", ["B", 4]), vi("b", [1, 4]), False),
    ]
    for a, b, paired in table:
        expected = [(a.name, "b", POSITION)] if paired else []
        assert io_pairs(a, b) == expected, (a, b)


# -- metadata -----------------------------------------------------------------------------------------


def test_pair_metadata_must_map_input_names_to_output_names_or_null():
    io = ([vi("x", [1]), vi("h0", [1, 4])], [vi("y", [1]), vi("hn", [1, 4])])
    for raw in ['{"h0": 5}', '{"h0": ["hn"]}', '{"h0": {"o": "hn"}}', '["h0", "hn"]', '"h0"']:
        try:
            find_pairs(model(*io, meta=raw), label="m")
        except ModelError as exc:
            assert str(exc) == "m: metadata 'rnnir.pairs' is not valid: not an object of input -> output names", raw
        else:
            raise AssertionError(f"{raw} was accepted")
    assert pairs(model(*io, meta='{"h0": "hn"}')) == [("h0", "hn", PairSource.METADATA)]
    assert pairs(model(*io, meta='{"h0": null}')) == [("h0", None, PairSource.METADATA)]


# -- Triton ---------------------------------------------------------------------------------------------

STATE_BLOCK = 'sequence_batching { state [ { input_name: "a" output_name: "p" } ] }\n'
# a and p: rank 1, so neither names nor position would pair them; only the config does
TRITON_IO = ([vi("x", [1]), vi("a", [4])], [vi("y", [1]), vi("p", [4])])


def test_a_triton_config_of_one_mib_is_read_and_one_byte_more_is_not(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(model(*TRITON_IO).SerializeToString())
    cfg = tmp_path / "config.pbtxt"
    cfg.write_bytes(STATE_BLOCK.encode() + b"#" * (2**20 - len(STATE_BLOCK)))
    assert os.path.getsize(cfg) == 1024 * 1024
    assert pairs(model(*TRITON_IO), model_path=path) == [("a", "p", PairSource.TRITON)]
    cfg.write_bytes(STATE_BLOCK.encode() + b"#" * (2**20 + 1 - len(STATE_BLOCK)))
    assert pairs(model(*TRITON_IO), model_path=path) == []


def test_a_triton_config_removed_after_it_was_found_gives_no_pairs(tmp_path, monkeypatch):
    path = tmp_path / "model.onnx"
    cfg = tmp_path / "config.pbtxt"
    cfg.write_text(STATE_BLOCK)
    real_stat, removed = os.stat, []

    def stat_then_remove(p, *args, **kwargs):  # the config vanishes between the stat and the open
        result = real_stat(p, *args, **kwargs)
        if not removed and os.fspath(p) == os.fspath(cfg):
            removed.append(True)
            os.unlink(cfg)
        return result

    monkeypatch.setattr(os, "stat", stat_then_remove)
    assert pairs(model(*TRITON_IO), model_path=path) == []
    assert removed and not cfg.exists()  # it was found (statted) first


# -- what a partial declaration leaves out ---------------------------------------------------------------


LSTM_IO = ([vi("x", [1]), vi("h0", [1, 4]), vi("c0", [1, 4])], [vi("y", [1]), vi("hn", [1, 4]), vi("cn", [1, 4])])


def test_without_a_declaration_nothing_is_left_out():
    assert left_out_pairs(model(*LSTM_IO), label="m", declared={}) == []


def test_a_pair_whose_input_or_output_was_declared_is_not_left_out():
    m = model(*LSTM_IO)
    left = [(p.input, p.output) for p in left_out_pairs(m, label="m", declared={"h0": "hn"})]
    assert left == [("c0", "cn")]
    assert left_out_pairs(m, label="m", declared={"h0": None, "c0": None}) == []  # both inputs declared
    # hn and cn declared for other inputs: h0 -> hn and c0 -> cn would take a declared output
    ins = [*LSTM_IO[0], vi("a", [1, 4]), vi("b", [1, 4])]
    assert left_out_pairs(model(ins, LSTM_IO[1]), label="m", declared={"a": "hn", "b": "cn"}) == []


def test_when_automatic_pairing_fails_only_state_named_inputs_are_warned_about():
    # the metadata is malformed: a declaration does not read it, and the comparison with automatic pairing is skipped
    m = model(*LSTM_IO, meta='{"c0": 5}')
    assert left_out_pairs(m, label="m", declared={"h0": "hn"}) == []
    assert left_out_pair_warnings(m, label="m", declared={"h0": "hn"}) == [
        "the declared pairs (h0=hn) replace automatic pairing, and input 'c0' is named like state but left unpaired: "
        "if the caller feeds it what an output returned, declare that pair too (--pair c0=OUTPUT)"
    ]


def test_an_input_with_an_initializer_default_is_not_warned_about():
    ins = [vi("x", [1]), vi("h0", [1, 4]), vi("mem", [1, 4])]
    outs = [vi("y", [1]), vi("hn", [1, 4])]
    default = numpy_helper.from_array(np.zeros((1, 4), np.float32), "mem")
    assert left_out_pair_warnings(model(ins, outs, [default]), label="m", declared={"h0": "hn"}) == []
    # the near miss: without the default, mem is a state-named input nobody feeds back
    assert left_out_pair_warnings(model(ins, outs), label="m", declared={"h0": "hn"}) == [
        "the declared pairs (h0=hn) replace automatic pairing, and input 'mem' is named like state but left unpaired: "
        "if the caller feeds it what an output returned, declare that pair too (--pair mem=OUTPUT)"
    ]
