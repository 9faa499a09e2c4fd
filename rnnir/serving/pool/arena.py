"""The per-state buffers of a pool: one arena per state input (and per kept input context), one row per stream."""

from __future__ import annotations

import numpy as np

from rnnir.errors import StateError

__all__ = ["Arena", "row_of"]


class Arena:
    """One state (or kept context) for every placed stream: ``cur`` holds row ``r`` of stream ``r`` along the
    batch axis, with exactly as many rows as streams are placed, so a tick of every stream binds ``cur`` whole.

    ``spare`` is the other buffer of the ping-pong: a tick of every stream reads ``cur`` and onnxruntime
    writes the new state into ``spare``; then the two swap.  ``axis`` None: the model cannot batch;
    ``cur[row]`` holds a stream's whole value.
    """

    __slots__ = ("axis", "cur", "spare", "initial", "head")

    def __init__(self, axis: int | None, initial: np.ndarray, rows: int) -> None:
        self.axis = axis
        self.initial = initial  # one stream's starting value, shaped as a solo session's (batch of 1)
        self.head = (slice(None),) * (0 if axis is None else axis)
        self.cur = self._blank(rows)
        self.spare: np.ndarray | None = None

    def _blank(self, rows: int) -> np.ndarray:
        """``rows`` rows of the initial value."""
        if self.axis is None:
            return np.repeat(self.initial[np.newaxis], rows, axis=0)
        return np.ascontiguousarray(np.repeat(self.initial, rows, axis=self.axis))

    def relayout(self, rowmap: np.ndarray, rows: int) -> None:
        """New row i holds old row ``rowmap[i]``; rows past ``len(rowmap)`` start from the initial value."""
        axis = 0 if self.axis is None else self.axis
        fresh = self._blank(rows)
        if len(rowmap):
            fresh[self.head + (slice(0, len(rowmap)),)] = np.take(self.cur, rowmap, axis=axis)
        self.cur = fresh
        self.spare = None

    def gather(self, rows: np.ndarray) -> np.ndarray:
        if self.axis is None:  # unbatched: exactly one row, stored whole
            return np.asarray(self.cur[int(rows[0])])
        return np.take(self.cur, rows, axis=self.axis)

    def scatter(self, rows: np.ndarray, value: np.ndarray) -> None:
        if self.axis is None:
            self.cur[int(rows[0])] = value
        else:
            self.cur[self.head + (rows,)] = value

    def put(self, row: int, value: np.ndarray) -> None:
        """Set one stream's value (shaped as a solo session's)."""
        if self.axis is None:
            self.cur[row] = value
        else:
            self.cur[self.head + (slice(row, row + 1),)] = value

    def row(self, row: int) -> np.ndarray:
        """A copy of one stream's value, shaped as a solo session's (batch axis of size 1)."""
        if self.axis is None:
            return np.array(self.cur[row])
        return np.array(self.cur[self.head + (slice(row, row + 1),)])


def row_of(value: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != shape:
        raise StateError(f"{where}: shape {arr.shape} is not one stream's state {shape}")
    return arr

