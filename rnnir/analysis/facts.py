"""One analysis manager per program: results kept outside the IR, keyed by analysis type, valid for one version.

MLIR's ``AnalysisManager::getAnalysis<T>()``: an analysis is a class constructed from the program (and the
manager, to ask for the analyses it builds on); ``analyses(program).get(SliceAnalysis)`` computes it the first
time and hands back the same object until the program changes.  The program's :attr:`~rnnir.ir.Program.version`
is the whole key: every edit of a program goes through it (its containers are immutable tuples and its owned
objects count their own writes), so no cached answer outlives an edit.  Nothing here writes into the program;
the manager hangs in ``program.meta``, the IR's store for what other layers derive from it (onnx-ir's
``Model.meta``), which is never printed, compared or versioned.

    from rnnir.analysis.facts import analyses
    from rnnir.analysis.slices import SliceAnalysis

    maps = analyses(program).get(SliceAnalysis)
"""

from __future__ import annotations

from typing import TypeVar, cast

from rnnir.ir.core import Program

__all__ = ["Analysis", "AnalysisManager", "analyses"]


class Analysis:
    """Base of every analysis: built from the program it describes, asking ``facts`` for the analyses it needs.

    A result is read-only by contract: every caller of :meth:`AnalysisManager.get` shares it.
    """

    def __init__(self, program: Program, facts: AnalysisManager) -> None:
        self.program = program


A = TypeVar("A", bound=Analysis)

_META_KEY = "rnnir.analysis"  # where a program keeps its manager in ``program.meta``


class AnalysisManager:
    """The analyses of one program, each computed at most once per version of the program."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._results: dict[type[Analysis], tuple[int, Analysis]] = {}

    def get(self, kind: type[A]) -> A:
        """The result of analysis ``kind`` for the program as it is now (computed now if the program changed)."""
        version = self.program.version
        hit = self._results.get(kind)
        if hit is not None and hit[0] == version:
            return cast(A, hit[1])  # stored below under its own type
        result = kind(self.program, self)
        self._results[kind] = (version, result)
        return result

    def cached(self, kind: type[A]) -> A | None:
        """The result of ``kind`` if it is current, without computing it."""
        hit = self._results.get(kind)
        return cast(A, hit[1]) if hit is not None and hit[0] == self.program.version else None


def analyses(program: Program) -> AnalysisManager:
    """The program's analysis manager (made on first use)."""
    manager = program.meta.get(_META_KEY)
    if not isinstance(manager, AnalysisManager) or manager.program is not program:
        manager = AnalysisManager(program)
        program.meta[_META_KEY] = manager
    return manager
