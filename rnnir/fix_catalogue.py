"""Temporary shim: moved to rnnir.fixes.catalogue."""

import sys
from typing import TYPE_CHECKING

from rnnir.fixes import catalogue as _moved

if TYPE_CHECKING:
    from rnnir.fixes.catalogue import FIXES as FIXES  # noqa: F401

sys.modules[__name__] = _moved
