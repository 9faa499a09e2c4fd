"""The IR core: builder, def-use links, printing, invariants."""

from __future__ import annotations

import numpy as np
import pytest

import rnnir
from rnnir import IRError, LoadKind, OrderingLayer, StoreResult
from rnnir.analysis.slices import slice_maps
from rnnir.ir.nodes import Compute
from rnnir.render.graph import to_dot, to_mermaid


def _fanout(result="token"):
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, 2))
    x = b.input("x", "float32", (3, 1, 2))
    W = b.const("W", np.eye(2, dtype=np.float32)[None])
    R = b.const("R", 0.5 * np.eye(2, dtype=np.float32)[None])
    y, hn = b.recurrent("RNN", x, W, R, initial_h=b.load(h), hidden_size=2, name="rnn")
    b.store(hn, h, result)
    b.store(hn, b.output("hn", "float32", (1, 1, 2)))
    return b.build()


def test_def_use_is_one_lookup():
    prog = _fanout()
    (rec,) = prog.recurrents
    hn = rec.port("Y_h")
    assert hn.producer is rec
    assert {type(u).__name__ for u in hn.users} == {"Store"}
    assert len(hn.uses) == 2
    (load,) = prog.loads_of(prog.slot("h"))
    assert load.outputs[0].users == [rec]


def test_program_prints_readably():
    text = str(_fanout())
    assert "slot @h : float32[1,1,2] init=zeros" in text
    assert "%h = load_slot<@h, copy>()" in text
    assert "recurrent.RNN<direction='forward', hidden_size=2>(%x, %W, %R, _, _, %h)" in text
    assert "store<@h, token>(%rnn_Y_h_0)" in text and "store<out:hn, token>(%rnn_Y_h_0)" in text
    assert "return<by runtime>" in text


def test_build_adds_a_return_waiting_for_every_store():
    prog = _fanout()
    (ret,) = prog.returns
    assert {w.producer for w in ret.waits} == set(prog.stores)
    assert ret.layer is OrderingLayer.RUNTIME


def test_dot_and_mermaid_show_both_stores_reading_the_final_state():
    prog = _fanout()
    dot = to_dot(prog)
    assert dot.startswith("digraph") and '"slot:h"' in dot and '"out:hn"' in dot
    (rec,) = prog.recurrents
    assert sum(1 for line in dot.splitlines() if line.strip().startswith(f'"{rec.id}" ->')) == 2
    mer = to_mermaid(prog)
    assert mer.startswith("flowchart LR") and "==>" in mer


def test_builder_rejects_foreign_values_and_duplicate_names():
    a = rnnir.Builder("a")
    va = a.input("x")
    b = rnnir.Builder("b")
    with pytest.raises(IRError, match="neither produced here"):
        b.compute("Relu", [va])
    with pytest.raises(IRError, match="already used"):
        a.input("x")
    with pytest.raises(IRError, match="kind"):
        a.recurrent("TRANSFORMER", va, va, va, hidden_size=1)
    with pytest.raises(IRError, match="exactly one Return"):
        a.ret()
        a.ret()


def test_store_result_kinds_and_load_kinds():
    b = rnnir.Builder("chain")
    s = b.slot("s", "float32", (1,))
    v = b.compute("Relu", [b.load(s, "view")])
    r = b.store(v, s, "alias")
    b.store(r, b.output("o", "float32", (1,)), "value")
    prog = b.build()
    assert [st.result for st in prog.stores] == [StoreResult.ALIAS, StoreResult.VALUE]
    assert prog.loads[0].kind is LoadKind.VIEW
    assert prog.stores[1].value.producer is prog.stores[0]


def test_programs_are_acyclic_and_order_edges_are_explicit():
    b = rnnir.Builder("ord")
    s = b.slot("s", "float32", (1,))
    v = b.load(s)
    w = b.compute("Relu", [v])
    st = b.store(w, s)
    b.order(w, st)
    prog = b.build()
    kinds = {d["kind"] for _, _, d in prog.graph.edges(data=True)}
    assert kinds == {"data"}  # order edge on an existing data edge keeps the data kind
    b2 = rnnir.Builder("ord2")
    s2 = b2.slot("s", "float32", (1,))
    r1 = b2.compute("Relu", [b2.load(s2)])
    r2 = b2.compute("Abs", [b2.input("x", "float32", (1,))])
    b2.order(r1, r2)
    prog2 = b2.build()
    assert any(d["kind"] == "order" for _, _, d in prog2.graph.edges(data=True))


def test_slot_init_validation():
    with pytest.raises(IRError):
        rnnir.SlotInit("sometimes")
    with pytest.raises(IRError):
        rnnir.SlotInit("constant")
    b = rnnir.Builder("c")
    s = b.slot("s", "float32", (2,), init=np.array([1.0, 2.0], np.float32))
    assert s.init.kind == "constant" and "init=constant dense<float32[2] [1.0, 2.0]>" in str(b.build())


def test_builder_state_pairs_and_slices():
    prog = _fanout()
    (pair,) = prog.state_pairs
    assert (pair.input, pair.output, pair.source.value) == ("h", "hn", "builder")
    (sm,) = slice_maps(prog).of(pair).slices
    assert [(e.op, e.port) for e in sm.entry] == [("RNN", "initial_h")]
    assert [(e.op, e.port) for e in sm.exit] == [("RNN", "Y_h")]


def test_one_op_trait_table_answers_every_module():
    from rnnir.analysis.tracer import TRACED_OPS
    from rnnir.ir.optraits import OpTrait, ops_with, traits_of
    from rnnir.lower import LAYOUT_OPS
    from rnnir.passes.aliasing import VIEW_OPS

    assert VIEW_OPS == ops_with(OpTrait.VIEW) and LAYOUT_OPS == ops_with(OpTrait.LAYOUT)
    assert TRACED_OPS <= LAYOUT_OPS  # the tracer follows only ops that never change a value
    assert VIEW_OPS <= LAYOUT_OPS and "Concat" not in VIEW_OPS and "Cast" not in VIEW_OPS  # copies, never views
    assert traits_of("MatMul") == OpTrait.NONE and traits_of("Add") == OpTrait.ELEMENTWISE
    assert {"If", "Loop", "Scan"} == ops_with(OpTrait.CONTROL_FLOW)


def test_a_node_reads_only_its_own_programs_values_and_writes_only_values_no_node_produced():
    a = rnnir.Builder("a")
    relu_a = a.compute("Relu", [a.input("x")])
    b = rnnir.Builder("b")
    x_b = b.input("x")
    relu_b = b.compute("Relu", [x_b])
    # the same node id in both programs: only the node itself, not its id, says whose value it is
    assert relu_a.producer.id == relu_b.producer.id and relu_a.producer is not relu_b.producer
    with pytest.raises(IRError, match=r"reads %relu_\w*, produced by a node outside this program"):
        b.compute("Neg", [relu_a])
    c = rnnir.Builder("c")
    c.input("x")
    with pytest.raises(IRError, match="produced by a node outside this program"):
        c.compute("Neg", [relu_a])  # an id this program does not have at all
    with pytest.raises(IRError, match=r"already has producer"):
        b.program.add(Compute(op="Neg", inputs=[x_b], outputs=[relu_b]))
    # near-miss: a node of several outputs is their producer, each at its own index
    first, second = b.compute("Split", [x_b], outputs=2)
    assert first.producer is second.producer and (first.index, second.index) == (0, 1)
    assert [u for u, _ in x_b.uses] == [relu_b.producer, first.producer]
