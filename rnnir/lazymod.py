"""Temporary shim: moved to rnnir.util.lazymod."""

import sys
from typing import TYPE_CHECKING

from rnnir.util import lazymod as _moved

if TYPE_CHECKING:
    from rnnir.util.lazymod import *  # noqa: F403

sys.modules[__name__] = _moved
