"""Temporary shim: moved to rnnir.onnxio.source."""

import sys
from typing import TYPE_CHECKING

from rnnir.onnxio import source as _moved

if TYPE_CHECKING:
    from rnnir.onnxio.source import *  # noqa: F403

sys.modules[__name__] = _moved
