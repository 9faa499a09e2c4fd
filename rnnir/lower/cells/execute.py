"""Running a cell's subgraph: the evaluator over leaf feeds, the deterministic probe data, the error measure against
the reference cell, and float errors kept quiet without importing numpy for checks that never compute."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from rnnir.lower.cells.net import Net
from rnnir.lower.cells.ops import MAX_RUN_NODES, Key
from rnnir.semantics.evaluate import EvalError, run_op

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np


class Runner:
    """Evaluates values of the cell's subgraph from leaf feeds (memo per run; constants shared)."""

    def __init__(self, net: Net) -> None:
        self.net = net

    def run(self, feeds: dict[Key, np.ndarray], wanted: Sequence[Key]) -> list[np.ndarray]:
        net = self.net
        memo: dict[Key, np.ndarray] = dict(feeds)
        budget = MAX_RUN_NODES
        for target in wanted:
            stack: list[tuple[Key, bool]] = [(target, False)]
            while stack:
                k, ready = stack.pop()
                if k in memo:
                    continue
                c = net.const(k)
                if c is not None:
                    memo[k] = c
                    continue
                d = net.d(k)
                if d.kind != "node" or d.node is None:
                    raise EvalError(f"value {d.name!r} is not an input of the cell")
                ins = net.inputs(k)
                if not ready:
                    stack.append((k, True))
                    stack.extend((i, False) for i in ins if i is not None and i not in memo)
                    continue
                budget -= 1
                if budget < 0:
                    raise EvalError("the cell's subgraph is larger than expected")
                res = run_op(d.node, [memo[i] if i is not None else None for i in ins])
                for ok, r in zip(net.outputs_of(d.node, d.scope), res):
                    if ok is not None:
                        memo[ok] = r
        return [memo[k] for k in wanted]


class ProbeData:
    """Deterministic standard-normal probe data: splitmix64 over a counter, then Box-Muller.

    Any generic values serve (a cell is confirmed by agreeing with the reference cell on them); numpy.random,
    which made them before, costs a tenth of a lint of a small cell model just to import.
    """

    def __init__(self) -> None:
        self._counter = 0

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        n = 1
        for d in shape:
            n *= int(d)
        half = (n + 1) // 2
        idx = np.arange(self._counter, self._counter + 2 * half, dtype=np.uint64)
        self._counter += 2 * half
        z = idx * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x9E3779B97F4A7C15)  # wraps modulo 2**64, as splitmix64 does
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)  # in (0, 1)
        radius = np.sqrt(-2.0 * np.log(u[:half]))
        angle = 2.0 * np.pi * u[half:]
        out = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:n]
        return out.reshape(shape)


def flat(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).ravel()


def relative_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        g, w = flat(g), flat(w)
        if g.size != w.size:
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        worst = max(worst, float(np.max(np.abs(g - w))) / scale if g.size else 0.0)
    return worst


def reference_module() -> ModuleType:
    """rnnir.semantics.reference, imported when a cell is checked against it (numpy-heavy; most models have no such cell)."""
    from rnnir.semantics import reference

    return reference


@contextlib.contextmanager
def quiet_float_errors() -> Iterator[None]:
    """``numpy.errstate(all="ignore")`` without importing numpy for checks that never compute.

    Before numpy is imported its error state is the default, where floating-point errors are RuntimeWarnings:
    ignoring those warnings is the same as ignoring the errors, for a check that imports numpy on its way.
    """
    if "numpy" in sys.modules:
        with np.errstate(all="ignore"):
            yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
