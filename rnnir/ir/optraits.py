"""One table of op traits that lowering, slice tracing and every pass query.

What rnnir needs to know about an ONNX op it does not model is small: does it only move elements around
(``LAYOUT``: the state's values survive, so a final state rearranged by it is still the final state), does it
read only its input's shape (``SHAPE_ONLY``: ``ConstantOfShape(Shape(h0))`` is zeros, not the state), may a
runtime implement it as a view of its input's memory (``VIEW``: aliasing and write-after-read questions),
does it combine operands element by element (``ELEMENTWISE``: slice positions survive, values change), is
it control flow with subgraphs (``CONTROL_FLOW``).  Before this table four modules kept four different
lists.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["OpTrait", "TRAITS", "ops_with", "traits_of"]


class OpTrait(enum.Flag):
    NONE = 0
    LAYOUT = enum.auto()  # moves or selects elements, never changes a value
    VIEW = enum.auto()  # a runtime may return a view of its first input instead of a copy
    ELEMENTWISE = enum.auto()  # output element i depends on input elements i only
    CONTROL_FLOW = enum.auto()  # runs subgraphs (If, Loop, Scan)
    SHAPE_ONLY = enum.auto()  # reads only its input's shape, never a value: zeros_like(state) ignores the state


_L, _V, _E, _C, _S = OpTrait.LAYOUT, OpTrait.VIEW, OpTrait.ELEMENTWISE, OpTrait.CONTROL_FLOW, OpTrait.SHAPE_ONLY

#: op type (default ONNX domain) -> traits; an op not listed has none
TRAITS: Mapping[str, OpTrait] = MappingProxyType(
    {
        "Identity": _L | _V,
        "Reshape": _L | _V,
        "Squeeze": _L | _V,
        "Unsqueeze": _L | _V,
        "Flatten": _L | _V,
        "Slice": _L | _V,
        "Gather": _L | _V,
        "Split": _L | _V,
        "Transpose": _L | _V,
        "Expand": _L | _V,
        "Concat": _L,  # a new buffer: never a view
        "Cast": _L,  # changes the representation, not the value (within the target type's precision)
        "CastLike": _L,
        **{op: _E for op in ("Add", "Sub", "Mul", "Div", "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Clip", "Max", "Min", "Pow", "Sqrt")},
        **{op: _C for op in ("If", "Loop", "Scan")},
        "Shape": _S,
        "Size": _S,
    }
)


def traits_of(op: str) -> OpTrait:
    return TRAITS.get(op, OpTrait.NONE)


def ops_with(trait: OpTrait) -> frozenset[str]:
    """Every op type that has ``trait``."""
    return frozenset(op for op, t in TRAITS.items() if t & trait)
