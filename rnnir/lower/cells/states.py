"""A cell's state inputs: state views of one source grouped by the elements they hold, and the feeds that put
(x, h, c) batches into every leaf of the cell's subgraph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rnnir.lower.cells.ops import Key

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np


@dataclass
class StateClass:
    """State views of one source holding the same elements: one state input of a cell."""

    source: Key
    leaves: list[Key]
    shapes: dict[Key, tuple[int, ...]]
    size: int


@dataclass
class Feeder:
    """Turns (x, h, c) batches, [batch, size] each, into feeds for every leaf of the cell's subgraph.

    Leaves hold their batch rows first (row-major), which is how exporters lay out [batch, features];
    a model that does otherwise fails the reference check, it is never mis-confirmed.
    """

    x_leaves: list[Key]
    x_shapes: list[tuple[int, ...]]
    h: StateClass
    c: StateClass | None
    batch: int = 1

    @property
    def x_size(self) -> int:
        """Input features per batch row (all x leaves side by side)."""
        return int(sum(int(np.prod(s)) for s in self.x_shapes)) // self.batch

    @property
    def hidden(self) -> int:
        return self.h.size // self.batch

    def make(self, x: np.ndarray, h: np.ndarray, c: np.ndarray | None) -> dict[Key, np.ndarray]:
        B = self.batch
        x = x.reshape(B, -1)
        feeds: dict[Key, np.ndarray] = {}
        pos = 0
        for leaf, shape in zip(self.x_leaves, self.x_shapes):
            n = int(np.prod(shape)) // B
            feeds[leaf] = x[:, pos : pos + n].reshape(shape)
            pos += n
        for leaf in self.h.leaves:
            feeds[leaf] = h.reshape(self.h.shapes[leaf])
        if self.c is not None and c is not None:
            for leaf in self.c.leaves:
                feeds[leaf] = c.reshape(self.c.shapes[leaf])
        return feeds

    def make_rows(self, xs: np.ndarray, hs: np.ndarray, cs: np.ndarray | None) -> dict[Key, np.ndarray | None]:
        """Feeds for P probes at once, stacked on axis 0 of each leaf (None where axis 0 is not a batch of 1)."""
        P = xs.shape[0]

        def stack(rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
            if not shape or shape[0] != 1:
                return None
            return rows.reshape((P, *shape[1:]))

        feeds: dict[Key, np.ndarray | None] = {}
        pos = 0
        for leaf, shape in zip(self.x_leaves, self.x_shapes):
            n = int(np.prod(shape))
            feeds[leaf] = stack(xs[:, pos : pos + n], shape)
            pos += n
        for leaf in self.h.leaves:
            feeds[leaf] = stack(hs, self.h.shapes[leaf])
        if self.c is not None and cs is not None:
            for leaf in self.c.leaves:
                feeds[leaf] = stack(cs, self.c.shapes[leaf])
        return feeds
