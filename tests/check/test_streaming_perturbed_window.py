"""Each streaming check judges the perturbed run: models that misbehave in exactly the perturbed window.

tests/check/test_streaming_windows.py shows one noise burst on a memoryless model; here every window position (the
first call, the middle, the last calls), both burst kinds, and every check on a model a perturbation breaks for good.

``transient(trigger)`` keeps a state that goes non-finite on the calls whose input fires ``trigger`` and is finite
again on the next ordinary call (a non-finite state is reset to 0 before use), while its output is the input itself:

* ``loud``:   h' = log(T - |x|) + 0.5 h   (NaN on a call with an element above T; the stream stays below it)
* ``silent``: h' = log(|x|) + 0.5 h       (-inf on an all-zero call; a random stream has no zero)

So a burst of the matching kind makes the state non-finite during the burst and nowhere else: the outputs agree
with the intact run throughout (recovery 0), and only the burst's state health, taken over the perturbed run, can fail
the report.  Health computed over the intact run, or over the calls after the burst, passes it.  The near misses:
the other burst kind, and the same model with a trigger the stream never reaches.  ``poisoned(trigger)`` is the
same without the reset (the state, and the output y = h', stay non-finite for ever): exactly the checks whose
perturbation fires the trigger fail.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnir.check.streaming import check_streaming, streaming_to_text
from rnnir.runtime import StatefulSession

W = 16
CALLS = 30
PAIRS = {"h_in": "h_out"}
QUIET = 0.1  # the stream's amplitude: uniform in [-QUIET, QUIET]
THRESHOLD = 2 * QUIET  # a noise burst (4 x the stream's std, ~0.23 here) crosses it on some of W elements every call


def _model(trigger: str, *, reset: bool, threshold: float = THRESHOLD) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    vi = [helper.make_tensor_value_info(n, f, [1, W]) for n in ("x", "h_in", "y", "h_out")]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("T", threshold), ("half", 0.5), ("zero", 0.0))]
    nodes = [helper.make_node("Abs", ["x"], ["ax"])]
    if trigger == "loud":
        nodes += [helper.make_node("Sub", ["T", "ax"], ["room"]), helper.make_node("Log", ["room"], ["fx"])]
    else:
        nodes += [helper.make_node("Log", ["ax"], ["fx"])]
    h = "h_in"
    if reset:  # a non-finite state is forgotten: the next ordinary call is finite again
        nodes += [
            helper.make_node("IsNaN", ["h_in"], ["nan"]),
            helper.make_node("IsInf", ["h_in"], ["inf"]),
            helper.make_node("Or", ["nan", "inf"], ["bad"]),
            helper.make_node("Where", ["bad", "zero", "h_in"], ["h_ok"]),
        ]
        h = "h_ok"
    nodes += [helper.make_node("Mul", [h, "half"], ["kept"]), helper.make_node("Add", ["fx", "kept"], ["h_out"])]
    nodes.append(helper.make_node("Identity", ["x" if reset else "h_out"], ["y"]))
    graph = helper.make_graph(nodes, f"{trigger}_{'transient' if reset else 'poisoned'}", vi[:2], vi[2:], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _stream(seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-QUIET, QUIET, (CALLS, 1, W)).astype(np.float32)
    return [{"x": x[k]} for k in range(CALLS)]


def _finite_calls(session: StatefulSession, feeds: list[dict[str, np.ndarray]]) -> list[bool]:
    s = session.fork(reset=True)
    out = []
    for feed in feeds:
        s.run(feed)
        out.append(bool(np.isfinite(s.state["h_in"]).all()))
    return out


def test_burst_health_is_taken_over_the_perturbed_run_for_every_window():
    """A burst that makes the state non-finite only while it lasts fails the report; outputs recover at once."""
    stream = _stream()
    windows = [(1, 1), (5, 3), (CALLS - 4, 3)]
    for trigger, kind in (("loud", "noise"), ("silent", "silence")):
        session = StatefulSession(_model(trigger, reset=True), pairs=PAIRS)
        assert all(_finite_calls(session, stream))  # the intact stream never fires the trigger
        for at, length in windows:
            report = check_streaming(session, stream, burst=(at, length), burst_kind=kind)
            burst = report.check("burst")
            # the outputs never departed; the state, reset to 0 after the burst, decays back to the intact one
            assert burst.ok and burst.recovery == 0 and burst.departure == {"y": 0.0}, (trigger, at)
            assert burst.state_recovery != 0, (trigger, at)  # None when the run ends first
            assert burst.compared == CALLS - at - length
            health = report.burst_health["h_in"]
            assert health.trend == "non-finite" and not health.finite and health.calls == CALLS, (trigger, at)
            assert not report.ok and report.status == "fail"
            assert "FAIL: h_in: non-finite" in streaming_to_text(report)
            # the near miss: the other kind of burst leaves the state finite, and the report passes
            other = check_streaming(session, stream, burst=(at, length), burst_kind="silence" if kind == "noise" else "noise")
            assert other.burst_health["h_in"].finite and other.ok, (trigger, at)
    # a trigger no burst reaches: the same noise burst passes
    calm = StatefulSession(_model("loud", reset=True, threshold=1e6), pairs=PAIRS)
    report = check_streaming(calm, stream, burst=(5, 3), burst_kind="noise")
    assert report.ok and report.burst_health["h_in"].finite


def test_a_lasting_failure_fails_exactly_the_checks_whose_perturbation_fires_it():
    stream = _stream(1)
    silent = StatefulSession(_model("silent", reset=False), pairs=PAIRS)
    loud = StatefulSession(_model("loud", reset=False), pairs=PAIRS)
    expected = {  # (model, check kwargs) -> report ok
        ("silent", "drop zero"): False, ("silent", "drop skip"): True, ("silent", "reconnect"): True,
        ("silent", "burst silence"): False, ("silent", "burst noise"): True,
        ("loud", "drop zero"): True, ("loud", "burst noise"): False, ("loud", "burst silence"): True,
    }
    kwargs = {
        "drop zero": {"drop": 7, "drop_mode": "zero"}, "drop skip": {"drop": 7, "drop_mode": "skip"}, "reconnect": {"reconnect": 7},
        "burst silence": {"burst": (7, 2), "burst_kind": "silence"}, "burst noise": {"burst": (7, 2), "burst_kind": "noise"},
    }
    for (name, check), ok in expected.items():
        report = check_streaming(silent if name == "silent" else loud, stream, **kwargs[check])
        assert report.ok == ok, (name, check)
        (rec,) = report.checks
        assert rec.ok == ok, (name, check)  # the outputs themselves never come back
        if not ok:
            assert rec.recovery is None and rec.state_recovery is None and rec.per_output == {"y": None}
