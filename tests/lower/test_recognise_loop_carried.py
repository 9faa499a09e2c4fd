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
from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from rnnir.ir.text import print_program
from rnnir.passes.coverage import slice_verdicts
from rnnir.passes.manager import ProgramFacts
from tests.support.cell_models import lstm_loop

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


def cell_in_if_loop() -> onnx.ModelProto:
    """lstm_loop with its body's cell moved into an If: steps 0 and 1 run the cell, later steps hand (h, c) back."""
    m = lstm_loop(T=T)
    loop = m.graph.node[-1]
    battr = next(a for a in loop.attribute if a.name == "body")
    body = battr.g
    yields = {n.name: n for n in body.node if n.name in ("yield_h", "yield_c")}
    cell = [n for n in body.node if n.name not in ("cond_pass", "yield_h", "yield_c")]
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph(
        [*cell, helper.make_node("Identity", [yields["yield_h"].input[0]], ["t_h"]), helper.make_node("Identity", [yields["yield_c"].input[0]], ["t_c"])],
        "then",
        [],
        [vi("t_h", TensorProto.FLOAT, [1, 4]), vi("t_c", TensorProto.FLOAT, [1, 4])],
        list(body.initializer),
    )
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["h_it"], ["e_h"]), helper.make_node("Identity", ["c_it"], ["e_c"])],
        "else",
        [],
        [vi("e_h", TensorProto.FLOAT, [1, 4]), vi("e_c", TensorProto.FLOAT, [1, 4])],
    )
    nodes = [
        next(n for n in body.node if n.name == "cond_pass"),
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [], [2])),
        helper.make_node("Less", ["it", "two"], ["flag"]),
        helper.make_node("If", ["flag"], ["hh", "cc"], name="gate", then_branch=then_g, else_branch=else_g),
        helper.make_node("Identity", ["hh"], ["h_next"], name="yield_h"),
        helper.make_node("Identity", ["cc"], ["c_next"], name="yield_c"),
    ]
    battr.g.CopyFrom(helper.make_graph(nodes, "body", list(body.input), list(body.output)))
    onnx.checker.check_model(m, full_check=True)
    return m


def test_a_loop_whose_cell_runs_in_an_if_is_unverified_not_a_restart():
    m = cell_in_if_loop()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((T, 1, 3)).astype(np.float32)
    h1, c1 = sess.run(["hn", "cn"], {"x": x, "h0": np.zeros((1, 4), np.float32), "c0": np.zeros((1, 4), np.float32)})
    h2, c2 = sess.run(["hn", "cn"], {"x": x, "h0": h1, "c0": c1})
    # onnxruntime: the results depend on the state carried in, so "every call restarts" (SD003) was false
    assert not np.allclose(h1, h2) and not np.allclose(c1, c2)
    assert _findings(m) == [("SD009", "c0"), ("SD009", "h0")]  # was SD003 for both, as errors
    assert _slices(m) == {"h0": "unverified", "c0": "unverified"}


def _third_state_yield(m: onnx.ModelProto) -> tuple[onnx.GraphProto, onnx.NodeProto]:
    body = next(a.g for a in m.graph.node[-1].attribute if a.name == "body")
    return body, next(n for n in body.node if n.name == "yield_k")


def test_an_identity_of_another_domain_is_no_hand_back():
    # only the ONNX Identity is known to copy its input: a custom-domain op of that name may compute anything
    m = three_state_loop("Identity")
    _body, node = _third_state_yield(m)
    node.domain = "com.acme"
    m.opset_import.append(helper.make_opsetid("com.acme", 1))
    assert _findings(m) == [("SD009", "k0")]


def test_a_third_state_the_body_replaces_with_its_own_constant_is_unverified():
    # after the first step kn is the body's constant; with a trip count of 0 it would be k0: no plain verdict
    m = three_state_loop("Identity")
    body, node = _third_state_yield(m)
    body.initializer.append(helper.make_tensor("k_const", TensorProto.FLOAT, [2, 2], [0.5] * 4))
    body.node.remove(node)
    body.output[-1].name = "k_const"
    np.testing.assert_array_equal(_kn(m, K0), np.full((2, 2), 0.5, np.float32))  # onnxruntime
    assert _findings(m) == [("SD009", "k0")]


def test_two_carried_states_the_body_swaps_are_not_handed_back():
    # k' = j and j' = k: each output is another state's input, after an odd trip count the two are exchanged
    m = three_state_loop("Identity")
    loop = m.graph.node[-1]
    body, node = _third_state_yield(m)
    body.input.append(helper.make_tensor_value_info("j_it", TensorProto.FLOAT, [2, 2]))
    node.input[0] = "j_it"
    body.node.append(helper.make_node("Identity", ["k_it"], ["j_next"], name="yield_j"))
    body.output.append(helper.make_tensor_value_info("j_next", TensorProto.FLOAT, [2, 2]))
    loop.input.append("j0")
    loop.output.append("jn")
    m.graph.input.append(helper.make_tensor_value_info("j0", TensorProto.FLOAT, [2, 2]))
    m.graph.output.append(helper.make_tensor_value_info("jn", TensorProto.FLOAT, [2, 2]))
    onnx.checker.check_model(m, full_check=True)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"x": np.zeros((T, 1, 3), np.float32), "h0": np.zeros((1, 4), np.float32), "c0": np.zeros((1, 4), np.float32)}
    kn, jn = sess.run(["kn", "jn"], {**feeds, "k0": K0, "j0": -K0})
    np.testing.assert_array_equal(kn, -K0)  # onnxruntime: three steps exchange them
    np.testing.assert_array_equal(jn, K0)
    # neither slot gets its own value back: no SD001 ("handed straight back") for either
    assert [f for f in _findings(m) if f[0] == "SD001"] == []
    assert {s: v for s, v in _slices(m).items() if s[0] in "jk"} == {"k0": "unverified", "j0": "unverified"}
