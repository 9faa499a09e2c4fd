"""``rnnir.load``: a model file, bytes or proto lowered to a :class:`Program`, or a ``.rnnir`` file read as IR text.

It lives here, under every layer that loads a model (the lint library, the fixes, the checks), so none of them goes
through the package's façade to reach it; ``rnnir.load`` is this function.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rnnir.errors import PairingError

if TYPE_CHECKING:
    from rnnir.ir.core import Program
    from rnnir.onnxio.source import ModelLike

__all__ = ["load"]


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
    from rnnir.lower.build import lower
    from rnnir.lower.policy import Policy
    from rnnir.onnxio.source import read_model
    from rnnir.util.gcpause import paused_gc

    if isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".rnnir"):  # any case, as the folder walk finds it
        from rnnir.ir.text import read_program

        if pairs:
            raise PairingError(f"{label or os.fspath(model)}: IR text declares its own state pairs (its `pair` lines); declared pairs apply to ONNX models")
        return read_program(model, label=label)
    with paused_gc():  # see rnnir.util.gcpause: the collector's rescans cost ~40 % on long state paths
        src = read_model(model, label=label)
        return lower(src, pairs, Policy.named(entry, exit))
