"""SessionPool: many streams batched into one onnxruntime call, each equal to running it alone.

Oracle: every stream is mirrored by its own StatefulSession (batch of one, the pool's code not involved);
mutant pools that shift a row when gathering or scattering state must be caught by the same comparison.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession
from rnnir.runtime.versioning import StateMigrations, VersionOutcome, VersionPolicy, with_state_version
from rnnir.serving.pool.pool import SessionPool
from rnnir.serving.pool.streams import UnknownSessionError
from tests.support import streaming_models as sm
from tests.support.bounded import WAIT, closing, together

TOL = 1e-5
INP = 3


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _chunk(rng: np.random.Generator, steps: int) -> np.ndarray:
    return (0.8 * rng.standard_normal((steps, 1, INP))).astype(np.float32)


def drive_against_solo(pool: SessionPool, model, *, streams: int = 72, ticks: int = 30, seed: int = 0, peak: list[int] | None = None) -> float:
    """Random joins, leaves and resets; every stream's outputs against its own solo session. Returns the worst |diff|
    (and appends the most streams open at once to ``peak``)."""
    rng = np.random.default_rng(seed)
    base = StatefulSession(model)
    solo: dict[int, StatefulSession] = {}
    next_id = 0
    worst = 0.0
    for tick in range(ticks):
        # join: up to the target, a few at a time, from the very first tick
        for _ in range(int(rng.integers(0, 12)) if tick else streams // 2):
            if len(solo) < streams:
                solo[next_id] = base.fork(reset=True)
                pool.open(next_id)
                next_id += 1
        if solo and rng.random() < 0.5:  # leave
            for sid in rng.choice(sorted(solo), size=min(len(solo), int(rng.integers(1, 4))), replace=False):
                pool.close(int(sid))
                del solo[int(sid)]
        if solo and rng.random() < 0.5:  # reset one alone
            sid = int(rng.choice(sorted(solo)))
            pool.reset(sid)
            solo[sid].reset()
        if peak is not None:
            peak.append(len(solo))
        callers = [sid for sid in solo if rng.random() < 0.8]  # some streams sit this tick out
        steps = int(rng.choice([1, 1, 1, 2]))
        requests = {sid: {"x": _chunk(rng, steps if sid % 5 else 1)} for sid in callers}  # mixed lengths: several groups
        got = pool.run(requests)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            for name, value in want.items():
                worst = max(worst, float(np.max(np.abs(got[sid][name] - value))))
    return worst


def test_every_stream_equals_its_solo_run_whatever_the_interleaving():
    model = sm.lstm_b()
    pool = SessionPool(model)
    peak: list[int] = []
    assert drive_against_solo(pool, model, peak=peak) <= TOL
    assert max(peak) >= 64
    assert pool.batching == "" and pool.layout.states == {"h0": 1, "c0": 1} and pool.layout.outputs["Y"] == 2
    assert pool.stats.largest_batch >= 40  # the streams really shared calls
    assert pool.stats.ort_calls < pool.stats.rows / 10


class ShiftedGather(SessionPool):
    """Crosstalk: each stream reads the state row of the stream next to it."""

    def _gather(self, arena, rows):
        return super()._gather(arena, np.roll(rows, 1))


class ShiftedScatter(SessionPool):
    """Crosstalk: each stream's new state lands in its neighbour's row."""

    def _scatter(self, arena, rows, value):
        super()._scatter(arena, np.roll(rows, 1), value)


class SwappedFirstTwo(SessionPool):
    """Crosstalk between two streams only, only in the first batch of each call."""

    def _gather(self, arena, rows):
        if len(rows) > 2:
            rows = rows.copy()
            rows[[0, 1]] = rows[[1, 0]]
        return super()._gather(arena, rows)


@pytest.mark.parametrize("mutant", [ShiftedGather, ShiftedScatter, SwappedFirstTwo])
def test_a_pool_that_shifts_a_row_is_caught(mutant):
    model = sm.lstm_b()
    assert drive_against_solo(mutant(model), model, ticks=8) > 1e-3


def test_silero_streams_batched_with_their_kept_context_equal_solo_sessions(silero_dir):
    path = silero_dir / "silero_vad.onnx"
    pool = SessionPool(path, context={"input": 64})
    rng = np.random.default_rng(1)
    sr = np.array(16000, np.int64)
    base = StatefulSession(path, context={"input": 64})
    solo = {sid: base.fork(reset=True) for sid in range(8)}  # one onnxruntime session, eight streams
    for sid in solo:
        pool.open(sid)
    for _ in range(5):
        requests = {sid: {"input": (0.1 * rng.standard_normal((1, 512))).astype(np.float32), "sr": sr} for sid in solo}
        got = pool.run(requests)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            assert np.max(np.abs(got[sid]["output"] - want["output"])) <= TOL
            assert np.max(np.abs(got[sid]["stateN"] - want["stateN"])) <= TOL
            assert np.array_equal(pool.state(sid)["state"], want["stateN"])
    assert pool.stats.ort_calls == 5 and pool.stats.largest_batch == 8  # one onnxruntime call per tick
    assert pool.stats.whole_calls == 4  # after the first, each bound the state buffers whole, context kept beside them
    assert pool.layout.inputs == {"input": 0, "sr": None} and pool.layout.states == {"state": 1}


def test_requests_that_differ_in_a_shared_input_run_as_separate_calls(silero_dir):
    pool = SessionPool(silero_dir / "silero_vad_16k_op15.onnx")  # reads sr only as sr * 0: any value runs
    x = np.zeros((1, 576), np.float32)
    pool.run({"a": {"input": x, "sr": np.array(16000)}, "b": {"input": x, "sr": np.array(16001)}, "c": {"input": x, "sr": np.array(16000)}}, open_missing=True)
    assert pool.stats.ort_calls == 2 and pool.stats.largest_batch == 2


def test_a_model_with_a_fixed_batch_is_served_one_stream_per_call():
    model = sm.toy("decay")
    pool = SessionPool(model, sm.PAIRS)
    assert "static shape" in pool.batching
    rng = np.random.default_rng(0)
    solo = {sid: StatefulSession(model, sm.PAIRS) for sid in "abc"}
    for _ in range(4):
        requests = {sid: {"x": rng.standard_normal((1, 4)).astype(np.float32)} for sid in solo}
        got = pool.run(requests, open_missing=True)
        for sid in solo:
            assert np.allclose(got[sid]["y"], solo[sid].run(requests[sid])["y"], atol=TOL)
    assert pool.stats.ort_calls == 12


def test_a_model_that_mixes_batch_rows_fails_the_probe_and_stays_correct():
    model = sm.mixing()
    pool = SessionPool(model, {"h_in": "h_out"})
    rng = np.random.default_rng(0)
    solo = {sid: StatefulSession(model, {"h_in": "h_out"}) for sid in range(4)}
    for _ in range(3):
        requests = {sid: {"x": rng.standard_normal((1, 2)).astype(np.float32), "g": np.array(1.0, np.float32)} for sid in solo}
        got = pool.run(requests, open_missing=True)
        for sid in solo:
            assert np.allclose(got[sid]["y"], solo[sid].run(requests[sid])["y"], atol=TOL)
    assert "mixes batch rows" in pool.batching and pool.stats.largest_batch == 1


def test_the_first_tick_of_a_model_that_cannot_batch_fails_part_way_and_moves_no_stream_on():
    # the probe finds the rows mix, so the first tick's one group runs as one call per stream; onnxruntime failing
    # on the fourth stream's call (injected: a value-dependent failure no shape check sees; the probe uses the first
    # three rows) must leave the first three where their solo sessions are, which did not run that tick
    model = sm.mixing()
    pool = SessionPool(model, {"h_in": "h_out"})
    rng = np.random.default_rng(5)
    ids = [0, 1, 2, 3]
    solo = {sid: StatefulSession(model, {"h_in": "h_out"}) for sid in ids}
    g = np.array(1.0, np.float32)
    poison = np.full((1, 2), 7.0, np.float32)
    real_run = pool._ort.run

    def run(names, feeds, *args):
        x = feeds["x"]
        if x.shape[0] == 1 and np.array_equal(x, poison):
            raise RuntimeError("injected: onnxruntime refuses this row")
        return real_run(names, feeds, *args)

    pool._ort.run = run
    first = {sid: {"x": poison if sid == 3 else rng.standard_normal((1, 2)).astype(np.float32), "g": g} for sid in ids}
    with pytest.raises(Exception, match="injected"):
        pool.run(first, open_missing=True)
    assert "mixes batch rows" in pool.batching
    for tick in range(3):
        requests = {sid: {"x": rng.standard_normal((1, 2)).astype(np.float32), "g": g} for sid in ids}
        pool.run(requests)
        for sid in ids:  # y is h' less the batch mean, 0 for one row: the state itself is compared
            solo[sid].run(requests[sid])
            assert np.allclose(pool.state(sid)["h_in"], solo[sid].state["h_in"], atol=TOL), (tick, sid)


def test_idle_sessions_expire_by_the_injected_clock():
    clock = Clock()
    pool = SessionPool(sm.lstm_b(), idle_timeout=10.0, clock=clock)
    x = np.ones((1, 1, INP), np.float32)
    pool.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    clock.now = 6.0
    pool.run({"a": {"x": x}})
    clock.now = 10.0
    assert pool.expire() == []  # b idle exactly 10 s: not more than the timeout
    clock.now = 10.5
    assert pool.expire() == ["b"] and pool.sessions == ["a"]
    with pytest.raises(UnknownSessionError, match="'b'"):
        pool.run({"b": {"x": x}})
    fresh = pool.run({"b": {"x": x}}, open_missing=True)["b"]  # rejoins from the initial state
    first = StatefulSession(sm.lstm_b()).run_dict({"x": x})
    assert np.allclose(fresh["hn"], first["hn"], atol=TOL)
    clock.now = 100.0
    assert sorted(pool.run({"a": {"x": x}}, open_missing=True)) == ["a"] and pool.sessions == ["a"]  # both expired; a rejoins
    assert pool.stats.expired == 3  # b at 10.5, then a (idle since 6) and b at 100; a rejoined


def test_reset_puts_one_stream_back_and_leaves_the_others():
    pool = SessionPool(sm.lstm_b())
    x = np.ones((1, 1, INP), np.float32)
    for _ in range(3):
        pool.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    before = pool.state("b")
    pool.reset("a")
    assert all(np.array_equal(v, np.zeros_like(v)) for v in pool.state("a").values())
    assert all(np.array_equal(pool.state("b")[k], before[k]) for k in before)


def test_bad_requests_are_clear_errors():
    pool = SessionPool(sm.lstm_b())
    x = np.ones((1, 1, INP), np.float32)
    with pytest.raises(UnknownSessionError):
        pool.run({"nobody": {"x": x}})
    pool.open("a")
    with pytest.raises(StateError, match="already open"):
        pool.open("a")
    with pytest.raises(FeedError, match="state input"):
        pool.run({"a": {"x": x, "h0": np.zeros((1, 1, 5), np.float32)}})
    with pytest.raises(FeedError, match="missing"):
        pool.run({"a": {}})
    with pytest.raises(FeedError, match="no output"):
        pool.run({"a": {"x": x}}, outputs=["nope"])
    assert "b" not in pool  # a failed call opens nobody
    with pytest.raises(FeedError):
        pool.run({"b": {"y": x}}, open_missing=True)
    assert pool.sessions == ["a"]


# -- upgrading the model under running streams --------------------------------------------------


def _versioned(seed: int, version: str | None) -> onnx.ModelProto:
    model = sm.lstm_b(seed=seed)
    return model if version is None else with_state_version(model, version)


def _warm(pool: SessionPool) -> np.ndarray:
    x = np.full((1, 1, INP), 0.5, np.float32)
    for _ in range(3):
        pool.run({"a": {"x": x}, "b": {"x": x}}, open_missing=True)
    return x


def test_an_upgrade_declaring_the_same_state_version_keeps_every_stream_state():
    pool = SessionPool(_versioned(0, "1"))
    x = _warm(pool)
    kept = pool.state("a")
    outcomes = pool.upgrade(_versioned(1, "1"))
    assert outcomes == {"a": VersionOutcome.SAME_VERSION, "b": VersionOutcome.SAME_VERSION}
    got = pool.run({"a": {"x": x}})["a"]
    new = StatefulSession(_versioned(1, "1"))
    want = new.run_dict({"x": x, **kept})  # the new weights from the carried state
    assert np.allclose(got["hn"], want["hn"], atol=TOL)


def test_an_upgrade_to_another_state_version_is_refused_by_default_and_leaves_the_pool_as_it_was():
    pool = SessionPool(_versioned(0, "1"))
    x = _warm(pool)
    before = pool.fingerprint
    with pytest.raises(StateError, match="state version '1'.*state version '2'"):
        pool.upgrade(_versioned(1, "2"))
    assert pool.fingerprint == before
    pool.run({"a": {"x": x}})


def test_an_upgrade_with_policy_reset_restarts_every_stream_on_the_new_model():
    pool = SessionPool(_versioned(0, "1"))
    x = _warm(pool)
    outcomes = pool.upgrade(_versioned(1, "2"), policy=VersionPolicy.RESET)
    assert set(outcomes.values()) == {VersionOutcome.RESET}
    got = pool.run({"a": {"x": x}})["a"]
    want = StatefulSession(_versioned(1, "2")).run_dict({"x": x})
    assert np.allclose(got["hn"], want["hn"], atol=TOL)


def test_an_upgrade_with_a_registered_migration_carries_the_migrated_state():
    pool = SessionPool(_versioned(0, "1"))
    x = _warm(pool)
    kept = pool.state("b")
    steps = StateMigrations()
    steps.register("1", "2", lambda s: {"h0": s["h0"] * 0.5, "c0": -s["c0"]})
    pool.upgrade(_versioned(1, "2"), policy="migrate", migrations=steps)
    got = pool.run({"b": {"x": x}})["b"]
    want = StatefulSession(_versioned(1, "2")).run_dict({"x": x, "h0": kept["h0"] * 0.5, "c0": -kept["c0"]})
    assert np.allclose(got["hn"], want["hn"], atol=TOL) and np.allclose(got["cn"], want["cn"], atol=TOL)


def test_a_migration_that_returns_the_wrong_shape_is_refused_before_anything_changes():
    pool = SessionPool(_versioned(0, "1"))
    _warm(pool)
    steps = StateMigrations()
    steps.register("1", "2", lambda s: {"h0": s["h0"][..., :2], "c0": s["c0"]})
    with pytest.raises(StateError, match="shape"):
        pool.upgrade(_versioned(1, "2"), policy="migrate", migrations=steps)
    assert pool.state_version == "1"


# -- the stacked form ---------------------------------------------------------------------------


def test_run_batch_takes_and_returns_stacked_rows_equal_to_solo_runs():
    model = sm.lstm_b()
    pool = SessionPool(model)
    rng = np.random.default_rng(4)
    ids = ["a", "b", "c", "d"]
    solo = {sid: StatefulSession(model) for sid in ids}
    for tick in range(5):
        order = ids if tick % 2 else ids[::-1]  # rows follow the ids, whatever their order
        x = (0.8 * rng.standard_normal((1, len(order), INP))).astype(np.float32)
        out = pool.run_batch(order, {"x": x}, open_missing=True)
        assert out["hn"].shape == (1, len(order), 5)
        for k, sid in enumerate(order):
            want = solo[sid].run_dict({"x": x[:, k : k + 1]})
            assert np.max(np.abs(out["hn"][:, k : k + 1] - want["hn"])) <= TOL
            assert np.max(np.abs(out["Y"][:, :, k : k + 1] - want["Y"])) <= TOL
    assert pool.stats.ort_calls == 5


def test_run_batch_on_a_model_that_cannot_batch_falls_back_and_stays_correct():
    model = sm.toy("decay")
    pool = SessionPool(model, sm.PAIRS)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = pool.run_batch(["a", "b"], {"x": x}, open_missing=True)
    assert out["y"].tolist() == x.tolist()  # h starts at 0: y = x, row by row
    out = pool.run_batch(["a", "b"], {"x": x})
    assert out["y"].tolist() == (1.5 * x).tolist()
    with pytest.raises(FeedError, match="twice"):
        pool.run_batch(["a", "a"], {"x": x})


def test_groups_after_a_failed_probe_in_the_same_tick_also_run_one_stream_per_call():
    model = sm.mixing()
    pool = SessionPool(model, {"h_in": "h_out"})
    solo = {sid: StatefulSession(model, {"h_in": "h_out"}) for sid in range(6)}
    rng = np.random.default_rng(2)
    # two groups in one tick: the shared input g differs; the probe runs (and fails) on the first group
    g = [np.array(1.0, np.float32), np.array(0.5, np.float32)]
    requests = {sid: {"x": rng.standard_normal((1, 2)).astype(np.float32), "g": g[sid // 3]} for sid in range(6)}
    got = pool.run(requests, open_missing=True)
    for sid, feeds in requests.items():
        assert np.allclose(got[sid]["y"], solo[sid].run(feeds)["y"], atol=TOL)
    assert pool.stats.largest_batch == 1


# -- calls from many threads --------------------------------------------------------------------


def test_calls_from_many_threads_are_batched_and_each_stream_equals_its_solo_run():
    from rnnir.serving.pool.batcher import Batcher

    model = sm.lstm_b()
    pool = SessionPool(model)
    streams, calls = 16, 8
    rng = np.random.default_rng(7)
    inputs = {sid: [_chunk(rng, 1) for _ in range(calls)] for sid in range(streams)}
    got: dict[int, list[np.ndarray]] = {sid: [] for sid in range(streams)}

    def client(sid: int) -> None:
        for x in inputs[sid]:
            got[sid].append(batcher.call(sid, {"x": x}, ["hn"], timeout=WAIT)["hn"])

    with closing(Batcher(pool, max_delay=0.02)) as batcher:
        errors = [r for r in together([lambda sid=sid: client(sid) for sid in range(streams)], timeout=6 * WAIT) if r is not None]
    assert not errors, errors
    for sid in range(streams):
        solo = StatefulSession(model)
        for x, hn in zip(inputs[sid], got[sid]):
            assert np.max(np.abs(solo.run_dict({"x": x})["hn"] - hn)) <= TOL  # in order, and nobody else's state
    assert pool.stats.rows == streams * calls and pool.stats.largest_batch > 1
    assert batcher.ticks < streams * calls


def test_a_bad_call_in_a_batched_tick_fails_only_its_caller():
    from rnnir.serving.pool.batcher import Batcher

    pool = SessionPool(sm.lstm_b())
    x = np.ones((1, 1, INP), np.float32)
    with closing(Batcher(pool, max_delay=0.05)) as batcher:
        bad, good = together([lambda: batcher.call("bad", {"nope": x}, timeout=WAIT), lambda: batcher.call("good", {"x": x}, timeout=WAIT)])
    assert isinstance(bad, FeedError) and "nope" in str(bad)
    assert isinstance(good, dict), good
    assert np.allclose(good["hn"], StatefulSession(sm.lstm_b()).run_dict({"x": x})["hn"], atol=TOL)
    assert "bad" not in pool


# -- a stream's state on disk -------------------------------------------------------------------


def test_a_saved_stream_state_goes_back_into_its_own_session_only(tmp_path):
    model = sm.lstm_b()
    pool = SessionPool(model)
    solo = StatefulSession(model)
    rng = np.random.default_rng(9)
    xs = [_chunk(rng, 1) for _ in range(6)]
    for x in xs[:3]:
        pool.run({"alice": {"x": x}, "bob": {"x": -x}}, open_missing=True)
        solo.run({"x": x})
    path = pool.save_state("alice", tmp_path / "alice.state")

    fresh = SessionPool(model)
    with pytest.raises(StateError, match="session 'alice', not of 'bob'"):
        fresh.load_state("bob", path)
    assert fresh.load_state("alice", path) is VersionOutcome.SAME_MODEL
    for x in xs[3:]:
        got = fresh.run({"alice": {"x": x}})["alice"]
        assert np.max(np.abs(got["hn"] - solo.run_dict({"x": x})["hn"])) <= TOL  # continues where it left off
    assert fresh.load_state("carol", path, from_session="alice") is VersionOutcome.SAME_MODEL  # a deliberate move

    # the same file format as StatefulSession's, both ways
    other = StatefulSession(model)
    assert other.load_state(path) is VersionOutcome.SAME_MODEL
    solo_path = solo.save_state(tmp_path / "solo.state")
    assert fresh.load_state("dave", solo_path) is VersionOutcome.SAME_MODEL  # a state saved alone names no session
    assert np.array_equal(fresh.state("dave")["h0"], solo.state["h0"])


def test_a_saved_stream_state_follows_the_version_policy(tmp_path):
    pool = SessionPool(_versioned(0, "1"))
    _warm(pool)
    path = pool.save_state("a", tmp_path / "a.state")
    newer = SessionPool(_versioned(1, "2"))
    with pytest.raises(StateError, match="state version"):
        newer.load_state("a", path)
    assert newer.load_state("a", path, on_version_mismatch="reset") is VersionOutcome.RESET
    with pytest.raises(StateError, match="not run yet"):
        newer.save_state("a", tmp_path / "b.state")


def test_max_batch_splits_a_tick_into_calls_of_at_most_that_many_rows():
    model = sm.lstm_b()
    pool = SessionPool(model, max_batch=4)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in range(10)}
    rng = np.random.default_rng(5)
    for _ in range(3):
        requests = {sid: {"x": _chunk(rng, 1)} for sid in solo}
        got = pool.run(requests, open_missing=True)
        for sid, feeds in requests.items():
            assert np.max(np.abs(got[sid]["hn"] - solo[sid].run_dict(feeds)["hn"])) <= TOL
    assert pool.stats.largest_batch == 4 and pool.stats.ort_calls == 3 * 3


def test_a_reused_row_starts_clean_state_and_context_included():
    model = sm.context_probe(6)
    pool = SessionPool(model, {"h_in": "h_out"}, context={"x": 2}, batch_axes={"x": None, "h_in": None})
    x = np.array([[1, 2, 3, 4]], np.float32)
    pool.run({"old": {"x": x}}, open_missing=True)
    pool.close("old")
    out = pool.run({"new": {"x": x}}, open_missing=True)["new"]  # takes the row "old" left
    assert out["seen"].tolist() == [[0, 0, 1, 2, 3, 4]] and out["h_out"].tolist() == [[10.0]]


def test_a_reused_row_starts_clean_in_a_batched_pool_with_context():
    model = sm.lstm_b()
    pool = SessionPool(model, context={"x": 1})  # one kept time step along the LSTM's time axis
    rng = np.random.default_rng(6)
    for _ in range(3):
        pool.run({sid: {"x": _chunk(rng, 2)} for sid in ("a", "b", "c")}, open_missing=True)
    assert pool.batching == ""
    pool.close("b")
    x = {sid: _chunk(rng, 2) for sid in ("a", "new", "c")}
    got = pool.run({sid: {"x": v} for sid, v in x.items()}, open_missing=True)  # "new" takes b's row
    want = StatefulSession(model, context={"x": 1}).run_dict({"x": x["new"]})
    assert np.max(np.abs(got["new"]["Y"] - want["Y"])) <= TOL and np.max(np.abs(got["new"]["cn"] - want["cn"])) <= TOL


def test_a_tick_refused_part_way_moves_no_stream_on_neither_its_state_nor_its_kept_context():
    # two row shapes make two calls; the second is refused (a chunk with the time and feature axes swapped, which
    # the kept context does not fit) after the first ran: every stream, of either call, must be where its solo
    # session is, which did not run this tick (its state and its kept time step both as before)
    model = sm.lstm_b()
    pool = SessionPool(model, context={"x": 1})
    ids = ["a", "b", "c", "d"]
    solo = {sid: StatefulSession(model, context={"x": 1}) for sid in ids}
    rng = np.random.default_rng(31)
    for tick in range(5):
        requests = {sid: {"x": _chunk(rng, 2 if sid in ("a", "b") else 1)} for sid in ids}  # two groups every tick
        if tick == 2:
            for sid in ("c", "d"):  # one group of two: the tick is exactly two calls
                requests[sid] = {"x": _chunk(rng, 1).reshape(1, INP, 1).copy()}
                with pytest.raises(StateError, match="the kept context is"):
                    solo[sid].run_dict(requests[sid])
            with pytest.raises(StateError, match="the kept context is"):
                pool.run(requests, open_missing=True)
            continue
        got = pool.run(requests, open_missing=True)
        for sid, f in requests.items():
            want = solo[sid].run_dict(f)
            for name in ("Y", "hn", "cn"):
                assert np.max(np.abs(got[sid][name] - want[name])) <= TOL, (tick, sid, name)


def test_a_loaded_state_brings_its_kept_context_back_before_the_first_call(tmp_path):
    model = sm.lstm_b()
    rng = np.random.default_rng(11)
    xs = [_chunk(rng, 2) for _ in range(5)]
    pool = SessionPool(model, context={"x": 1})
    solo = StatefulSession(model, context={"x": 1})
    for x in xs[:3]:
        pool.run({"a": {"x": x}, "b": {"x": -x}}, open_missing=True)
        solo.run({"x": x})
    path = pool.save_state("a", tmp_path / "a.state")
    fresh = SessionPool(model, context={"x": 1})  # no call yet: the pool does not know the row shapes
    fresh.load_state("a", path)
    for x in xs[3:]:
        got = fresh.run({"a": {"x": x}})["a"]
        want = solo.run_dict({"x": x})
        # the kept time step of xs[2] is prepended to xs[3]: without it Y differs from the first step on
        assert got["Y"].shape == want["Y"].shape == (3, 1, 1, 5)
        assert np.max(np.abs(got["Y"] - want["Y"])) <= TOL and np.max(np.abs(got["hn"] - want["hn"])) <= TOL


def test_a_loaded_state_brings_its_kept_context_back_into_a_running_batched_pool(tmp_path):
    model = sm.lstm_b()
    rng = np.random.default_rng(12)
    xs = [_chunk(rng, 2) for _ in range(5)]
    pool = SessionPool(model, context={"x": 1})
    solo = StatefulSession(model, context={"x": 1})
    for x in xs[:3]:
        pool.run({"a": {"x": x}, "b": {"x": -x}}, open_missing=True)
        solo.run({"x": x})
    path = pool.save_state("a", tmp_path / "a.state")
    running = SessionPool(model, context={"x": 1})
    for x in xs[:2]:
        running.run({"c": {"x": x}, "d": {"x": 2 * x}, "e": {"x": x}}, open_missing=True)
    running.load_state("a", path)
    for x in xs[3:]:
        got = running.run({"a": {"x": x}, "c": {"x": x}, "d": {"x": x}, "e": {"x": x}})["a"]
        want = solo.run_dict({"x": x})
        assert np.max(np.abs(got["Y"] - want["Y"])) <= TOL and np.max(np.abs(got["hn"] - want["hn"])) <= TOL


# -- every stream in one call: the state buffers bound whole ------------------------------------


def drive_whole_ticks(pool: SessionPool, model, *, streams: int = 72, ticks: int = 24, seed: int = 0, shuffle: bool = True) -> float:
    """Every open stream calls every tick (the whole-buffer path), with joins, leaves anywhere in the row
    order, resets and expiry-free churn between ticks; each stream against its own solo session."""
    rng = np.random.default_rng(seed)
    base = StatefulSession(model)
    solo: dict[int, StatefulSession] = {}
    next_id = 0
    worst = 0.0
    for tick in range(ticks):
        if tick % 3 == 1:  # leave: any rows, middle ones included
            for sid in rng.choice(sorted(solo), size=int(rng.integers(1, 6)), replace=False):
                pool.close(int(sid))
                del solo[int(sid)]
        if tick % 3 == 2:  # join
            for _ in range(int(rng.integers(1, 6))):
                solo[next_id] = base.fork(reset=True)
                pool.open(next_id)
                next_id += 1
        if tick == 0:
            for _ in range(streams):
                solo[next_id] = base.fork(reset=True)
                pool.open(next_id)
                next_id += 1
        if tick % 4 == 3:
            sid = int(rng.choice(sorted(solo)))
            pool.reset(sid)
            solo[sid].reset()
        order = list(solo)
        if shuffle and tick % 2:
            order = [order[i] for i in rng.permutation(len(order))]  # not in row order: the inputs are moved
        requests = {sid: {"x": _chunk(rng, 1)} for sid in order}
        got = pool.run(requests)
        assert list(got) == order
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            for name, value in want.items():
                assert got[sid][name].shape == value.shape
                worst = max(worst, float(np.max(np.abs(got[sid][name] - value))))
    return worst


def test_ticks_of_every_stream_equal_solo_runs_across_joins_leaves_and_resets():
    model = sm.lstm_b()
    pool = SessionPool(model)
    assert drive_whole_ticks(pool, model) <= TOL
    # one call per tick (the probe's calls are not counted); the first tick learnt the outputs' shapes with a
    # plain call, every later one bound the buffers whole, whatever the number of streams
    assert pool.stats.ort_calls == 24 and pool.stats.whole_calls == 23 and pool.stats.largest_batch >= 64
    # after all that churn the rows are compact and in order of joining
    assert [s.row for s in pool._placed] == list(range(len(pool)))


class ShiftedInputs(SessionPool):
    """Crosstalk on the whole-buffer path: each stream's input lands in its neighbour's row."""

    def _into_rows(self, rows, batch):
        moved, pick = super()._into_rows(rows, batch)
        return {n: a if self.layout.inputs[n] is None else np.roll(a, 1, axis=self.layout.inputs[n]) for n, a in moved.items()}, pick


class ShiftedRowMap(SessionPool):
    """Crosstalk when rows are laid out again after a leave: each remaining stream gets its neighbour's state."""

    def _row_map(self, rowmap):
        return np.roll(rowmap, 1)


@pytest.mark.parametrize("mutant", [ShiftedInputs, ShiftedRowMap])
def test_a_whole_buffer_pool_that_shifts_a_row_is_caught(mutant):
    model = sm.lstm_b()
    assert drive_whole_ticks(mutant(model), model, ticks=9, shuffle=False) > 1e-3


def test_a_leave_that_frees_a_middle_row_keeps_every_other_stream_on_its_own_state():
    model = sm.lstm_b()
    pool = SessionPool(model)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in "abcde"}
    rng = np.random.default_rng(3)
    for sid in solo:
        pool.open(sid)
    for _ in range(3):
        requests = {sid: {"x": _chunk(rng, 1)} for sid in solo}
        pool.run(requests)
        for sid, f in requests.items():
            solo[sid].run(f)
    assert [pool._streams[s].row for s in "abcde"] == [0, 1, 2, 3, 4]
    pool.close("b")  # row 1 of 5: c, d and e move up
    del solo["b"]
    for sid in solo:  # the saved view of every stream is unchanged by the leave itself
        assert np.array_equal(pool.state(sid)["h0"], solo[sid].state["h0"])
    for _ in range(3):
        requests = {sid: {"x": _chunk(rng, 1)} for sid in solo}
        got = pool.run(requests)
        for sid, f in requests.items():
            want = solo[sid].run_dict(f)
            assert np.max(np.abs(got[sid]["Y"] - want["Y"])) <= TOL and np.max(np.abs(got[sid]["cn"] - want["cn"])) <= TOL
    assert [pool._streams[s].row for s in "acde"] == [0, 1, 2, 3]
    assert pool.stats.whole_calls == 5  # every tick after the probe bound the 5, then the 4 rows whole


def test_run_batch_of_every_stream_in_another_order_equals_solo_runs():
    model = sm.lstm_b()
    pool = SessionPool(model)
    base = StatefulSession(model)
    ids = [f"s{k}" for k in range(6)]
    solo = {sid: base.fork(reset=True) for sid in ids}
    rng = np.random.default_rng(4)
    for sid in ids:
        pool.open(sid)
    pool.run({sid: {"x": _chunk(rng, 1)} for sid in ids[:2]})  # the probe
    for sid in ids[:2]:
        solo[sid].reset()
    pool.reset(ids[0]), pool.reset(ids[1])
    for t in range(4):
        order = ids[::-1] if t % 2 else ids[2:] + ids[:2]
        x = _chunk(rng, 1).repeat(len(order), axis=1) * np.arange(1, len(order) + 1, dtype=np.float32)[None, :, None]
        got = pool.run_batch(order, {"x": x})
        for k, sid in enumerate(order):
            want = solo[sid].run_dict({"x": x[:, k : k + 1]})
            assert np.max(np.abs(got["hn"][:, k : k + 1] - want["hn"])) <= TOL and np.max(np.abs(got["Y"][:, :, k : k + 1] - want["Y"])) <= TOL
    assert pool.stats.whole_calls == 3  # the first whole tick runs plainly and learns the outputs' shapes


def test_expiry_of_a_middle_row_then_a_whole_tick_keeps_the_others_right():
    clock = Clock()
    model = sm.lstm_b()
    pool = SessionPool(model, idle_timeout=5.0, clock=clock)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in range(6)}
    rng = np.random.default_rng(8)
    for t in range(4):
        clock.now = float(t)
        active = [sid for sid in solo if not (sid == 2 and t > 0)]  # stream 2 goes quiet after the first tick
        requests = {sid: {"x": _chunk(rng, 1)} for sid in active}
        got = pool.run(requests, open_missing=True)
        for sid, f in requests.items():
            assert np.max(np.abs(got[sid]["hn"] - solo[sid].run_dict(f)["hn"])) <= TOL
    clock.now = 5.5
    assert pool.expire() == [2] and 2 not in pool
    del solo[2]
    for _ in range(3):
        requests = {sid: {"x": _chunk(rng, 1)} for sid in solo}
        got = pool.run(requests)
        for sid, f in requests.items():
            assert np.max(np.abs(got[sid]["hn"] - solo[sid].run_dict(f)["hn"])) <= TOL
    assert pool.sessions == [0, 1, 3, 4, 5] and pool.stats.whole_calls >= 3


def test_a_pool_of_one_stream_binds_its_buffers_and_equals_the_solo_session():
    model = sm.lstm_b()
    pool = SessionPool(model, context={"x": 1})
    solo = StatefulSession(model, context={"x": 1})
    rng = np.random.default_rng(13)
    for t in range(6):
        x = _chunk(rng, 2)
        got = pool.run_one("only", {"x": x}, ["Y", "hn"] if t % 2 else None, open_missing=True)
        want = solo.run_dict({"x": x})
        assert sorted(got) == (["Y", "hn"] if t % 2 else sorted(want))
        for name, value in got.items():
            assert np.max(np.abs(value - want[name])) <= TOL
    assert pool.stats.whole_calls == 4  # a plain call to learn the shapes for each of the two output lists
    assert np.array_equal(pool.state("only")["c0"], solo.state["c0"])


def test_a_shared_input_fed_as_equal_copies_shares_the_call_and_a_different_value_splits_it(silero_dir):
    pool = SessionPool(silero_dir / "silero_vad_16k_op15.onnx")  # reads sr only as sr * 0: any value runs
    rng = np.random.default_rng(14)
    x = {sid: (0.1 * rng.standard_normal((1, 576))).astype(np.float32) for sid in "abcd"}
    pool.run({sid: {"input": x[sid], "sr": np.array(16000)} for sid in x}, open_missing=True)  # probes
    calls = pool.stats.ort_calls
    got = pool.run({sid: {"input": x[sid], "sr": np.array(16000)} for sid in x})  # four objects, one value
    assert pool.stats.ort_calls == calls + 1 and pool.stats.whole_calls >= 1
    pool.run({sid: {"input": x[sid], "sr": np.array(16000 if sid != "c" else 8000)} for sid in x})  # c differs
    assert pool.stats.ort_calls == calls + 3
    solo = StatefulSession(silero_dir / "silero_vad_16k_op15.onnx")
    solo.run({"input": x["a"], "sr": np.array(16000)})
    assert np.max(np.abs(got["a"]["output"] - solo.run({"input": x["a"], "sr": np.array(16000)})["output"])) <= TOL


def test_the_whole_buffer_path_through_onnxruntimes_documented_api_equals_solo_runs():
    model = sm.lstm_b()
    pool = SessionPool(model)
    pool._native = False  # as on an onnxruntime without the pybind layer (rnnir.runtime.ort.PublicBinding)
    assert drive_whole_ticks(pool, model, streams=12, ticks=9) <= TOL
    assert pool._whole is not None and {b.kind for b in pool._whole.pingpong.bindings} == {"public"}
    assert pool.stats.whole_calls == 8


def test_run_batch_checks_again_whatever_differs_from_the_last_checked_tick():
    model = sm.lstm_b()
    pool = SessionPool(model)
    base = StatefulSession(model)
    ids = ["a", "b", "c"]
    solo = {sid: base.fork(reset=True) for sid in ids}
    rng = np.random.default_rng(15)
    pool.run({sid: {"x": _chunk(rng, 1)} for sid in ids[:2]}, open_missing=True)  # the probe, a and b
    pool.reset("a"), pool.reset("b")
    pool.open("c")
    for _ in range(3):  # the same signature each tick: checked once, then compared
        x = (0.8 * rng.standard_normal((1, 3, INP))).astype(np.float32)
        got = pool.run_batch(ids, {"x": x}, ["hn"])
        for k, sid in enumerate(ids):
            assert np.max(np.abs(got["hn"][:, k : k + 1] - solo[sid].run_dict({"x": x[:, k : k + 1]})["hn"])) <= TOL
    good = np.zeros((1, 3, INP), np.float32)
    with pytest.raises(FeedError, match="twice"):
        pool.run_batch(["a", "b", "a"], {"x": good}, ["hn"])
    with pytest.raises(FeedError, match="one row per id"):
        pool.run_batch(ids, {"x": np.zeros((1, 2, INP), np.float32)}, ["hn"])
    with pytest.raises(FeedError, match="no output"):
        pool.run_batch(ids, {"x": good}, ["nope"])
    with pytest.raises(UnknownSessionError):
        pool.close("c")
        pool.run_batch(ids, {"x": good}, ["hn"])  # the same signature as the checked ticks, c gone


# -- the steady tick: the same streams as the last tick, nothing looked up again ------------------------


def drive_steady_ticks(pool: SessionPool, model, *, context: dict[str, int] | None = None, streams: int = 6, seed: int = 0) -> float:
    """Runs of ticks with the same ids (the steady path), broken by what must end it: a reset, another
    output list, a chunk of another length, a join and a leave; every stream against its own session."""
    rng = np.random.default_rng(seed)
    base = StatefulSession(model, context=context)
    solo = {sid: base.fork(reset=True) for sid in range(streams)}
    worst = 0.0
    next_id = streams
    # (outputs, time steps per chunk, ids in reverse order): the reversed ticks bind new buffers without
    # becoming the steady plan, so the ticks after them must not reuse the plan from before them
    plan = ([(None, 1, False)] * 4 + [(["Y"], 1, False)] * 3 + [(["cn", "Y"], 1, True)] * 2 + [(["Y"], 1, False)] * 2
            + [(None, 2, False)] * 3 + [(["Y"], 1, False)] * 3)
    for tick, (outputs, steps, reverse) in enumerate(plan):
        if tick == 5:
            pool.reset(streams - 1)
            solo[streams - 1].reset()
        if tick == 12:
            pool.close(0)
            del solo[0]
            pool.open(next_id)
            solo[next_id] = base.fork(reset=True)
            next_id += 1
        requests = {sid: {"x": _chunk(rng, steps)} for sid in (reversed(solo) if reverse else solo)}
        got = pool.run(requests, outputs)
        assert list(got) == list(requests)
        for sid, feeds in requests.items():
            want = solo[sid].run_dict(feeds)
            assert list(got[sid]) == (outputs or ["Y", "hn", "cn"])
            for name, value in got[sid].items():
                assert value.shape == want[name].shape
                worst = max(worst, float(np.max(np.abs(value - want[name]))))
    return worst


class CountingSteadyTicks(SessionPool):
    """Counts the ticks the steady path served (so the tests know they tested that path)."""

    @property
    def steady_ticks(self) -> int:
        return self.stats.steady_ticks


@pytest.mark.parametrize("streams", [1, 6])
@pytest.mark.parametrize("context", [None, {"x": 1}])
def test_repeated_ticks_of_the_same_streams_equal_solo_runs(streams, context):
    model = sm.lstm_b()
    pool = CountingSteadyTicks(model, context=context)
    for sid in range(streams):
        pool.open(sid)
    assert drive_steady_ticks(pool, model, context=context, streams=streams) <= TOL
    assert pool.stats.whole_calls >= 10  # most ticks bound the arenas whole
    assert pool.steady_ticks >= 5  # and several of them took the steady path


class StaleSteadyTick(SessionPool):
    """Keeps the steady plan when new buffers are bound (another output list): its bindings' ping-pong parity
    is the old one, so a later tick that matches the plan reads the state of two ticks ago."""

    def _execute_whole(self, batch, wanted):
        steady = self._steady
        out = super()._execute_whole(batch, wanted)
        if self._steady is None:
            self._steady = steady
        return out


def test_a_steady_tick_that_outlives_its_bindings_is_caught():
    model = sm.lstm_b()
    pool = StaleSteadyTick(model)
    for sid in range(3):
        pool.open(sid)
    assert drive_steady_ticks(pool, model, streams=3) > 1e-3


def test_a_bad_feed_on_the_steady_path_is_refused_like_any_other():
    model = sm.lstm_b()
    pool = SessionPool(model)
    rng = np.random.default_rng(2)
    for sid in range(1, 3):  # one stream, then two: both shapes of the steady path
        for s in range(sid):
            if s not in pool:
                pool.open(s)
        for _ in range(3):
            pool.run({s: {"x": _chunk(rng, 1)} for s in range(sid)})
        before = {s: pool.state(s) for s in range(sid)}
        with pytest.raises(FeedError):
            pool.run({s: {"x": _chunk(rng, 1).astype(np.float64)} for s in range(sid)})
        with pytest.raises(FeedError):
            pool.run({s: {"x": _chunk(rng, 1), "y": _chunk(rng, 1)} for s in range(sid)})
        for s in range(sid):  # nothing ran
            assert all(np.array_equal(v, before[s][k]) for k, v in pool.state(s).items())


def test_a_max_batch_lowered_between_ticks_holds_on_the_steady_path():
    model = sm.lstm_b()
    pool = SessionPool(model)
    base = StatefulSession(model)
    solo = {sid: base.fork(reset=True) for sid in range(5)}
    rng = np.random.default_rng(4)
    for sid in solo:
        pool.open(sid)
    for tick in range(6):
        if tick == 3:
            pool.max_batch = 2
        calls = pool.stats.ort_calls
        requests = {sid: {"x": _chunk(rng, 1)} for sid in solo}
        got = pool.run(requests)
        for sid, f in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(f)["Y"])) <= TOL
        if tick >= 3:
            assert pool.stats.ort_calls - calls == 3  # 5 streams, at most 2 rows per call
    assert pool.stats.largest_batch == 5


# -- the lean steady tick (no input context, plain outputs only): rows joined straight into the bound buffer ----


def gained_lstm() -> onnx.ModelProto:
    """lstm_b with a shared scalar input: x is scaled by ``gain`` (static shape [], so one value per call)."""
    model = sm.lstm_b()
    g = model.graph
    g.node[0].input[0] = "xg"
    g.node.insert(0, onnx.helper.make_node("Mul", ["x", "gain"], ["xg"]))
    g.input.append(onnx.helper.make_tensor_value_info("gain", onnx.TensorProto.FLOAT, []))
    return model


def _odd_rows(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One stream's x that differs from the steady plan's rows in a way the lean path must not join blindly."""
    return {
        "transposed": _chunk(rng, 1).reshape(1, INP, 1).copy(),  # the same bytes, another shape: refused like solo
        "strided": np.asfortranarray(np.repeat(_chunk(rng, 1), 2, axis=0))[:1],  # the right shape, not C-contiguous
        "two steps": _chunk(rng, 2),  # another row shape: its own call
    }


@pytest.mark.parametrize("odd", ["transposed", "strided", "two steps"])
def test_a_row_the_lean_tick_cannot_join_takes_the_general_path_and_each_stream_equals_its_solo_run(odd):
    model = sm.lstm_b()
    pool = CountingSteadyTicks(model)
    base = StatefulSession(model)
    ids = list(range(6))
    solo = {sid: base.fork(reset=True) for sid in ids}
    rng = np.random.default_rng(21)
    for sid in ids:
        pool.open(sid)
    for tick in range(6):
        requests = {sid: {"x": _chunk(rng, 1)} for sid in ids}
        if tick == 4:
            requests[3] = {"x": _odd_rows(rng)[odd]}
        if odd == "transposed" and tick == 4:
            # the same bytes as a good row: joined blindly, it would run; refused as a solo session refuses it,
            # and the tick moves no stream on (the others' group, run before the refusal, gets its state back):
            # the ticks after it still equal the solo sessions, none of which ran this tick
            with pytest.raises(RuntimeError, match="dimensions"):
                solo[3].run_dict(requests[3])
            with pytest.raises(Exception, match="dimensions"):
                pool.run(requests, ["Y"])
            continue
        got = pool.run(requests, ["Y"])
        for sid, f in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(f)["Y"])) <= TOL
    assert pool._steady is not None and pool._steady.lean
    assert pool.steady_ticks >= 2  # the ticks before and after the odd one took the lean path


def test_the_lean_tick_shares_an_input_only_when_every_stream_feeds_the_same_value():
    model = gained_lstm()
    pool = CountingSteadyTicks(model)
    base = StatefulSession(model)
    ids = list(range(5))
    solo = {sid: base.fork(reset=True) for sid in ids}
    rng = np.random.default_rng(22)
    for sid in ids:
        pool.open(sid)
    one = np.array(1.5, np.float32)
    for tick in range(7):
        # the same object, then equal values in new objects, then one stream with another gain
        gains = {sid: one if tick < 3 else np.array(1.5, np.float32) for sid in ids}
        if tick == 5:
            gains[2] = np.array(-0.5, np.float32)
        requests = {sid: {"x": _chunk(rng, 1), "gain": gains[sid]} for sid in ids}
        calls = pool.stats.ort_calls
        got = pool.run(requests, ["Y"])
        for sid, f in requests.items():
            assert np.max(np.abs(got[sid]["Y"] - solo[sid].run_dict(f)["Y"])) <= TOL
        if tick == 5:
            assert pool.stats.ort_calls - calls == 2  # two gains: two calls
    assert pool.steady_ticks >= 3
    # an equal gain of another dtype: refused, as the stream's own session refuses it, and nothing runs
    requests = {sid: {"x": _chunk(rng, 1), "gain": one} for sid in ids}
    requests[4]["gain"] = np.array(1.5, np.float64)
    with pytest.raises(FeedError):
        solo[4].run_dict(requests[4])
    calls = pool.stats.ort_calls
    with pytest.raises(FeedError):
        pool.run(requests, ["Y"])
    assert pool.stats.ort_calls == calls
