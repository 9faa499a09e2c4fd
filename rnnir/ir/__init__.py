"""The rnnir IR layer: one inference call of one model, with its persistent state made explicit.

``rnnir.ir`` re-exports the IR's node, value and program types (:mod:`rnnir.ir.core`).  The rest of the
layer sits next to it, each module one concept, importing nothing above the IR:

- :mod:`rnnir.ir.core`        the node, value and slot types and :class:`Program`;
- :mod:`rnnir.ir.digraph`     the program's directed graph (networkx's interface, without its import cost);
- :mod:`rnnir.ir.recurrence`  the registry of recurrence kinds (ports, state entry and exit);
- :mod:`rnnir.ir.optraits`    what each ONNX op is to the analyses (layout, view, elementwise, control flow);
- :mod:`rnnir.ir.pairs`       the caller's state contract (:class:`StatePair`, :class:`SliceMap`);
- :mod:`rnnir.ir.text`        the IR's text format, printed and parsed back (public path ``rnnir.irtext``);
- :mod:`rnnir.ir.builder`     :class:`Builder`, a program built without ONNX;
- :mod:`rnnir.ir.structure`   the store structure ONNX cannot express, recorded as IR text in metadata.
"""

from __future__ import annotations

from rnnir.ir.core import (
    Compute,
    FrozenProgramError,
    ImmutableIRError,
    IRTuple,
    LoadKind,
    LoadSlot,
    Node,
    OrderingLayer,
    Output,
    PendingConst,
    Program,
    Provenance,
    QuantParams,
    Recurrent,
    Region,
    Return,
    Slot,
    SlotInit,
    Store,
    StoreResult,
    TensorType,
    Value,
    check_acyclic,
)
from rnnir.ir.recurrence import Recognition

__all__ = [
    "FrozenProgramError",
    "IRTuple",
    "ImmutableIRError",
    "TensorType",
    "QuantParams",
    "Provenance",
    "LoadKind",
    "StoreResult",
    "OrderingLayer",
    "SlotInit",
    "Slot",
    "Output",
    "Value",
    "PendingConst",
    "Node",
    "LoadSlot",
    "Compute",
    "Region",
    "Recurrent",
    "Store",
    "Return",
    "Program",
    "Recognition",
    "check_acyclic",
]
