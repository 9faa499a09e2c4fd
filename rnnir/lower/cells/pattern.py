"""What a cell kind supplies (:class:`CellPattern`) and what every kind's check shares: the gates' one activation,
the nodes a match names, and the match itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.cells.ops import Key
from rnnir.lower.cells.results import CellMatch, CellWeights, NotACell
from rnnir.lower.cells.states import Feeder, StateClass
from rnnir.lower.cells.walk import Walk
from rnnir.lower.scope import Scope

if TYPE_CHECKING:
    import onnx


class CellPattern(Protocol):
    """One cell kind whose semantics :mod:`rnnir.semantics.reference` knows: registered in :data:`rnnir.lower.cells.kinds.PATTERNS`."""

    kind: str
    anchor_ops: frozenset[str]

    def match(self, rec: Recogniser, node: onnx.NodeProto, scope: Scope, k: Key) -> CellMatch | None:
        """Called once per anchor (a node whose op is in ``anchor_ops``) in the state cone, in registration order:
        the confirmed cell, None (no such structure), or raises :class:`NotACell` (a look-alike, with the reason) or
        :class:`Retry` (needs a state source not known yet)."""

    def verify(self, rec: Recogniser, feeds: Feeder, w: CellWeights, h_out: Key, c_out: Key | None, H: int) -> float:
        """Runs the matched subgraph on random inputs: its relative error against the reference cell with the
        extracted weights."""


def gate_activation(rec: Recogniser, gates: list[Key], anchor: str, kind: str) -> tuple[str, tuple[float, ...] | None, tuple[float, ...] | None]:
    """The one activation ONNX applies to every gate: the gates must agree (op and HardSigmoid's alpha/beta)."""
    seen: set[tuple[str, float | None, float | None]] = set()
    for g in gates:
        n = rec.net.node(g)
        assert n is not None
        if n.op_type == "HardSigmoid":
            alpha = float(next((a.f for a in n.attribute if a.name == "alpha"), 0.2))
            beta = float(next((a.f for a in n.attribute if a.name == "beta"), 0.5))
            seen.add(("HardSigmoid", alpha, beta))
        else:
            seen.add((n.op_type, None, None))
    if len(seen) != 1:
        raise NotACell(f"{kind}-like structure at node {anchor!r}: its gates use different activations ({', '.join(sorted(str(x[0]) for x in seen))})")
    op, a, b = seen.pop()
    return (op, None, None) if a is None or b is None else (op, (a,), (b,))


def provenance(rec: Recogniser, core: list[onnx.NodeProto | None], walk: Walk) -> tuple[str, ...]:
    names: list[str] = []
    for n in [*core, *walk.nodes]:
        if n is not None:
            nm = rec.net.node_name(n)
            if nm not in names:
                names.append(nm)
    return tuple(names)


def cell_match(
    rec: Recogniser,
    kind: str,
    scope: Scope,
    nodes: tuple[str, ...],
    x_leaves: list[Key],
    h: StateClass,
    c: StateClass | None,
    h_out: Key,
    c_out: Key | None,
    H: int,
    w: CellWeights,
    err: float,
) -> CellMatch:
    return CellMatch(
        kind=kind,
        scope_path=scope.path,
        nodes=nodes,
        x=tuple(k[1] for k in x_leaves),
        h_in=h.leaves[0][1],
        c_in=None if c is None else c.leaves[0][1],
        h_out=h_out[1],
        c_out=None if c_out is None else c_out[1],
        hidden_size=H,
        weights=w,
        h_views=tuple(k[1] for k in h.leaves),
        c_views=() if c is None else tuple(k[1] for k in c.leaves),
        h_source=h.source[1],
        c_source=None if c is None else c.source[1],
        max_error=err,
        x_shapes=tuple(rec.net.shape(k) or () for k in x_leaves),
        scope=scope,
    )
