"""``rnnir.pytest_plugin``, a documented import path: the pytest plugin (users' conftests name it, and the pytest11 entry point registers it under this name), which lives in :mod:`rnnir.check.pytest_plugin`.

The name is that very module (``sys.modules``), so a name or a monkeypatch through either path is the same object.
"""

import sys
from typing import TYPE_CHECKING

from rnnir.check import pytest_plugin as _module

if TYPE_CHECKING:  # type checkers see the module's public names here
    from rnnir.check.pytest_plugin import *  # noqa: F403

sys.modules[__name__] = _module
