"""The one worker loop: lint jobs on any :class:`concurrent.futures.Executor` (or in this process), results in
job order, a task the executor loses reported as that model's ``InternalError``.

``rnnir lint --jobs N`` and :func:`rnnir.lint_many` both run through :func:`run_jobs`; :func:`process_pool`
makes the process pool both use by default.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rnnir.lint.jobs import REPORT_HINT, LintJob, lint_one
from rnnir.lint.results import FileResult

if TYPE_CHECKING:  # concurrent.futures imports logging: `rnnir rules` and a one-model lint do without it
    from concurrent.futures import Executor, Future
    from multiprocessing.context import BaseContext

__all__ = ["fork_is_unsafe", "pool_context", "process_pool", "run_jobs"]


def run_jobs(jobs: Sequence[LintJob], executor: Executor | None = None, *, done: Callable[[str], None] | None = None) -> list[FileResult]:
    """Lint ``jobs`` on ``executor`` (``None``: one after the other, in this process); results in ``jobs`` order.

    ``done(path)`` is called as each result is taken, in order.  Every job is submitted before the first
    result is waited for; an executor that fails a task (a worker process killed, a cluster gone) fails only
    that model.  The executor is used as is and left running.
    """
    results: list[FileResult] = []
    if executor is None:
        for job in jobs:
            results.append(lint_one(job))
            if done is not None:
                done(job.path)
        return results
    futures: list[Future[FileResult]] = [executor.submit(lint_one, job) for job in jobs]
    for job, future in zip(jobs, futures):
        try:
            results.append(future.result())
        except Exception as exc:  # noqa: BLE001 - the executor lost the task: report it as this model's error, go on
            results.append(FileResult(job.path, error={"type": "InternalError", "message": _lost_task(exc)}))
        if done is not None:
            done(job.path)
    return results


def _lost_task(exc: BaseException) -> str:
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, BrokenProcessPool):
        return f"a worker process died while analysing this model ({REPORT_HINT})"
    return f"the executor lost this model's task: {type(exc).__name__}: {exc}"


def fork_is_unsafe() -> bool:
    """Whether a child forked from this process could deadlock: another thread may hold a lock (onnxruntime's
    thread pool once a session ran, a batcher thread, the caller's own) that the child inherits locked forever."""
    return threading.active_count() > 1 or "onnxruntime" in sys.modules


def pool_context() -> BaseContext | None:
    """The multiprocessing context for a worker pool started from this process: ``None`` (the default) while
    forking is safe, else ``forkserver`` (``spawn`` where there is none), which start workers from a clean
    single-threaded process."""
    import multiprocessing

    # the start method the caller set, else the platform's default (the first one listed); asking the default
    # context instead would fix it, and a later multiprocessing.set_start_method of the caller's would fail
    chosen = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    if chosen != "fork" or not fork_is_unsafe():
        return None  # workers that start clean already (spawn, forkserver), or a fork that copies no other thread
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


def process_pool(workers: int, pool_class: Callable[..., Executor] | None = None) -> Executor:
    """A process pool of ``workers`` processes that is safe to start from this process (see :func:`pool_context`).

    ``pool_class`` (default :class:`concurrent.futures.ProcessPoolExecutor`) is called with ``max_workers``,
    and ``mp_context`` only when forking is unsafe.
    """
    if pool_class is None:
        from concurrent.futures import ProcessPoolExecutor

        pool_class = ProcessPoolExecutor
    options: dict[str, Any] = {}
    context = pool_context()
    if context is not None:
        options["mp_context"] = context
    return pool_class(max_workers=workers, **options)
