"""Temporary shim: moved to rnnir.ir.optraits."""
import sys
from typing import TYPE_CHECKING

from rnnir.ir import optraits as _moved

if TYPE_CHECKING:  # what mypy needs to see through the shim: the names imported from the old path
    from rnnir.ir.optraits import OpTrait as OpTrait  # noqa: F401
    from rnnir.ir.optraits import ops_with as ops_with  # noqa: F401

sys.modules[__name__] = _moved
