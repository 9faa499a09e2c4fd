"""Temporary shim: moved to rnnir.runtime.statefile."""
import sys
from typing import TYPE_CHECKING

from rnnir.runtime import statefile as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.runtime.statefile import STATE_FORMAT as STATE_FORMAT, read_state_file as read_state_file, shape_text as shape_text, write_atomically as write_atomically  # noqa: F401
