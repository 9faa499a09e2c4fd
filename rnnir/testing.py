"""``rnnir.testing``, a documented import path: the multi-call checker, which lives in :mod:`rnnir.check.multicall`.

The name is that very module (``sys.modules``), so a name or a monkeypatch through either path is the same object.
"""

import sys
from typing import TYPE_CHECKING

from rnnir.check import multicall as _module

if TYPE_CHECKING:  # type checkers see the module's public names here
    from rnnir.check.multicall import *  # noqa: F403

sys.modules[__name__] = _module
