"""The rnnir IR layer: one inference call of one model, with its persistent state made explicit.

``rnnir.ir`` re-exports the IR's program, node, value and attribute types.  The rest of the
layer sits next to it, each module one concept, importing nothing above the IR:

- :mod:`rnnir.ir.core`        :class:`Program`: the nodes of one call, the only way to edit them, its version;
- :mod:`rnnir.ir.nodes`       slots, outputs, SSA values and the nodes (load, compute, recurrent, store, return);
- :mod:`rnnir.ir.attributes`  tensor types, provenance, slot inits, load/store/ordering kinds;
- :mod:`rnnir.ir.ownership`   the immutable containers and the writes a program sees or refuses;
- :mod:`rnnir.ir.digraph`     the program's directed graph (networkx's interface, without its import cost);
- :mod:`rnnir.ir.recurrence`  the registry of recurrence kinds (ports, state entry and exit);
- :mod:`rnnir.ir.optraits`    what each ONNX op is to the analyses (layout, view, elementwise, control flow);
- :mod:`rnnir.ir.pairs`       the caller's state contract (:class:`StatePair`, :class:`SliceMap`);
- :mod:`rnnir.ir.printer`     the IR's text format, written (``str(program)``);
- :mod:`rnnir.ir.lexer`       the pieces of a line of IR text: names, literals, dense constants, tensor types;
- :mod:`rnnir.ir.text`        the IR's text format, parsed back and read from files (public path ``rnnir.irtext``);
- :mod:`rnnir.ir.builder`     :class:`Builder`, a program built without ONNX;
- :mod:`rnnir.ir.structure`   the store structure ONNX cannot express, recorded as IR text in metadata.
"""

from __future__ import annotations

from rnnir.ir.attributes import LoadKind, OrderingLayer, Provenance, QuantParams, SlotInit, StoreResult, TensorType
from rnnir.ir.core import Program, check_acyclic
from rnnir.ir.nodes import Compute, LoadSlot, Node, Output, PendingConst, Recurrent, Region, Return, Slot, Store, Value
from rnnir.ir.ownership import FrozenProgramError, ImmutableIRError, IRTuple
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
