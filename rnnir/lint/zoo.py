"""Linting a model zoo: many models, any ``concurrent.futures.Executor``, and shards for CI job matrices.

    import rnnir
    results = rnnir.lint_many(["models/"])                      # a process pool, one worker per CPU at most
    results = rnnir.lint_many(paths, executor=my_executor)      # threads, processes, dask, ray, ...
    [(r.path, [d.code for d in r.diagnostics], r.error) for r in results]

With dask.distributed, the zoo runs on an existing cluster::

    from distributed import Client
    with Client("scheduler:8786") as client:
        results = rnnir.lint_many(paths, executor=client.get_executor())

Results are :class:`rnnir.lint.results.FileResult` objects, one per model, **in input order** (folders
expanded to their ``*.onnx`` files in sorted order, as ``rnnir lint`` does), and equal to a serial
run's: each model is linted by the same function, in its own task, with nothing shared between
tasks.  A model that cannot be read or analysed has ``error`` set; it never stops the others.  A
task the executor itself loses (a worker process killed, a cluster gone) is reported as that
model's ``InternalError``.

Configuration is explicit here (``select``/``ignore``/``pairs``/``strict``...): a library call does
not read ``pyproject.toml``.

Sharding for CI job matrices
----------------------------
``rnnir lint models/ --shard 2/4`` (or ``lint_many(..., shard=Shard(2, 4))``) lints the second of
four disjoint shards: the models, collected and ordered as above, dealt round-robin (model k goes to
shard ``k mod 4 + 1``).  Every job of the matrix passes the same paths and changes only ``I``; the
union of the shards is the whole zoo, each model in exactly one.  GitHub Actions::

    strategy:
      matrix:
        shard: [1, 2, 3, 4]
    steps:
      - run: rnnir lint models/ --shard ${{ matrix.shard }}/4 --format sarif -o rnnir-${{ matrix.shard }}.sarif
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from rnnir.errors import RnnirError

if TYPE_CHECKING:
    from rnnir.lint.results import FileResult

__all__ = ["Shard", "ShardError", "lint_many"]

T = TypeVar("T")


class ShardError(RnnirError, ValueError):
    """A shard that is not ``I/N`` with ``1 <= I <= N``."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``: items k with ``k mod count == index - 1``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not (isinstance(self.index, int) and isinstance(self.count, int) and 1 <= self.index <= self.count):
            raise ShardError(f"a shard is I/N with 1 <= I <= N, got {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` → ``Shard(2, 4)``."""
        index, sep, count = text.partition("/")
        try:
            if not sep:
                raise ValueError
            return cls(int(index), int(count))
        except ValueError:
            raise ShardError(f"--shard takes I/N with 1 <= I <= N (e.g. 2/4), got {text!r}") from None

    def of(self, items: Sequence[T]) -> list[T]:
        """This shard's items, in their order."""
        return [item for k, item in enumerate(items) if k % self.count == self.index - 1]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def lint_many(
    paths: Iterable[str | os.PathLike[str]],
    executor: Executor | None = None,
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] = (),
    pairs: Mapping[str, str | None] | None = None,
    strict: bool = False,
    cost: bool = False,
    entry: str = "dynamic",
    exit: str = "fanout",
    max_workers: int | None = None,
    shard: Shard | None = None,
) -> list[FileResult]:
    """Lint every model under ``paths`` with ``executor`` (see the module docstring).

    ``executor=None`` makes a process pool of ``max_workers`` processes (default: one per CPU),
    clamped to the CPU count and to the number of models; ``max_workers=1`` lints in this process.
    An executor the caller passes is used as is and left running.  When this process runs other threads (or
    has imported onnxruntime, whose thread pool does), the default pool starts its workers with ``forkserver``
    rather than ``fork``: a forked child could inherit a lock another thread held and wait on it forever.  Such
    workers import the caller's main module, as :mod:`multiprocessing` always does outside ``fork``: a script
    that calls ``lint_many`` keeps the call under ``if __name__ == "__main__":``.
    """
    from rnnir.lint.executor import process_pool, run_jobs
    from rnnir.lint.jobs import LintJob, collect_models
    from rnnir.lint.results import FileResult
    from rnnir.passes.catalogue import selector_code

    targets = collect_models([os.fspath(p) for p in paths])
    if shard is not None:
        targets = shard.of(targets)
    select_t = None if select is None else tuple(map(selector_code, select))  # rule names (wrong-slot) as their codes
    ignore_t = tuple(map(selector_code, ignore))
    _check_codes(select_t or (), "select")  # once, here: not the same error on every one of 100,000 models
    _check_codes(ignore_t, "ignore")
    jobs = [
        LintJob(path=t.path, select=select_t, ignore=ignore_t, pairs=pairs, entry=entry, exit=exit, cost=cost, strict=strict)
        for t in targets
        if t.error is None
    ]

    if executor is None:
        cpus = os.cpu_count() or 1
        workers = min(max_workers or cpus, cpus, len(jobs))
        if workers <= 1:
            done = iter(run_jobs(jobs))
        else:
            with process_pool(workers) as pool:  # forkserver when this process has threads: see rnnir.lint.executor
                done = iter(run_jobs(jobs, pool))
    else:
        done = iter(run_jobs(jobs, executor))
    return [FileResult(t.path, error=t.error) if t.error is not None else next(done) for t in targets]


def _check_codes(codes: Sequence[str], what: str) -> None:
    from rnnir.passes.catalogue import check_selectors

    check_selectors(codes, what)  # a SelectionError, which is a ValueError
