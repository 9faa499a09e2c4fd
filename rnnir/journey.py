"""Temporary shim: moved to rnnir.render.journey."""
import sys

from rnnir.render import journey as _moved

sys.modules[__name__] = _moved
