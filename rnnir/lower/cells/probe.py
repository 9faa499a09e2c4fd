"""Reading a cell's weights off the model: gate widths, feeds, and W, R, b of each pre-activation from runs on
zeros and unit vectors (the pre-activations are affine in x and h)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.lower.cells.execute import ProbeData, Runner, flat
from rnnir.lower.cells.net import Net
from rnnir.lower.cells.ops import MAX_PROBES, Key
from rnnir.lower.cells.results import NotACell
from rnnir.lower.cells.states import Feeder, StateClass
from rnnir.semantics.evaluate import EvalError

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np


class Prober:
    """Probes one model's cell subgraphs (runs through ``runner``, random data from ``rng``)."""

    def __init__(self, net: Net, rng: ProbeData) -> None:
        self.net = net
        self.rng = rng
        self.runner = Runner(net)

    def x_shapes(self, x_leaves: list[Key], anchor: str) -> list[tuple[int, ...]]:
        shapes: list[tuple[int, ...]] = []
        for leaf in x_leaves:
            s = self.net.shape(leaf)
            if s is None:
                raise NotACell(f"cell-like structure at node {anchor!r}: the shape of its input {leaf[1]!r} is unknown")
            shapes.append(s)
        return shapes

    def gate_width(self, x_leaves: list[Key], classes: list[StateClass], pre: Key, anchor: str, extra: dict[Key, np.ndarray] | None = None) -> int:
        """The hidden size: the last axis of a gate's pre-activation, run once on zeros."""
        feeds = {leaf: np.zeros(shape) for leaf, shape in zip(x_leaves, self.x_shapes(x_leaves, anchor))}
        for c in classes:
            feeds.update({leaf: np.zeros(c.shapes[leaf]) for leaf in c.leaves})
        (a,) = self.runner.run({**feeds, **(extra or {})}, [pre])
        if a.ndim == 0 or a.shape[-1] == 0:
            raise NotACell(f"cell-like structure at node {anchor!r}: its gate {pre[1]!r} is a scalar")
        return int(a.shape[-1])

    def feeder(self, x_leaves: list[Key], h: StateClass, c: StateClass | None, anchor: str, H: int) -> Feeder:
        shapes = self.x_shapes(x_leaves, anchor)
        if H <= 0 or h.size % H or (c is not None and c.size != h.size):
            raise NotACell(f"cell-like structure at node {anchor!r}: its state ({h.size} elements) is not a batch of gates {H} wide")
        B = h.size // H
        if any(int(np.prod(s)) % B for s in shapes):
            raise NotACell(f"cell-like structure at node {anchor!r}: its inputs are not a batch of {B} rows like its state")
        return Feeder(x_leaves, shapes, h, c, B)

    def zeros(self, feeds: Feeder) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        B, H = feeds.batch, feeds.hidden
        return np.zeros((B, feeds.x_size)), np.zeros((B, H)), None if feeds.c is None else np.zeros((B, H))

    def random_inputs(self, feeds: Feeder) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        r = self.rng
        B, H = feeds.batch, feeds.hidden
        return r.standard_normal((B, feeds.x_size)), r.standard_normal((B, H)), None if feeds.c is None else r.standard_normal((B, H))

    def probe(self, feeds: Feeder, pres: list[Key], extra: dict[Key, np.ndarray] | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """W, R, b of each pre-activation, read off with zeros and unit vectors (they are affine in x and h).

        All probes run at once, stacked on axis 0 (the batch of a batch-1 cell); a graph that does not
        take that (a fixed reshape, a squeeze of axis 0) is probed one vector at a time. Either way the
        weights are only trusted after the single-batch run agrees with the reference cell. A fixed batch of
        B rows is probed through its first row (the others zero) and checked on all B rows.
        """
        n_x, H, B = feeds.x_size, feeds.hidden, feeds.batch
        if n_x + H > MAX_PROBES:
            raise EvalError(f"input {n_x} + hidden {H} is too large to probe")
        extra = extra or {}
        x0, h0, c0 = self.zeros(feeds)

        def row0(a: np.ndarray) -> np.ndarray:
            f = flat(a)
            if f.size % B:
                raise EvalError(f"a gate of {f.size} elements is not a batch of {B} rows")
            row: np.ndarray = f.reshape(B, -1)[0]
            return row

        base = [row0(a) for a in self.runner.run({**feeds.make(x0, h0, c0), **extra}, pres)]
        P = 1 + n_x + H
        xs = np.zeros((P, n_x))
        xs[1 : 1 + n_x] = np.eye(n_x)
        hs = np.zeros((P, H))
        hs[1 + n_x :] = np.eye(H)
        rows = self._probe_stacked(feeds, pres, xs, hs, extra, base) if B == 1 else None
        if rows is None:
            rows = []
            for p in range(len(pres)):
                rows.append(np.zeros((P, len(base[p]))))
            for j in range(1, P):
                x, h = x0.copy(), h0.copy()
                x[0], h[0] = xs[j], hs[j]
                for p, v in enumerate(self.runner.run({**feeds.make(x, h, c0), **extra}, pres)):
                    rows[p][j] = row0(v)
            for p in range(len(pres)):
                rows[p][0] = base[p]
        out = []
        for p in range(len(pres)):
            delta = rows[p] - base[p][None, :]
            out.append((delta[1 : 1 + n_x].T.copy(), delta[1 + n_x :].T.copy(), base[p]))
        return out

    def _probe_stacked(
        self, feeds: Feeder, pres: list[Key], xs: np.ndarray, hs: np.ndarray, extra: dict[Key, np.ndarray], base: list[np.ndarray]
    ) -> list[np.ndarray] | None:
        P = xs.shape[0]
        stacked: dict[Key, np.ndarray] = {}
        c0 = None if feeds.c is None else np.zeros((P, feeds.hidden))
        for k, v in feeds.make_rows(xs, hs, c0).items():
            if v is None:
                return None
            stacked[k] = v
        for k, v in extra.items():
            if v.ndim == 0 or v.shape[0] != 1:
                return None
            stacked[k] = np.broadcast_to(v, (P, *v.shape[1:])).copy()
        try:
            outs = self.runner.run(stacked, pres)
        except EvalError:
            return None
        rows = []
        for p, o in enumerate(outs):
            if o.ndim == 0 or o.shape[0] != P or o.size != P * len(base[p]):
                return None
            r = o.reshape(P, -1).astype(np.float64)
            if not np.allclose(r[0], base[p], atol=1e-9):
                return None
            rows.append(r)
        return rows
