"""Checks that judge the perturbed run, not the intact one; faults aimed at named slots only.

Each streaming check runs the same stream intact and perturbed.  A model built to misbehave in exactly the perturbed
window tells which run a check judged: ``burst_sensitive`` keeps a finite state on the intact stream (checked here
with numpy) and an infinite one only while a noise burst is fed, so burst health computed over the intact run
passes it.  The decaying recurrence ``h' = 0.5 h + x`` (tests/streaming_models.py) gives hand-worked recovery
counts that move if a check compares the wrong window.

The simulator's ``Faults(late={...})`` delays the stores of the named slots only: two slots with the same seed
recurrence (design.md: ``h' = 0.5 h + x``, x = 1, 0, 2 gives 1, 0.5, 2.25; a store landing one call late gives
1, 0, 2.5) and a Return that waits for neither slot store (OR001), so a late store shows.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.check.simulate import Faults, SimulationError, Simulator
from rnnir.check.streaming import check_streaming
from rnnir.runtime import StatefulSession
from tests.support import streaming_models as sm

W = 4
GAIN = 350.0  # exp(GAIN * |x|) overflows float32 (|x| > 88.7 / GAIN = 0.25) only for inputs louder than the stream's


def burst_sensitive() -> onnx.ModelProto:
    """h' = exp(GAIN |x|) + 0 * min(h, 0): finite while |x| <= 0.25, infinite past it; y = h'."""
    F = TensorProto.FLOAT
    vi = [helper.make_tensor_value_info(n, F, [1, W]) for n in ("x", "h_in", "y", "h_out")]
    inits = [numpy_helper.from_array(np.array(GAIN, np.float32), "gain"), numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    nodes = [
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Mul", ["ax", "gain"], ["gx"]),
        helper.make_node("Exp", ["gx"], ["ex"]),
        helper.make_node("Min", ["h_in", "zero"], ["hneg"]),  # h >= 0 always: the state is carried, and adds nothing
        helper.make_node("Add", ["ex", "hneg"], ["h_out"]),
        helper.make_node("Identity", ["h_out"], ["y"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "burst_sensitive", vi[:2], vi[2:], inits), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _uniform_stream(calls: int) -> list[dict[str, np.ndarray]]:
    """|x| <= 0.1: exp(35) at most on the intact stream; a noise burst is 4x the stream's std (0.058) times N(0, 1)."""
    rng = np.random.default_rng(7)
    return [{"x": rng.uniform(-0.1, 0.1, (1, W)).astype(np.float32)} for _ in range(calls)]


@pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:invalid value encountered")
def test_burst_health_judges_the_perturbed_run_not_the_intact_one():
    chunks = _uniform_stream(30)
    intact = [np.exp(GAIN * np.abs(c["x"].astype(np.float64))) for c in chunks]
    assert all(np.isfinite(h.astype(np.float32)).all() for h in intact)  # the oracle: the intact state stays finite
    report = check_streaming(StatefulSession(burst_sensitive(), pairs=sm.PAIRS), chunks, burst=(10, 5), burst_kind="noise")
    assert report.burst_health["h_in"].trend == "non-finite" and not report.burst_health["h_in"].finite
    assert not report.ok
    # the near miss: a silence burst (zeros) keeps the state finite, and the memoryless state recovers at once
    quiet = check_streaming(StatefulSession(burst_sensitive(), pairs=sm.PAIRS), chunks, burst=(10, 5), burst_kind="silence")
    assert quiet.burst_health["h_in"].finite and quiet.ok
    assert quiet.check("burst").recovery == 0


def _spiked(calls: int, at: int, value: float) -> list[dict[str, np.ndarray]]:
    x = np.zeros((calls, 1, W), np.float32)
    x[at] = value
    return [{"x": x[k]} for k in range(calls)]


def test_a_burst_is_judged_on_the_calls_after_it_by_the_hand_worked_decay():
    # h' = 0.5 h + x, x = 1 at call 20 only; a one-call silence burst there erases it: the call after the burst (21)
    # differs by 0.5, call 21 + j by 0.5^(j+1): within 1e-3 first at j = 9; the burst call itself (difference 1) is not compared
    report = check_streaming(StatefulSession(sm.toy("decay"), pairs=sm.PAIRS), _spiked(40, 20, 1.0), burst=(20, 1), burst_kind="silence", tol=1e-3)
    burst = report.check("burst")
    assert burst.departure["y"] == pytest.approx(0.5, abs=1e-6)
    assert burst.recovery == 9 and burst.compared == 40 - 21


def test_a_drop_is_judged_on_the_calls_after_it_by_the_hand_worked_decay():
    # the same spike zeroed by drop_mode="zero": the same numbers; skipped instead, every later call ran one chunk
    # earlier in the perturbed run, which on an all-zero tail is the same input: the same numbers again
    for mode in ("zero", "skip"):
        report = check_streaming(StatefulSession(sm.toy("decay"), pairs=sm.PAIRS), _spiked(40, 20, 1.0), drop=20, drop_mode=mode, tol=1e-3)
        drop = report.check("drop")
        assert drop.departure["y"] == pytest.approx(0.5, abs=1e-6), mode
        assert drop.recovery == 9 and drop.compared == 40 - 21, mode


def test_a_reconnect_is_judged_on_the_restarted_run():
    # x = 1 at calls 10 and 12; restart at call 12: the continuous h_11 = 0.5, h_12 = 1.25; the restarted stream
    # starts from zeros at call 12 (which it runs: h'_12 = 1), so call 12 + j differs by 0.5^(j+2): departure 0.25,
    # within 1e-3 first at j = 8.  The integrator never agrees (the lost history is 1).
    chunks = _spiked(40, 10, 1.0)
    chunks[12] = {"x": np.ones((1, W), np.float32)}
    good = check_streaming(StatefulSession(sm.toy("decay"), pairs=sm.PAIRS), chunks, reconnect=12, tol=1e-3)
    assert good.check("reconnect").departure["y"] == pytest.approx(0.25, abs=1e-6)
    assert good.check("reconnect").recovery == 8 and good.check("reconnect").compared == 40 - 12
    bad = check_streaming(StatefulSession(sm.toy("integrator"), pairs=sm.PAIRS), chunks, reconnect=12, tol=1e-3)
    assert bad.check("reconnect").recovery is None and bad.check("reconnect").departure["y"] == pytest.approx(1.0)


# -- Faults(late={slot names}) ---------------------------------------------------------------------


KEPT = [1.0, 0.5, 2.25]
STALE = [1.0, 0.0, 2.5]
XS = [{"x": np.full((1, 1, 1), v, np.float32), "u": np.full((1, 1, 1), v, np.float32)} for v in (1, 0, 2)]


def two_slots_returned_early() -> rnnir.Program:
    """Slots h and g, each the seed recurrence of its own input; the Return waits for the output stores only."""
    b = rnnir.Builder("two")
    waits = []
    for slot, inp in (("h", "x"), ("g", "u")):
        s = b.slot(slot, "float32", (1, 1, 1))
        x = b.input(inp, "float32", (1, 1, 1))
        Wc = b.const(f"W_{slot}", np.ones((1, 1, 1), np.float32))
        Rc = b.const(f"R_{slot}", np.full((1, 1, 1), 0.5, np.float32))
        _, hn = b.recurrent("RNN", x, Wc, Rc, initial_h=b.load(s), hidden_size=1, activations=["Affine"], activation_alpha=[1.0],
                            activation_beta=[0.0], name=f"rnn_{slot}")
        b.store(hn, s)
        waits.append(b.store(hn, b.output(f"{slot}n", "float32", (1, 1, 1)), "value"))
    b.ret(*waits)
    return b.build()


def test_late_stores_hit_the_named_slots_only():
    """Every way to name the late slots, in one test (each case matters): exactly the named slots go stale, their
    stores are the deferred ones, and each lands at the start of the next call (the last call's is still pending)."""
    cases = [(frozenset(), set()), ({"h"}, {"h"}), ({"g"}, {"g"}), ({"h", "g"}, {"h", "g"}), (["h", "h"], {"h"}), (True, {"h", "g"}), (False, set())]
    for late, stale in cases:
        sim = Simulator(two_slots_returned_early(), Faults(late=late))
        got: dict[str, list[float]] = {"h": [], "g": []}
        for feed in XS:
            out = sim.run(feed)
            for slot in got:
                got[slot].append(float(np.asarray(out[f"{slot}n"]).ravel()[0]))
        assert got == {slot: STALE if slot in stale else KEPT for slot in got}, late
        assert {e.detail.split("'")[1] for e in sim.events_of("late-store")} == stale, late
        landed = sorted((e.call, e.detail) for e in sim.events_of("landed-next-call"))
        assert landed == sorted((k + 1, f"store to {slot!r} from call {k}") for slot in stale for k in range(2)), late


def test_late_slot_names_must_be_the_programs():
    with pytest.raises(SimulationError, match=r"\['nope'\]"):
        Simulator(two_slots_returned_early(), Faults(late={"h", "nope"}))
