"""Temporary shim: moved to rnnir.cli.fix."""
import sys

from rnnir.cli import fix as _moved

sys.modules[__name__] = _moved
