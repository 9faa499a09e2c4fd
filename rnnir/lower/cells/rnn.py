"""The simple RNN cell: ``act(W x + R h + b)`` with a matmul on the state and an input besides it (``act(W h)``
alone is an MLP layer on the state), confirmed against :func:`rnnir.semantics.reference.rnn`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.cells.execute import reference_module, relative_error
from rnnir.lower.cells.ops import CANDIDATE_ACTS, TOL, Key
from rnnir.lower.cells.pattern import cell_match, provenance
from rnnir.lower.cells.results import CellMatch, CellWeights, NotACell, Retry, SilentRetry
from rnnir.lower.cells.states import Feeder
from rnnir.lower.cells.walk import affine_walk, h_order, state_classes, threads
from rnnir.lower.scope import Scope
from rnnir.semantics.evaluate import EvalError

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np


class RnnPattern:
    """RNN: anchored on the activation of ``act(affine(x, h))``."""

    kind = "RNN"
    anchor_ops = frozenset(CANDIDATE_ACTS)

    def match(self, rec: Recogniser, node: onnx.NodeProto, scope: Scope, k: Key) -> CellMatch | None:
        if node.op_type not in CANDIDATE_ACTS or id(node) in rec.claimed:
            return None
        net = rec.net
        pre = net.inputs(k)[0]
        if pre is None:
            return None
        anchor = net.node_name(node)
        for cons, sc in net.consumers(k):
            if cons.op_type == "Mul":
                other = [i for i in (net.key(sc, nm) for nm in cons.input if nm) if i != k]
                if any(not net.is_const(i) for i in other):
                    return None  # gated by another run-time value: part of a larger cell, not an RNN's new state
        try:
            walk = affine_walk(rec, [pre], frozenset(), anchor)
        except Retry as exc:
            raise SilentRetry(str(exc)) from None
        except NotACell:
            return None  # act(something not affine in the state): not an RNN cell, and nothing that looks like one
        if not walk.matmul_on_state or not walk.state_leaves:
            return None
        classes = state_classes(rec, walk.state_leaves, anchor)
        if not walk.x_leaves and not (len(classes) > 1 and any(c.source in rec.cell_of_source for c in classes)):
            # an RNN cell reads an input besides its state: act(W h) alone is an MLP layer on the state; a stacked
            # layer's input is the new state of a cell found already (the layer below), read as state too
            return None
        pre_shape = None
        rec.done.add(id(node))
        last = ""
        for h_class in h_order(rec, classes, None):
            x_leaves = walk.x_leaves + [c.leaves[0] for c in classes if c is not h_class]
            try:
                H = rec.prober.gate_width(x_leaves, [h_class], pre, anchor)
                feeds = rec.prober.feeder(x_leaves, h_class, None, anchor, H)
                ((W, R, b),) = rec.prober.probe(feeds, [pre])
                pre_shape = len(b)
                if pre_shape != H:
                    last = f"RNN-like structure at node {anchor!r}: its output has {pre_shape} elements, the state {H}"
                    continue
                w = CellWeights(W[None], R[None], np.concatenate([b, np.zeros(H)])[None], (node.op_type,))
                err = self.verify(rec, feeds, w, k, None, H)
            except EvalError as exc:
                raise NotACell(f"RNN-like structure at node {anchor!r} could not be run: {exc}") from None
            if err <= TOL and threads(rec, h_class, "RNN", w):
                return cell_match(rec, "RNN", scope, provenance(rec, [node], walk), x_leaves, h_class, None, k, None, H, w, err)
            if err > TOL:
                last = f"RNN-like structure at node {anchor!r} does not compute an RNN cell: differs from {node.op_type}(Wx + Rh + b) by {err:.3g}"
        if last:
            raise NotACell(last)
        return None

    def verify(self, rec: Recogniser, feeds: Feeder, w: CellWeights, h_out: Key, c_out: Key | None, H: int) -> float:
        x, h, _ = rec.prober.random_inputs(feeds)
        (got,) = rec.runner.run(feeds.make(x, h, None), [h_out])
        _, y_h = reference_module().rnn(x[None], w.W, w.R, w.B, initial_h=h[None], hidden_size=H, activations=list(w.activations))
        return relative_error([got], [y_h])
