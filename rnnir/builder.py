"""Temporary shim: moved to rnnir.ir.builder."""
import sys
from typing import TYPE_CHECKING

from rnnir.ir import builder as _moved

if TYPE_CHECKING:  # what mypy needs to see through the shim: the names imported from the old path
    from rnnir.ir.builder import Builder as Builder  # noqa: F401

sys.modules[__name__] = _moved
