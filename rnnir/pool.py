"""``rnnir.pool``, a documented import path: the session pool and the batcher, which lives in :mod:`rnnir.serving.pool`.

The name is that very module (``sys.modules``), so a name or a monkeypatch through either path is the same object.
"""

import sys
from typing import TYPE_CHECKING

from rnnir.serving import pool as _module

if TYPE_CHECKING:  # type checkers see the module's public names here
    from rnnir.serving.pool import *  # noqa: F403

sys.modules[__name__] = _module
