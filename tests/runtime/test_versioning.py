"""State bound to its model and its declared state version: loading across versions follows the caller's policy."""

from __future__ import annotations

import numpy as np
import pytest

from rnnir import StateError
from rnnir.runtime import StatefulSession
from rnnir.runtime.versioning import (
    STATE_VERSION_KEY,
    StateMigrations,
    StateOrigin,
    VersionOutcome,
    VersionPolicy,
    compatible,
    model_state_version,
    reconcile,
    with_state_version,
)
from tests.support import streaming_models as sm

X = np.full((1, 1, 3), 0.5, np.float32)


def _session(seed: int, version: str | None) -> StatefulSession:
    model = sm.lstm_b(seed=seed)
    return StatefulSession(model if version is None else with_state_version(model, version))


def _saved(tmp_path, seed: int = 0, version: str | None = "1"):
    s = _session(seed, version)
    for _ in range(3):
        s.run({"x": X})
    return s.save_state(tmp_path / "s.state"), s.state


def test_declaring_a_version_is_metadata_only():
    model = sm.lstm_b()
    tagged = with_state_version(with_state_version(model, "1"), "2")
    assert model_state_version(model) is None and model_state_version(tagged) == "2"
    assert [p.key for p in tagged.metadata_props].count(STATE_VERSION_KEY) == 1
    assert StatefulSession(model).fingerprint == StatefulSession(tagged).fingerprint
    assert StatefulSession(tagged).state_version == "2"


def test_the_same_version_on_another_graph_loads(tmp_path):
    path, state = _saved(tmp_path, seed=0, version="1")
    other = _session(1, "1")
    assert other.load_state(path) is VersionOutcome.SAME_VERSION
    assert all(np.array_equal(other.state[k], state[k]) for k in state)


def test_another_version_is_refused_by_default(tmp_path):
    path, _ = _saved(tmp_path, version="1")
    other = _session(1, "2")
    with pytest.raises(StateError, match="state version '1'.*state version '2'"):
        other.load_state(path)
    same_graph_new_version = _session(0, "2")  # a bumped version wins over an equal fingerprint
    with pytest.raises(StateError):
        same_graph_new_version.load_state(path)


def test_reset_policy_starts_from_the_initial_state(tmp_path):
    path, _ = _saved(tmp_path, version="1")
    other = _session(1, "2")
    other.run({"x": X})
    assert other.load_state(path, on_version_mismatch=VersionPolicy.RESET) is VersionOutcome.RESET
    fresh = _session(1, "2")
    assert np.array_equal(other.run_dict({"x": X})["hn"], fresh.run_dict({"x": X})["hn"])


def test_a_chain_of_registered_migrations_is_applied_in_order(tmp_path):
    path, state = _saved(tmp_path, version="1")
    steps = StateMigrations()
    steps.register("1", "2", lambda s: {"h0": s["h0"] + 1.0, "c0": s["c0"]})
    steps.register("2", "3", lambda s: {"h0": s["h0"] * 2.0, "c0": s["c0"] * 0.0})
    target = _session(1, "3")
    assert target.load_state(path, on_version_mismatch="migrate", migrations=steps) is VersionOutcome.MIGRATED
    assert np.allclose(target.state["h0"], (state["h0"] + 1.0) * 2.0) and not target.state["c0"].any()


@pytest.mark.parametrize("target_version,steps_given,match", [("4", True, "no registered migration"), ("2", False, "no migrations"), (None, True, "declare a state version")])
def test_a_migration_that_cannot_happen_is_an_error(tmp_path, target_version, steps_given, match):
    path, _ = _saved(tmp_path, version="1")
    steps = StateMigrations()
    steps.register("1", "2", lambda s: s)
    with pytest.raises(StateError, match=match):
        _session(1, target_version).load_state(path, on_version_mismatch="migrate", migrations=steps if steps_given else None)


def test_a_migration_to_the_wrong_slots_is_refused(tmp_path):
    path, _ = _saved(tmp_path, version="1")
    steps = StateMigrations()
    steps.register("1", "2", lambda s: {"h0": s["h0"]})
    with pytest.raises(StateError, match="do not match"):
        _session(1, "2").load_state(path, on_version_mismatch="migrate", migrations=steps)


def test_without_declared_versions_only_the_same_graph_loads(tmp_path):
    path, _ = _saved(tmp_path, version=None)
    assert _session(0, None).load_state(path) is VersionOutcome.SAME_MODEL
    assert _session(0, "1").load_state(path) is VersionOutcome.SAME_MODEL  # one side undeclared: the graph decides
    with pytest.raises(StateError, match="graph that produced it"):
        _session(1, None).load_state(path)


def test_registry_rules():
    steps = StateMigrations()
    steps.register("1", "2", lambda s: s)
    with pytest.raises(StateError, match="already registered"):
        steps.register("1", "3", lambda s: s)
    with pytest.raises(StateError, match="itself"):
        steps.register("2", "2", lambda s: s)
    steps.register("2", "1", lambda s: s)  # a cycle never reaches 3
    assert steps.path("1", "3") is None and steps.path("1", "2") == [("1", "2")] and steps.path("2", "2") == []


def test_compatibility_table():
    a = StateOrigin("f" * 64, "1", "a")
    assert compatible(a, StateOrigin("f" * 64, "1", "b")) is VersionOutcome.SAME_MODEL
    assert compatible(a, StateOrigin("e" * 64, "1", "b")) is VersionOutcome.SAME_VERSION
    assert compatible(a, StateOrigin("f" * 64, "2", "b")) is None
    assert compatible(a, StateOrigin("f" * 64, None, "b")) is VersionOutcome.SAME_MODEL
    assert compatible(a, StateOrigin("e" * 64, None, "b")) is None
    outcome, state = reconcile(a, StateOrigin("e" * 64, "2", "b"), {"h": np.ones(2)}, VersionPolicy.RESET)
    assert outcome is VersionOutcome.RESET and state is None


def test_a_cycle_after_the_first_step_ends_the_search():
    steps = StateMigrations()
    for a, b in [("1", "2"), ("2", "3"), ("3", "2")]:
        steps.register(a, b, lambda s: s)
    assert steps.path("1", "4") is None  # 1 -> 2 -> 3 -> 2 ...: the walk stops where it has been
    assert steps.path("1", "3") == [("1", "2"), ("2", "3")]


def test_a_missing_migration_names_the_registered_ones():
    with pytest.raises(StateError, match=r"from state version '1' to '2' \(registered: none\)"):
        StateMigrations().migrate({}, "1", "2")
    steps = StateMigrations()
    steps.register("1", "2", lambda s: s)
    steps.register("5", "6", lambda s: s)
    with pytest.raises(StateError, match=r"\(registered: '1' -> '2', '5' -> '6'\)"):
        steps.migrate({}, "2", "3")


def test_declaring_a_version_again_replaces_it_however_often_it_was_declared():
    model = with_state_version(with_state_version(sm.lstm_b(), "1"), "2")
    assert [(p.key, p.value) for p in model.metadata_props if p.key == STATE_VERSION_KEY] == [(STATE_VERSION_KEY, "2")]
    model.metadata_props.add(key=STATE_VERSION_KEY, value="7")  # a tool that appended instead of replacing
    model = with_state_version(model, "3")
    assert [(p.key, p.value) for p in model.metadata_props if p.key == STATE_VERSION_KEY] == [(STATE_VERSION_KEY, "3")]


def test_migrate_needs_both_versions_whichever_is_missing():
    steps = StateMigrations()
    steps.register("1", "2", lambda s: s)
    for saved_version, target_version in [(None, "2"), ("1", None)]:
        saved, target = StateOrigin("f" * 64, saved_version, "a"), StateOrigin("e" * 64, target_version, "b")
        with pytest.raises(StateError, match="needs both models to declare a state version"):
            reconcile(saved, target, {"h": np.ones(2)}, VersionPolicy.MIGRATE, steps)
