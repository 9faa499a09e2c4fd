"""Temporary shim: moved to rnnir.analysis.statekinds."""
import sys

from rnnir.analysis import statekinds as _moved

sys.modules[__name__] = _moved
