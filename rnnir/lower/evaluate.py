"""Temporary shim: moved to rnnir.semantics.evaluate."""

import sys
from typing import TYPE_CHECKING

from rnnir.semantics import evaluate as _moved

if TYPE_CHECKING:
    from rnnir.semantics.evaluate import *  # noqa: F403

sys.modules[__name__] = _moved
