"""Temporary shim: moved to rnnir.ir.pairs."""
import sys
from typing import TYPE_CHECKING

from rnnir.ir import pairs as _moved

if TYPE_CHECKING:  # what mypy needs to see through the shim: the names imported from the old path
    from rnnir.ir.pairs import SLICE_MAPS as SLICE_MAPS  # noqa: F401
    from rnnir.ir.pairs import ExitKind as ExitKind  # noqa: F401
    from rnnir.ir.pairs import PairSource as PairSource  # noqa: F401
    from rnnir.ir.pairs import PortRef as PortRef  # noqa: F401
    from rnnir.ir.pairs import SliceMap as SliceMap  # noqa: F401
    from rnnir.ir.pairs import StatePair as StatePair  # noqa: F401

sys.modules[__name__] = _moved
