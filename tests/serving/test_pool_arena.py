"""The per-state buffers of a pool, one row per stream, as a caller sees them: in a pool that batches (rows along
the model's batch axis) and in one that cannot (each row a stream's whole value), through joins, leaves, resets,
loads and reads.  Oracle: the integrator ``h' = h + x`` (hand-checkable sums) and a StatefulSession per stream."""

from __future__ import annotations

import numpy as np

from rnnir.serving.pool import SessionPool
from tests.support import streaming_models as sm


def _integrators(batching: bool) -> SessionPool:
    model = sm.toy("integrator")
    if batching:  # the same model with a free batch dim: h[B, 4]
        for vi in list(model.graph.input) + list(model.graph.output):
            vi.type.tensor_type.shape.dim[0].Clear()
            vi.type.tensor_type.shape.dim[0].dim_param = "B"
    pool = SessionPool(model, sm.PAIRS)
    assert bool(pool.batching) is not batching, pool.batching
    return pool


def test_every_stream_keeps_its_own_row_through_leaves_joins_resets_and_loads(tmp_path):
    for batching in (False, True):
        pool = _integrators(batching)
        total: dict[str, float] = {}

        def tick(ids: list[str], pool: SessionPool = pool, total: dict[str, float] = total, batching: bool = batching) -> None:
            got = pool.run({sid: {"x": np.full((1, 4), "abcdefgh".index(sid) + 1, np.float32)} for sid in ids}, open_missing=True)
            for sid in ids:
                total[sid] = total.get(sid, 0.0) + "abcdefgh".index(sid) + 1
                assert got[sid]["y"].tolist() == [[total[sid]] * 4], (batching, sid)
            for sid in pool.sessions:
                assert pool.state(sid)["h_in"].tolist() == [[total[sid]] * 4], (batching, sid)

        tick(list("abcd"))
        for gone in ("a", "c"):  # the first row, then a middle one: the others move up
            pool.close(gone)
            del total[gone]
            tick(pool.sessions)
        tick(["b", "e", "d"])  # a newcomer takes the row after the others
        pool.reset("b")
        total["b"] = 0.0
        assert pool.state("b")["h_in"].tolist() == [[0.0] * 4]
        tick(pool.sessions)
        path = pool.save_state("d", tmp_path / f"d{batching}.npz")
        tick(["d"])
        pool.load_state("e", path, from_session="d")  # into a stream that has a row: its row only
        total["e"] = total["d"] - 4.0
        tick(pool.sessions)
        read = pool.state("e")
        read["h_in"][...] = -1.0  # a copy of the row
        tick(["e", "b"])
