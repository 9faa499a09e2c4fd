"""rnnir: verify how recurrent models keep their state across inference calls.

    import rnnir
    prog = rnnir.load("model.onnx")     # one call of the model as IR
    print(prog)                          # readable text
    prog.state_pairs                     # which input/output pairs carry state, and why
    model = rnnir.export(prog)           # back to ONNX, with the pairing in metadata_props
    result = rnnir.fix("model.onnx", expose_state=True)   # edited model + the edits that made it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rnnir.errors import ExportError, IRError, ModelError, PairingError, RnnirError, StateError
from rnnir.ir.attributes import LoadKind, OrderingLayer, Provenance, SlotInit, StoreResult, TensorType
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, LoadSlot, Output, Recurrent, Region, Return, Slot, Store, Value
from rnnir.ir.pairs import PairSource, StatePair

if TYPE_CHECKING:
    from rnnir.analysis.slicemaps import PortRef, SliceMap
    from rnnir.exporter import export
    from rnnir.fixes.engine import fix
    from rnnir.ir.builder import Builder
    from rnnir.lower.load import load

__all__ = [
    "Builder",
    "Compute",
    "ExportError",
    "IRError",
    "LoadKind",
    "LoadSlot",
    "ModelError",
    "OrderingLayer",
    "Output",
    "PairSource",
    "PairingError",
    "Policy",
    "PortRef",
    "Program",
    "Provenance",
    "Recurrent",
    "Region",
    "Return",
    "RnnirError",
    "SliceMap",
    "Slot",
    "SlotInit",
    "StateError",
    "StatePair",
    "Store",
    "StoreResult",
    "TensorType",
    "Value",
    "export",
    "fix",
    "lint_many",
    "load",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # load, export, fix and Builder import lowering, onnx and numpy: imported on first use, so `import rnnir` stays
    # light.  Their modules are named apart from them (lower.load, exporter, fixes): importing one never rebinds them
    if name == "load":
        from rnnir.lower.load import load

        return load
    if name == "export":
        from rnnir.exporter import export

        return export
    if name == "fix":
        from rnnir.fixes.engine import fix

        return fix
    if name in ("PortRef", "SliceMap"):  # analysis results (rnnir.analysis): `import rnnir` loads the IR only
        from rnnir.analysis import slicemaps

        return getattr(slicemaps, name)
    if name == "Builder":
        from rnnir.ir.builder import Builder

        return Builder
    if name == "Policy":
        from rnnir.lower import Policy

        return Policy
    if name == "lint_many":  # imported on first use: `import rnnir` stays free of the CLI and the passes
        from rnnir.lint.zoo import lint_many

        return lint_many
    raise AttributeError(f"module 'rnnir' has no attribute {name!r}")
