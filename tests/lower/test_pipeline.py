"""Lines every lowering runs: lower()'s own (rnnir/lower/build.py) and store placement's (rnnir/lower/stores.py). Kept apart from
tests/lower/test_stages.py on purpose: tools/mutate.py gives a line that thousands of tests execute
only the fastest covering test of each file, so a case pinning such a line must be the fastest of its file (and
the file's first test pays for the lazy imports: each test here checks the whole rule on its own)."""

from __future__ import annotations

import onnx
from onnx import helper

import rnnir
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def _passthrough(graph_name):
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [1, I])], [vi("y", [1, I])])
    m.graph.name = graph_name
    return m


def test_a_program_is_named_after_its_graph_else_model():
    assert rnnir.load(_passthrough("encoder")).name == "encoder"
    assert rnnir.load(_passthrough("")).name == "model"  # no graph name and no file


def test_an_unnamed_graph_read_from_a_file_is_named_after_the_file(tmp_path):
    path = tmp_path / "streaming_vad.onnx"
    onnx.save(_passthrough(""), path)
    assert rnnir.load(path).name == "streaming_vad"
    assert rnnir.load(path.read_bytes()).name == "model"  # near-miss: the same bytes, no file
    assert rnnir.load(_passthrough("encoder")).name == "encoder"  # a graph name comes first


def _gru_h0_hn():
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"), helper.make_node("Identity", ["Yh"], ["hn"])]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], weights("GRU"))


def test_a_slot_the_recorded_structure_does_not_mention_gets_the_default_fan_out_whatever_the_exit_policy():
    from rnnir.ir import Store, StoreResult
    from rnnir.ir.structure import StoreFact, StoreStructure
    from rnnir.lower import Policy, lower, read_model

    # the recording says how hn is stored, nothing about h0 (a slot exposed after the export)
    structure = StoreStructure(outputs=["hn"], stores=[StoreFact("o", "out:hn", "hn", False, StoreResult.VALUE)], waits=["o"])
    prog = lower(read_model(_gru_h0_hn()), None, Policy(exit="chain"), structure=structure)
    stores = sorted((st.dest.name, st.inputs[0].name, st.result) for st in prog.nodes if isinstance(st, Store))
    assert stores == [("h0", "hn", StoreResult.TOKEN), ("hn", "hn", StoreResult.VALUE)]  # not chained, hn stored once
    assert prog.returns[0].describe() == "return"  # the recorded Return
    assert lower(read_model(_gru_h0_hn())).returns[0].describe() == "onnxruntime call"  # near-miss: none recorded
