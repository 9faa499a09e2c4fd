"""``rnnir.streaming``, a documented import path: the streaming checks, which lives in :mod:`rnnir.check.streaming`.

The name is that very module (``sys.modules``), so a name or a monkeypatch through either path is the same object.
"""

import sys
from typing import TYPE_CHECKING

from rnnir.check import streaming as _module

if TYPE_CHECKING:  # type checkers see the module's public names here
    from rnnir.check.streaming import *  # noqa: F403

sys.modules[__name__] = _module
