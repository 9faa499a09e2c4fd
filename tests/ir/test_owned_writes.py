"""A write to an element of a program (rnnir.ir.nodes, ownership.Owned) lands and moves the program's version, and
is refused while the program is frozen; an element not yet in a program is written as it is built."""

from __future__ import annotations

import pytest

from rnnir.ir import TensorType
from rnnir.ir.builder import Builder
from rnnir.ir.nodes import Compute, Value
from rnnir.ir.ownership import FrozenProgramError


def test_writes_to_a_programs_value_and_node_land_and_move_its_version():
    b = Builder("p")
    x = b.input("x", shape=(1, 4))
    y = b.compute("Relu", [x])
    prog = b.program
    node = y.producer
    before = prog.version
    y.type = TensorType("float32", (2, 4))
    assert y.type.shape == (2, 4) and prog.version > before
    before = prog.version
    node.provenance = node.provenance
    assert prog.version > before
    with prog.frozen():
        with pytest.raises(FrozenProgramError):
            y.kind = "alias"
        with pytest.raises(FrozenProgramError):
            node.provenance = node.provenance
    assert y.kind == "tensor"


def test_an_element_being_built_takes_its_fields_as_given():
    v = Value("v", TensorType("float32", (3,)))
    n = Compute(id="n", inputs=[v], outputs=[], op="Add", attributes={"axis": 1})
    assert v.type.shape == (3,) and n.inputs == (v,) and n.attributes["axis"] == 1
    v.kind = "alias"
    assert v.kind == "alias"
