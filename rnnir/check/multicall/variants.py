"""Running the variants of one stream on forks of one :class:`~rnnir.runtime.StatefulSession`:

``persistent``
    the runtime keeps the state;
``reinit``
    the state is reset before every call (a slot that is never written);
``stale``
    call k starts from the state call k-2 wrote (a slot store that lands one call late);
``hc-swapped``
    h and c written into each other's place (packed slices, or two slots of the same shape);

and ``whole``, one call over the whole stream (or the caller's oracle), when the model can take it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnir.analysis.slices import slice_maps
from rnnir.check.multicall.stream import ProgressCallback, Stream
from rnnir.ir.recurrence import STATE_C, STATE_ENTRY_PORTS, STATE_H
from rnnir.runtime.session import StatefulSession

__all__ = ["HcSwap", "VariantRunner", "apply_swaps", "hc_swaps"]


class VariantRunner:
    """Runs the variants of one stream on forks of one StatefulSession (its own state is left alone)."""

    def __init__(self, session: StatefulSession, stream: Stream, progress: ProgressCallback | None = None) -> None:
        self.session = session
        self.stream = stream
        self.slots = session.slots
        self.swaps = hc_swaps(session)
        self.state_outputs = {s.output for s in self.slots if s.output is not None}
        names = session.output_names
        #: the output each variant's trace follows: the first output that is not state
        self.watched: str | None = next((n for n in names if n not in self.state_outputs), names[0] if names else None)
        self.progress = progress

    def trace(self, outs: list[dict[str, np.ndarray]]) -> list[float]:
        """The watched output's mean, call by call (NaN where a call did not return it)."""
        name = self.watched
        return [float(np.asarray(o[name], dtype=np.float64).mean()) if name in o and np.size(o[name]) else math.nan for o in outs]

    def whole(self, oracle: Callable[[dict[str, np.ndarray]], Mapping[str, Any]] | None, notes: list[str]) -> dict[str, np.ndarray] | None:
        """The outputs of one call over the whole stream (the caller's ``oracle`` when given), or None with a note
        saying why there is no such call."""
        stream = self.stream
        if oracle is not None:
            return {k: np.asarray(v) for k, v in oracle(dict(stream.feeds)).items()}
        if stream.mode == "calls":
            notes.append("calls mode and no whole= oracle: persistence is judged by the broken variants only")
            return None
        if stream.static_steps:
            notes.append("the model's time axis is static, so one call cannot take the whole stream: persistence is judged by the broken variants only")
            return None
        if self.session.context:
            notes.append("an input context is declared: chunked calls see overlapping input that one whole call does not, so there is no whole-stream oracle")
            return None
        s = self.session.fork(reset=True, alias_outputs=False)
        try:
            return s.run_dict(stream.feeds)
        except Exception as exc:  # noqa: BLE001 - any runtime failure makes the oracle unavailable, and the report says why
            notes.append(f"one call over the whole stream failed ({type(exc).__name__}: {exc}); persistence judged by the broken variants only")
            return None

    def persistent(self, chunks: list[dict[str, np.ndarray]], c: int) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
        """The outputs of every call with the state kept, and the state after each call."""
        s = self.session.fork(reset=True, alias_outputs=False)
        outs, states = [], []
        what = "persistent" + self._chunk_label(c)
        for feed in chunks:
            outs.append(s.run_dict(feed))
            states.append(s.state)
            self._tick(what, len(outs), len(chunks))
        return outs, states

    def _chunk_label(self, c: int) -> str:
        return "" if self.stream.mode == "calls" else f", chunk {c}"  # c, not length / calls: the last call may be shorter

    def _tick(self, what: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(what, done, total)

    def broken(self, name: str, chunks: list[dict[str, np.ndarray]], c: int) -> list[dict[str, np.ndarray]] | None:
        """The outputs of every call with persistence bug ``name``; None when the model has no place for it
        (``hc-swapped`` without h and c the IR names)."""
        if name == "hc-swapped" and not self.swaps:
            return None
        s = self.session.fork(reset=True, alias_outputs=False)
        outs: list[dict[str, np.ndarray]] = []
        initial = s.initial_state(chunks[0]) if chunks else {}
        what = name + self._chunk_label(c)
        for k, feed in enumerate(chunks):
            self._tick(what, k, len(chunks))
            if name == "reinit":
                s.reset()
                outs.append(s.run_dict(feed))
                continue
            if name == "stale":
                # call k reads what call k-2 wrote: the store of call k-1 had not landed yet
                start = initial if k < 2 else self._written(outs[k - 2], initial)
            else:  # hc-swapped: h and c land in each other's place
                start = initial if k == 0 else apply_swaps(self._written(outs[k - 1], initial), self.swaps)
            outs.append(s.run_dict({**feed, **start}))
        self._tick(what, len(chunks), len(chunks))
        return outs

    def _written(self, out: Mapping[str, np.ndarray], initial: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        # a state output of another dtype (SD005) is converted as a caller would have to: the session refuses it as is
        return {s.input: (out[s.output].astype(s.dtype, copy=False) if s.output is not None else initial[s.input]) for s in self.slots}


# -- h/c swaps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HcSwap:
    """Two places that hold h and c of the same op and direction: (slot, index along axis 0 or None)."""

    a: tuple[str, int | None]
    b: tuple[str, int | None]


def hc_swaps(session: StatefulSession) -> list[HcSwap]:
    """Where h and c of one recurrent op live, from the pairs' slice maps (packed slices or two slots)."""
    places: dict[tuple[str, int | None, str], tuple[str, int | None]] = {}
    shapes = {s.input: s.shape for s in session.slots}
    for pair in slice_maps(session.program).declared:
        for sl in pair.slices:
            for ref in sl.entry:
                if ref.port not in STATE_ENTRY_PORTS or ref.note:
                    continue
                if len(sl.index) > 1:
                    continue  # deeper than one packed axis: not a place this check swaps
                idx = sl.index[0] if sl.index else None
                key = (ref.node_id, ref.direction, ref.port)
                places.setdefault(key, (pair.input, idx))
    swaps: list[HcSwap] = []
    seen: set[tuple[tuple[str, int | None], tuple[str, int | None]]] = set()
    for (node, direction, port), h in places.items():
        if port != STATE_H.entry:
            continue
        c = places.get((node, direction, STATE_C.entry))
        if c is None or c == h:
            continue
        if h[1] is None and c[1] is None and shapes.get(h[0]) != shapes.get(c[0]):
            continue  # two whole slots of different shapes cannot be swapped
        swap = (h, c)
        if swap not in seen:
            seen.add(swap)
            swaps.append(HcSwap(h, c))
    return swaps


def apply_swaps(state: Mapping[str, np.ndarray], swaps: list[HcSwap]) -> dict[str, np.ndarray]:
    """A copy of ``state`` with the two places of every swap exchanged (places of different shapes left alone)."""
    out = {k: np.array(v, copy=True) for k, v in state.items()}
    for sw in swaps:
        (sa, ia), (sb, ib) = sw.a, sw.b
        va = state[sa] if ia is None else state[sa][ia]
        vb = state[sb] if ib is None else state[sb][ib]
        if va.shape != vb.shape:
            continue
        if ia is None:
            out[sa] = np.array(vb, copy=True)
        else:
            out[sa][ia] = vb
        if ib is None:
            out[sb] = np.array(va, copy=True)
        else:
            out[sb][ib] = va
    return out
