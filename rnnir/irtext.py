"""Temporary shim: moved to rnnir.ir.text."""
import sys
from typing import TYPE_CHECKING

from rnnir.ir import text as _moved

if TYPE_CHECKING:  # what mypy needs to see through the shim: the names imported from the old path
    from rnnir.ir.text import parse_program as parse_program  # noqa: F401
    from rnnir.ir.text import print_program as print_program  # noqa: F401
    from rnnir.ir.text import read_program as read_program  # noqa: F401

sys.modules[__name__] = _moved
