"""Properties of every stream, id and returned buffer, over random interleavings (Hypothesis state machines).

The pool and the stateful session are driven by random sequences of open / run / reset / close / save / load /
fork / state reads, with session ids of several types (str, int, tuple: ``1`` and ``"1"`` are two sessions).
Each stream is compared with an oracle that shares no code with rnnir:

* the batched LSTM (``streaming_models.lstm_b``) against a plain onnxruntime ``InferenceSession`` run by hand,
  one stream at a time, its state fed back by the test;
* the kept-context model (``streaming_models.context_probe``: ``seen = x``, ``h' = h + sum(x)``) against numpy
  arithmetic: what the model saw is the kept tail followed by the new samples, which can be checked by hand.

Invariants checked after every step and at the end: every array ever handed out is unchanged (no buffer is
reused under the caller, a fork shares nothing), writing into a returned array changes no state, a reset clears
the stream's kept context with its state, and a saved state loads back into its own session only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from tests.support import streaming_models as sm

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, precondition, rule  # noqa: E402

from rnnir import StateError  # noqa: E402
from rnnir.runtime import StatefulSession  # noqa: E402
from rnnir.serving.pool.pool import SessionPool  # noqa: E402

TOL = 1e-5
INP, HIDDEN = 3, 5
KEEP, NEW = 2, 4  # context_probe(6) with a kept context of 2 samples: each call brings 4 new ones

#: session ids of several types; equal-looking ids of different types are different sessions
IDS = st.sampled_from(["a", "1", 1, 0, -1, (1, "1"), ("1",), (0, "x")])
STEPS = st.integers(1, 3)
SEEDS = st.integers(0, 2**16)


class _Held:
    """Every array handed to the caller, with a copy of what it held then: none may change afterwards."""

    def __init__(self) -> None:
        self.items: list[tuple[str, np.ndarray, np.ndarray]] = []

    def keep(self, where: str, arrays: dict[str, np.ndarray]) -> None:
        for name, arr in arrays.items():
            self.items.append((f"{where}:{name}", arr, np.array(arr, copy=True)))

    def check(self) -> None:
        for where, arr, copy in self.items:
            np.testing.assert_array_equal(arr, copy, err_msg=f"{where} changed after it was returned")


def _scribble(arrays: dict[str, np.ndarray]) -> None:
    """Write into returned arrays where numpy lets us: the state must not change because of it."""
    for arr in arrays.values():
        if isinstance(arr, np.ndarray) and arr.flags.writeable and arr.size:
            arr[...] = 1e6


class LstmOracle:
    """One stream of ``lstm_b`` run by hand through onnxruntime, batch of one."""

    sess: ort.InferenceSession | None = None

    def __init__(self) -> None:
        if LstmOracle.sess is None:
            LstmOracle.sess = ort.InferenceSession(sm.lstm_b().SerializeToString(), providers=["CPUExecutionProvider"])
        self.reset()

    def reset(self) -> None:
        self.h = np.zeros((1, 1, HIDDEN), np.float32)
        self.c = np.zeros((1, 1, HIDDEN), np.float32)

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        assert LstmOracle.sess is not None
        y, h, c = LstmOracle.sess.run(["Y", "hn", "cn"], {"x": x, "h0": self.h, "c0": self.c})
        self.h, self.c = h, c
        return {"Y": y, "hn": h, "cn": c}

    def copy(self) -> LstmOracle:
        twin = LstmOracle()
        twin.h, twin.c = self.h.copy(), self.c.copy()
        return twin


class ContextOracle:
    """One stream of ``context_probe`` with a kept context of KEEP samples, in numpy."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.kept = np.zeros((1, KEEP), np.float32)
        self.h = np.zeros((1, 1), np.float32)

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        seen = np.concatenate([self.kept, x], axis=1)
        self.kept = seen[:, -KEEP:].copy()
        self.h = self.h + seen.sum(dtype=np.float32).reshape(1, 1)
        return {"seen": seen, "h_out": self.h.copy()}


def _x_lstm(seed: int, steps: int) -> np.ndarray:
    return (0.8 * np.random.default_rng(seed).standard_normal((steps, 1, INP))).astype(np.float32)


def _x_context(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-4, 5, (1, NEW)).astype(np.float32)  # small integers: exact sums


class PoolMachine(RuleBasedStateMachine):
    """A SessionPool against one hand-run oracle per stream."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="rnnir-props-"))
        self.held = _Held()
        self.saved: dict[int, tuple[Any, Any]] = {}  # file number -> (session id, oracle copy at save time)
        self.files = 0
        self.setup()

    def setup(self) -> None:
        self.pool = SessionPool(sm.lstm_b())
        self.oracles: dict[Any, Any] = {}
        self.new_oracle: Any = LstmOracle

    def feed(self, seed: int, steps: int) -> dict[str, np.ndarray]:
        return {"x": _x_lstm(seed, steps)}

    def snapshot(self, oracle: Any) -> Any:
        return oracle.copy() if isinstance(oracle, LstmOracle) else _copy_context(oracle)

    def compare(self, sid: Any, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
        assert set(got) == set(want), (sid, sorted(got), sorted(want))
        for name in want:
            np.testing.assert_allclose(got[name], want[name], atol=TOL, err_msg=f"session {sid!r}, output {name!r}")

    @rule(sid=IDS)
    def open(self, sid: Any) -> None:
        if sid in self.oracles:
            with pytest.raises(StateError):
                self.pool.open(sid)
            return
        self.pool.open(sid)
        self.oracles[sid] = self.new_oracle()

    @precondition(lambda self: self.oracles)
    @rule(data=st.data(), seed=SEEDS, steps=STEPS, scribble=st.booleans())
    def run(self, data: st.DataObject, seed: int, steps: int, scribble: bool) -> None:
        ids = sorted(self.oracles, key=repr)
        callers = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique_by=repr))
        steps = 1 if isinstance(self.oracles[callers[0]], ContextOracle) else steps  # a tick's rows share a shape
        requests = {sid: self.feed(seed + k, steps) for k, sid in enumerate(callers)}
        got = self.pool.run(requests)
        assert list(got) == list(requests)
        for sid, feeds in requests.items():
            self.compare(sid, got[sid], self.oracles[sid].run(feeds["x"]))
            self.held.keep(f"run {sid!r}", got[sid])
        if scribble:
            for sid in callers:  # the arrays are the caller's: writing into them must not reach any state
                self.held.items = [item for item in self.held.items if not item[0].startswith(f"run {sid!r}:")]
                _scribble(got[sid])

    @precondition(lambda self: self.oracles)
    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.oracles, key=repr)))
        self.pool.reset(sid)
        self.oracles[sid].reset()

    @precondition(lambda self: self.oracles)
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.oracles, key=repr)))
        self.pool.close(sid)
        del self.oracles[sid]

    @precondition(lambda self: self.oracles)
    @rule(data=st.data(), scribble=st.booleans())
    def read_state(self, data: st.DataObject, scribble: bool) -> None:
        sid = data.draw(st.sampled_from(sorted(self.oracles, key=repr)))
        state = self.pool.state(sid)
        if isinstance(self.oracles[sid], LstmOracle):
            np.testing.assert_allclose(state["h0"], self.oracles[sid].h, atol=TOL)
            np.testing.assert_allclose(state["c0"], self.oracles[sid].c, atol=TOL)
        else:
            np.testing.assert_allclose(state["h_in"], self.oracles[sid].h, atol=TOL)
        if scribble:
            _scribble(state)  # a copy: writing into it changes nothing (the next run compares with the oracle)
        else:
            self.held.keep(f"state {sid!r}", state)

    @precondition(lambda self: self.oracles)
    @rule(data=st.data())
    def save(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.oracles, key=repr)))
        path = self.tmp / f"{self.files}.npz"
        try:
            self.pool.save_state(sid, path)
        except StateError:
            return  # a stream that has not run has only its initial state: nothing to save (documented)
        self.saved[self.files] = (sid, self.snapshot(self.oracles[sid]))
        self.files += 1

    @precondition(lambda self: self.saved)
    @rule(data=st.data(), into=IDS)
    def load(self, data: st.DataObject, into: Any) -> None:
        number = data.draw(st.sampled_from(sorted(self.saved)))
        owner, oracle = self.saved[number]
        path = self.tmp / f"{number}.npz"
        if type(into) is not type(owner) or into != owner:
            before = {sid: self.pool.state(sid) for sid in self.oracles}
            with pytest.raises(StateError):
                self.pool.load_state(into, path)  # another session's state must never reach this one
            assert set(self.pool.sessions) == set(self.oracles)
            for sid, state in before.items():
                for name, value in state.items():
                    np.testing.assert_array_equal(self.pool.state(sid)[name], value)
            return
        self.pool.load_state(into, path)
        self.oracles[into] = self.snapshot(oracle)

    @invariant()
    def held_outputs_never_change(self) -> None:
        self.held.check()

    @invariant()
    def the_pool_holds_exactly_the_open_streams(self) -> None:
        assert sorted(self.pool.sessions, key=repr) == sorted(self.oracles, key=repr)

    def teardown(self) -> None:
        self.held.check()
        for p in self.tmp.glob("*"):
            p.unlink()
        self.tmp.rmdir()


def _copy_context(oracle: ContextOracle) -> ContextOracle:
    twin = ContextOracle()
    twin.kept, twin.h = oracle.kept.copy(), oracle.h.copy()
    return twin


class ContextPoolMachine(PoolMachine):
    """The same rules on a model with a kept input context: reset and load must bring the context along."""

    def setup(self) -> None:
        self.pool = SessionPool(sm.context_probe(KEEP + NEW), context={"x": KEEP})
        self.oracles = {}
        self.new_oracle = ContextOracle

    def feed(self, seed: int, steps: int) -> dict[str, np.ndarray]:
        return {"x": _x_context(seed)}


class SessionMachine(RuleBasedStateMachine):
    """StatefulSession and its forks against hand-run oracles: forks are independent, held outputs never change."""

    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.held = _Held()
        self.oracles: dict[int, Any] = {}
        self.objects: dict[int, StatefulSession] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="rnnir-props-"))
        self.made = 0

    def _key(self) -> int:
        self.made += 1
        return self.made

    def make(self) -> tuple[StatefulSession, Any]:
        return StatefulSession(sm.context_probe(KEEP + NEW), context={"x": KEEP}), ContextOracle()

    def feed(self, seed: int) -> np.ndarray:
        return _x_context(seed)

    def copy(self, oracle: Any) -> Any:
        return _copy_context(oracle)

    @rule(target=sessions)
    def new(self) -> int:
        key = self._key()
        self.objects[key], self.oracles[key] = self.make()
        return key

    @rule(key=sessions, seed=SEEDS, scribble=st.booleans())
    def run(self, key: int, seed: int, scribble: bool) -> None:
        x = self.feed(seed)
        got = self.objects[key].run_dict({"x": x})
        want = self.oracles[key].run(x)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], atol=TOL, err_msg=f"session {key}, {name}")
        if scribble:
            _scribble(got)
        else:
            self.held.keep(f"run {key}", got)

    @rule(key=sessions)
    def reset(self, key: int) -> None:
        self.objects[key].reset()
        self.oracles[key].reset()

    @rule(target=sessions, key=sessions, reset=st.booleans())
    def fork(self, key: int, reset: bool) -> int:
        twin = self._key()
        self.objects[twin] = self.objects[key].fork(reset=reset)
        self.oracles[twin] = self.make()[1] if reset else self.copy(self.oracles[key])
        return twin

    @rule(key=sessions, scribble=st.booleans())
    def read_state(self, key: int, scribble: bool) -> None:
        state = self.objects[key].state
        oracle = self.oracles[key]
        if isinstance(oracle, LstmOracle):
            np.testing.assert_allclose(state["h0"], oracle.h, atol=TOL)
            np.testing.assert_allclose(state["c0"], oracle.c, atol=TOL)
        else:
            np.testing.assert_allclose(state["h_in"], oracle.h, atol=TOL)
        if scribble:
            _scribble(state)  # a copy: writing into it changes nothing (the next run compares with the oracle)
        else:
            self.held.keep(f"state {key}", state)

    @rule(key=sessions, into=sessions)
    def save_and_load(self, key: int, into: int) -> None:
        path = self.tmp / "s.npz"
        self.objects[key].save_state(path)
        self.objects[into].load_state(path)
        self.oracles[into] = self.copy(self.oracles[key])

    @rule(key=consumes(sessions))
    def drop(self, key: int) -> None:
        del self.objects[key], self.oracles[key]

    @invariant()
    def held_outputs_never_change(self) -> None:
        self.held.check()

    def teardown(self) -> None:
        self.held.check()
        for p in self.tmp.glob("*"):
            p.unlink()
        self.tmp.rmdir()


class LstmSessionMachine(SessionMachine):
    """The same rules on a session without an input context (``lstm_b``): its calls bind the state buffers and
    swap them (ping-pong), so a fork, a returned state output or a read state that shares a buffer shows here."""

    base: StatefulSession | None = None

    def make(self) -> tuple[StatefulSession, Any]:
        if LstmSessionMachine.base is None:  # one onnxruntime session: each new one is a reset fork of it
            LstmSessionMachine.base = StatefulSession(sm.lstm_b(), state_shapes={"h0": (1, 1, HIDDEN), "c0": (1, 1, HIDDEN)})
        return LstmSessionMachine.base.fork(reset=True), LstmOracle()

    def feed(self, seed: int) -> np.ndarray:
        return _x_lstm(seed, 1 + seed % 3)

    def copy(self, oracle: Any) -> Any:
        return oracle.copy()


#: a few seconds per machine in the default run; RNNIR_PROPERTY_EXAMPLES=500 (say) for the long run
_SETTINGS = settings(max_examples=int(os.environ.get("RNNIR_PROPERTY_EXAMPLES", "25")), stateful_step_count=25, deadline=None,
                     derandomize=True, database=None)
TestPool = PoolMachine.TestCase
TestPool.settings = _SETTINGS
TestContextPool = ContextPoolMachine.TestCase
TestContextPool.settings = _SETTINGS
TestSession = SessionMachine.TestCase
TestSession.settings = _SETTINGS
TestLstmSession = LstmSessionMachine.TestCase
TestLstmSession.settings = settings(_SETTINGS, max_examples=int(os.environ.get("RNNIR_PROPERTY_EXAMPLES", "12")))


def test_a_state_saved_by_session_1_does_not_load_into_session_str_1(tmp_path):
    """Found by the machine above: ids 1 and "1" are two sessions, so the file of one must not load into the other."""
    pool = SessionPool(sm.context_probe(KEEP + NEW), context={"x": KEEP})
    pool.open(1)
    pool.open("1")
    pool.run({1: {"x": _x_context(0)}, "1": {"x": _x_context(1)}})
    pool.save_state(1, tmp_path / "one.npz")
    theirs = pool.state("1")
    with pytest.raises(StateError, match="not of '1'"):
        pool.load_state("1", tmp_path / "one.npz")
    np.testing.assert_array_equal(pool.state("1")["h_in"], theirs["h_in"])
    assert pool.load_state(1, tmp_path / "one.npz") is not None  # its own session takes it back
    pool.load_state("1", tmp_path / "one.npz", from_session=1)  # a deliberate move is still possible
    np.testing.assert_array_equal(pool.state("1")["h_in"], pool.state(1)["h_in"])
