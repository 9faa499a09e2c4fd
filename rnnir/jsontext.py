"""Temporary shim: moved to rnnir.util.jsontext."""

import sys
from typing import TYPE_CHECKING

from rnnir.util import jsontext as _moved

if TYPE_CHECKING:
    from rnnir.util.jsontext import *  # noqa: F403

sys.modules[__name__] = _moved
