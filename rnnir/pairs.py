"""Temporary shim: split into rnnir.ir.pairs (the caller's declaration) and rnnir.analysis.slicemaps (the slice maps)."""

from rnnir.analysis.slicemaps import ExitKind as ExitKind  # noqa: F401
from rnnir.analysis.slicemaps import PortRef as PortRef
from rnnir.analysis.slicemaps import SliceMap as SliceMap
from rnnir.ir.pairs import PairSource as PairSource  # noqa: F401
from rnnir.ir.pairs import StatePair as StatePair
