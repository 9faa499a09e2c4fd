"""Temporary shim: moved to rnnir.lint.zoo."""
import sys

from rnnir.lint import zoo as _moved

sys.modules[__name__] = _moved
