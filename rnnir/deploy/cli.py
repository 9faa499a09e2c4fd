"""Temporary shim: moved to rnnir.cli.deploy."""
import sys

from rnnir.cli import deploy as _moved

sys.modules[__name__] = _moved
