"""Temporary shim: moved to rnnir.onnxio.metadata."""

import sys
from typing import TYPE_CHECKING

from rnnir.onnxio import metadata as _moved

if TYPE_CHECKING:
    from rnnir.onnxio.metadata import *  # noqa: F403

sys.modules[__name__] = _moved
