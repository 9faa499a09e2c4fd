"""Where state pairs come from, source by source (mutation survivors of rnnir/lower/pairing.py): metadata and Triton
entries that name nothing in the graph, precedence between sources, the Triton config's size limit and layout, the
name rules' candidates in order, and dims that agree only for state-named inputs. Each expectation is read off the
graph's input and output names by hand."""

from __future__ import annotations

import json

import pytest
from onnx import TensorProto, helper

from rnnir.ir.pairs import PairSource
from rnnir.lower.pairing import _dims_agree, _name_candidates, _state_blocks, find_pairs, graph_io, triton_pairs
from rnnir.onnxio.metadata import META_PAIRS

F32 = TensorProto.FLOAT


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def identity_model(ins, outs, meta=None):
    nodes = [helper.make_node("Identity", [i.name], [o.name]) for i, o in zip(ins, outs)]
    m = helper.make_model(helper.make_graph(nodes, "m", ins, outs), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    if meta is not None:
        m.metadata_props.add(key=META_PAIRS, value=json.dumps(meta))
    return m


def pairs(m, **kw):
    return [(p.input, p.output, p.source) for p in find_pairs(m, label="m", **kw)]


IO = ([vi("x", [1]), vi("a", [1, 4]), vi("b", [1, 4])], [vi("y", [1]), vi("p", [1, 4]), vi("q", [1, 4, 1])])


# -- metadata -------------------------------------------------------------------------------------


def test_metadata_entries_naming_an_unknown_input_or_output_are_ignored():
    m = identity_model(*IO, meta={"ghost": "p", "a": "nowhere", "b": "p"})
    assert pairs(m) == [("b", "p", PairSource.METADATA)]


def test_metadata_is_outranked_by_a_declaration():
    m = identity_model(*IO, meta={"a": "p"})
    assert pairs(m, declared={"b": "p"}) == [("b", "p", PairSource.DECLARED)]


# -- Triton ---------------------------------------------------------------------------------------

CONFIG = """
name: "m"
sequence_batching {
  state [
    { input_name: "a" output_name: "p" dims: [ 1, 4 ] },
    { input_name: "b" output_name: "q" dims: [ [1], 4 ] },
    { input_name: "x" },
    { output_name: "y" }
  ]
}
"""


def model_in_folder(tmp_path, config=CONFIG, meta=None, folder="1"):
    d = tmp_path / "repo" / "m" / folder
    d.mkdir(parents=True)
    path = d / "model.onnx"
    path.write_bytes(identity_model(*IO, meta=meta).SerializeToString())
    (d / "config.pbtxt").write_text(config)
    return path


def test_triton_state_entries_pair_their_input_and_output_and_skip_incomplete_ones(tmp_path):
    path = model_in_folder(tmp_path)
    assert triton_pairs(path) == {"a": "p", "b": "q"}
    m = identity_model(*IO)
    assert pairs(m, model_path=path) == [("a", "p", PairSource.TRITON), ("b", "q", PairSource.TRITON)]


def test_triton_entries_already_paired_by_metadata_are_not_taken_again(tmp_path):
    path = model_in_folder(tmp_path)
    m = identity_model(*IO, meta={"a": "q"})
    # a -> q from metadata; Triton's a -> p (input used) and b -> q (output used) are both skipped; b and p are
    # left over, the same type in the same position
    assert pairs(m, model_path=path) == [("a", "q", PairSource.METADATA), ("b", "p", PairSource.POSITION)]


def test_triton_entries_naming_what_the_graph_lacks_are_ignored(tmp_path):
    path = model_in_folder(tmp_path, config='sequence_batching { state [ { input_name: "a" output_name: "zz" }, { input_name: "zz" output_name: "q" } ] }')
    assert pairs(identity_model(*IO), model_path=path) == []


def test_a_config_without_sequence_batching_or_without_a_path_gives_nothing(tmp_path):
    path = model_in_folder(tmp_path, config='state [ { input_name: "a" output_name: "p" } ]')
    assert triton_pairs(path) == {}
    assert triton_pairs(None) == {}
    assert triton_pairs(tmp_path / "nowhere" / "model.onnx") == {}


def test_an_oversized_config_is_not_read(tmp_path):
    from rnnir.lower import pairing

    body = 'sequence_batching { state [ { input_name: "a" output_name: "p" } ] }'
    path = model_in_folder(tmp_path, config=body + " " * (pairing._TRITON_CONFIG_MAX_BYTES - len(body)))
    assert triton_pairs(path) == {"a": "p"}  # exactly at the limit
    (path.parent / "config.pbtxt").write_text(body + " " * (pairing._TRITON_CONFIG_MAX_BYTES - len(body) + 1))
    assert triton_pairs(path) == {}


def test_a_config_that_is_a_folder_is_not_read(tmp_path):
    d = tmp_path / "m" / "1"
    (d / "config.pbtxt").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text('sequence_batching { state [ { input_name: "a" output_name: "p" } ] }')
    # the folder beside the model is skipped; the config above the numbered folder is Triton's
    assert triton_pairs(d / "model.onnx") == {"a": "p"}


def test_state_blocks_match_brackets_and_accept_state_with_or_without_a_colon():
    text = 'state: [ { dims: [ [2], 3 ] } ] other [ ] state [ { input_name: "b" } ]'
    assert _state_blocks(text) == [" { dims: [ [2], 3 ] } ", ' { input_name: "b" } ']
    assert _state_blocks("state [ { unclosed") == [" { unclose"]  # runs to the end of the text
    assert _state_blocks("no blocks here") == []


# -- names ----------------------------------------------------------------------------------------


def test_name_candidates_come_in_rule_order_then_generic_suffixes_and_prefixes_without_repeats():
    got = _name_candidates("h_in")
    assert got[:2] == ["h_out", "h_in_out"]  # the _in rule first, then the generic suffixes
    assert got[-3:] == ["new_h_in", "next_h_in", "out_h_in"]
    assert len(got) == len(set(got)) and "h_in" not in got
    assert _name_candidates("state")[:3] == ["stateN", "state_n", "state_out"]
    assert _name_candidates("h_prev")[:3] == ["h_next", "h_new", "h"]
    assert _name_candidates("c0")[:4] == ["cn", "cN", "cout", "c_final"]
    assert _name_candidates("lstm.h0")[:3] == ["lstm.hn", "lstm.hN", "lstm.h_out"]


def test_a_state_named_input_takes_the_first_candidate_that_is_an_output():
    ins = [vi("x", [1]), vi("state", [2, 4])]
    outs = [vi("y", [1]), vi("state_out", [2, 4]), vi("stateN", [2, 4])]
    assert pairs(identity_model(ins, outs)) == [("state", "stateN", PairSource.NAME)]


def test_an_input_already_paired_is_not_paired_again_by_name():
    ins = [vi("x", [1]), vi("h_in", [1, 4])]
    outs = [vi("y", [1]), vi("h_out", [1, 4]), vi("p", [1, 4])]
    m = identity_model(ins, outs, meta={"h_in": "p"})
    assert pairs(m) == [("h_in", "p", PairSource.METADATA)]


def gio(name, dims):
    return graph_io(identity_model([vi(name, dims)], [vi("o", dims)]))[0][0]


@pytest.mark.parametrize(
    ("a", "b", "agree"),
    [
        (("h", ["B", 4]), ("o", ["N", 4]), True),  # state-named: another symbol is the same batch
        (("feat", ["B", 4]), ("o", ["N", 4]), False),  # not state-named: symbols must match
        (("feat", ["B", 4]), ("o", ["B", 4]), True),
        (("h", ["B", 4]), ("o", ["N", 8]), False),  # static dims always equal
        (("h", ["B", 4]), ("o", [2, 4]), False),  # a symbol against a number
        (("h", ["B", 4]), ("o", ["N", 4, 1]), False),
        (("h", None), ("o", ["N", 4]), False),
    ],
)
def test_dims_agree(a, b, agree):
    assert _dims_agree(gio(*a), gio(*b)) is agree


def test_position_pairs_a_state_named_input_whose_batch_symbol_differs():
    ins = [vi("x", [1]), vi("state", ["batch", 2, 4])]
    outs = [vi("y", [1]), vi("out0", ["Concat_dim_1", 2, 4])]
    assert pairs(identity_model(ins, outs)) == [("state", "out0", PairSource.POSITION)]


def test_graph_io_reads_symbols_unknown_dims_and_defaults():
    from numpy import zeros
    from onnx import numpy_helper

    m = identity_model([vi("a", ["B", None, 3])], [vi("o", [2])])
    m.graph.initializer.append(numpy_helper.from_array(zeros(3, "float32"), "a"))
    (a,), (o,) = graph_io(m)
    assert (a.dtype, a.rank, a.dims, a.has_default) == (F32, 3, ("B", None, 3), True)
    assert (o.rank, o.dims, o.has_default) == (1, (2,), False)
    m2 = identity_model([vi("a", None)], [vi("o", [])])
    (a,), (o,) = graph_io(m2)
    assert (a.dtype, a.rank, a.dims) == (F32, None, None)
    assert (o.rank, o.dims) == (0, ())


def test_a_zero_dim_on_either_side_is_unknown_and_agrees_with_any_size():
    from rnnir.lower.pairing import _compatible

    (a,), (b,) = graph_io(identity_model([vi("a", [3, 4])], [vi("b", [0, 4])]))
    assert _compatible(a, b) and _compatible(b, a)
    (c,), _ = graph_io(identity_model([vi("c", [3, 5])], [vi("d", [0, 4])]))
    assert not _compatible(c, b)
