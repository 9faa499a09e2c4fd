"""The IR simulator: every static finding class shows up as a dynamic failure, and the correct fan-out
survives the same injected faults.

Programs are built with rnnir.Builder around docs/design.md's seed recurrence
``h_t = 0.5 h_{t-1} + x_t`` (an RNN with an identity activation, run by
rnnir.semantics.reference).  With x = 1, 0, 2 and h0 = 0, the expected states are the
hand-checkable 1, 0.5, 2.25; a lost state gives 1, 0, 2; a state one call stale
(call k starts from what call k-2 wrote) gives 1, 0, 2.5.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.check.simulate import NO_TENSOR, Faults, SimulationError, Simulator
from tests.support.runnable_samples import runnable_sample  # noqa: E402  # tests/ is on sys.path (rootdir conftest)

KEPT = [1.0, 0.5, 2.25]
LOST = [1.0, 0.0, 2.0]
STALE = [1.0, 0.0, 2.5]
XS = [{"x": np.full((1, 1, 1), v, np.float32)} for v in (1, 0, 2)]
FAULTS = {
    "none": Faults(),
    "late": Faults(late=True),
    "stores-first": Faults(schedule="stores-first"),
    "stores-last": Faults(schedule="stores-last"),
    "late+stores-first": Faults(late=True, schedule="stores-first"),
}


def _cell(b: rnnir.Builder, h0):
    x = b.input("x", "float32", (1, 1, 1))
    W = b.const("W", np.ones((1, 1, 1), np.float32))
    R = b.const("R", np.full((1, 1, 1), 0.5, np.float32))
    return b.recurrent("RNN", x, W, R, initial_h=h0, hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])


def fanout() -> rnnir.Program:
    """Correct: both stores read the final state; the Return waits for both."""
    b = rnnir.Builder("fanout")
    h = b.slot("h", "float32", (1, 1, 1))
    _, hn = _cell(b, b.load(h))
    b.store(hn, h)
    b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value")
    return b.build()


def return_without_slot_wait() -> rnnir.Program:
    """OR001: the Return waits for the output store only."""
    b = rnnir.Builder("no_wait")
    h = b.slot("h", "float32", (1, 1, 1))
    _, hn = _cell(b, b.load(h))
    b.store(hn, h)
    out = b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value")
    b.ret(out)
    return b.build()


def no_slot_store() -> rnnir.Program:
    """SD001: the slot is read, never written."""
    b = rnnir.Builder("no_store")
    h = b.slot("h", "float32", (1, 1, 1))
    _, hn = _cell(b, b.load(h))
    b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value")
    return b.build()


def chain(result: str) -> rnnir.Program:
    """AL001: the output store reads the slot store's result (a token, or a view of the slot)."""
    b = rnnir.Builder(f"chain_{result}")
    h = b.slot("h", "float32", (1, 1, 1))
    _, hn = _cell(b, b.load(h))
    r = b.store(hn, h, result)
    b.store(r, b.output("hn", "float32", (1, 1, 1)), "value")
    return b.build()


def reuse_single_store() -> rnnir.Program:
    """AL002: the slot lives in the output buffer handed to the caller."""
    b = rnnir.Builder("reuse")
    out = b.output("hn", "float32", (1, 1, 1))
    h = b.slot("h", "float32", (1, 1, 1), alias_of=out)
    _, hn = _cell(b, b.load(h))
    b.store(hn, out, "value")
    return b.build()


def view_load(ordered: bool = False, load: str = "view") -> rnnir.Program:
    """OR002: a VIEW load read by an output (the previous state) that nothing orders before the slot store."""
    b = rnnir.Builder("view")
    h = b.slot("h", "float32", (1, 1, 1))
    h0 = b.load(h, load)
    prev = b.compute("Identity", [h0], name="previous_state")
    _, hn = _cell(b, h0)
    store = b.store(hn, h)
    b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value")
    handed = b.store(prev, b.output("h_prev", "float32", (1, 1, 1)), "value")
    if ordered:  # the last reader of the loaded value (the output store; Identity may be a view) before the write
        b.order(handed, store)
    return b.build()


def run(program: rnnir.Program, faults: Faults | None = None, output: str = "hn") -> list[float]:
    """Three calls; each output read at return (as a caller that copies at once would)."""
    sim = Simulator(program, faults)
    values = []
    for feed in XS:
        out = sim.run(feed)[output]
        values.append(out if out is NO_TENSOR else float(np.asarray(out).ravel()[0]))
    return values


def static_codes(program: rnnir.Program) -> set[str]:
    passes = pytest.importorskip("rnnir.passes")
    if not hasattr(passes, "run"):
        pytest.skip("passes.run is not available yet")
    return {d.code for d in passes.run(program)}


# -- the correct fan-out -------------------------------------------------------------------------


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fanout_survives_every_injected_delay_and_schedule(fault):
    assert run(fanout(), FAULTS[fault]) == KEPT


def test_fanout_has_none_of_the_findings_the_broken_programs_have():
    assert not static_codes(fanout()) & {"OR001", "OR002", "SD001", "AL001", "AL002"}


def test_a_late_store_in_the_fanout_lands_before_the_return():
    sim = Simulator(fanout(), Faults(late=True))
    for feed in XS:
        sim.run(feed)
    assert len(sim.events_of("late-store")) == 3 and not sim.events_of("landed-next-call")


# -- OR001: the Return does not wait for the slot store -----------------------------------------


def test_or001_is_static():
    assert "OR001" in static_codes(return_without_slot_wait())


def test_or001_with_a_late_store_makes_the_next_call_read_stale_state():
    sim = Simulator(return_without_slot_wait(), Faults(late=True))
    values = [float(sim.run(f)["hn"].ravel()[0]) for f in XS]
    assert values == STALE
    assert [e.call for e in sim.events_of("landed-next-call")] == [1, 2]


def test_or001_is_latent_without_a_delay():
    assert run(return_without_slot_wait()) == KEPT


# -- SD001: the slot is never written -----------------------------------------------------------


def test_sd001_is_static():
    assert "SD001" in static_codes(no_slot_store())


def test_sd001_restarts_every_call_from_the_initial_state():
    assert run(no_slot_store()) == LOST


def test_a_dropped_store_in_the_fanout_is_the_same_dynamic_failure_as_sd001():
    sim = Simulator(fanout(), Faults(drop={"h"}))
    assert [float(sim.run(f)["hn"].ravel()[0]) for f in XS] == LOST
    assert len(sim.events_of("dropped-store")) == 3


# -- AL001: the output store reads the slot store's result ---------------------------------------


@pytest.mark.parametrize("result", ["token", "alias"])
def test_al001_is_static(result):
    assert "AL001" in static_codes(chain(result))


def test_al001_with_a_token_result_hands_the_caller_no_tensor():
    assert run(chain("token")) == [NO_TENSOR] * 3


def test_al001_with_an_alias_result_hands_out_slot_memory_that_changes_at_the_next_call():
    sim = Simulator(chain("alias"))
    held = sim.run(XS[0])["hn"]
    assert float(held.ravel()[0]) == 1.0
    sim.run(XS[1])
    assert float(held.ravel()[0]) == 0.5  # the caller's value of call 0 is now call 1's state
    assert held is sim.memory("h")


def test_fanout_outputs_held_by_the_caller_never_change():
    sim = Simulator(fanout(), Faults(late=True))
    held = [sim.run(f)["hn"] for f in XS]
    assert [float(h.ravel()[0]) for h in held] == KEPT


# -- AL002: the slot lives in the output buffer (reuse-single-store) ----------------------------


def test_al002_is_static():
    assert "AL002" in static_codes(reuse_single_store())


def test_al002_a_held_output_changes_at_the_next_call():
    sim = Simulator(reuse_single_store())
    held = sim.run(XS[0])["hn"]
    sim.run(XS[1])
    assert float(held.ravel()[0]) == 0.5


def test_al002_a_caller_that_modifies_its_output_corrupts_the_next_call():
    sim = Simulator(reuse_single_store())
    out = sim.run(XS[0])["hn"]
    out *= 100  # the caller scales "its" output in place
    assert float(sim.run(XS[1])["hn"].ravel()[0]) == 50.0  # 0.5 * 100 + 0, not 0.5


def test_the_same_caller_cannot_corrupt_the_fanout():
    sim = Simulator(fanout())
    out = sim.run(XS[0])["hn"]
    out *= 100
    assert float(sim.run(XS[1])["hn"].ravel()[0]) == 0.5


# -- OR002: a VIEW load and a store that may clobber it before its last reader -------------------


def test_or002_is_static_and_goes_away_with_an_order_edge_or_a_copy_load():
    assert "OR002" in static_codes(view_load())
    assert "OR002" not in static_codes(view_load(ordered=True))
    assert "OR002" not in static_codes(view_load(load="copy"))


def test_or002_with_stores_run_first_the_previous_state_output_reads_the_new_state():
    assert run(view_load(), Faults(schedule="stores-first"), "h_prev") == KEPT  # should be 0, 1, 0.5
    assert run(view_load(), Faults(schedule="stores-last"), "h_prev") == [0.0, 1.0, 0.5]


@pytest.mark.parametrize("program", [view_load(ordered=True), view_load(load="copy")], ids=["ordered", "copy"])
def test_or002_fixed_programs_survive_stores_first(program):
    assert run(program, Faults(schedule="stores-first"), "h_prev") == [0.0, 1.0, 0.5]
    assert run(program, Faults(schedule="stores-first")) == KEPT


# -- lowerings of a real ONNX model, executed as they are ---------------------------------------


def _seed_onnx():
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1,
                            activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    graph = helper.make_graph(
        [node], "seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 1]), helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, 1, 1])],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def test_the_lowered_fanout_keeps_its_state():
    assert run(rnnir.load(_seed_onnx()), Faults(late=True)) == KEPT


def test_the_chain_lowering_hands_out_a_view_of_the_slot():
    sim = Simulator(rnnir.load(_seed_onnx(), exit="chain"))
    held = sim.run(XS[0])["hn"]
    sim.run(XS[1])
    assert float(held.ravel()[0]) == 0.5


def test_the_reuse_single_store_lowering_keeps_state_in_the_callers_buffer():
    sim = Simulator(rnnir.load(_seed_onnx(), exit="reuse-single-store"))
    out = sim.run(XS[0])["hn"]
    out[...] = 0  # the caller clears "its" buffer
    assert float(sim.run(XS[2])["hn"].ravel()[0]) == 2.0  # started from 0, not from 1


# -- the simulator itself ------------------------------------------------------------------------


def test_recurrent_values_come_from_the_numpy_reference_of_design_md():
    """tanh RNN, W_x = I, W_h = 0.5 I, inputs (1,0), (0,1), (1,1) -> docs/design.md's three states."""
    b = rnnir.Builder("tanh")
    h = b.slot("h", "float32", (1, 1, 2))
    x = b.input("x", "float32", (1, 1, 2))
    _, hn = b.recurrent("RNN", x, b.const("W", np.eye(2, dtype=np.float32)[None]), b.const("R", 0.5 * np.eye(2, dtype=np.float32)[None]),
                        initial_h=b.load(h), hidden_size=2)
    b.store(hn, h)
    b.store(hn, b.output("hn"), "value")
    sim = Simulator(b.build())
    got = [sim.run({"x": np.array(v, np.float32).reshape(1, 1, 2)})["hn"].ravel() for v in ((1, 0), (0, 1), (1, 1))]
    assert np.allclose(got, [(0.761594, 0), (0.363399, 0.761594), (0.827987, 0.881130)], atol=1e-6)


def test_compute_ops_outside_the_numpy_table_run_through_onnx_reference():
    b = rnnir.Builder("softsign")
    h = b.slot("h", "float32", (2,))
    y = b.compute("Softsign", [b.load(h)])
    z = b.compute("Add", [y, b.input("x", "float32", (2,))])
    b.store(z, h)
    b.store(z, b.output("z"), "value")
    sim = Simulator(b.build())
    sim.run({"x": np.array([1.0, -2.0], np.float32)})
    out = sim.run({"x": np.zeros(2, np.float32)})["z"]
    assert np.allclose(out, [0.5, -2.0 / 3.0])


def test_reset_returns_every_slot_to_its_initial_value():
    sim = Simulator(fanout())
    sim.run(XS[0])
    sim.reset()
    assert float(sim.run(XS[1])["hn"].ravel()[0]) == 0.0


def test_a_missing_feed_is_a_clear_error():
    with pytest.raises(SimulationError, match="feed it"):
        Simulator(fanout()).run({})


def test_faults_naming_an_unknown_slot_are_refused():
    with pytest.raises(SimulationError, match="does not have"):
        Simulator(fanout(), Faults(drop={"nope"}))


def test_the_simulator_and_onnxruntime_agree_on_the_exported_fanout():
    """Two independent executions of one Program: numpy reference + IR semantics vs rnnir.export + onnxruntime."""
    from rnnir.runtime import StatefulSession

    session = StatefulSession(fanout())  # a Builder program: exported, then run by onnxruntime
    assert [float(session.run_dict(f)["hn"].ravel()[0]) for f in XS] == run(fanout()) == KEPT


# -- the samples: what onnxruntime cannot show, the simulator does ------------------------------

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples"
#: under which injected fault a store-structure finding becomes a dynamic failure (docs/design.md's catalogue):
#: aliasing shows whatever the schedule; a Return that does not wait only when a store lands late; a
#: write-after-read on a view only when the store lands before the last reader (run first, not late).
FAILS_UNDER = {"AL001": set(FAULTS), "AL002": set(FAULTS), "AL003": set(FAULTS), "OR001": {"late", "late+stores-first"}, "OR002": {"stores-first"}}


def _expected(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.expected.json").read_text())


def _sample_feeds(session, calls: int = 4) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    feeds = []
    for _ in range(calls):
        feed = {}
        for name, spec in session.inputs.items():
            shape = [d if isinstance(d, int) else 3 for d in spec.shape]  # symbolic dims (T) -> 3 steps
            if name in session.length_inputs:
                feed[name] = np.full(shape, 3, spec.dtype)
            elif spec.dtype.kind == "f":
                feed[name] = rng.standard_normal(shape).astype(spec.dtype)
            else:
                feed[name] = np.full(shape, 16000, spec.dtype)  # sr: the 16 kHz branch
        feeds.append(feed)
    return feeds


def _simulated_vs_onnxruntime(name: str, faults: Faults) -> float:
    """Worst |diff| between the outputs a caller holds after four simulated calls and onnxruntime's."""
    from rnnir.runtime import StatefulSession

    model = runnable_sample(name)
    session = StatefulSession(model, cast_state=True)
    feeds = _sample_feeds(session)
    expected = [session.run_dict(f) for f in feeds]
    sim = Simulator(rnnir.load(model), faults)
    held = [sim.run(f) for f in feeds]
    worst = 0.0
    for got, want in zip(held, expected):
        for out, value in want.items():
            if got[out] is NO_TENSOR:
                return float("inf")
            worst = max(worst, float(np.abs(np.asarray(got[out], np.float64) - value).max()))
    return worst


CORRECT = sorted(
    p.stem for p in [*SAMPLES.glob("*.onnx"), *SAMPLES.glob("*.rnnir")] if _expected(p.stem)["correct"] and p.stem != "gru_reset_branch"
)
#: the store structures plain ONNX cannot express are the IR-text samples
STRUCTURE_BUGS = sorted(p.stem for p in SAMPLES.glob("*.rnnir") if {f["code"] for f in _expected(p.stem)["findings"]} & set(FAILS_UNDER))


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_sample_runs_in_the_simulator_as_in_onnxruntime_under_every_fault(name, fault):
    assert _simulated_vs_onnxruntime(name, FAULTS[fault]) <= 1e-5


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("name", STRUCTURE_BUGS)
def test_a_store_structure_bug_onnxruntime_cannot_show_fails_in_the_simulator_under_its_fault(name, fault):
    codes = {f["code"] for f in _expected(name)["findings"]}
    should_fail = any(fault in FAILS_UNDER[c] for c in codes if c in FAILS_UNDER)
    assert (_simulated_vs_onnxruntime(name, FAULTS[fault]) > 1e-3) == should_fail


def test_the_sample_lists_are_not_empty():
    assert len(CORRECT) >= 8 and "gru_view_load_ordered" in CORRECT
    assert {"al001_chain", "or001_return_no_wait", "or002_view_war"} <= set(STRUCTURE_BUGS)


def test_a_value_computed_inside_a_branch_off_the_state_path_is_a_clear_error():
    sim = Simulator(rnnir.load(str(SAMPLES / "gru_reset_branch.onnx")))
    with pytest.raises(SimulationError, match="inside an If branch"):
        sim.run({"x": np.zeros((3, 1, 3), np.float32), "reset": np.array(True)})
