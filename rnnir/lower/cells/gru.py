"""The GRU cell: a ``tanh`` candidate ``n`` whose input holds a sigmoid-gated product (the reset gate), blended with
a state input by a second sigmoid ``z`` in any algebraic arrangement; the roles structure cannot fix (reset before or
after the matmul, ``z`` as keep or write ratio) are tried against :func:`rnnir.semantics.reference.gru`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.cells.execute import flat, reference_module, relative_error
from rnnir.lower.cells.ops import BLEND_OPS, CANDIDATE_ACTS, GATE_ACTS, LINEAR_OPS, PARAM_OPS, TOL, Key, pick
from rnnir.lower.cells.pattern import cell_match, gate_activation, provenance
from rnnir.lower.cells.results import CellMatch, CellWeights, NotACell, Retry
from rnnir.lower.cells.states import Feeder
from rnnir.lower.cells.walk import affine_walk, state_classes, threads
from rnnir.lower.scope import Scope
from rnnir.semantics.evaluate import EvalError

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np


class GruPattern:
    """GRU: anchored on the candidate's activation."""

    kind = "GRU"
    anchor_ops = frozenset(CANDIDATE_ACTS)

    def match(self, rec: Recogniser, node: onnx.NodeProto, scope: Scope, k: Key) -> CellMatch | None:
        if node.op_type not in CANDIDATE_ACTS or id(node) in rec.lstm_claimed:
            return None
        net = rec.net
        pre_n = net.inputs(k)[0]
        if pre_n is None:
            return None
        blends = self._blends(rec, k, None)
        if not blends:
            # worth waiting for a state input only when the candidate has its reset-gated product already
            if self._reset_gates(rec, pre_n) and any(rec.view_source(v) is None for v in self._blend_state_terms(rec, k)):
                raise Retry(f"GRU-like structure at node {net.node_name(node)!r}: its output blend reads no state input")
            return None
        anchor = net.node_name(node)
        resets = self._reset_gates(rec, pre_n)
        rec.claimed.add(id(node))
        if len(resets) != 1:
            rec.done.add(id(node))
            what = "no reset gate" if not resets else f"{len(resets)} gated products, not one reset gate"
            raise NotACell(f"GRU-like structure at node {anchor!r}: its candidate n = {node.op_type}(...) has {what}")
        r_gate = resets[0]
        rn = net.node(r_gate)
        if rn is not None:
            rec.claimed.add(id(rn))
        blends = [b for b in blends if b[1] != r_gate]
        rec.done.add(id(node))
        last = f"GRU-like structure at node {anchor!r} does not compute a GRU cell"
        for h_out, z_gate, h_terms in blends[:3]:
            zn = net.node(z_gate)
            if zn is not None:
                rec.claimed.add(id(zn))
            pres = {"z": rec.pre(z_gate), "r": rec.pre(r_gate), "n": pre_n}
            gate_act = gate_activation(rec, [z_gate, r_gate], anchor, "GRU")
            walk = affine_walk(rec, list(pres.values()), frozenset({r_gate}), anchor)
            classes = state_classes(rec, [*walk.state_leaves, *h_terms], anchor)
            h_class = next(c for c in classes if h_terms[0] in c.leaves)
            if any(t not in h_class.leaves for t in h_terms):
                raise NotACell(f"GRU-like structure at node {anchor!r}: its output blend reads two different state slices")
            if not any(leaf in h_class.leaves for leaf in walk.state_leaves) and walk.state_leaves:
                other = walk.state_leaves[0][1]
                raise NotACell(
                    f"GRU-like structure at node {anchor!r}: its output blend keeps {h_terms[0][1]!r} but its gates read {other!r}, a different state slice"
                )
            x_leaves = walk.x_leaves + [c.leaves[0] for c in classes if c is not h_class]
            try:
                H = rec.prober.gate_width(x_leaves, [h_class], pres["z"], anchor)
                feeds = rec.prober.feeder(x_leaves, h_class, None, anchor, H)
                (r_shape,) = [a.shape for a in rec.runner.run(feeds.make(*rec.prober.zeros(feeds)), [pres["r"]])]
                ones = {r_gate: np.ones(r_shape)}
                lin = rec.prober.probe(feeds, [pres["z"], pres["r"], pres["n"]], extra=ones)
                x0, h0, _ = rec.prober.zeros(feeds)
                (bn_r0,) = rec.runner.run({**feeds.make(x0, h0, None), r_gate: np.zeros(r_shape)}, [pres["n"]])
                bn_r0 = flat(bn_r0).reshape(feeds.batch, -1)[0]
                (Wz, Rz, bz), (Wr, Rr, br), (Wn, Rn, bn) = lin
                if Wz.shape[0] != H or Rn.shape != (H, H):
                    raise NotACell(f"GRU-like structure at node {anchor!r}: gate sizes do not match the state size {H}")
                best: tuple[float, CellWeights] | None = None
                for lbr in (1, 0):
                    for pol in (1.0, -1.0):
                        W = np.concatenate([pol * Wz, Wr, Wn])[None]
                        R = np.concatenate([pol * Rz, Rr, Rn])[None]
                        zero = np.zeros(H)
                        if lbr:
                            B = np.concatenate([pol * bz, br, bn_r0, zero, zero, bn - bn_r0])[None]
                        else:
                            B = np.concatenate([pol * bz, br, bn, zero, zero, zero])[None]
                        w = CellWeights(W, R, B, (gate_act[0], node.op_type), lbr, *gate_act[1:])
                        err = self.verify(rec, feeds, w, h_out, None, H)
                        if best is None or err < best[0]:
                            best = (err, w)
                        if err <= TOL:
                            break
                    if best is not None and best[0] <= TOL:
                        break
            except EvalError as exc:
                raise NotACell(f"GRU-like structure at node {anchor!r} could not be run: {exc}") from None
            assert best is not None
            err, w = best
            if err <= TOL:
                if not threads(rec, h_class, "GRU", w):
                    last = f"GRU-like structure at node {anchor!r} reads the output of another cell as its state"
                    continue
                nodes = provenance(rec, [node, net.node(h_out), net.node(z_gate), net.node(r_gate)], walk)
                return cell_match(rec, "GRU", scope, nodes, x_leaves, h_class, None, h_out, None, H, w, err)
            last = f"GRU-like structure at node {anchor!r} does not compute a GRU cell: the new state at {h_out[1]!r} differs from (1-z)*n + z*h with the extracted weights by {err:.3g}"
        raise NotACell(last)

    def verify(self, rec: Recogniser, feeds: Feeder, w: CellWeights, h_out: Key, c_out: Key | None, H: int) -> float:
        x, h, _ = rec.prober.random_inputs(feeds)
        (got,) = rec.runner.run(feeds.make(x, h, None), [h_out])
        _, y_h = reference_module().gru(x[None], w.W, w.R, w.B, initial_h=h[None], hidden_size=H, linear_before_reset=w.linear_before_reset, activations=list(w.activations), activation_alpha=w.activation_alpha, activation_beta=w.activation_beta)
        return relative_error([got], [y_h])

    def _reset_gates(self, rec: Recogniser, pre_n: Key) -> list[Key]:
        """Sigmoid outputs that gate a product inside the candidate's pre-activation (the reset gate)."""
        net = rec.net
        found: list[Key] = []
        stack = [pre_n]
        seen: set[Key] = set()
        while stack and len(seen) < 64:
            k = stack.pop()
            if k in seen or k not in rec.cone or rec.view_source(k) is not None or net.is_const(k):
                continue
            seen.add(k)
            node = net.node(k)
            if node is None:
                continue
            ins = [i for i in net.inputs(k) if i is not None]
            if node.op_type == "Mul" and len(ins) == 2:
                g, other = pick(ins[0], ins[1], lambda v: rec.producer_op(v) in GATE_ACTS, lambda v: True)
                if g is not None and other is not None and not net.is_const(other):
                    if g not in found:
                        found.append(g)
                    stack.append(other)
                    continue
            if node.op_type in ("Gemm", "MatMul"):
                # reset before the matmul (R (r*h)) is a gated product right at a matmul's data operand; further
                # back lies the cell's input, which may be another cell (a stacked layer): never search there
                for d in net.inputs(k)[:2]:
                    if d is None or net.is_const(d) or rec.producer_op(d) != "Mul":
                        continue
                    a, b = net.inputs(d)[:2]
                    g, other = pick(a, b, lambda v: rec.producer_op(v) in GATE_ACTS, lambda v: True)
                    if g is not None and other is not None and not net.is_const(other) and g not in found:
                        found.append(g)
                continue
            if node.op_type in LINEAR_OPS or node.op_type in PARAM_OPS or node.op_type in ("Mul", "Div", "Split"):
                stack.extend(ins[:1] if node.op_type in PARAM_OPS else ins)
        return found

    def _blend_cone(self, rec: Recogniser, k: Key, n_key: Key) -> tuple[set[Key], list[Key], list[Key]] | None:
        """Leaves of the Add/Sub/Mul/Neg expression at ``k``: sigmoids, state views (and the candidate ``n``)."""
        net = rec.net
        sigmoids: set[Key] = set()
        states: list[Key] = []
        has_n = False
        stack = [k]
        seen: set[Key] = set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if len(seen) > 32:
                return None
            if v == n_key:
                has_n = True
                continue
            if net.is_const(v):
                continue
            if rec.producer_op(v) in GATE_ACTS:
                sigmoids.add(v)
                continue
            if rec.view_source(v) is not None:
                states.append(v)
                continue
            op = rec.producer_op(v)
            if op not in BLEND_OPS:
                return None
            stack.extend(i for i in net.inputs(v) if i is not None)
        if not has_n:
            return None
        return sigmoids, states, []

    def _blends(self, rec: Recogniser, n_key: Key, r_gate: Key | None) -> list[tuple[Key, Key, list[Key]]]:
        """Candidate new states: values reached from ``n`` through blend ops that read n, one z and a state view."""
        net = rec.net
        out: list[tuple[Key, Key, list[Key]]] = []
        frontier = [n_key]
        seen = {n_key}
        for _depth in range(4):
            nxt: list[Key] = []
            for v in frontier:
                for cons, sc in net.consumers(v):
                    if cons.op_type not in BLEND_OPS:
                        continue
                    ok = net.outputs_of(cons, sc)[0]
                    if ok is None or ok in seen:
                        continue
                    seen.add(ok)
                    nxt.append(ok)
                    cone = self._blend_cone(rec, ok, n_key)
                    if cone is None:
                        continue
                    sig, states, _ = cone
                    if r_gate is not None:
                        sig.discard(r_gate)
                    if len(sig) == 1 and states:
                        out.append((ok, next(iter(sig)), states))
            frontier = nxt
        return out

    def _blend_state_terms(self, rec: Recogniser, n_key: Key) -> list[Key]:
        """Non-gate, non-constant values the blends of ``n`` read (to tell 'no state yet' from 'not a GRU')."""
        net = rec.net
        out: list[Key] = []
        for cons, sc in net.consumers(n_key):
            if cons.op_type in BLEND_OPS:
                ok = net.outputs_of(cons, sc)[0]
                if ok is None:
                    continue
                for cons2, sc2 in net.consumers(ok):
                    if cons2.op_type in BLEND_OPS:
                        for i in net.inputs(net.outputs_of(cons2, sc2)[0] or ok):
                            if i is not None and i != ok and not net.is_const(i) and rec.producer_op(i) not in (*GATE_ACTS, "Sub"):
                                out.append(i)
        return out
