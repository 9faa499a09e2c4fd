"""One caller's mistake reaches only that caller (issue 26): an unknown output name in a Batcher tick, a saved state
of the wrong batch loaded into a pool stream that has no row yet."""

from __future__ import annotations

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool.batcher import Batcher
from rnnir.serving.pool.pool import SessionPool
from tests.support import streaming_models as sm
from tests.support.bounded import WAIT, closing, together

TOL = 1e-5


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 1, 3)).astype(np.float32)


def test_an_unknown_output_name_fails_only_its_caller_and_the_others_get_their_results():
    model = sm.lstm_b()
    pool = SessionPool(model)
    asked: list[tuple[str, list[str] | None]] = [("good", ["hn"]), ("bad", ["no_such_output"]), ("all", None)]
    with closing(Batcher(pool, max_delay=0.2)) as batcher:  # long enough that the three calls share one tick
        got = together([lambda sid=sid, outputs=outputs: batcher.call(sid, {"x": _x(len(sid))}, outputs, timeout=WAIT) for sid, outputs in asked])
    results = {sid: r for (sid, _), r in zip(asked, got)}
    assert isinstance(results["bad"], FeedError) and "no_such_output" in str(results["bad"])
    for sid, name in (("good", "hn"), ("all", "Y")):
        got = results[sid]
        assert isinstance(got, dict), got
        want = StatefulSession(model).run_dict({"x": _x(len(sid))})[name]
        assert np.max(np.abs(got[name] - want)) <= TOL


def test_a_wrong_batch_state_for_a_stream_without_a_row_is_refused_and_the_others_run_on(tmp_path):
    model = sm.lstm_b()
    wide = StatefulSession(model)
    wide.run({"x": np.zeros((1, 2, 3), np.float32)})  # a state of batch 2, saved alone
    path = wide.save_state(tmp_path / "wide.state")
    pool = SessionPool(model)
    pool.run({"alice": {"x": _x(1)}}, open_missing=True)  # the arenas exist; "bob" has no row yet
    with pytest.raises(StateError, match=r"wide.state: state '[hc]0': shape \(1, 2, 5\) is not one stream's state \(1, 1, 5\)"):
        pool.load_state("bob", path)
    solo = StatefulSession(model)
    solo.run({"x": _x(1)})
    got = pool.run({"alice": {"x": _x(2)}})["alice"]  # the other stream's next call is untouched
    assert np.max(np.abs(got["hn"] - solo.run_dict({"x": _x(2)})["hn"])) <= TOL
    # the near miss: a one-row state loads into a stream without a row and carries on from there
    one = StatefulSession(model)
    one.run({"x": _x(3)})
    pool.load_state("carol", one.save_state(tmp_path / "one.state"))
    got = pool.run({"carol": {"x": _x(4)}, "alice": {"x": _x(5)}})["carol"]
    assert np.max(np.abs(got["hn"] - one.run_dict({"x": _x(4)})["hn"])) <= TOL


def test_a_wrong_batch_state_is_refused_also_before_the_pools_first_call(tmp_path):
    model = sm.lstm_b()
    wide = StatefulSession(model)
    wide.run({"x": np.zeros((1, 2, 3), np.float32)})
    pool = SessionPool(model)
    with pytest.raises(StateError, match=r"state '[hc]0' has shape \(1, 2, 5\): 2 rows along its batch axis 1, but a pool stream's state is one row"):
        pool.load_state("bob", wide.save_state(tmp_path / "wide.state"))
    assert set(pool.run({"alice": {"x": _x(1)}}, open_missing=True)) == {"alice"}
