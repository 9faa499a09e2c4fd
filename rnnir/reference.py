"""Temporary shim: moved to rnnir.semantics.reference."""

import sys
from typing import TYPE_CHECKING

from rnnir.semantics import reference as _moved

if TYPE_CHECKING:
    from rnnir.semantics.reference import *  # noqa: F403

sys.modules[__name__] = _moved
