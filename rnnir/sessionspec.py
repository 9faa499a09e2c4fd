"""Temporary shim: moved to rnnir.runtime.spec."""
import sys
from typing import TYPE_CHECKING

from rnnir.runtime import spec as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.runtime.spec import DEFAULT_MAX_SLOT_BYTES as DEFAULT_MAX_SLOT_BYTES  # noqa: F401
    from rnnir.runtime.spec import _io_spec as _io_spec
