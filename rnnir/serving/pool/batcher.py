"""Calls arriving from many threads, batched into pool ticks (Triton's dynamic batching, in-process)."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from rnnir.errors import StateError
from rnnir.runtime.feeds import FeedError
from rnnir.serving.pool.pool import SessionPool
from rnnir.serving.pool.streams import UnknownSessionError

__all__ = ["Batcher"]


class _Pending:
    __slots__ = ("sid", "feeds", "outputs", "done", "result", "error")

    def __init__(self, sid: Hashable, feeds: Mapping[str, Any], outputs: Sequence[str] | None) -> None:
        self.sid = sid
        self.feeds = feeds
        self.outputs = outputs
        self.done = threading.Event()
        self.result: dict[str, np.ndarray] | None = None
        self.error: BaseException | None = None


class Batcher:
    """Calls arriving from many threads, batched into pool ticks (Triton's dynamic batching, in-process).

        batcher = Batcher(pool, max_delay=0.002)
        out = batcher.call("alice", {"input": chunk, "sr": sr})   # from any thread; blocks until its tick ran
        batcher.close()

    A worker thread takes the first waiting call, waits up to ``max_delay`` seconds for more (or until
    ``max_batch`` streams wait), and runs them as one :meth:`SessionPool.run`.  A stream's calls stay in
    order: a second call of a stream already in the tick waits for the next tick.  Streams are opened on
    their first call.  When a tick is refused before it runs (a bad feed), each of its calls is retried
    alone, so the error reaches only the caller that caused it; an error while running reaches every
    caller of the tick (part of it may have run, so nothing is retried).
    """

    def __init__(self, pool: SessionPool, *, max_delay: float = 0.002, max_batch: int | None = None) -> None:
        if max_delay < 0:
            raise ValueError(f"max_delay must not be negative, got {max_delay}")
        self.pool = pool
        self.max_delay = max_delay
        self.max_batch = max_batch
        self._queue: list[_Pending] = []
        self._cond = threading.Condition()
        self._closed = False
        self.ticks = 0
        self._worker = threading.Thread(target=self._loop, name="rnnir-batcher", daemon=True)
        self._worker.start()

    def call(self, sid: Hashable, feeds: Mapping[str, Any], outputs: Sequence[str] | None = None, timeout: float | None = None) -> dict[str, np.ndarray]:
        item = _Pending(sid, feeds, outputs)
        with self._cond:
            if self._closed:
                raise StateError("the batcher is closed")
            self._queue.append(item)
            self._cond.notify()
        if not item.done.wait(timeout):
            raise TimeoutError(f"session {sid!r}: no result within {timeout} s")
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def close(self) -> None:
        """Finish the waiting calls, then stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._worker.join()

    def __enter__(self) -> Batcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> list[_Pending]:
        """The next tick: one call per stream, oldest first, after waiting up to max_delay for company."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return []
            deadline = time.monotonic() + self.max_delay
            limit = self.max_batch or 1 << 30
            while len({p.sid for p in self._queue}) < limit and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            tick: list[_Pending] = []
            seen: set[Hashable] = set()
            rest: list[_Pending] = []
            for item in self._queue:
                if item.sid in seen or len(tick) >= limit:
                    rest.append(item)  # its stream already has a call in this tick: the next one
                else:
                    seen.add(item.sid)
                    tick.append(item)
            self._queue = rest
            return tick

    def _refuse_unknown_outputs(self, tick: list[_Pending]) -> list[_Pending]:
        """The calls of ``tick`` that ask only for outputs the model has; the others are answered with a FeedError
        now, before the tick runs: picked out of a whole tick's results, one caller's unknown name was a KeyError
        for every caller, although their calls ran and their states advanced."""
        names = self.pool.output_names
        known = set(names)
        kept: list[_Pending] = []
        for p in tick:
            unknown = [n for n in p.outputs or () if n not in known]
            if unknown:
                p.error = FeedError(f"{self.pool.label}: the model has no output(s) {unknown}; outputs are {names}")
                p.done.set()
            else:
                kept.append(p)
        return kept

    def _loop(self) -> None:
        while True:
            tick = self._take()
            if not tick:
                return
            self.ticks += 1
            tick = self._refuse_unknown_outputs(tick)
            if not tick:
                continue
            outputs = tick[0].outputs if all(p.outputs == tick[0].outputs for p in tick) else None
            try:
                results = self.pool.run({p.sid: p.feeds for p in tick}, outputs, open_missing=True)
                for p in tick:
                    p.result = results[p.sid] if p.outputs is None or outputs is not None else {k: results[p.sid][k] for k in p.outputs}
            except (FeedError, UnknownSessionError):  # raised before anything ran: isolate the failing call
                for p in tick:
                    try:
                        p.result = self.pool.run({p.sid: p.feeds}, p.outputs, open_missing=True)[p.sid]
                    except Exception as exc:  # noqa: BLE001 - handed to the caller that made the call
                        p.error = exc
            except Exception as exc:  # noqa: BLE001 - part of the tick may have run: every caller hears of it, none is retried
                for p in tick:
                    p.error = exc
            for p in tick:
                p.done.set()
