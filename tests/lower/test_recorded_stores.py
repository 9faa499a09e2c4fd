"""The store structure a model records as IR text (``rnnir.ir`` metadata) decides its stores, each exactly once
(rnnir/lower/stores.py). One test in its own file on purpose: reading the metadata happens in every lowering, and
tools/mutate.py gives such a line only the fastest covering test of each file."""

from __future__ import annotations

from collections import Counter

import pytest
from onnx import helper

import rnnir
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def _gru_with_sequence_output():
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Identity", ["Yh"], ["hn"]),
        helper.make_node("Identity", ["Y"], ["y"]),
    ]
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H]), vi("y", [T, 1, 1, H])], weights("GRU"))


def _stores(prog):
    return [(st.dest.name, st.inputs[0].name) for st in prog.stores]


def test_the_recorded_structure_places_each_store_once_and_unreadable_text_is_refused():
    from rnnir.ir import StoreResult
    from rnnir.ir.structure import SlotFacts, StoreFact, StoreStructure
    from rnnir.ir.text import print_program
    from rnnir.lower import Policy, lower, read_model

    chain = StoreStructure(
        slots={"h0": SlotFacts()},
        outputs=["hn", "y"],
        stores=[
            StoreFact("s", "slot:h0", "hn", False, StoreResult.TOKEN),
            StoreFact("o", "out:hn", "s", True, StoreResult.VALUE),  # hn is stored from the slot store's result
            StoreFact("u", "out:y", "y", False, StoreResult.VALUE),
        ],
        waits=["s", "o", "u"],
    )
    m = _gru_with_sequence_output()
    helper.set_model_props(m, {"rnnir.ir": print_program(lower(read_model(m), None, Policy(), structure=chain))})
    prog = rnnir.load(m)
    assert Counter(dest for dest, _ in _stores(prog)) == {"h0": 1, "hn": 1, "y": 1}  # nothing stored twice
    assert ("hn", "store.h0") in _stores(prog)  # the recorded chain, read back from the metadata
    assert prog.returns[0].describe() == "return"  # the recorded Return, not the runtime's
    plain = rnnir.load(_gru_with_sequence_output())  # near-miss: nothing recorded, the default fan-out
    assert sorted(_stores(plain)) == [("h0", "hn"), ("hn", "hn"), ("y", "y")]
    assert plain.returns[0].describe() == "onnxruntime call"
    helper.set_model_props(m, {"rnnir.ir": "program @p { not ir"})
    with pytest.raises(rnnir.ModelError, match=r"metadata 'rnnir.ir' is not IR text rnnir can read") as refused:
        rnnir.load(m, label="recorded.onnx")
    assert "recorded.onnx" in str(refused.value)  # the model is named too
