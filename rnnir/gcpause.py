"""Temporary shim: moved to rnnir.util.gcpause."""

import sys
from typing import TYPE_CHECKING

from rnnir.util import gcpause as _moved

if TYPE_CHECKING:
    from rnnir.util.gcpause import *  # noqa: F403

sys.modules[__name__] = _moved
