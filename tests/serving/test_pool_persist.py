"""A pool stream's state on disk and what a loaded or carried state must be: the file names its session (also in
the format written before the typed session key), its model and version decide what loads, the kept context comes
with the state, and anything that does not fit is refused before the pool changes.

Oracle: one StatefulSession per stream (batch of one, none of the pool's code), hand-made files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import StatefulSession
from rnnir.runtime.versioning import VersionOutcome, with_state_version
from rnnir.serving.pool import SessionPool
from tests.serving.test_pool_streams import _chunk, _close
from tests.support import streaming_models as sm

TOL = 1e-5
INP = 3


def test_a_state_saved_before_its_stream_has_a_row_is_the_loaded_one_with_its_context(tmp_path):
    model = sm.lstm_b()
    donor = SessionPool(model, context={"x": 1})
    solo = StatefulSession(model, context={"x": 1})
    for k in range(2):
        donor.run({"a": {"x": _chunk(k, 2)}, "b": {"x": _chunk(10 + k, 2)}}, open_missing=True)
        solo.run_dict({"x": _chunk(k, 2)})
    first = donor.save_state("a", tmp_path / "first.npz")
    relay = SessionPool(model, context={"x": 1})
    relay.load_state("a", first)  # no call yet: state and context wait for a row
    second = relay.save_state("a", tmp_path / "second.npz")  # saved from what waits
    last = SessionPool(model, context={"x": 1})
    last.run({"z": {"x": _chunk(30, 2)}}, open_missing=True)
    last.load_state("a", second)
    got = last.run({"a": {"x": _chunk(40, 2)}, "z": {"x": _chunk(41, 2)}})["a"]
    _close(got, solo.run_dict({"x": _chunk(40, 2)}), "relayed")  # the kept time step came along twice


def _rewrite_meta(path: Path, change) -> None:
    with np.load(path) as f:
        entries = {k: f[k] for k in f.files}
    meta = json.loads(str(entries.pop("__rnnir_state__")))
    change(meta)
    with open(path, "wb") as fh:
        np.savez(fh, __rnnir_state__=np.array(json.dumps(meta)), **entries)


def test_a_file_written_before_the_typed_session_key_names_its_session_by_str(tmp_path):
    model = sm.lstm_b()
    pool = SessionPool(model)
    pool.run({1: {"x": _chunk(1)}, "b": {"x": _chunk(2)}}, open_missing=True)
    for sid, name in ((1, "one"), ("b", "b")):
        path = pool.save_state(sid, tmp_path / f"{name}.npz")
        meta = json.loads(str(np.load(path)["__rnnir_state__"]))
        assert meta["session"] == str(sid) and meta["session_key"] == f"{type(sid).__qualname__}:{sid!r}"
        _rewrite_meta(path, lambda m: m.pop("session_key"))
    old_one, old_b = tmp_path / "one.npz", tmp_path / "b.npz"
    fresh = SessionPool(model)
    fresh.load_state("1", old_one)  # by str() alone 1 and "1" cannot be told apart: the old format allowed it
    fresh.load_state("b", old_b)
    with pytest.raises(StateError, match="session 'b', not of 'c'"):
        fresh.load_state("c", old_b)
    fresh.load_state("c", old_b, from_session="b")
    with pytest.raises(StateError, match="not of 'd'"):
        fresh.load_state("d", old_b, from_session="x")
    for sid in ("b", "c"):
        assert np.array_equal(fresh.state(sid)["h0"], pool.state("b")["h0"])
    _rewrite_meta(old_b, lambda m: m.pop("session"))  # a file naming no session at all (a StatefulSession's)
    fresh.load_state("e", old_b)
    assert np.array_equal(fresh.state("e")["c0"], pool.state("b")["c0"])


def test_a_file_of_another_format_is_refused(tmp_path):
    pool = SessionPool(sm.lstm_b())
    pool.run({"a": {"x": _chunk(1)}}, open_missing=True)
    path = pool.save_state("a", tmp_path / "a.npz")
    _rewrite_meta(path, lambda m: m.update(format="something else"))
    with pytest.raises(StateError, match="not a state file of format"):
        pool.load_state("a", path)
    assert np.array_equal(pool.state("a")["h0"], StatefulSession(sm.lstm_b()).run_dict({"x": _chunk(1)})["hn"])


def test_a_loaded_context_of_the_wrong_shape_is_refused_before_anything_changes(tmp_path):
    model = sm.lstm_b()
    long_context = SessionPool(model, context={"x": 2})
    long_context.run({"a": {"x": _chunk(1, 3)}}, open_missing=True)
    path = long_context.save_state("a", tmp_path / "a.npz")
    pool = SessionPool(model, context={"x": 1})
    pool.run({"a": {"x": _chunk(2, 2)}, "b": {"x": _chunk(3, 2)}}, open_missing=True)
    before = {sid: pool.state(sid) for sid in ("a", "b")}
    with pytest.raises(StateError, match="context 'x'"):
        pool.load_state("a", path)
    for sid, state in before.items():
        for name, value in state.items():
            assert np.array_equal(pool.state(sid)[name], value)


def test_a_reset_policy_load_clears_the_state_and_the_kept_context(tmp_path):
    old = with_state_version(sm.lstm_b(seed=0), "1")
    new = with_state_version(sm.lstm_b(seed=1), "2")
    donor = SessionPool(old, context={"x": 1})
    donor.run({"a": {"x": _chunk(1, 2)}}, open_missing=True)
    path = donor.save_state("a", tmp_path / "a.npz")
    pool = SessionPool(new, context={"x": 1})
    for _ in range(2):
        pool.run({"a": {"x": _chunk(2, 2)}, "b": {"x": _chunk(3, 2)}}, open_missing=True)
    assert pool.load_state("a", path, on_version_mismatch="reset") is VersionOutcome.RESET
    got = pool.run({"a": {"x": _chunk(4, 2)}, "b": {"x": _chunk(5, 2)}})["a"]
    _close(got, StatefulSession(new, context={"x": 1}).run_dict({"x": _chunk(4, 2)}), "reset by policy")


def test_an_upgrade_refuses_a_carried_state_of_the_wrong_names_dtype_or_shape_and_keeps_the_pool():
    from rnnir.runtime.versioning import StateMigrations

    for bad, match in ((lambda s: {"h0": s["h0"]}, "state names"),
                       (lambda s: {"h0": s["h0"].astype(np.float64), "c0": s["c0"]}, "float64"),
                       (lambda s: {"h0": s["h0"][0], "c0": s["c0"]}, "shape"),
                       (lambda s: {"h0": s["h0"][..., :4], "c0": s["c0"]}, r"has shape \(1, 1, 4\), the new model declares \[1, 'B', 5\]"),
                       (lambda s: {"h0": np.concatenate([s["h0"], s["h0"]]), "c0": s["c0"]}, r"has shape \(2, 1, 5\)")):
        pool = SessionPool(with_state_version(sm.lstm_b(seed=0), "1"))
        pool.run({"a": {"x": _chunk(1)}, "b": {"x": _chunk(2)}}, open_missing=True)
        pool.open("c")  # never ran: nothing to carry, reset on the new model
        before = pool.state("a")
        steps = StateMigrations()
        steps.register("1", "2", bad)
        with pytest.raises(StateError, match=match):
            pool.upgrade(with_state_version(sm.lstm_b(seed=1), "2"), policy="migrate", migrations=steps)
        assert pool.state_version == "1" and np.array_equal(pool.state("a")["h0"], before["h0"])
    good = StateMigrations()
    good.register("1", "2", lambda s: s)
    outcomes = pool.upgrade(with_state_version(sm.lstm_b(seed=1), "2"), policy="migrate", migrations=good)
    assert outcomes["c"] is VersionOutcome.RESET and outcomes["a"] is VersionOutcome.MIGRATED


def test_a_state_read_while_it_waits_for_a_row_is_a_copy(tmp_path):
    model = sm.lstm_b()
    donor = SessionPool(model, context={"x": 1})
    donor.run({"a": {"x": _chunk(1, 2)}}, open_missing=True)
    path = donor.save_state("a", tmp_path / "a.npz")
    pool = SessionPool(model, context={"x": 1})
    pool.load_state("a", path)
    read = pool.state("a")
    for v in read.values():
        v[...] = 1e3  # the caller's copy
    again = SessionPool(model, context={"x": 1})
    again.load_state("a", pool.save_state("a", tmp_path / "b.npz"))  # saved from what waits, not from the copy
    _close(again.state("a"), donor.state("a"), "saved while waiting")
    got = pool.run({"a": {"x": _chunk(2, 2)}})["a"]
    solo = StatefulSession(model, context={"x": 1})
    solo.load_state(path)
    _close(got, solo.run_dict({"x": _chunk(2, 2)}), "after the copies were written into")


def test_a_state_of_another_model_is_refused_unless_the_policy_resets(tmp_path):
    pool = SessionPool(sm.lstm_b(seed=0))
    pool.run({"a": {"x": _chunk(1)}}, open_missing=True)
    path = pool.save_state("a", tmp_path / "a.npz")
    other = SessionPool(sm.lstm_b(seed=1))
    other.run({"a": {"x": _chunk(2)}}, open_missing=True)
    before = other.state("a")
    with pytest.raises(StateError):
        other.load_state("a", path)
    assert all(np.array_equal(v, before[k]) for k, v in other.state("a").items())
    assert other.load_state("a", path, on_version_mismatch="reset") is VersionOutcome.RESET
    assert all(not v.any() for v in other.state("a").values())


def test_a_state_saved_without_a_context_clears_the_streams_kept_context(tmp_path):
    model = sm.lstm_b()
    plain = SessionPool(model)
    plain.run({"a": {"x": _chunk(1, 2)}}, open_missing=True)
    path = plain.save_state("a", tmp_path / "a.npz")  # no kept context in it
    for before_first_call in (True, False):
        pool = SessionPool(model, context={"x": 1})
        if not before_first_call:
            pool.run({"a": {"x": _chunk(3, 2)}, "b": {"x": _chunk(4, 2)}}, open_missing=True)  # a keeps a time step
        pool.load_state("a", path)
        got = pool.run({"a": {"x": _chunk(5, 2)}}, open_missing=True)["a"]
        solo = StatefulSession(model, context={"x": 1})
        solo.load_state(path)  # the state, and a context of zeros
        _close(got, solo.run_dict({"x": _chunk(5, 2)}), f"before the first call: {before_first_call}")


def test_a_stream_that_joined_after_the_last_call_has_nothing_to_save_and_a_waiting_one_saves_what_waits(tmp_path):
    model = sm.lstm_b()
    pool = SessionPool(model, context={"x": 1})
    pool.run({"b": {"x": _chunk(1, 2)}}, open_missing=True)  # the buffers exist; b has row 0
    pool.open("a")  # no row until the next call
    with pytest.raises(StateError, match="not run yet"):
        pool.save_state("a", tmp_path / "a.npz")
    donor = SessionPool(model, context={"x": 1})
    donor.run({"c": {"x": _chunk(2, 2)}}, open_missing=True)
    pool.load_state("c", donor.save_state("c", tmp_path / "c.npz"))  # waits for a row, with its context
    again = SessionPool(model, context={"x": 1})
    again.load_state("c", pool.save_state("c", tmp_path / "c2.npz"))
    solo = StatefulSession(model, context={"x": 1})
    solo.run_dict({"x": _chunk(2, 2)})
    _close(again.run({"c": {"x": _chunk(3, 2)}})["c"], solo.run_dict({"x": _chunk(3, 2)}), "c, saved while it waited")
    pool.upgrade(model)  # the same model: states carried, the buffers made again at the next call
    path = pool.save_state("b", tmp_path / "b.npz")  # saved while b's state waits after the upgrade
    twin = StatefulSession(model, context={"x": 1})
    twin.run_dict({"x": _chunk(1, 2)})
    kept = SessionPool(model, context={"x": 1})
    kept.load_state("b", path)
    _close(kept.run({"b": {"x": _chunk(4, 2)}})["b"], twin.run_dict({"x": _chunk(4, 2)}), "b, saved after the upgrade")


def test_from_session_must_name_the_files_session_whatever_the_types_of_the_ids(tmp_path):
    pool = SessionPool(sm.lstm_b())
    pool.run({None: {"x": _chunk(1)}, "None": {"x": _chunk(2)}, 7: {"x": _chunk(3)}}, open_missing=True)
    none_path = pool.save_state(None, tmp_path / "none.npz")
    with pytest.raises(StateError, match="not of 'x'"):
        pool.load_state("x", none_path)  # the session None is a session like any other
    with pytest.raises(StateError, match="not of 'x'"):
        pool.load_state("x", none_path, from_session="None")
    pool.load_state(None, none_path)  # its own session takes it back
    seven = pool.save_state(7, tmp_path / "seven.npz")
    with pytest.raises(StateError, match="not of 'y'"):
        pool.load_state("y", seven, from_session=8)
    with pytest.raises(StateError, match="not of 'y'"):
        pool.load_state("y", seven, from_session="7")
    pool.load_state("y", seven, from_session=7)
    assert np.array_equal(pool.state("y")["h0"], pool.state(7)["h0"])
    legacy = pool.save_state("None", tmp_path / "legacy.npz")
    with np.load(legacy) as f:
        entries = {k: f[k] for k in f.files}
    meta = json.loads(str(entries.pop("__rnnir_state__")))
    del meta["session_key"]  # the format before the typed key: the session by str() alone
    with open(legacy, "wb") as fh:
        np.savez(fh, __rnnir_state__=np.array(json.dumps(meta)), **entries)
    with pytest.raises(StateError, match="not of 'z'"):
        pool.load_state("z", legacy)
    with pytest.raises(StateError, match="not of 'z'"):
        pool.load_state("z", legacy, from_session="other")
    pool.load_state("z", legacy, from_session="None")


def _integrator_file(tmp_path: Path, width: int, version: str) -> Path:
    """The saved state of a pool stream of ``h' = h + x`` with h[1, width], state version ``version``."""
    model = with_state_version(sm.toy("integrator", width), version)
    pool = SessionPool(model, sm.PAIRS)
    pool.run({"s": {"x": np.full((1, width), 2.0, np.float32)}}, open_missing=True)
    return pool.save_state("s", tmp_path / f"w{width}v{version}.npz")


def test_a_file_larger_than_this_models_state_is_refused_unread_unless_a_policy_may_use_it(tmp_path):
    from rnnir.runtime.versioning import StateMigrations

    wide = _integrator_file(tmp_path, 300_000, "1")  # a fixed state of 1.2 MB; the pool's holds 4 floats
    model = with_state_version(sm.toy("integrator", 4), "2")
    pool = SessionPool(model, sm.PAIRS)
    with pytest.raises(StateError, match="expands to"):
        pool.load_state("s", wide)  # refused by its size, before anything is decompressed
    with pytest.raises(StateError, match="state version"):  # migrations given: read, then judged by version
        pool.load_state("s", wide, migrations=StateMigrations())
    assert pool.load_state("s", wide, on_version_mismatch="reset") is VersionOutcome.RESET
    steps = StateMigrations()
    steps.register("1", "2", lambda s: {"h_in": s["h_in"][:, :4] * 10})
    assert pool.load_state("s", wide, on_version_mismatch="migrate", migrations=steps) is VersionOutcome.MIGRATED
    assert pool.state("s")["h_in"].tolist() == [[20.0] * 4]
    bad = StateMigrations()
    bad.register("1", "2", lambda s: {"h_in": s["h_in"][:, :4].astype(np.float64)})
    with pytest.raises(StateError, match="float64"):
        pool.load_state("s", wide, on_version_mismatch="migrate", migrations=bad)
    assert pool.state("s")["h_in"].tolist() == [[20.0] * 4]


def test_a_reset_policy_load_ignores_a_saved_context_of_another_shape(tmp_path):
    old = with_state_version(sm.lstm_b(seed=0), "1")
    new = with_state_version(sm.lstm_b(seed=1), "2")
    donor = SessionPool(old, context={"x": 2})
    donor.run({"a": {"x": _chunk(1, 3)}}, open_missing=True)
    path = donor.save_state("a", tmp_path / "a.npz")  # a kept context of two time steps
    pool = SessionPool(new, context={"x": 1})
    pool.run({"a": {"x": _chunk(2, 2)}, "b": {"x": _chunk(3, 2)}}, open_missing=True)
    assert pool.load_state("a", path, on_version_mismatch="reset") is VersionOutcome.RESET
    got = pool.run({"a": {"x": _chunk(4, 2)}, "b": {"x": _chunk(5, 2)}})["a"]
    _close(got, StatefulSession(new, context={"x": 1}).run_dict({"x": _chunk(4, 2)}), "reset by policy")
