"""Run a model call after call on onnxruntime, with its state kept inside the session.

The session a caller holds is :class:`StatefulSession` (:mod:`rnnir.runtime.session`, whose docstring says how
state is kept); the names below are the public API of ``rnnir.runtime``.  The parts: :mod:`~rnnir.runtime.spec`
(what every instance of a model shares), :mod:`~rnnir.runtime.feeds` (feeds checked against their inputs),
:mod:`~rnnir.runtime.initial` (slots' initial values and shapes), :mod:`~rnnir.runtime.ort` (onnxruntime's
IOBinding, the only module that touches its private API), :mod:`~rnnir.runtime.binding` (slot buffers, the
ping-pong of two bindings, the steady call), :mod:`~rnnir.runtime.statefile`, :mod:`~rnnir.runtime.context`
and :mod:`~rnnir.runtime.versioning`.
"""

from __future__ import annotations

from rnnir.runtime.binding import SessionStats
from rnnir.runtime.feeds import FeedError, feed_array
from rnnir.runtime.initial import StateShapeError
from rnnir.runtime.session import OnnxRuntimeError, SessionBusyError, StatefulSession
from rnnir.runtime.spec import DEFAULT_MAX_SLOT_BYTES, IOSpec, RecurrentInput, SlotSpec

__all__ = [
    "DEFAULT_MAX_SLOT_BYTES",
    "FeedError",
    "IOSpec",
    "OnnxRuntimeError",
    "RecurrentInput",
    "SessionBusyError",
    "SessionStats",
    "SlotSpec",
    "StateShapeError",
    "StatefulSession",
    "feed_array",
]
