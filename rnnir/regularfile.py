"""Temporary shim: moved to rnnir.util.regularfile."""

import sys
from typing import TYPE_CHECKING

from rnnir.util import regularfile as _moved

if TYPE_CHECKING:
    from rnnir.util.regularfile import *  # noqa: F403

sys.modules[__name__] = _moved
