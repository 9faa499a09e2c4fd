"""``rnnir.simulate``, a documented import path: the IR simulator, which lives in :mod:`rnnir.check.simulate`.

The name is that very module (``sys.modules``), so a name or a monkeypatch through either path is the same object.
"""

import sys
from typing import TYPE_CHECKING

from rnnir.check import simulate as _module

if TYPE_CHECKING:  # type checkers see the module's public names here
    from rnnir.check.simulate import *  # noqa: F403

sys.modules[__name__] = _module
