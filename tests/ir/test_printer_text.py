"""What the printer writes, line for line, for a small program: the format of :mod:`rnnir.ir.text`'s docstring, written
out by hand.  A round trip cannot see what the reader takes either way (a type after a load, a loc value equal to the
result's name, the blank line before the nodes); this test does."""

from __future__ import annotations

import numpy as np

from rnnir.ir.attributes import Provenance, SlotInit, TensorType
from rnnir.ir.builder import Builder
from rnnir.ir.nodes import Slot
from rnnir.ir.text import print_program

EXPECTED = """program @cell {
  slot @h : float32[1,2] init=zeros
  output hn : float32[1,2]
  value %x : float32[T,2]
  pair h -> hn builder "slot built with rnnir.Builder"

  %h = load_slot<@h, copy>() loc{'id': 'loadslot0'}
  %fusedadd_0 = com.microsoft.FusedAdd(%h, %x) loc{'id': 'fusedadd0'} : float32[1,2]
  %relu_0 = Relu(%fusedadd_0) loc{'id': 'relu0'} : ?[1,2]
  %identity_0 = Identity(%relu_0) loc{'id': 'identity0'}
  %store_h_0 = store<@h, token>(%relu_0) loc{'id': 'store0', 'value': 'h'}
  %store_hn_0 = store<out:hn, value>(%relu_0) loc{'id': 'store1', 'value': 'hn'}
  return<by runtime>(%store_h_0, %store_hn_0) loc{'id': 'return0'}
  order %h -> %store_hn_0
}"""


def test_a_small_program_prints_exactly_as_the_format_says():
    # what is left out: a slot's loc equal to its name, a node's loc value equal to its first result's name, the
    # types of a load's and a store's results (the slot's and the destination's), the types of untyped results
    b = Builder("cell")
    h = b.slot("h", "float32", (1, 2))
    h.provenance = Provenance(value="h")
    out = b.output("hn", "float32", (1, 2))
    x = b.input("x", "float32", ("T", 2))
    b.input("unused", "float32", (3,))  # a value nothing reads is not written
    hv = b.load(h)
    s = b.compute("FusedAdd", [hv, x], domain="com.microsoft", types=[h.type])
    u = b.compute("Relu", [s], types=[TensorType(None, (1, 2))])  # a shape without a dtype is a known type too
    b.compute("Identity", [u])
    b.store(u, h)
    so = b.store(u, out, "value")
    b.order(hv, so)
    assert print_program(b.build()) == EXPECTED


def test_a_slot_init_prints_its_kind_whatever_value_it_carries():
    """Only a constant init writes its value: a caller-supplied or zero init that carries an array stays what it is."""
    b = Builder("p")
    for kind in ("caller", "zeros"):
        b.program.add_slot(Slot(name=kind, init=SlotInit(kind, np.ones(2, np.float32))))
    b.slot("k", "float32", (2,), init=np.array([1.5, 2.5], np.float32))
    text = print_program(b.build())
    assert "slot @caller : ?[*] init=caller\n" in text and "slot @zeros : ?[*] init=zeros\n" in text
    assert "slot @k : float32[2] init=constant dense<float32[2] [1.5, 2.5]>\n" in text
