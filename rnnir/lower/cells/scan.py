"""The scan: every anchor in the state cone checked once per cell kind, again only when a new cell gave it the state
source it waited for; and :func:`find_cells`, the entry point lowering calls."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.cells.ops import Key
from rnnir.lower.cells.results import CellCandidate, CellMatch, NotACell, Retry, SilentRetry
from rnnir.lower.scope import ModelIndex, Scope

if TYPE_CHECKING:
    import numpy as np
    import onnx


@dataclass
class CellScan:
    """What :func:`find_cells` found: confirmed cells, unconfirmed look-alikes, and the Loop bodies state enters.

    ``loop_carried`` maps a Loop body input that carries state (as (body scope, name)) to the Loop node, the
    Loop's scope and the carried slot; ``view_source`` answers which state source a value is a layout-only
    rearrangement of (state inputs and confirmed cells' outputs).
    """

    matches: list[CellMatch] = field(default_factory=list)
    candidates: list[CellCandidate] = field(default_factory=list)
    loop_carried: dict[tuple[Scope, str], tuple[onnx.NodeProto, Scope, int]] = field(default_factory=dict)
    _rec: Recogniser | None = field(default=None, repr=False)

    def const(self, scope: Scope, name: str) -> np.ndarray | None:
        """The value of ``name`` when it is a constant (initializer, Constant or ops over them)."""
        if self._rec is None or not name:
            return None
        return self._rec.net.const(self._rec.net.key(scope, name))

    def is_step_number(self, body: Scope, name: str) -> bool:
        """``name`` counts a Loop body's iterations from 0 (see ``Recogniser.step_number``)."""
        return self._rec is not None and bool(body.graph.input) and self._rec.step_number(body, name)

    def is_zero_start(self, scope: Scope, source: str) -> bool:
        """``source`` (a cell's ``h_source``/``c_source``) is zeros the model makes, not a state input or a cell's output."""
        if self._rec is None or not source:
            return False
        return self._rec.sources.get(self._rec.net.key(scope, source)) == "constant"

    def view_source(self, scope: Scope, name: str) -> tuple[Scope, str] | None:
        if self._rec is None:
            return None
        k = self._rec.net.key(scope, name)
        src = self._rec.view_source(k)
        if src is None:
            return None
        d = self._rec.net.d(src)
        return d.scope, d.name


def scan(rec: Recogniser) -> CellScan:
    """Every cone node once per kind; then, while new cells appear, only the anchors that waited for one.

    A confirmed cell's outputs become state sources at once, so the steps of an unrolled loop (in graph
    order) are all found in the first pass: the cost stays linear in the number of steps.
    """
    # the cell kinds (and the probing they share) load here, not with the package: most models with state have
    # no plain-op cell in their cone, and find_cells returns before scanning for them
    from rnnir.lower.cells.kinds import PATTERNS

    result = CellScan()
    failures: dict[int, CellCandidate] = {}
    nodes = rec.cone_nodes()
    todo = {pattern.kind: nodes for pattern in PATTERNS}
    while True:
        retry: dict[str, list[tuple[onnx.NodeProto, Scope, Key]]] = {kind: [] for kind in todo}
        new = _pass(rec, result, failures, todo, retry)
        if not new or not any(retry.values()):
            break
        todo = retry
    confirmed = {m.anchor for m in result.matches}
    result.candidates = [c for c in failures.values() if c.anchor not in confirmed]
    return result


def _pass(
    rec: Recogniser,
    result: CellScan,
    failures: dict[int, CellCandidate],
    todo: dict[str, list[tuple[onnx.NodeProto, Scope, Key]]],
    retry: dict[str, list[tuple[onnx.NodeProto, Scope, Key]]],
) -> list[CellMatch]:
    from rnnir.lower.cells.execute import quiet_float_errors
    from rnnir.lower.cells.kinds import PATTERNS

    new: list[CellMatch] = []
    for pattern in PATTERNS:
        kind, anchors = pattern.kind, pattern.anchor_ops
        for node, scope, k in todo[kind]:
            if id(node) in rec.done or node.op_type not in anchors:
                continue  # (the check would return None at once: no numpy.errstate, so no numpy import, for it)
            try:
                with quiet_float_errors():  # random probes may overflow a model's exp: never a warning on stderr
                    m = pattern.match(rec, node, scope, k)
            except (ValueError, IndexError, TypeError, KeyError, ArithmeticError) as exc:
                # a shape or value the checks did not foresee: this anchor stays unconfirmed, the lint goes on
                rec.done.add(id(node))
                failures[id(node)] = CellCandidate(kind, rec.net.node_name(node), f"{kind}-like structure at node {rec.net.node_name(node)!r} could not be checked: {exc}", scope.path)
                continue
            except NotACell as exc:
                failures[id(node)] = CellCandidate(kind, rec.net.node_name(node), str(exc), scope.path)
                continue
            except SilentRetry:
                retry[kind].append((node, scope, k))
                continue
            except Retry as exc:
                rec.done.discard(id(node))  # checked again once a new cell's outputs are state sources
                failures[id(node)] = CellCandidate(kind, rec.net.node_name(node), str(exc), scope.path)
                retry[kind].append((node, scope, k))
                continue
            if m is not None:
                failures.pop(id(node), None)
                rec.done.add(id(node))
                result.matches.append(m)
                new.append(m)
                rec.add_sources(m)
    return new


def find_cells(index: ModelIndex, sources: Iterable[tuple[Scope, str]]) -> CellScan:
    """Cells in the cone of ``sources`` (state inputs, as (scope, name)): confirmed matches and unconfirmed candidates."""
    rec = Recogniser(index, sources)
    if len(rec.cone) <= len(rec.sources):
        return CellScan(_rec=rec)
    found = scan(rec)
    found._rec = rec
    for k, where in rec.loop_carried.items():
        d = rec.net.d(k)
        found.loop_carried[(d.scope, d.name)] = where
    return found
