"""Program.add: a node belongs to one program, once; a node without an id is given one from its op or kind;
the use-def links it writes are those the nodes say (hand-read from each small program)."""

from __future__ import annotations

import pytest

from rnnir import IRError
from rnnir.ir.attributes import TensorType
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, Recurrent, Store, Value


def test_a_node_is_added_to_one_program_once():
    p = Program("p")
    x = p.external("x", TensorType("float32", (1,)))
    neg = Compute(op="Neg", inputs=[x], outputs=[Value(name="y")])
    p.add(neg)
    with pytest.raises(IRError, match="already belongs to program 'p'"):
        p.add(neg)
    q = Program("q")
    with pytest.raises(IRError, match="already belongs to program 'p'"):
        q.add(neg)
    # near-miss: a new node reading the same value is welcome
    p.add(Compute(op="Abs", inputs=[x], outputs=[Value(name="z")]))
    assert [n.id for n, _ in x.uses] == ["neg0", "abs0"]


def test_ids_come_from_the_op_or_the_node_kind_numbered_per_stem():
    p = Program("p")
    x = p.external("x")
    a = p.add(Compute(op="Add", inputs=[x, x], outputs=[Value(name="a")]))
    b = p.add(Compute(op="Add", inputs=[a.outputs[0], x], outputs=[Value(name="b")]))
    c = p.add(Compute(op="CellState", domain="rnnir", inputs=[b.outputs[0]], outputs=[Value(name="c")]))
    r = p.add(Recurrent(kind="GRU", inputs=[x], outputs=[Value(name="y"), Value(name="h")]))
    s = p.add(Store(inputs=[r.outputs[1]], outputs=[Value(name="t")]))
    named = p.add(Compute(id="mine", op="Add", inputs=[x, x], outputs=[Value(name="d")]))
    assert [n.id for n in (a, b, c, r, s, named)] == ["add0", "add1", "cellstate0", "recurrent0", "store0", "mine"]
    with pytest.raises(IRError, match="duplicate node id 'mine'"):
        p.add(Compute(id="mine", op="Neg", inputs=[x], outputs=[Value(name="e")]))
    # use-def: x is read twice by add0 (operands 0 and 1), once by add1 (operand 1), ...; edges only from producers
    assert [(n.id, i) for n, i in x.uses] == [("add0", 0), ("add0", 1), ("add1", 1), ("recurrent0", 0), ("mine", 0), ("mine", 1)]
    assert (a.outputs[0].producer, a.outputs[0].index) == (a, 0) and (r.outputs[1].producer, r.outputs[1].index) == (r, 1)
    assert sorted(p.graph.edges) == [("add0", "add1"), ("add1", "cellstate0"), ("recurrent0", "store0")]
    assert p.graph.edges["add0", "add1"]["kind"] == "data"
