"""What a pool hands out and what it keeps per stream, on every path a tick can take (issue 28).

* Every array a call returns is the caller's: later ticks (which write the pool's bound buffers again, two
  ticks later with the ping-pong) never change it, and writing into it changes no stream's state.
* ``reset(sid)`` puts back the stream's kept input context with its state, whether the stream has a row, is
  waiting for one, or had its context loaded from a file.
* Session ids of several types (str, int, tuple) are sessions of their own, also on disk.

Oracle: each stream is mirrored by its own ``StatefulSession`` (batch of one, none of the pool's code), and a
reset stream by a fresh one.  Only the public API is used: the paths are chosen by the calls (every stream or
some of them, the same ids as the last tick or not, plain or state outputs, a kept context or not).
"""

from __future__ import annotations

import types
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool import SessionPool
from tests.support import streaming_models as sm

TOL = 1e-5
INP = 3


def _chunk(rng: np.random.Generator, steps: int = 1) -> np.ndarray:
    return (0.8 * rng.standard_normal((steps, 1, INP))).astype(np.float32)


class Held:
    """Every array handed out, with a copy of what it held then."""

    def __init__(self) -> None:
        self.items: list[tuple[str, np.ndarray, np.ndarray]] = []

    def keep(self, where: str, arrays: Mapping[str, np.ndarray]) -> None:
        for name, arr in arrays.items():
            self.items.append((f"{where} {name}", arr, np.array(arr, copy=True)))

    def check(self) -> None:
        for where, arr, copy in self.items:
            assert np.array_equal(arr, copy), f"{where} changed after it was returned"


def _scribble(arrays: Mapping[str, np.ndarray]) -> None:
    for arr in arrays.values():
        assert arr.flags.writeable  # the caller's array: numpy lets the caller write into it
        arr[...] = 1e3


def _close(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], where: str) -> None:
    for name, value in got.items():
        assert value.shape == want[name].shape, (where, name)
        assert np.max(np.abs(value - want[name])) <= TOL, f"{where}: {name}"


def two_plain_outputs() -> onnx.ModelProto:
    """lstm_b with two more plain outputs: ``negY = -Y`` (batch axis 2) and ``last = hn`` (batch axis 1)."""
    model = sm.lstm_b()
    g = model.graph
    g.node.extend([onnx.helper.make_node("Neg", ["Y"], ["negY"]), onnx.helper.make_node("Identity", ["hn"], ["last"])])
    g.output.extend([onnx.helper.make_tensor_value_info("negY", onnx.TensorProto.FLOAT, ["T", 1, "B", 5]),
                     onnx.helper.make_tensor_value_info("last", onnx.TensorProto.FLOAT, [1, "B", 5])])
    return model


class Streams:
    """A pool and one solo session per stream, driven tick by tick; every output held and compared."""

    def __init__(self, ids: Sequence[Hashable], context: dict[str, int] | None, seed: int, model: onnx.ModelProto | None = None) -> None:
        self.model = sm.lstm_b() if model is None else model
        self.context = context
        self.pool = SessionPool(self.model, context=context)
        self.base = StatefulSession(self.model, context=context)
        self.solo = {sid: self.base.fork(reset=True) for sid in ids}
        self.rng = np.random.default_rng(seed)
        self.held = Held()
        for sid in ids:
            self.pool.open(sid)

    def tick(self, ids: Sequence[Hashable], outputs: list[str] | None = None, *, scribble: bool = False, steps: int = 1) -> None:
        requests = {sid: {"x": _chunk(self.rng, steps)} for sid in ids}
        sent = {sid: feeds["x"].copy() for sid, feeds in requests.items()}
        got = self.pool.run(requests, outputs)
        assert list(got) == list(requests)
        for sid, feeds in requests.items():  # the caller's requests are the caller's: nothing added or written
            assert list(feeds) == ["x"] and np.array_equal(feeds["x"], sent[sid]), sid
        for sid, feeds in requests.items():
            want = self.solo[sid].run_dict(feeds)
            assert sorted(got[sid]) == sorted(outputs or want)
            _close(got[sid], want, f"stream {sid!r}")
            if scribble:
                _scribble(got[sid])
            else:
                self.held.keep(f"stream {sid!r} tick", got[sid])

    def batch(self, ids: Sequence[Hashable], outputs: list[str] | None = None, *, scribble: bool = False) -> None:
        x = np.concatenate([_chunk(self.rng) for _ in ids], axis=1)
        got = self.pool.run_batch(ids, {"x": x}, outputs)
        axes = {"Y": 2, "negY": 2, "hn": 1, "cn": 1, "last": 1}
        for k, sid in enumerate(ids):
            want = self.solo[sid].run_dict({"x": x[:, k : k + 1]})
            _close({name: np.take(v, [k], axis=axes[name]) for name, v in got.items()}, want, f"run_batch {sid!r}")
        if scribble:
            _scribble(got)
        else:
            self.held.keep("run_batch", got)

    def states_equal_solo(self) -> None:
        for sid, solo in self.solo.items():
            state = self.pool.state(sid)
            for name, value in solo.state.items():
                assert np.array_equal(state[name], value), (sid, name)


#: (streams, kept context, outputs asked for, time steps, model): the lean tick (plain outputs, no context; one
#: plain output or several, rows contiguous or not), the steady tick that copies state outputs, the steady tick
#: with a kept context, one stream and several
PLAIN2 = ["Y", "negY", "last"]
CASES: list[tuple[int, dict[str, int] | None, list[str] | None, int, str]] = [
    (4, None, ["Y"], 1, "lstm"), (4, None, ["Y", "hn"], 1, "lstm"), (4, None, None, 1, "lstm"), (4, None, ["cn"], 1, "lstm"),
    (4, {"x": 1}, None, 1, "lstm"), (4, {"x": 1}, ["Y"], 1, "lstm"),
    (1, None, ["Y"], 1, "lstm"), (1, None, ["Y", "hn"], 1, "lstm"), (1, None, None, 1, "lstm"), (1, {"x": 1}, ["hn"], 1, "lstm"),
    (4, None, PLAIN2, 1, "plain2"), (4, None, PLAIN2, 2, "plain2"), (1, None, PLAIN2, 1, "plain2"), (4, None, ["last", "Y"], 2, "plain2"),
]


def _streams(streams: int, context: dict[str, int] | None, kind: str, seed: int) -> tuple[Streams, list[Hashable]]:
    ids: list[Hashable] = list(range(streams))
    return Streams(ids, context, seed, two_plain_outputs() if kind == "plain2" else None), ids


def test_outputs_handed_out_by_any_tick_never_change_afterwards():
    """Ticks of every stream (the bound buffers: written again two ticks later), of some, and run_batch:
    every array returned on the way is compared with its copy at the end."""
    for streams, context, outputs, steps, kind in CASES:  # one loop: every case matters (the mutation tool runs one parametrization)
        s, ids = _streams(streams, context, kind, seed=streams)
        for _ in range(5):
            s.tick(ids, outputs, steps=steps)
        s.tick(ids[:1], outputs, steps=steps)  # a tick of some streams: gathered and scattered rows (or one stream alone)
        for _ in range(3):
            s.tick(ids, outputs, steps=steps)
        if streams > 1 and context is None and steps == 1:
            for _ in range(3):
                s.batch(ids, outputs)
            s.batch(ids[::-1], outputs)
        for _ in range(2):
            s.tick(ids, outputs, steps=steps)
        s.held.check()
        s.states_equal_solo()
        assert s.pool.stats.steady_ticks >= 2, (streams, context, outputs)  # the repeated ticks took the steady path


def test_writing_into_a_returned_array_changes_no_state():
    for streams, context, outputs, steps, kind in CASES:
        s, ids = _streams(streams, context, kind, seed=10 + streams)
        for t in range(6):
            s.tick(ids, outputs, scribble=True, steps=steps)
            if t == 2:
                s.tick(ids[-1:], outputs, scribble=True, steps=steps)
            s.states_equal_solo()
        if streams > 1 and context is None and steps == 1:
            for _ in range(3):
                s.batch(ids, outputs, scribble=True)
                s.states_equal_solo()
        state = s.pool.state(ids[0])  # a copy: writing into it changes nothing
        _scribble(state)
        s.states_equal_solo()
        s.tick(ids, outputs)


def test_a_state_output_asked_for_is_the_streams_state_of_that_tick_not_a_view_of_the_pools_buffer():
    s = Streams(["a", "b", "c"], None, seed=3)
    first: dict[str, np.ndarray] = {}
    for t in range(6):
        requests = {sid: {"x": _chunk(s.rng)} for sid in s.solo}
        got = s.pool.run(requests, ["hn", "cn"])
        for sid, feeds in requests.items():
            want = s.solo[sid].run_dict(feeds)
            _close(got[sid], want, f"{sid} tick {t}")
            if t == 1:
                first[sid] = got[sid]["cn"]
                s.held.keep(sid, got[sid])
    s.held.check()
    assert not np.array_equal(first["a"], s.pool.state("a")["c0"])  # the state moved on; what was handed out did not


# -- reset: the state and the kept context -------------------------------------------------------


def test_reset_clears_the_kept_context_with_the_state_on_every_path():
    """A kept time step of x (context={"x": 1}) is prepended to every call: after a reset the next call must see
    zeros there, exactly as a fresh session does, while every other stream keeps its own context."""
    model = sm.lstm_b()
    for how in ("whole tick", "alone", "some", "before a row", "after load"):
        pool = SessionPool(model, context={"x": 1})
        base = StatefulSession(model, context={"x": 1})
        solo = {sid: base.fork(reset=True) for sid in ("a", "b", "c")}
        rng = np.random.default_rng(7)

        def tick(ids: Sequence[str], pool: SessionPool = pool, solo: dict[str, StatefulSession] = solo,
                 rng: np.random.Generator = rng, how: str = how) -> None:
            requests = {sid: {"x": _chunk(rng, 2)} for sid in ids}
            got = pool.run(requests, open_missing=True)
            for sid, feeds in requests.items():
                _close(got[sid], solo[sid].run_dict(feeds), f"{how}: stream {sid}")

        if how == "before a row":  # b has run alone (the arenas exist), then joins a fresh pool layout
            tick(["a"])
            pool.open("b")
            tick(["b"])
            tick(["a", "c"])
        elif how == "after load":  # b's state and context loaded before the pool's first call
            donor = SessionPool(model, context={"x": 1})
            donor.open("b")
            x = _chunk(rng, 2)
            donor.run({"b": {"x": x}})
            solo["b"].run_dict({"x": x})
            import tempfile
            from pathlib import Path

            with tempfile.TemporaryDirectory() as tmp:
                path = donor.save_state("b", Path(tmp) / "b.npz")
                pool.load_state("b", path)
            assert np.array_equal(pool.state("b")["h0"], solo["b"].state["h0"])
        else:
            for _ in range(3):
                tick(["a", "b", "c"])
        pool.reset("b")
        solo["b"] = base.fork(reset=True)
        if how == "alone":
            tick(["b"])
        elif how == "some":
            tick(["b", "c"])
        for _ in range(2):
            tick(["a", "b", "c"])


def test_reset_of_a_stream_in_a_pool_that_cannot_batch_clears_its_context():
    model = sm.context_probe(6)
    pool = SessionPool(model, context={"x": 2})
    assert pool.batching  # the model's batch is fixed: one stream per call, each row stored whole
    x = np.array([[1, 2, 3, 4]], np.float32)
    for _ in range(2):
        pool.run({"a": {"x": x}, "b": {"x": 2 * x}}, open_missing=True)
    pool.reset("a")
    got = pool.run({"a": {"x": x}, "b": {"x": x}})
    assert got["a"]["seen"].tolist() == [[0, 0, 1, 2, 3, 4]] and got["a"]["h_out"].tolist() == [[10.0]]
    assert got["b"]["seen"].tolist() == [[6, 8, 1, 2, 3, 4]] and got["b"]["h_out"].tolist() == [[20.0 + 34.0 + 24.0]]  # seen 0,0,2,4,6,8 then 6,8,2,4,6,8


# -- session ids of several types ------------------------------------------------------------------


def test_ids_of_every_type_save_and_load_their_own_state(tmp_path):
    model = sm.lstm_b()
    ids: list[Any] = [1, "1", ("1",), (1, "1"), 0, -1]
    for context in (None, {"x": 1}):
        pool = SessionPool(model, context=context)
        base = StatefulSession(model, context=context)
        solo = {sid: base.fork(reset=True) for sid in ids}
        rng = np.random.default_rng(9)
        for sid in ids:
            pool.open(sid)

        def tick(pool: SessionPool = pool, solo: dict[Any, StatefulSession] = solo, rng: np.random.Generator = rng) -> None:
            requests = {sid: {"x": _chunk(rng, 2)} for sid in ids}
            got = pool.run(requests)
            for sid, feeds in requests.items():
                _close(got[sid], solo[sid].run_dict(feeds), f"stream {sid!r}")

        tick()
        paths = {sid: pool.save_state(sid, tmp_path / f"{k}.npz") for k, sid in enumerate(ids)}
        saved = {sid: solo[sid].fork() for sid in ids}
        tick()
        for sid in ids:  # each file goes back into its own session, whatever the type of its id
            pool.load_state(sid, paths[sid])
            solo[sid] = saved[sid].fork()
        tick()
        for owner, other in ((1, "1"), ("1", 1), (("1",), "1"), (0, -1)):
            with pytest.raises(StateError, match="not of"):
                pool.load_state(other, paths[owner])
        fresh = SessionPool(model, context=context)  # no call yet: each file waits for its stream's row
        for sid in ids:
            fresh.load_state(sid, paths[sid])
        assert fresh.sessions == ids
        requests = {sid: {"x": _chunk(rng, 2)} for sid in ids}
        got = fresh.run(requests)
        for sid, feeds in requests.items():
            _close(got[sid], saved[sid].run_dict(feeds), f"loaded {sid!r}")


# -- what ends the steady plan ------------------------------------------------------------------------


def test_a_tick_of_the_same_ids_after_another_output_list_a_rejoin_or_a_lower_max_batch_is_served_right():
    """The steady plan repeats the last tick; a tick with the same ids in the same order must still get what it
    asks for after anything the plan does not cover changed: the outputs, the rows (a stream left and rejoined
    under the same id), the cap on a call's rows."""
    for kind in ("lstm", "plain2"):
        s, ids = _streams(4, None, kind, seed=30)
        lean = ["Y"] if kind == "lstm" else PLAIN2
        for outputs in (lean, lean, lean, None, lean, lean, ["Y"], ["Y"], lean, lean):
            s.tick(ids, outputs)
        s.pool.close(1)  # 1 leaves and rejoins: rows are now 0, 2, 3, 1 while the tick's ids are 0, 1, 2, 3
        s.pool.open(1)
        s.solo[1] = s.base.fork(reset=True)
        for _ in range(3):
            s.tick(ids, lean)
        s.pool.max_batch = 2
        calls = s.pool.stats.ort_calls
        for _ in range(2):
            s.tick(ids, lean)
        assert s.pool.stats.ort_calls - calls == 4  # two calls of at most two rows each tick
        s.pool.max_batch = 4
        for _ in range(3):
            s.tick(ids, lean)
        s.held.check()
        s.states_equal_solo()


def _odd_feeds(rng: np.random.Generator) -> dict[str, Any]:
    """Feeds of one stream that differ from the repeated tick's, each as a solo session takes or refuses them."""
    x = _chunk(rng)
    return {
        "float64": {"x": x.astype(np.float64)},  # refused (no cast_inputs)
        "extra input": {"x": x, "y": x},  # refused
        "missing input": {},  # refused
        "state fed": {"x": x, "h0": np.zeros((1, 1, 5), np.float32)},  # refused by the pool, which keeps the state
        "a list": {"x": x.tolist()},  # converted
        "a mapping": types.MappingProxyType({"x": x}),  # not a dict, read like one
        "not contiguous": {"x": np.asfortranarray(np.repeat(x, 2, axis=0))[:1]},
        "two steps": {"x": _chunk(rng, 2)},  # another row shape: runs on its own
    }


def test_a_repeated_tick_with_one_odd_request_answers_as_the_streams_own_session_would():
    """Every way one request can differ from the repeated tick's, on the paths the repetition takes (one stream
    and several, a kept context or not, plain outputs only or state outputs too): refused exactly when the stream's
    own session refuses it, with nothing run for anyone; otherwise each stream equal to its own session."""
    for streams, context, outputs in ((1, None, ["Y"]), (1, None, None), (3, None, ["Y"]), (3, None, None), (1, {"x": 1}, None), (3, {"x": 1}, ["Y"])):
        s, ids = _streams(streams, context, "lstm", seed=40 + streams)
        for odd, feeds in _odd_feeds(s.rng).items():
            if context is not None and odd == "two steps":
                continue  # a kept context needs the same chunk shape every call
            for _ in range(2):
                s.tick(ids, outputs)
            requests: dict[Hashable, Any] = {sid: {"x": _chunk(s.rng)} for sid in ids}
            requests[ids[-1]] = feeds
            twin = s.solo[ids[-1]].fork()
            try:
                want: dict[str, np.ndarray] | None = None if odd == "state fed" else twin.run_dict(dict(feeds))
            except FeedError:
                want = None
            where = f"{streams} streams, context {context}, outputs {outputs}: {odd}"
            if want is None:
                before = {sid: s.pool.state(sid) for sid in ids}
                with pytest.raises(FeedError):
                    s.pool.run(requests, outputs)
                for sid in ids:  # nothing ran, for anyone
                    assert all(np.array_equal(v, before[sid][k]) for k, v in s.pool.state(sid).items()), where
                continue
            got = s.pool.run(requests, outputs)
            for sid, f in requests.items():
                w = want if sid == ids[-1] else s.solo[sid].run_dict(f)
                _close({k: v for k, v in got[sid].items()}, w, where)
            s.solo[ids[-1]] = twin
        s.held.check()


def test_the_stats_count_every_call_and_every_stream_call_on_every_path():
    """PoolStats: onnxruntime calls made and stream-calls served, whichever path a tick took (the probe's own
    calls are not counted); repeated ticks are served by the steady plan, also under a max_batch they fit in."""
    for streams, context, outputs, max_batch in ((1, None, ["Y"], None), (1, None, None, None), (3, None, ["Y"], None), (3, None, None, None),
                                                 (3, {"x": 1}, None, None), (3, None, ["Y"], 8), (3, None, None, 3), (1, {"x": 1}, ["hn"], 1)):
        s, ids = _streams(streams, context, "lstm", seed=50)
        s.pool.max_batch = max_batch
        for _ in range(6):
            s.tick(ids, outputs)
        st = s.pool.stats
        where = (streams, context, outputs, max_batch)
        assert (st.ort_calls, st.rows, st.largest_batch) == (6, 6 * streams, streams), where
        assert st.whole_calls == 5 and st.steady_ticks >= 3, where


def test_a_leave_or_a_join_costs_no_plain_call_the_output_shapes_hold_at_any_row_count():
    """The plain outputs' shapes learnt at one row count hold at any other (their batch dim scaled): after the
    first tick of a shape, every tick of every stream binds the buffers whole, whoever joined or left."""
    for first in (2, 3):
        for outputs in (["Y"], None):
            s, ids = _streams(first, None, "lstm", seed=60)
            for _ in range(3):
                s.tick(ids, outputs)
            for sid in ids[1:]:  # down to one stream
                s.pool.close(sid)
            for _ in range(3):
                s.tick(ids[:1], outputs)
            s.pool.open(9)  # and up again
            s.solo[9] = s.base.fork(reset=True)
            for _ in range(3):
                s.tick([ids[0], 9], outputs)
            assert (s.pool.stats.ort_calls, s.pool.stats.whole_calls) == (9, 8), (first, outputs, s.pool.stats)
