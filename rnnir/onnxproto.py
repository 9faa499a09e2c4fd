"""Temporary shim: moved to rnnir.onnxio.proto."""

import sys
from typing import TYPE_CHECKING

from rnnir.onnxio import proto as _moved

if TYPE_CHECKING:
    from rnnir.onnxio.proto import *  # noqa: F403

sys.modules[__name__] = _moved
