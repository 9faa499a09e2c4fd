"""A module imported on first attribute access, for the lint path.

``rnnir lint`` runs as a short process per model: numpy alone costs more than
linting a typical model, and most models never need it (it evaluates constants
for recognising hand-written cells, and backs constants of the IR).  Modules on
the lint path bind ``np`` to :data:`numpy` at run time and to the real module for
type checkers::

    if TYPE_CHECKING:
        import numpy as np
    else:
        from rnnir.lazymod import numpy as np
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["LazyModule", "numpy"]


class LazyModule:
    """Stands for the module ``name``; the first attribute read imports it (Python caches the import itself)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattribute__(self, attr: str) -> Any:
        # __getattribute__, not __getattr__: the latter runs only after a failed lookup, which costs an exception
        name = object.__getattribute__(self, "_name")
        module = sys.modules.get(name)
        if module is None:
            module = importlib.import_module(name)
        return getattr(module, attr)



numpy = LazyModule("numpy")
