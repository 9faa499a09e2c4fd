"""Temporary shim: moved to rnnir.util.writing."""

import sys
from typing import TYPE_CHECKING

from rnnir.util import writing as _moved

if TYPE_CHECKING:
    from rnnir.util.writing import *  # noqa: F403

sys.modules[__name__] = _moved
