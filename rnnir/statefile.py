"""Temporary shim: moved to rnnir.runtime.statefile."""
import sys
from typing import TYPE_CHECKING

from rnnir.runtime import statefile as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.runtime.statefile import STATE_FORMAT as STATE_FORMAT  # noqa: F401
    from rnnir.runtime.statefile import read_state_file as read_state_file
    from rnnir.runtime.statefile import shape_text as shape_text
    from rnnir.runtime.statefile import write_atomically as write_atomically
