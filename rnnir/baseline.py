"""Temporary shim: moved to rnnir.lint.baseline."""
import sys

from rnnir.lint import baseline as _moved

sys.modules[__name__] = _moved
