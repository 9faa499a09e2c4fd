"""find_pairs called without a dataflow (rnnir show's suggestions, left_out_pairs) indexes the model itself and
pairs as lowering does with its own: the dataflow pair of a GRU whose state input and output have plain names;
and a model rnnir cannot index is still paired by name, from names alone. Hand-read from each model."""

from __future__ import annotations

import numpy as np
from onnx import helper

import rnnir
from rnnir.ir.pairs import PairSource
from rnnir.lower.pairing import find_pairs
from tests.support.onnx_models import const, model, vi


def _gru_foo_bar():
    H, I = 2, 1
    rng = np.random.default_rng(0)
    return model(
        [helper.make_node("GRU", ["x", "W", "R", "", "", "foo"], ["", "bar"], hidden_size=H, name="gru"), helper.make_node("Identity", ["x"], ["echo"])],
        [vi("x", ["T", 1, I]), vi("foo", [1, 1, H])], [vi("echo", ["T", 1, I]), vi("bar", None)],
        [const("W", rng.standard_normal((1, 3 * H, I)).astype(np.float32)), const("R", rng.standard_normal((1, 3 * H, H)).astype(np.float32))],
    )


def test_pairing_without_a_dataflow_pairs_as_lowering_does_and_from_names_alone_when_there_is_none():
    m = _gru_foo_bar()
    expected = [("foo", "bar", PairSource.DATAFLOW)]
    assert [(p.input, p.output, p.source) for p in find_pairs(m, label="m")] == expected
    assert [(p.input, p.output, p.source) for p in rnnir.load(m).state_pairs] == expected
    # (one test function: the mutation tool runs the fastest test of each file first)
    # "b" is produced twice: no index, so no dataflow; a -> a_out (a plain name) still pairs by name
    nodes = [helper.make_node("Neg", ["a"], ["a_out"]), helper.make_node("Neg", ["x"], ["b"]), helper.make_node("Abs", ["x"], ["b"])]
    m = model(nodes, [vi("x", [1, 4]), vi("a", [1, 4])], [vi("b", [1, 4]), vi("a_out", [1, 4])])
    assert [(p.input, p.output, p.source) for p in find_pairs(m, label="m")] == [("a", "a_out", PairSource.NAME)]
