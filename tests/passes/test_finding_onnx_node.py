"""Which ONNX node a finding points at (:func:`rnnir.passes.diagnostics.onnx_node_of`): the node a value was lowered
from, followed back through any chain of stores; never a name rnnir made up for a node no ONNX graph has (the
Return's "onnxruntime call", a slot load). Models are built with onnx.helper; the expected names are read off them."""

from __future__ import annotations

import numpy as np
from onnx import helper

import rnnir
from rnnir.ir.nodes import LoadSlot, Return, Store
from rnnir.passes.diagnostics import Location, onnx_node_of
from tests.support.onnx_models import lstm_weights, model, vi

I, H = 3, 4


def _lstm_with_c_kept():
    """An LSTM whose cell state is written back through an Identity of its own live-in value (SD001)."""
    lstm = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["Y", "hn", "cn_unused"], hidden_size=H, name="lstm")
    keep = helper.make_node("Identity", ["c0"], ["cn"], name="keep_c")
    return model(
        [lstm, keep],
        [vi("x", ["T", 1, I]), vi("h0", [1, 1, H]), vi("c0", [1, 1, H])],
        [vi("Y", ["T", 1, 1, H]), vi("hn", [1, 1, H]), vi("cn", [1, 1, H])],
        lstm_weights(I=I, H=H),
    )


def test_a_store_names_the_onnx_node_that_produced_its_value_and_a_load_or_return_names_none():
    program = rnnir.load(_lstm_with_c_kept())
    by_dest = {n.dest.name: onnx_node_of(n) for n in program.nodes if isinstance(n, Store) and n.dest is not None}
    assert by_dest == {"h0": "lstm", "c0": "keep_c", "Y": "lstm", "hn": "lstm", "cn": "keep_c"}
    assert [onnx_node_of(n) for n in program.nodes if isinstance(n, LoadSlot)] == [None, None]
    (ret,) = [n for n in program.nodes if isinstance(n, Return)]
    assert ret.provenance.node is not None  # lowering names the Return after the call ...
    assert onnx_node_of(ret) is None and Location.at(ret).onnx_node is None  # ... which is no ONNX node
    compute = next(n for n in program.nodes if n.provenance.node == "keep_c")
    assert onnx_node_of(compute) == "keep_c"


def test_the_sd001_finding_points_at_the_identity_that_hands_the_state_back():
    from rnnir import passes

    (d,) = [d for d in passes.run(rnnir.load(_lstm_with_c_kept())) if d.code == "SD001"]
    assert [(loc.onnx_node, loc.value) for loc in d.locations] == [("keep_c", "cn")]


def test_a_chain_of_stores_of_any_length_leads_back_to_the_op_first_stored():
    b = rnnir.Builder("chain")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (5, 1, I))
    h0 = b.load(h, "copy")
    rng = np.random.default_rng(1)
    w = b.const("W", rng.standard_normal((1, H, I)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, H, H)).astype(np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=h0, hidden_size=H, name="rnn", outputs=["Y", "hn"])
    v = hn
    for i in range(100):  # each output store reads the previous store's result (an AL001 chain)
        v = b.store(v, b.output(f"o{i}"), "value")
    b.store(h0, b.output("back"), "value")  # a loaded value stored: no ONNX node stands behind it
    b.store(hn, h)
    program = b.build()
    names = {n.dest.name: onnx_node_of(n) for n in program.nodes if isinstance(n, Store) and n.dest is not None}
    assert names == {**{f"o{i}": "rnn" for i in range(100)}, "back": None, "h": "rnn"}
