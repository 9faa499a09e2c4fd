"""Temporary shim: moved to rnnir.ir.structure."""
import sys
from typing import TYPE_CHECKING

from rnnir.ir import structure as _moved

if TYPE_CHECKING:  # what mypy needs to see through the shim: the names imported from the old path
    from rnnir.ir.structure import StoreFact as StoreFact  # noqa: F401
    from rnnir.ir.structure import StoreStructure as StoreStructure  # noqa: F401
    from rnnir.ir.structure import read_structure as read_structure  # noqa: F401
    from rnnir.ir.structure import structure_of as structure_of  # noqa: F401

sys.modules[__name__] = _moved
