"""A Loop recognised as an LSTM that carries a third state besides its cell's (h, c).

The recognised recurrence stands for the whole Loop, so its other carried outputs need a value of their own. Before,
each became an external value: a state the body hands back unchanged, or one it changes by an op rnnir does not
follow, was reported as SD003 "a value that depends on no state", an error that is false for both. onnxruntime shows
what the Loop really does with the third state; the verdicts must agree with it.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _cell_models import lstm_loop
from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from rnnir.irtext import print_program
from rnnir.passes.coverage import slice_verdicts
from rnnir.passes.manager import ProgramFacts

T = 3  # lstm_loop's trip count


def three_state_loop(yield_k: str) -> onnx.ModelProto:
    """lstm_loop's Loop carrying k[1, 2] as well; the body yields it back through ``yield_k``."""
    m = lstm_loop(T=T)
    g = m.graph
    loop = g.node[-1]
    body = next(a.g for a in loop.attribute if a.name == "body")
    body.input.append(helper.make_tensor_value_info("k_it", TensorProto.FLOAT, [2, 2]))
    if yield_k == "Identity":
        body.node.append(helper.make_node("Identity", ["k_it"], ["k_next"], name="yield_k"))
    elif yield_k == "Identity x2":
        body.node.append(helper.make_node("Identity", ["k_it"], ["k_mid"], name="k_mid"))
        body.node.append(helper.make_node("Identity", ["k_mid"], ["k_next"], name="yield_k"))
    elif yield_k == "Transpose":
        body.node.append(helper.make_node("Transpose", ["k_it"], ["k_next"], name="yield_k", perm=[1, 0]))
    elif yield_k == "Add":
        body.initializer.append(helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]))
        body.node.append(helper.make_node("Add", ["k_it", "one"], ["k_next"], name="yield_k"))
    else:
        raise AssertionError(yield_k)
    body.output.append(helper.make_tensor_value_info("k_next", TensorProto.FLOAT, [2, 2]))
    loop.input.append("k0")
    loop.output.append("kn")
    g.input.append(helper.make_tensor_value_info("k0", TensorProto.FLOAT, [2, 2]))
    g.output.append(helper.make_tensor_value_info("kn", TensorProto.FLOAT, [2, 2]))
    onnx.checker.check_model(m, full_check=True)
    return m


def _kn(m: onnx.ModelProto, k0: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((T, 1, 3)).astype(np.float32),
        "h0": np.zeros((1, 4), np.float32),
        "c0": np.zeros((1, 4), np.float32),
        "k0": k0,
    }
    return sess.run(["kn"], feeds)[0]


K0 = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)


def _findings(m: onnx.ModelProto) -> list[tuple[str, str | None]]:
    return sorted((d.code, d.slot) for d in passes.run(rnnir.load(m)))


def _slices(m: onnx.ModelProto) -> dict[str, str]:
    prog = rnnir.load(m)
    return {s.slice: s.verdict.value for s in slice_verdicts(ProgramFacts(prog), passes.run(prog))}


@pytest.mark.parametrize("yield_k", ["Identity", "Identity x2"])
def test_a_third_state_the_body_hands_back_is_the_state_handed_straight_back(yield_k):
    m = three_state_loop(yield_k)
    np.testing.assert_array_equal(_kn(m, K0), K0)  # onnxruntime: the call returns k as it came in
    # the same verdict as kn = Identity(k0) in the main graph: SD001, the state never advances; not SD003
    assert _findings(m) == [("SD001", "k0")]
    verdicts = _slices(m)
    assert (verdicts["h0"], verdicts["c0"]) == ("verified", "verified")
    assert {v for s, v in verdicts.items() if s.startswith("k0")} == {"violated"}


@pytest.mark.parametrize(("yield_k", "op"), [("Identity", "Identity"), ("Add", "Loop")])
def test_the_third_state_is_made_from_the_loaded_slot_in_the_ir(yield_k, op):
    text = print_program(rnnir.load(three_state_loop(yield_k)))
    assert "%k0 = load_slot<@k0, copy>()" in text
    # handed back: the load itself; changed: an opaque op named after the Loop that reads it
    assert f"%kn = {op}(%k0) loc{{'id': '{op.lower()}0', 'node': 'time_loop'}} : float32[2,2]" in text


@pytest.mark.parametrize(("yield_k", "expected"), [("Add", K0 + T), ("Transpose", K0.T)])
def test_a_third_state_the_body_changes_is_unverified_not_a_state_free_value(yield_k, expected):
    m = three_state_loop(yield_k)
    np.testing.assert_array_equal(_kn(m, K0), expected)  # onnxruntime: kn is made from k0 (3 steps)
    assert _findings(m) == [("SD009", "k0")]  # was SD003 "depends on no state": an error, and false
    verdicts = _slices(m)
    assert verdicts == {"h0": "verified", "c0": "verified", "k0": "unverified"}


def test_the_loop_without_a_third_state_is_clean():
    assert _findings(lstm_loop(T=T)) == []
