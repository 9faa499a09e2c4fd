"""What a caller feeds a session: each value checked against its input (the dtype onnxruntime would refuse is
refused here with the input's name), or converted when the caller asked for that."""

from __future__ import annotations

from typing import Any

import numpy as np

from rnnir.errors import RnnirError
from rnnir.runtime.spec import IOSpec

__all__ = ["FeedError", "feed_array"]


class FeedError(RnnirError, ValueError):
    """A feed names an input the model does not have, a required input is missing, or an array's dtype is not
    the input's (without ``cast_inputs=True``)."""


#: values without a dtype of their own: they take the input's, as onnxruntime converts them
_UNTYPED_FEEDS = (list, tuple, int, float, bool)


def feed_array(label: str, spec: IOSpec, value: Any, cast: bool) -> np.ndarray:
    """``value`` as the array bound to input ``spec``.  An array of another dtype is refused with a
    :class:`FeedError` naming the input and both dtypes, as onnxruntime refuses it (a float64 array for a
    float input, an int64 one for int32), unless ``cast`` (``cast_inputs=True``) converts it; a list or a
    Python number has no dtype of its own and becomes the input's, as onnxruntime's ``run()`` does."""
    if isinstance(value, _UNTYPED_FEEDS) and spec.dtype is not None:
        return np.asarray(value, dtype=spec.dtype)
    arr = np.asarray(value)
    if spec.dtype is not None and arr.dtype != spec.dtype:
        if not cast:
            raise FeedError(
                f"{label}: input {spec.name!r} takes {spec.dtype}, got a {arr.dtype} array; onnxruntime refuses it too. "
                f"Convert it (x.astype(np.{spec.dtype})) or pass cast_inputs=True to convert every feed"
            )
        arr = arr.astype(spec.dtype)
    return arr
