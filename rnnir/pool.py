"""Temporary shim: split into rnnir.serving.pool (``rnnir.pool`` stays a documented public path)."""
from rnnir.serving.pool.batcher import Batcher  # noqa: F401
from rnnir.serving.pool.layout import BatchLayout  # noqa: F401
from rnnir.serving.pool.pool import SessionPool  # noqa: F401
from rnnir.serving.pool.streams import PoolStats, UnknownSessionError  # noqa: F401

__all__ = ["BatchLayout", "Batcher", "PoolStats", "SessionPool", "UnknownSessionError"]
