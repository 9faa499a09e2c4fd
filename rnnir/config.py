"""Temporary shim: moved to rnnir.lint.config."""
import sys

from rnnir.lint import config as _moved

sys.modules[__name__] = _moved
