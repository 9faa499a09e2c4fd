"""Many streams of one model, keyed by session id, batched into one onnxruntime call (:mod:`.pool`, whose
docstring says how), and :class:`Batcher`, which batches calls from many threads into ticks."""

from __future__ import annotations

from rnnir.serving.pool.batcher import Batcher
from rnnir.serving.pool.layout import BatchLayout
from rnnir.serving.pool.pool import SessionPool
from rnnir.serving.pool.streams import PoolStats, UnknownSessionError

__all__ = ["BatchLayout", "Batcher", "PoolStats", "SessionPool", "UnknownSessionError"]
