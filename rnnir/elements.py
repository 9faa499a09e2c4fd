"""Temporary shim: moved to rnnir.analysis.elements."""
import sys

from rnnir.analysis import elements as _moved

sys.modules[__name__] = _moved
