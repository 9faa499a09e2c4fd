"""The LSTM cell: ``c' = f*c + i*g`` anchored on its ``Add``, with ``h' = o*act(c')``; gates found by role, never by
name or order, and confirmed against :func:`rnnir.semantics.reference.lstm` with the weights read off the model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.cells.execute import flat, reference_module, relative_error
from rnnir.lower.cells.ops import ANY_ACTS, CANDIDATE_ACTS, GATE_ACTS, TOL, Key, pick
from rnnir.lower.cells.pattern import cell_match, gate_activation, provenance
from rnnir.lower.cells.results import CellMatch, CellWeights, NotACell, Retry
from rnnir.lower.cells.states import Feeder, StateClass
from rnnir.lower.cells.walk import affine_walk, h_order, state_classes, threads
from rnnir.lower.scope import Scope
from rnnir.semantics.evaluate import EvalError

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np


class LstmPattern:
    """LSTM: anchored on the ``Add`` of ``c' = f*c + i*g``."""

    kind = "LSTM"
    anchor_ops = frozenset({"Add"})

    def match(self, rec: Recogniser, node: onnx.NodeProto, scope: Scope, k: Key) -> CellMatch | None:
        if node.op_type != "Add" or len(node.input) != 2 or node.domain not in ("", "ai.onnx"):
            return None
        net = rec.net
        terms = [t for t in net.inputs(k) if t is not None]
        if len(terms) != 2 or any(rec.producer_op(t) != "Mul" for t in terms):
            return None
        roles = None
        def is_act(v: Key) -> bool:
            return rec.producer_op(v) in ANY_ACTS

        def is_sig(v: Key) -> bool:
            return rec.producer_op(v) in GATE_ACTS

        def is_cand(v: Key) -> bool:
            return rec.producer_op(v) in CANDIDATE_ACTS

        for forget, inp in ((terms[0], terms[1]), (terms[1], terms[0])):
            fa, fb = net.inputs(forget)[:2]
            ia, ib = net.inputs(inp)[:2]
            f_gate, c_term = pick(fa, fb, is_act, lambda v: not is_act(v))
            i_gate, g_val = pick(ia, ib, is_sig, is_cand)
            if i_gate is None:
                i_gate, g_val = pick(ia, ib, is_act, is_cand)
            if f_gate is not None and i_gate is not None and c_term is not None and g_val is not None and f_gate != i_gate:
                roles = (forget, inp, f_gate, c_term, i_gate, g_val)
                break
        if roles is None:
            return None
        forget, inp, f_gate, c_term, i_gate, g_val = roles
        anchor = net.node_name(node)
        for g in (f_gate, i_gate, g_val):
            gn = net.node(g)
            if gn is not None:
                rec.claimed.add(id(gn))
                rec.lstm_claimed.add(id(gn))
        for role, gate in (("forget", f_gate), ("input", i_gate)):
            if not is_sig(gate):
                rec.done.add(id(node))
                raise NotACell(f"LSTM-like structure at node {anchor!r}: its {role} gate {rec.describe(gate)} is not a sigmoid")
        # h' = o * act(c'): the first such product whose gate reads the state, as the cell's own gates do (a
        # product gated by x alone, a head on the new cell state, is an LSTM too, with R_o = 0: it only serves
        # when nothing better is there)
        found: list[tuple[Key, Key, onnx.NodeProto]] = []
        for cons, sc in net.consumers(k):
            if cons.op_type in CANDIDATE_ACTS:
                act_key = net.outputs_of(cons, sc)[0]
                assert act_key is not None
                for cons2, sc2 in net.consumers(act_key):
                    if cons2.op_type != "Mul":
                        continue
                    out2 = net.outputs_of(cons2, sc2)[0]
                    assert out2 is not None
                    op_a, op_b = net.inputs(out2)[:2]
                    activated: Key = act_key

                    def is_activated(v: Key, act: Key = activated) -> bool:
                        return v == act

                    o, _ = pick(op_a, op_b, is_sig, is_activated)
                    if o is not None:
                        found.append((out2, o, cons))
        h_out, o_gate, h_act = next((f for f in found if f[1] in rec.cone), found[0] if found else (None, None, None))
        if h_out is None or o_gate is None or h_act is None:
            rec.done.add(id(node))
            raise NotACell(self._no_h(rec, k, anchor, c_term, f_gate, i_gate, g_val))
        rec.claimed.add(id(h_act))
        rec.lstm_claimed.add(id(h_act))
        on = net.node(o_gate)
        if on is not None:
            rec.claimed.add(id(on))
            rec.lstm_claimed.add(id(on))
        c_src = rec.view_source(c_term)
        if c_src is None:
            raise Retry(f"LSTM-like structure at node {anchor!r}: the cell-state operand of the forget product is {rec.describe(c_term)}, not a state input")
        pres = {"i": rec.pre(i_gate), "o": rec.pre(o_gate), "f": rec.pre(f_gate), "g": rec.pre(g_val)}
        walk = affine_walk(rec, list(pres.values()), frozenset(), anchor)
        classes = state_classes(rec, [*walk.state_leaves, c_term], anchor)
        c_class = next(c for c in classes if c_term in c.leaves)
        if any(leaf in c_class.leaves for leaf in walk.state_leaves):
            rec.done.add(id(node))
            raise NotACell(f"LSTM-like structure at node {anchor!r}: its gates read the cell state {c_term[1]!r} (peepholes or a swapped state)")
        h_choices = h_order(rec, [c for c in classes if c is not c_class], c_class)
        if not h_choices:
            raise Retry(f"LSTM-like structure at node {anchor!r}: its gates read no state input besides the cell state")
        rec.done.add(id(node))
        gate_act = gate_activation(rec, [f_gate, i_gate, o_gate], anchor, "LSTM")
        acts = (gate_act[0], rec.producer_op(g_val) or "Tanh", h_act.op_type)
        nodes = provenance(rec, [node, net.node(forget), net.node(inp), h_act, net.node(h_out)], walk)
        last = ""
        for h_class in h_choices:
            x_leaves = walk.x_leaves + [leaf for c in classes if c is not h_class and c is not c_class for leaf in c.leaves[:1]]
            try:
                H = rec.prober.gate_width(x_leaves, [h_class, c_class], pres["f"], anchor)
                feeds = rec.prober.feeder(x_leaves, h_class, c_class, anchor, H)
                lin = rec.prober.probe(feeds, [pres[g] for g in "iofg"])
                W = np.concatenate([lin[j][0] for j in range(4)])
                R = np.concatenate([lin[j][1] for j in range(4)])
                b = np.concatenate([lin[j][2] for j in range(4)])
                if W.shape[0] != 4 * H or R.shape != (4 * H, H):
                    raise NotACell(f"LSTM-like structure at node {anchor!r}: gate sizes {[len(lin[j][2]) for j in range(4)]} do not match the state size {H}")
                weights = CellWeights(W[None], R[None], np.concatenate([b, np.zeros_like(b)])[None], acts, 0, *gate_act[1:])
                err = self.verify(rec, feeds, weights, h_out, k, H)
            except EvalError as exc:
                raise NotACell(f"LSTM-like structure at node {anchor!r} could not be run: {exc}") from None
            if err <= TOL:
                if not threads(rec, h_class, "LSTM", weights):
                    last = f"LSTM-like structure at node {anchor!r} reads the output of another cell as its state"
                    continue
                return cell_match(rec, "LSTM", scope, nodes, x_leaves, h_class, c_class, h_out, k, H, weights, err)
            last = f"LSTM-like structure at node {anchor!r} does not compute an LSTM cell: the new state differs from o*tanh(c'), c' = f*c + i*g with the extracted weights by {err:.3g}"
        raise NotACell(last)

    def _no_h(self, rec: Recogniser, c_new: Key, anchor: str, c_term: Key, f_gate: Key, i_gate: Key, g_val: Key) -> str:
        """Why an LSTM update c' = f*c + i*g has no h' = o*act(c'): name what the output product reads instead."""
        net = rec.net
        scope = net.d(c_new).scope
        for k in sorted(rec.cone):
            d = net.d(k)
            if d.scope is not scope or d.node is None or d.node.op_type != "Mul":
                continue
            a, b = net.inputs(k)[:2]
            o, t = pick(a, b, lambda v: rec.producer_op(v) in GATE_ACTS, lambda v: rec.producer_op(v) in CANDIDATE_ACTS)
            if o is None or t is None or o in (f_gate, i_gate) or t == g_val:
                continue
            t_in = net.inputs(t)[0]
            if t_in is None:
                continue
            diff = ""
            try:
                leaves = affine_walk(rec, [rec.pre(o), rec.pre(f_gate), rec.pre(i_gate), rec.pre(g_val)], frozenset(), anchor)
                classes = state_classes(rec, [*leaves.state_leaves, c_term, t_in] if rec.view_source(t_in) else [*leaves.state_leaves, c_term], anchor)
                hc = two_classes(classes, c_term)
                H = rec.prober.gate_width(leaves.x_leaves, list(hc), rec.pre(f_gate), anchor)
                feeds = rec.prober.feeder(leaves.x_leaves, *hc, anchor, H)
                x, h, c = rec.prober.random_inputs(feeds)
                got, og, cn = rec.runner.run(feeds.make(x, h, c), [k, o, c_new])
                want = og * np.tanh(cn)
                diff = f" by {float(np.max(np.abs(flat(got) - flat(want)))):.3g}"
            except (EvalError, NotACell, Retry, ValueError):
                pass
            return f"LSTM-like structure at node {anchor!r} does not compute an LSTM cell: h' at node {net.node_name(d.node)!r} is o*tanh({t_in[1]!r}), not o*tanh(c'); it differs from o*tanh(c'){diff}"
        return f"LSTM-like structure at node {anchor!r} (c' = f*c + i*g) has no output h' = o*tanh(c')"

    def verify(self, rec: Recogniser, feeds: Feeder, w: CellWeights, h_out: Key, c_out: Key | None, H: int) -> float:
        x, h, c = rec.prober.random_inputs(feeds)
        assert c is not None and c_out is not None
        got_h, got_c = rec.runner.run(feeds.make(x, h, c), [h_out, c_out])
        _, y_h, y_c = reference_module().lstm(x[None], w.W, w.R, w.B, initial_h=h[None], initial_c=c[None], hidden_size=H, activations=list(w.activations), activation_alpha=w.activation_alpha, activation_beta=w.activation_beta)
        return relative_error([got_h, got_c], [y_h, y_c])


def two_classes(classes: list[StateClass], c_term: Key) -> tuple[StateClass, StateClass]:
    c_class = next(c for c in classes if c_term in c.leaves)
    others = [c for c in classes if c is not c_class]
    if not others:
        raise NotACell("no h")
    return others[0], c_class
