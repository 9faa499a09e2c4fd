"""rnnir: verify how recurrent models keep their state across inference calls.

    import rnnir
    prog = rnnir.load("model.onnx")     # one call of the model as IR
    print(prog)                          # readable text
    prog.state_pairs                     # which input/output pairs carry state, and why
    model = rnnir.export(prog)           # back to ONNX, with the pairing in metadata_props
    result = rnnir.fix("model.onnx", expose_state=True)   # edited model + the edits that made it
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ExportError, IRError, ModelError, PairingError, RnnirError, StateError
from .ir import (
    Compute,
    LoadKind,
    LoadSlot,
    OrderingLayer,
    Output,
    Program,
    Provenance,
    Recurrent,
    Region,
    Return,
    Slot,
    SlotInit,
    Store,
    StoreResult,
    TensorType,
    Value,
)
from .pairs import PairSource, PortRef, SliceMap, StatePair

if TYPE_CHECKING:
    from .builder import Builder
    from .exporter import export
    from .fixes.engine import fix
    from .lower.source import ModelLike

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
    """Lower an ONNX model (path, bytes or ``onnx.ModelProto``) to a :class:`Program`, or read IR text.

    A path ending in ``.rnnir`` is IR text (:mod:`rnnir.irtext`): the program as written, with the pairs
    its ``pair`` lines declare; it is not lowered, so ``entry``/``exit`` do not apply and ``pairs`` must
    be empty (edit the text's ``pair`` lines instead).

    ``pairs`` declares the caller's state contract (``{"h0": "hn"}``) and
    replaces every other way of finding pairs.  ``entry``/``exit`` choose the
    lowering policies (see :class:`rnnir.lower.Policy`).  Raises
    :class:`ModelError` for any model that cannot be read, :class:`PairingError`
    for a declaration that names unknown inputs or outputs.
    """
    from .gcpause import paused_gc
    from .lower import Policy, lower, read_model

    if isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".rnnir"):  # any case, as the folder walk finds it
        from .irtext import read_program

        if pairs:
            raise PairingError(f"{label or os.fspath(model)}: IR text declares its own state pairs (its `pair` lines); declared pairs apply to ONNX models")
        return read_program(model, label=label)
    with paused_gc():  # see rnnir.gcpause: the collector's rescans cost ~40 % on long state paths
        src = read_model(model, label=label)
        return lower(src, pairs, Policy.named(entry, exit))


def __getattr__(name: str) -> Any:
    # export, fix and Builder import onnx and numpy, which `rnnir lint` never needs: imported on first use.  Their
    # modules are named apart from them (exporter, fixes), so importing a module never rebinds `rnnir.export`
    if name == "export":
        from .exporter import export

        return export
    if name == "fix":
        from .fixes.engine import fix

        return fix
    if name == "Builder":
        from .builder import Builder

        return Builder
    if name == "Policy":
        from .lower import Policy

        return Policy
    if name == "lint_many":  # imported on first use: `import rnnir` stays free of the CLI and the passes
        from .zoo import lint_many

        return lint_many
    raise AttributeError(f"module 'rnnir' has no attribute {name!r}")
