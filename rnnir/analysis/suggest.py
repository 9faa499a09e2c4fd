"""Pairs that only the dataflow implies, offered to the caller (never used as pairs): derived on demand.

An unpaired graph input that reaches a recurrent initial state through layout-only ops, and an unpaired
output that returns that recurrence's final state, look like a state pair nobody declared.  They are derived
from the lowered program (and the names of its model's inputs), so lowering does not compute them: whoever
shows them (``rnnir show``, the JSON outputs, ``rnnir deploy``) asks :class:`SuggestedPairs`.
"""

from __future__ import annotations

from collections.abc import Iterator

from rnnir.analysis.facts import Analysis, AnalysisManager, analyses
from rnnir.analysis.tracer import OriginKind, Tracer
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, Value
from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.ir.pairs import PairSource, StatePair

__all__ = ["SuggestedPairs", "suggested_pairs"]

LAYOUT_OPS = ops_with(OpTrait.LAYOUT)  # ops that only move elements: the walk back from an initial state follows them


class SuggestedPairs(Analysis):
    """The pairs the program's IR text suggests, then those its dataflow implies (a lowered program's)."""

    def __init__(self, program: Program, facts: AnalysisManager) -> None:
        super().__init__(program, facts)
        self.pairs: tuple[StatePair, ...] = (*program.suggested_pairs, *_dataflow_pairs(program, facts.get(Tracer)))


def suggested_pairs(program: Program) -> tuple[StatePair, ...]:
    """The suggested pairs of ``program`` as it is now."""
    return analyses(program).get(SuggestedPairs).pairs


def _dataflow_pairs(program: Program, tracer: Tracer) -> list[StatePair]:
    """Dataflow-only pairs: an unpaired input reaches a recurrent initial state whose final state an unpaired output returns."""
    src = program.source
    if src is None:  # built or parsed: its pairs (and suggestions) are all written down
        return []
    graph_inputs = {i.name for i in src.model.graph.input}
    paired_in = {p.input for p in program.state_pairs}
    paired_out = {p.output for p in program.state_pairs}
    inputs = [n for n in _state_fed_inputs(program, graph_inputs) if n not in paired_in]
    if not inputs:
        return []
    made = {v.name: v for n in program.nodes for v in n.outputs if v is not None}  # an output not built here is no state's
    suggested: list[StatePair] = []
    for o in program.outputs:
        v = made.get(o.name)
        if o.name in paired_out or v is None:
            continue
        ops = {ref.origin.owner for ref in tracer.trace(v).refs() if ref.origin.kind is OriginKind.PORT}
        for name in inputs:
            for rec in program.recurrents:
                if rec.id in ops and any(_reads_through_layout(rec.port(p), name) for p in rec.state_ports if rec.port(p) is not None):
                    suggested.append(
                        StatePair(name, o.name, PairSource.DATAFLOW, f"{name!r} reaches {rec.describe()!r}, whose final state {o.name!r} returns")
                    )
                    break
    return suggested


def _state_fed_inputs(program: Program, graph_inputs: set[str]) -> list[str]:
    """Graph inputs an ONNX recurrent op's initial state is made of through layout-only ops (a recurrence
    recognised from plain ops is left out: its state ports are lowering's reading, not the model's)."""
    found: list[str] = []
    for rec in program.recurrents:
        if rec.recognised_from:
            continue
        for port in rec.state_ports:
            name = _layout_source(rec.port(port))
            if name is not None and name in graph_inputs and name not in found:
                found.append(name)
    return found


def _layout_chain(value: Value | None) -> Iterator[Value]:
    """``value``, then what it is made of backwards through layout-only ops' first inputs."""
    v = value
    while v is not None:
        yield v
        p = v.producer
        v = p.inputs[0] if isinstance(p, Compute) and p.op in LAYOUT_OPS and p.inputs else None


def _layout_source(value: Value | None) -> str | None:
    """The name of what ``value`` is made of through layout-only ops, when no op computes that."""
    chain = list(_layout_chain(value))
    return chain[-1].name if chain and chain[-1].producer is None else None


def _reads_through_layout(value: Value | None, name: str) -> bool:
    """``value`` is the value called ``name``, or reaches it backwards through layout-only ops' first inputs."""
    return any(v.name == name for v in _layout_chain(value))
