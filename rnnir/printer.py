"""Temporary shim: moved to rnnir.render.graph."""
import sys

from rnnir.render import graph as _moved

sys.modules[__name__] = _moved
