"""rnnir: verify how recurrent models keep their state across inference calls.

    import rnnir
    prog = rnnir.load("model.onnx")     # one call of the model as IR
    print(prog)                          # readable text
    prog.state_pairs                     # which input/output pairs carry state, and why
    model = rnnir.export(prog)           # back to ONNX, with the pairing in metadata_props
    result = rnnir.fix("model.onnx", expose_state=True)   # edited model + the edits that made it
"""

from __future__ import annotations

from collections.abc import Mapping
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
    from rnnir.onnxio.source import ModelLike

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


def load(
    model: ModelLike,
    pairs: Mapping[str, str | None] | None = None,
    *,
    entry: str = "dynamic",
    exit: str = "fanout",
    label: str | None = None,
) -> Program:
    """Lower an ONNX model (path, bytes or ``onnx.ModelProto``) to a :class:`Program`, or read IR text (a path
    ending in ``.rnnir``): :func:`rnnir.lower.load.load`, which says what each argument does."""
    from rnnir.lower.load import load as load_program  # lowering is imported on first use: `import rnnir` stays light

    return load_program(model, pairs, entry=entry, exit=exit, label=label)


def __getattr__(name: str) -> Any:
    # export, fix and Builder import onnx and numpy, which `rnnir lint` never needs: imported on first use.  Their
    # modules are named apart from them (exporter, fixes), so importing a module never rebinds `rnnir.export`
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
