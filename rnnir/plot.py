"""Temporary shim: moved to rnnir.check.plot."""
import sys
from typing import TYPE_CHECKING

from rnnir.check import plot as _moved

if TYPE_CHECKING:  # the sys.modules swap below hides these from mypy
    from rnnir.check.plot import PlotError, PlotUnavailable, plot_report, require_matplotlib  # noqa: F401

__all__ = ["PlotError", "PlotUnavailable", "plot_report", "require_matplotlib"]  # what mypy may see through the shim

sys.modules[__name__] = _moved
