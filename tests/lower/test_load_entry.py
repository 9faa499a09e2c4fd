"""rnnir.load's own rules (rnnir.lower.load): a ``.rnnir`` path in any case is IR text, read as written and never
lowered, and refuses declared pairs with a clear error naming the file (or the label); an ONNX model is lowered with
the declared pairs and the chosen policies."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.errors import PairingError
from rnnir.ir.pairs import PairSource

SAMPLE = pathlib.Path(__file__).resolve().parents[2] / "samples" / "al001_chain.rnnir"


def test_an_ir_text_path_in_any_case_is_read_as_written_and_refuses_declared_pairs(tmp_path):
    upper = tmp_path / "CHAIN.RNNIR"
    shutil.copy(SAMPLE, upper)
    for path in (SAMPLE, str(SAMPLE), upper):
        prog = rnnir.load(path)
        assert prog.name == "al001_chain", path
    with pytest.raises(PairingError, match=r"CHAIN\.RNNIR: IR text declares its own state pairs"):
        rnnir.load(upper, {"h": "hn"})
    with pytest.raises(PairingError, match=r"^mine: IR text declares its own state pairs"):
        rnnir.load(upper, {"h": "hn"}, label="mine")
    assert rnnir.load(upper, {}).name == "al001_chain"  # no pairs declared: nothing to refuse
    onnx_path = tmp_path / "seed.onnx"  # any other path is an ONNX model, lowered
    onnx_path.write_bytes(_seed().SerializeToString())
    for path in (onnx_path, str(onnx_path)):
        assert [p.input for p in rnnir.load(path).state_pairs] == ["h0"], path


def _seed() -> object:
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1)
    graph = helper.make_graph(
        [node], "seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 1]), helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, 1, 1])],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "R")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_an_onnx_model_is_lowered_with_the_declared_pairs_policies_and_label():
    assert [(p.input, p.output, p.source) for p in rnnir.load(_seed()).state_pairs] == [("h0", "hn", PairSource.NAME)]
    declared = rnnir.load(_seed(), {"h0": "hn"})
    assert [(p.input, p.output, p.source) for p in declared.state_pairs] == [("h0", "hn", PairSource.DECLARED)]
    assert rnnir.load(_seed(), label="seed model").source.label == "seed model"
    from rnnir.ir.text import print_program

    fanout = print_program(rnnir.load(_seed()))
    assert print_program(rnnir.load(_seed(), entry="dynamic", exit="fanout")) == fanout  # the defaults
    assert print_program(rnnir.load(_seed(), exit="chain")) != fanout
    with pytest.raises(ValueError, match="exit policy must be"):
        rnnir.load(_seed(), exit="sideways")
    with pytest.raises(PairingError, match="'nope' is not a graph input"):
        rnnir.load(_seed(), {"nope": "hn"})
