"""``rnnir.irtext``, a documented import path: the IR text (print and parse), which lives in :mod:`rnnir.ir.text`.

The name is that very module (``sys.modules``), so a name or a monkeypatch through either path is the same object.
"""

import sys
from typing import TYPE_CHECKING

from rnnir.ir import text as _module

if TYPE_CHECKING:  # type checkers see the module's public names here
    from rnnir.ir.text import *  # noqa: F403

sys.modules[__name__] = _module
