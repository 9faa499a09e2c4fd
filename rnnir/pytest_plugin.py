"""Shim (a documented public path, kept: users' conftests name it, and the pytest11 entry point registers it under this name): moved to rnnir.check.pytest_plugin."""
import sys
from typing import TYPE_CHECKING

from rnnir.check import pytest_plugin as _moved

if TYPE_CHECKING:  # the sys.modules swap below hides these from mypy
    from rnnir.check.pytest_plugin import StatefulModel, stateful  # noqa: F401

__all__ = ["StatefulModel", "stateful"]  # what mypy may see through the shim

sys.modules[__name__] = _moved
