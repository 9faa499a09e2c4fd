"""Temporary shim: moved to rnnir.analysis.suggest."""
import sys

from rnnir.analysis import suggest as _moved

sys.modules[__name__] = _moved
