"""Temporary shim: moved to rnnir.analysis.slices."""
import sys

from rnnir.analysis import slices as _moved

sys.modules[__name__] = _moved
