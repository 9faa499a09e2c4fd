"""Waits with an end, for tests of code that runs on threads (the pool's Batcher).

A test that can hang forever is a bad test: a broken worker thread (one that never answers, never stops, or holds
its lock in a loop) must fail the test in seconds, not stall the suite until an outer timeout kills it. Every wait
here is bounded, and every thread is a daemon, so a thread stuck in broken code keeps no process alive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import pytest

__all__ = ["WAIT", "closing", "together", "within"]

#: seconds: far more than a tick takes, even on a loaded machine
WAIT = 5.0

class _Closable(Protocol):
    def close(self) -> None: ...


T = TypeVar("T")
C = TypeVar("C", bound=_Closable)


def within(call: Callable[[], T], timeout: float = WAIT, what: str = "") -> T:
    """``call()`` on a daemon thread: its result or its exception, or the test fails after ``timeout`` seconds.

    Even a call that blocks on a lock the code under test never releases (where a ``timeout=`` argument of the
    call itself cannot help) ends the test."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="bounded-call", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        pytest.fail(f"{what or getattr(call, '__name__', 'the call')} did not return within {timeout} s")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


@contextmanager
def closing(thing: C, timeout: float = WAIT) -> Iterator[C]:
    """``with closing(Batcher(...)) as b:`` — closed at the end, and the test fails if closing takes longer than
    ``timeout`` seconds (a worker that never stops)."""
    try:
        yield thing
    finally:
        within(thing.close, timeout, "close()")


def together(calls: Sequence[Callable[[], Any]], timeout: float = 2 * WAIT) -> list[Any]:
    """Run each call on its own daemon thread, released at once; each one's result or exception, in order.

    A call still running after ``timeout`` seconds fails the test (naming which)."""
    start = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)
    done = [False] * len(calls)

    def client(k: int) -> None:
        try:
            start.wait(timeout)
            out[k] = calls[k]()
        except Exception as exc:  # noqa: BLE001 - what the caller sees
            out[k] = exc
        done[k] = True

    threads = [threading.Thread(target=client, args=(k,), name=f"client-{k}", daemon=True) for k in range(len(calls))]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    stuck = [k for k, d in enumerate(done) if not d]
    if stuck:
        pytest.fail(f"call(s) {stuck} did not return within {timeout} s")
    return out
