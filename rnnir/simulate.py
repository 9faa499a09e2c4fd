"""Shim (a documented public path, kept): moved to rnnir.check.simulate."""
import sys
from typing import TYPE_CHECKING

from rnnir.check import simulate as _moved

if TYPE_CHECKING:  # the sys.modules swap below hides these from mypy
    from rnnir.check.simulate import NO_TENSOR, Event, Faults, SimulationError, Simulator, Token, run_calls  # noqa: F401

__all__ = ["NO_TENSOR", "Event", "Faults", "SimulationError", "Simulator", "Token", "run_calls"]  # what mypy may see through the shim

sys.modules[__name__] = _moved
