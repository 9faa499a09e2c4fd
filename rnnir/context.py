"""Temporary shim: moved to rnnir.runtime.context."""
import sys
from typing import TYPE_CHECKING

from rnnir.runtime import context as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.runtime.context import ContextKeeper as ContextKeeper  # noqa: F401
    from rnnir.runtime.context import ContextSpec as ContextSpec
    from rnnir.runtime.context import InputContext as InputContext
