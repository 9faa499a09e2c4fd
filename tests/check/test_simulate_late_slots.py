"""``Faults(late={...})``: only the named slots' stores complete late, and a late store is seen late.

Two independent copies of the seed recurrence ``h_t = 0.5 h_{t-1} + x_t`` (slots ``h`` and ``g``) in one program
whose Return waits for the output stores only (OR001 for both slots), so a deferred slot store lands after the
next call's loads.  With x = 1, 0, 2 a slot whose store is on time gives 1, 0.5, 2.25 and a late one gives the
hand-worked stale sequence 1, 0, 2.5 (call k starts from what call k-2 wrote); see tests/check/test_simulate.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import rnnir
from rnnir.check.simulate import Faults, SimulationError, Simulator

KEPT = [1.0, 0.5, 2.25]
STALE = [1.0, 0.0, 2.5]
XS = [{"x": np.full((1, 1, 1), v, np.float32)} for v in (1, 0, 2)]
SLOTS = ("g", "h")


def _two_slots_without_slot_waits() -> rnnir.Program:
    b = rnnir.Builder("two_slots")
    x = b.input("x", "float32", (1, 1, 1))
    W = b.const("W", np.ones((1, 1, 1), np.float32))
    R = b.const("R", np.full((1, 1, 1), 0.5, np.float32))
    waits = []
    for name in SLOTS:
        slot = b.slot(name, "float32", (1, 1, 1))
        _, final = b.recurrent(
            "RNN", x, W, R, initial_h=b.load(slot), hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0]
        )
        b.store(final, slot)
        waits.append(b.store(final, b.output(f"{name}_out", "float32", (1, 1, 1)), "value"))
    b.ret(*waits)
    return b.build()


def _outputs(faults: Faults) -> tuple[dict[str, list[float]], Simulator]:
    sim = Simulator(_two_slots_without_slot_waits(), faults)
    seen: dict[str, list[float]] = {name: [] for name in SLOTS}
    for feed in XS:
        out = sim.run(feed)
        for name in SLOTS:
            seen[name].append(float(np.asarray(out[f"{name}_out"]).ravel()[0]))
    return seen, sim


def test_only_the_slots_named_late_read_stale_state():
    """Every subset of the slots, as a set and as True/False: exactly the named slots go stale."""
    cases: list[tuple[bool | set[str] | frozenset[str], set[str]]] = [
        (False, set()), (True, set(SLOTS)), (set(), set()), ({"h"}, {"h"}), ({"g"}, {"g"}), (frozenset(SLOTS), set(SLOTS)),
    ]
    for late, stale in cases:
        seen, sim = _outputs(Faults(late=late))
        want = {name: STALE if name in stale else KEPT for name in SLOTS}
        assert seen == want, late
        deferred = {e.detail.split("'")[1] for e in sim.events_of("late-store")}
        assert deferred == stale, late
        # each late slot: its stores of calls 0 and 1 land at the start of calls 1 and 2 (the last one is still pending)
        landed = sorted((e.call, e.detail) for e in sim.events_of("landed-next-call"))
        assert landed == sorted((k + 1, f"store to {name!r} from call {k}") for name in stale for k in range(2)), late


def test_late_slot_names_are_kept_as_a_set_and_checked_against_the_program():
    faults = Faults(late=["h", "h"])
    assert faults.late == frozenset({"h"})
    program = _two_slots_without_slot_waits()
    assert [faults.is_late(s) for s in program.slots] == [s.name == "h" for s in program.slots]
    with pytest.raises(SimulationError, match=r"\['nope'\]"):
        Simulator(program, Faults(late={"h", "nope"}))
