"""A state file a StatefulSession wrote loads back into it, whatever the size of its slots and of its kept input
context: the size limit a file is held to before it is read counts every fixed slot at its full size and leaves room
for the context.  A file from an older state layout may be larger when the caller asks to migrate it, and a caller
who passes migrations without that policy is told about the version, not about the file's size.  Loading replaces
the kept context too, with none when the file holds none.

Sizes: 300,000 float32 (1.2 MB) is more than the 1 MiB the limit allows for metadata, so a limit that left out a
slot's or the context's size would refuse these files."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

from rnnir import StateError
from rnnir.runtime import StatefulSession
from rnnir.runtime.versioning import StateMigrations, VersionOutcome, with_state_version

F = TensorProto.FLOAT
BIG = 300_000


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def build(nodes, inputs, outputs, name="m"):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs), opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def add_state(shape, name="add"):
    """hn = h0 + x."""
    return build([helper.make_node("Add", ["h0", "x"], ["hn"])], [vi("x", shape), vi("h0", shape)], [vi("hn", shape)], name=name)


def test_a_large_fixed_slot_loads_back(tmp_path):
    s = StatefulSession(add_state([BIG]))
    state = np.arange(BIG, dtype=np.float32)
    s.state = {"h0": state}
    s.save_state(tmp_path / "big.state")
    t = StatefulSession(add_state([BIG]))
    t.load_state(tmp_path / "big.state")
    np.testing.assert_array_equal(t.state["h0"], state)
    np.testing.assert_array_equal(t.run_dict({"x": np.ones(BIG, np.float32)})["hn"], state + 1)


def test_a_slot_without_a_declared_shape_loads_back(tmp_path):
    s = StatefulSession(add_state(None))
    s.state = {"h0": np.array([[1, 2], [3, 4]], np.float32)}
    s.save_state(tmp_path / "any.state")
    t = StatefulSession(add_state(None))
    t.load_state(tmp_path / "any.state")
    assert t.state["h0"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert t.run_dict({"x": np.ones((2, 2), np.float32)})["hn"].tolist() == [[2.0, 3.0], [4.0, 5.0]]


def summing():
    """hn = h0 + sum(x): a one-number state, and an input whose last BIG samples the session keeps as context."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=1), helper.make_node("Add", ["h0", "sx"], ["hn"])]
    return build(nodes, [vi("x", ["N"]), vi("h0", [1])], [vi("hn", [1])], name="sum")


def test_a_large_kept_context_loads_back(tmp_path):
    s = StatefulSession(summing(), context={"x": BIG})
    assert s.run_dict({"x": np.array([1, 2, 3, 4], np.float32)})["hn"].tolist() == [10.0]  # zeros, then 1..4
    s.save_state(tmp_path / "ctx.state")
    t = StatefulSession(summing(), context={"x": BIG})
    t.load_state(tmp_path / "ctx.state")
    assert t.context_state["x"].shape == (BIG,) and t.context_state["x"][-4:].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert t.run_dict({"x": np.array([5], np.float32)})["hn"].tolist() == [25.0]  # 10 + (1 + 2 + 3 + 4) + 5


def test_loading_a_file_without_context_drops_the_kept_one(tmp_path):
    fresh = StatefulSession(summing(), context={"x": 2})
    fresh.save_state(tmp_path / "start.state")  # before any call: the initial state, no context kept yet
    s = StatefulSession(summing(), context={"x": 2})
    assert s.run_dict({"x": np.array([5, 6, 7], np.float32)})["hn"].tolist() == [18.0]
    assert s.context_state["x"].tolist() == [6.0, 7.0]
    s.load_state(tmp_path / "start.state")
    assert s.context_state == {}
    assert s.run_dict({"x": np.array([1, 2, 3], np.float32)})["hn"].tolist() == [6.0]  # as a fresh stream: zeros before


def versions(tmp_path):
    """A file of version "1" (a BIG slot) and a model of version "2" whose 4-number state is the old one's first 4."""
    old = StatefulSession(with_state_version(add_state([BIG], name="old"), "1"))
    old.state = {"h0": np.arange(BIG, dtype=np.float32)}
    old.save_state(tmp_path / "old.state")
    steps = StateMigrations()
    steps.register("1", "2", lambda state: {"h0": state["h0"][:4]})
    return StatefulSession(with_state_version(add_state([4], name="new"), "2")), steps


def test_a_larger_older_layout_is_read_when_asked_to_migrate(tmp_path):
    new, steps = versions(tmp_path)
    assert new.load_state(tmp_path / "old.state", on_version_mismatch="migrate", migrations=steps) is VersionOutcome.MIGRATED
    assert new.state["h0"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_migrations_without_the_migrate_policy_are_refused_for_the_version(tmp_path):
    new, steps = versions(tmp_path)
    with pytest.raises(StateError, match=re.escape("a state only means something to the graph that produced it")):
        new.load_state(tmp_path / "old.state", migrations=steps)
    assert new.state["h0"].tolist() == [0.0] * 4


def test_a_large_state_along_a_dim_declared_0_loads_back(tmp_path):
    # a dim declared 0 is not fixed for the session (state = takes any size along it), so its file is not held to 0 bytes
    m = build([helper.make_node("Add", ["h0", "x"], ["hn"])], [vi("x", [0, 2]), vi("h0", [0, 2])], [vi("hn", [0, 2])], name="zero")
    s = StatefulSession(m)
    state = np.arange(2 * (BIG // 2), dtype=np.float32).reshape(BIG // 2, 2)
    s.state = {"h0": state}
    s.save_state(tmp_path / "zero.state")
    t = StatefulSession(m)
    t.load_state(tmp_path / "zero.state")
    np.testing.assert_array_equal(t.state["h0"], state)
