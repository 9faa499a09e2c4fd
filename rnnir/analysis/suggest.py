"""Lowering's last stage: pairs that only the dataflow implies, offered in ``program.suggested_pairs`` (never used as pairs).

An unpaired input that reaches a recurrent initial state through layout-only ops, and an unpaired output
that returns that recurrence's final state, look like a state pair nobody declared.
"""

from __future__ import annotations

from rnnir.ir import Compute, Value
from rnnir.pairs import PairSource, StatePair
from rnnir.lower.state import LAYOUT_OPS
from rnnir.lower.values import ValueBuilder


def suggest_pairs(builder: ValueBuilder) -> None:
    """Dataflow-only pairs: an unpaired input reaches a recurrent initial state whose final state an unpaired output returns."""
    from rnnir.analysis.slices import OriginKind, trace_value

    prog = builder.program
    state = builder.state
    paired_in = {p.input for p in state.pairs}
    paired_out = {p.output for p in state.pairs}
    inputs = [n for n in state.state_fed_inputs if n not in paired_in]
    if not inputs:
        return
    suggested: list[StatePair] = []
    for o in prog.outputs:
        if o.name in paired_out:
            continue
        v = builder.operand(builder.index.root, o.name)
        if v is None or v.producer is None:
            continue
        ops = {ref.origin.owner for ref in trace_value(prog, v).refs() if ref.origin.kind is OriginKind.PORT}
        for name in inputs:
            for rec in prog.recurrents:
                if rec.id in ops and any(_reads_through_layout(rec.port(p), name) for p in rec.state_ports if rec.port(p) is not None):
                    suggested.append(
                        StatePair(name, o.name, PairSource.DATAFLOW, f"{name!r} reaches {rec.describe()!r}, whose final state {o.name!r} returns")
                    )
                    break
    prog.suggested_pairs = (*prog.suggested_pairs, *suggested)


def _reads_through_layout(value: Value | None, name: str) -> bool:
    """``value`` is the value called ``name``, or reaches it backwards through layout-only ops' first inputs."""
    v = value
    while v is not None:
        if v.name == name:
            return True
        p = v.producer
        if isinstance(p, Compute) and p.op in LAYOUT_OPS and p.inputs:
            v = p.inputs[0]
        else:
            return False
    return False
