"""The registry's contract: every registered recurrence kind (rnnir.ir.recurrence.KINDS) goes through lowering,
verification, export, the simulator and the numpy reference, checked against onnxruntime where it runs the kind.

A new kind in KINDS is included automatically: the test fails until ``_WEIGHTS`` says how to build a small
model of it (and the reference either runs it or lists it in ``reference.UNSUPPORTED_KINDS``, with the reason).
Below the contract: the contrib kinds' references on what the small models leave out.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.check.simulate import SimulationError, run_calls
from rnnir.ir.recurrence import KINDS, RecurrenceKind
from rnnir.semantics import reference

ort = pytest.importorskip("onnxruntime")

T, BATCH, IN, H = 4, 1, 2, 3
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
MEMORY_DEPTH, ATTN, MEMORY_STEPS = 2, 3, 4  # AttnLSTM's memory and attention sizes


def _float(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.4).astype(np.float32)


def _onnx_weights(kind: RecurrenceKind, rng: np.random.Generator) -> dict[str, np.ndarray]:
    g = GATES[kind.semantics] * H
    return {"W": _float(rng, 1, g, IN), "R": _float(rng, 1, g, H), "B": _float(rng, 1, 2 * g)}


def _quantized_weights(kind: RecurrenceKind, rng: np.random.Generator) -> dict[str, np.ndarray]:
    # int8 weights transposed against ONNX LSTM ([D, K, 4H]), one scale and zero point per direction
    return {
        "W": rng.integers(-100, 100, (1, IN, 4 * H)).astype(np.int8),
        "R": rng.integers(-100, 100, (1, H, 4 * H)).astype(np.int8),
        "B": _float(rng, 1, 8 * H),
        "W_scale": np.array([0.004], np.float32),
        "W_zero_point": np.array([25], np.int8),
        "R_scale": np.array([0.003], np.float32),
        "R_zero_point": np.array([-20], np.int8),
    }


def _attention_weights(kind: RecurrenceKind, rng: np.random.Generator) -> dict[str, np.ndarray]:
    # onnxruntime's kernel wants W over [x, attention] (its schema text says input_size only)
    return {
        "W": _float(rng, 1, 4 * H, IN + MEMORY_DEPTH),
        "R": _float(rng, 1, 4 * H, H),
        "B": _float(rng, 1, 8 * H),
        "QW": _float(rng, 1, H, ATTN),
        "MW": _float(rng, 1, MEMORY_DEPTH, ATTN),
        "V": _float(rng, 1, ATTN),
        "M": _float(rng, BATCH, MEMORY_STEPS, MEMORY_DEPTH),
        "memory_seq_lens": np.full((BATCH,), MEMORY_STEPS, np.int32),
    }


#: how to make the weights of a small model of each kind (every registered kind needs an entry)
_WEIGHTS: dict[str, Callable[[RecurrenceKind, np.random.Generator], dict[str, np.ndarray]]] = {
    "RNN": _onnx_weights,
    "GRU": _onnx_weights,
    "LSTM": _onnx_weights,
    "DynamicQuantizeLSTM": _quantized_weights,
    "AttnLSTM": _attention_weights,
}

STATE_NAMES = {"initial_h": ("h0", "hn"), "initial_c": ("c0", "cn")}


def _model(kind: RecurrenceKind, negated_x: bool = False) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One node of ``kind`` with its weights as initializers, its states as h0/c0 -> hn/cn; and the weights.
    ``negated_x``: X is ``Neg(x)``, a value off the state path (the simulator computes it from the ONNX graph)."""
    weights = _WEIGHTS[kind.name](kind, np.random.default_rng(23))
    names = {port: port for port in weights} | {"X": "neg_x" if negated_x else "x"} | {e: STATE_NAMES[e][0] for e in kind.entries}
    inputs = [names.get(p, "") for p in kind.inputs]
    while inputs[-1] == "":
        inputs.pop()
    outputs = {kind.sequence_output: "y"} | {kind.exit_of(e) or "": STATE_NAMES[e][1] for e in kind.entries}
    shapes = {"y": [T, 1, BATCH, H], "hn": [1, BATCH, H], "cn": [1, BATCH, H]}
    node = helper.make_node(kind.op_type, inputs, [outputs.get(p, "") for p in kind.outputs], name=f"{kind.name}_node",
                            domain=kind.domain or None, hidden_size=H)
    state = [helper.make_tensor_value_info(STATE_NAMES[e][0], TensorProto.FLOAT, [1, BATCH, H]) for e in kind.entries]
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["neg_x"], name="negate"), node] if negated_x else [node],
        kind.name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, BATCH, IN]), *state],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for p, n in outputs.items() if p],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(kind.domain, 1)] if kind.domain else [])
    return helper.make_model(graph, opset_imports=opsets), weights


def _feeds(kind: RecurrenceKind, seed: int) -> dict[str, np.ndarray]:
    return {"x": (np.random.default_rng(seed).standard_normal((T, BATCH, IN))).astype(np.float32)}


def _ort_calls(model: onnx.ModelProto, kind: RecurrenceKind, calls: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]] | None:
    """onnxruntime over the calls, each fed the states the previous one returned (None: it does not run the kind)."""
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - a build of onnxruntime without the contrib op
        return None
    state = {STATE_NAMES[e][0]: np.zeros((1, BATCH, H), np.float32) for e in kind.entries}
    out = []
    for feeds in calls:
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {**feeds, **state})))
        state = {STATE_NAMES[e][0]: got[STATE_NAMES[e][1]] for e in kind.entries}
        out.append(got)
    return out


def _tolerance(kind: RecurrenceKind, weights: dict[str, np.ndarray], calls: list[dict[str, np.ndarray]]) -> float:
    """How far the float reference may be from onnxruntime.

    Float kinds: float32 rounding.  DynamicQuantizeLSTM: onnxruntime rounds x and h to uint8 at every step (one
    scale per tensor: range/255, at most half of it off), which the reference does not; a gate's input is then off
    by at most half a step of x times the largest row sum of |W| plus the same for h (|h| <= 1, so range 2) and R.
    Sigmoid and tanh do not grow an error, the cell state adds one per step: T * (calls) steps of it, doubled for
    c feeding h.
    """
    if kind.name != "DynamicQuantizeLSTM":
        return 1e-5
    w = reference.dequantize_weights(weights["W"], weights["W_scale"], weights["W_zero_point"])
    r = reference.dequantize_weights(weights["R"], weights["R_scale"], weights["R_zero_point"])
    x_range = max(float(np.ptp(np.append(c["x"], 0.0))) for c in calls)
    per_gate = 0.5 * x_range / 255 * float(np.abs(w).sum(axis=2).max()) + 0.5 * 2.0 / 255 * float(np.abs(r).sum(axis=2).max())
    return 2 * per_gate * T * len(calls)


@pytest.fixture(params=sorted(KINDS), ids=str)
def kind(request: pytest.FixtureRequest) -> RecurrenceKind:
    k = KINDS[request.param]
    assert k.name in _WEIGHTS, f"recurrence kind {k.name} is registered but this contract test cannot build it: add it to _WEIGHTS"
    return k


def test_every_kind_lowers_with_its_state_pairs(kind):
    model, _ = _model(kind)
    prog = rnnir.load(model)
    assert [r.kind for r in prog.recurrents] == [kind.name]
    assert sorted((p.input, p.output) for p in prog.state_pairs) == sorted(STATE_NAMES[e] for e in kind.entries)


def test_every_kind_verifies_clean_and_a_sequence_output_stored_as_state_is_sd003(kind):
    model, _ = _model(kind)
    prog = rnnir.load(model)
    v = passes.verify(prog)
    assert v.diagnostics == [] and v.slices and v.all_verified, [d.code for d in v.diagnostics]
    # the near miss: the slot of h gets the sequence output (the edit of issue 23), through the Program
    (rec,) = prog.recurrents
    (store,) = prog.stores_to(prog.slot("h0"))
    prog.set_input(store, 0, rec.port(kind.sequence_output))
    assert "SD003" in {d.code for d in passes.run(prog)}


def test_every_kind_exports_and_reads_back_the_same(kind):
    model, _ = _model(kind)
    prog = rnnir.load(model)
    exported = rnnir.export(prog)
    again = rnnir.load(exported)
    assert [r.kind for r in again.recurrents] == [kind.name]
    assert sorted((p.input, p.output) for p in again.state_pairs) == sorted((p.input, p.output) for p in prog.state_pairs)
    assert passes.run(again) == []
    calls = [_feeds(kind, 1)]
    before, after = _ort_calls(model, kind, calls), _ort_calls(exported, kind, calls)
    if before is not None:
        assert after is not None
        for name, value in before[0].items():
            np.testing.assert_array_equal(after[0][name], value, err_msg=name)


@pytest.mark.parametrize("negated_x", [False, True], ids=["x", "neg_x"])
def test_every_kind_simulates_and_references_like_onnxruntime_or_is_refused_with_its_reason(kind, negated_x):
    model, weights = _model(kind, negated_x)
    prog = rnnir.load(model)
    calls = [_feeds(kind, 1), _feeds(kind, 2)]
    if not reference.supports(kind.name):
        why = reference.UNSUPPORTED_KINDS[kind.name]  # a refusal must be documented with its reason
        with pytest.raises(SimulationError, match=f"{kind.name}, which the simulator cannot run"):
            run_calls(prog, calls)
        with pytest.raises(reference.UnsupportedKindError, match="not supported"):
            reference.run_node(kind.name, [calls[0]["x"], weights["W"], weights["R"]], {"hidden_size": H})
        assert why
        return
    simulated = run_calls(prog, calls)
    # the reference alone, one node with the model's inputs in port order, fed the states call to call: the
    # simulator's state machinery (slots, loads, stores) is checked against this plain chain exactly
    (rec,) = prog.recurrents
    states = {name: np.zeros((1, BATCH, H), np.float32) for e in kind.entries for name in STATE_NAMES[e][:1]}
    for i, feeds in enumerate(calls):
        x = -feeds["x"] if negated_x else feeds["x"]
        ins = [None if v is None else x if v is rec.inputs[0] else states[v.name] if v.name in states else weights[v.name] for v in rec.inputs]
        referenced = dict(zip([None if v is None else v.name for v in rec.outputs], reference.run_node(kind.name, ins, rec.attributes())))
        for name in ("y", *(STATE_NAMES[e][1] for e in kind.entries)):
            np.testing.assert_allclose(simulated[i][name], referenced[name], rtol=0, atol=1e-6, err_msg=f"call {i} {name}")
        states = {STATE_NAMES[e][0]: referenced[STATE_NAMES[e][1]] for e in kind.entries}
    # the second call really carries the state: it differs from a call started afresh with the same input
    fresh = run_calls(prog, [calls[1]])[0]
    assert np.abs(fresh["hn"] - simulated[1]["hn"]).max() > 1e-5  # float32 rounding is 1e-7 here
    expected = _ort_calls(model, kind, calls)
    if expected is None:
        pytest.skip(f"this onnxruntime does not run {kind.name}: simulated and referenced without its oracle")
    tol = _tolerance(kind, weights, calls)
    for i, (sim, ort_out) in enumerate(zip(simulated, expected)):
        for name, value in ort_out.items():
            np.testing.assert_allclose(sim[name], value, rtol=0, atol=tol, err_msg=f"call {i} {name}")


def test_the_quantized_tolerance_is_far_below_what_a_dequantization_slip_moves():
    # the derived tolerance is a worst-case bound, yet well below the outputs and of the order of what a slip in
    # dequantizing moves (computed without onnxruntime, whose int8 kernels differ between CPUs): int8 weights read
    # in ONNX LSTM's layout ([D, 4H, K] reshaped, not transposed) or without their zero points
    kind = KINDS["DynamicQuantizeLSTM"]
    _, weights = _model(kind)
    calls = [_feeds(kind, 1)]
    tol = _tolerance(kind, weights, calls)
    _, right_h, _ = reference.dynamic_quantize_lstm(calls[0]["x"], **weights)

    def untransposed(q, scale, zero):
        return (q.astype(np.float64) - zero.astype(np.float64)).reshape(1, 4 * H, -1) * scale.astype(np.float64)

    w = untransposed(weights["W"], weights["W_scale"], weights["W_zero_point"])
    r = untransposed(weights["R"], weights["R_scale"], weights["R_zero_point"])
    _, reshaped_h, _ = reference.lstm(calls[0]["x"], w, r, weights["B"])
    no_zero = {**weights, "W_zero_point": np.zeros(1, np.int8), "R_zero_point": np.zeros(1, np.int8)}
    _, no_zero_h, _ = reference.dynamic_quantize_lstm(calls[0]["x"], **no_zero)
    assert 0 < tol < np.abs(right_h).max() / 5
    assert np.abs(reshaped_h - right_h).max() > tol / 2 and np.abs(no_zero_h - right_h).max() > tol / 4


def test_every_kind_is_run_by_the_reference_or_refused_with_a_reason():
    assert set(reference.UNSUPPORTED_KINDS) <= set(KINDS)
    for name in KINDS:
        assert reference.supports(name) != (name in reference.UNSUPPORTED_KINDS), name


def test_a_refused_kind_stops_the_simulator_by_name_before_any_call(monkeypatch):
    # no registered kind is refused today: pretend GRU were, as a kind added without a reference would be
    model, _ = _model(KINDS["GRU"])
    prog = rnnir.load(model)
    monkeypatch.setattr(reference, "_OPS", {k: v for k, v in reference._OPS.items() if k != "GRU"})
    monkeypatch.setattr(reference, "UNSUPPORTED_KINDS", {"GRU": "no reference for this test"})
    with pytest.raises(SimulationError, match=r"'?GRU_node'? is a GRU, which the simulator cannot run: no reference for this test"):
        run_calls(prog, [_feeds(KINDS["GRU"], 1)])
    with pytest.raises(reference.UnsupportedKindError, match="GRU is not supported: no reference for this test"):
        reference.run_node("GRU", [np.zeros((1, 1, 1))] * 3, {})


def _attn_model(direction: str, layer: int | None) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """AttnLSTM over a batch of 2 whose second memory is 2 of 4 steps long, with or without the attention layer AW."""
    rng = np.random.default_rng(5)
    d = 2 if direction == "bidirectional" else 1
    attention = MEMORY_DEPTH if layer is None else layer
    w = {
        "W": _float(rng, d, 4 * H, IN + attention), "R": _float(rng, d, 4 * H, H), "B": _float(rng, d, 8 * H),
        "QW": _float(rng, d, H, ATTN), "MW": _float(rng, d, MEMORY_DEPTH, ATTN), "V": _float(rng, d, ATTN),
        "M": _float(rng, 2, MEMORY_STEPS, MEMORY_DEPTH), "memory_seq_lens": np.array([MEMORY_STEPS, 2], np.int32),
    }
    if layer is not None:
        w["AW"] = _float(rng, d, MEMORY_DEPTH + H, layer)
    ins = ["x", "W", "R", "B", "", "h0", "c0", "", "QW", "MW", "V", "M", "memory_seq_lens", *(["AW"] if layer else [])]
    node = helper.make_node("AttnLSTM", ins, ["y", "hn", "cn"], domain="com.microsoft", hidden_size=H, direction=direction)
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("x", [T, 2, IN]), ("h0", [d, 2, H]), ("c0", [d, 2, H]))]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "hn", "cn")]
    graph = helper.make_graph([node], "attn", vi, outs, [numpy_helper.from_array(v, k) for k, v in w.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]), w


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("layer", [None, 5], ids=["no_AW", "AW"])
def test_the_attn_lstm_reference_is_onnxruntimes_kernel(direction, layer):
    model, w = _attn_model(direction, layer)
    d = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(6)
    feeds = {"x": _float(rng, T, 2, IN), "h0": _float(rng, d, 2, H), "c0": _float(rng, d, 2, H)}
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - a build of onnxruntime without the contrib op
        pytest.skip("this onnxruntime does not run AttnLSTM")
    expected = sess.run(None, feeds)
    args = dict(w, initial_h=feeds["h0"], initial_c=feeds["c0"])
    got = reference.attn_lstm(feeds["x"], **args, direction=direction)
    for name, g, e in zip(("Y", "Y_h", "Y_c"), got, expected):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-5, err_msg=name)
    # near misses: the short memory read to its padding, or AW applied to (context, h) instead of (h, context)
    unmasked = reference.attn_lstm(feeds["x"], **{**args, "memory_seq_lens": None}, direction=direction)
    assert np.abs(unmasked[1][:, 1] - expected[1][:, 1]).max() > 1e-3
    if layer is not None:
        swapped = np.concatenate([w["AW"][:, H:], w["AW"][:, :H]], axis=1)  # rows of (context, h) read as (h, context)
        wrong = reference.attn_lstm(feeds["x"], **{**args, "AW": swapped}, direction=direction)
        assert np.abs(wrong[1] - expected[1]).max() > 1e-3


def _without_state_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model returning only y: its final states are computed and dropped (SD001, the slot is never written)."""
    hidden = onnx.ModelProto()
    hidden.CopyFrom(model)
    keep = [o for o in hidden.graph.output if o.name == "y"]
    del hidden.graph.output[:]
    hidden.graph.output.extend(keep)
    return hidden


def test_every_kind_is_fixed_when_its_final_state_is_dropped(kind):
    model, _ = _model(kind)
    hidden = _without_state_outputs(model)
    assert {d.code for d in passes.run(rnnir.load(hidden))} == {"SD001"}
    result = rnnir.fix(hidden)
    assert result.changed and {e.code for e in result.edits} == {"SD001"}
    fixed = rnnir.load(result.model)
    added = {p.input: p.output for p in fixed.state_pairs}  # the fix names each output after its input (h0 -> hN)
    assert sorted(added) == sorted(STATE_NAMES[e][0] for e in kind.entries) and None not in added.values()
    assert passes.run(fixed) == []
    # onnxruntime, where it runs the kind: the outputs the fix added are the final states the full model returns
    calls = [_feeds(kind, 1), _feeds(kind, 2)]
    full = _ort_calls(model, kind, calls)
    if full is not None:
        sess = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
        state = {STATE_NAMES[e][0]: np.zeros((1, BATCH, H), np.float32) for e in kind.entries}
        for feeds, want in zip(calls, full):
            got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {**feeds, **state})))
            np.testing.assert_array_equal(got["y"], want["y"])
            for e in kind.entries:
                h0, hn = STATE_NAMES[e]
                np.testing.assert_array_equal(got[added[h0]], want[hn], err_msg=hn)
            state = {h0: got[added[h0]] for h0 in state}
