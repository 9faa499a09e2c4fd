"""Pausing Python's cyclic garbage collector while a large model is lowered and analysed.

Lowering allocates a few objects per ONNX node and IR node, nearly all of them alive until the
end.  CPython's collector keeps re-scanning that growing heap (every full collection walks every
tracked object), which cost about 40 % of the time of linting 40,000 elementwise nodes on a state
path.  Nothing built there needs a collection to be freed early, so the collector is paused for
the duration and resumed (if it was running) afterwards; cycles left behind are collected then.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_for_the_process", "paused_gc"]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; nested blocks and an already-disabled collector are left alone."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def paused_for_the_process() -> Iterator[None]:
    """For a command that is the last thing its process does (the ``rnnir`` console script): the collector is
    paused for the whole command, and at its end what the command built is frozen (``gc.freeze``), so neither a
    collection after the work nor the interpreter's collection at shutdown walks that heap again -- the process
    is about to end and the OS takes its memory back.  On syn_100k_r1000 those walks were ~0.3 s of a ~2 s lint.

    A caller that runs several models in the block collects between them itself (``gc.collect(0)``, as the
    serial ``rnnir lint`` of many files does), so the block's garbage stays bounded by one model's.  The
    collector is resumed afterwards if it was running: a process that goes on keeps the frozen objects for good.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
