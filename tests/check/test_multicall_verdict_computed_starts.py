"""check_multicall's verdict on an LSTM that carries h and starts c every call from a value *computed* from a plain
input or constants (``Mul(c_in, 2)``, ``Add(const, 0)``, ``Cast``, ``Expand``, ``Tile``, an ``If``), against near-misses
whose c is computed from its own written-back slot (``Mul(c_slot, 1)``, a Cast round trip, a Slice of a packed slot,
an If branch, a Reshape whose constant is only the shape).

A bug found by review: the check that finds a restarted state walked back through layout ops only, so any other op
between the plain input (or constant) and the LSTM hid the restart, and with a static time axis (no whole-call oracle)
such a model passed.

Oracle: onnxruntime, each model built again with a dynamic time axis and run in chunks with its state fed back
(c_in fed zeros, as the check feeds it) against one call over the whole stream: the restarts lose c, the near-misses
stream exactly.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rnnir.check.multicall.check import check_multicall
from tests.check.test_multicall_stream import build, init, vi

PART = "FAIL: part of the state restarts on every call while the rest is carried: LSTM 'LSTM(y)' carries initial_h across calls but "
STATE = [1, 1, 2]
X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(6, 1, 1)
_RNG = np.random.default_rng(5)
WEIGHTS = [init("W", _RNG.standard_normal((1, 8, 1))), init("R", 0.5 * _RNG.standard_normal((1, 8, 2)))]
CONSTS = [init("two", [2.0]), init("one", [1.0]), init("zero", [0.0]), init("c_const", np.full(STATE, 0.3)),
          init("c_small", np.full((1, 1, 1), 0.3)), init("reps", [1, 1, 2], np.int64), init("flat", [1, 2], np.int64),
          init("shape3", STATE, np.int64), init("at0", [0], np.int64), init("at1", [1], np.int64), init("at2", [2], np.int64), init("trip", 1, np.int64)]


def _branch(name: str, nodes, out: str):
    return helper.make_graph(nodes, name, [], [vi(out, STATE)])


def _if(then_nodes, then_out: str, else_nodes, else_out: str, out: str):
    """``out = If(p > 0, then, else)``: p is a plain input, fed 1 (the then branch runs)."""
    return [helper.make_node("Greater", ["p", "zero"], ["cond"]),
            helper.make_node("If", ["cond"], [out], then_branch=_branch("then", then_nodes, then_out),
                             else_branch=_branch("else", else_nodes, else_out))]


def _loop(start: str, out: str):
    """``out`` = ``start`` times 2 (an outer-scope constant) in a Loop run once: what the body reads comes from outside."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["go"], ["go_on"]), helper.make_node("Mul", ["carried", "two"], ["next"])], "body",
        [vi("i", [], TensorProto.INT64), vi("go", [], TensorProto.BOOL), vi("carried", STATE)],
        [vi("go_on", [], TensorProto.BOOL), vi("next", STATE)])
    return [helper.make_node("Loop", ["trip", "", start], [out], body=body)]


def _doubled(start: str, levels: int = 40) -> list:
    """``start`` added to itself ``levels`` times, ending in ``c_start``: 2**levels paths back to ``start``, one value
    each step (a walk that does not remember what it saw never ends)."""
    names = [start, *(f"d{i}" for i in range(1, levels)), "c_start"]
    return [helper.make_node("Add", [a, a], [b]) for a, b in zip(names, names[1:])]


# name -> (nodes that compute c_start, what the verdict says about initial_c)
RESTARTS = {
    "Mul(c_in, 2)": ([helper.make_node("Mul", ["c_in", "two"], ["c_start"])],
                     "its initial_c ('c_start') is computed from the plain input(s) 'c_in' alone, fed anew every call."),
    "Add(const, 0)": ([helper.make_node("Add", ["c_const", "zero"], ["c_start"])],
                      "its initial_c ('c_start') is computed from constants alone, the same every call."),
    "Cast(Mul(c_in, 2))": ([helper.make_node("Mul", ["c_in", "two"], ["c2"]), helper.make_node("Cast", ["c2"], ["c_start"], to=TensorProto.FLOAT)],
                           "its initial_c ('c_start') is computed from the plain input(s) 'c_in' alone, fed anew every call."),
    "Expand(const, Shape(h0))": ([helper.make_node("Shape", ["h0"], ["hs"]), helper.make_node("Expand", ["c_small", "hs"], ["c_start"])],
                                 "its initial_c is the constant 'c_small', the same every call."),
    "Add(Expand(c_in), 0) by h0's shape": ([helper.make_node("Shape", ["h0"], ["hs"]), helper.make_node("Expand", ["c_in", "hs"], ["ce"]),
                                           helper.make_node("Add", ["ce", "zero"], ["c_start"])],
                                          "its initial_c ('c_start') is computed from the plain input(s) 'c_in' alone, fed anew every call."),
    "ConstantOfShape(computed shape) + 0": ([helper.make_node("Shape", ["h0"], ["hs"]), helper.make_node("Mul", ["hs", "at1"], ["hs1"]),
                                             helper.make_node("ConstantOfShape", ["hs1"], ["cz"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.3])),
                                             helper.make_node("Add", ["cz", "zero"], ["c_start"])],
                                            "its initial_c ('c_start') is computed from constants alone, the same every call."),
    "Tile(const)": ([helper.make_node("Tile", ["c_small", "reps"], ["c_start"])],
                    "its initial_c ('c_start') is computed from constants alone, the same every call."),
    "If(p > 0, c_in * 2, c_in)": (_if([helper.make_node("Mul", ["c_in", "two"], ["t"])], "t", [helper.make_node("Identity", ["c_in"], ["e"])], "e", "c_start"),
                                  "its initial_c ('c_start') is computed from the plain input(s) 'c_in', 'p' alone, fed anew every call."),
    # a ConstantOfShape is a constant even when its shape is computed from the carried h's values
    "ConstantOfShape(shape from h's values)": ([helper.make_node("Mul", ["h0", "zero"], ["h_zero"]),
                                                helper.make_node("ReduceSum", ["h_zero"], ["h_sum"], keepdims=0),
                                                helper.make_node("Cast", ["h_sum"], ["h_sum64"], to=TensorProto.INT64),
                                                helper.make_node("Add", ["shape3", "h_sum64"], ["c_shape"]),
                                                helper.make_node("ConstantOfShape", ["c_shape"], ["c_start"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.3]))],
                                               "its initial_c is the constant 'c_start', the same every call."),
    # outside the IR (no slot on the way): a shape read from a plain input, or a plain input's values made into a
    # shape, make a constant all the same
    "Expand(const, Shape(c_in)) + 0": ([helper.make_node("Shape", ["c_in"], ["cs"]), helper.make_node("Expand", ["c_small", "cs"], ["ce"]),
                                        helper.make_node("Add", ["ce", "zero"], ["c_start"])],
                                       "its initial_c ('c_start') is computed from constants alone, the same every call."),
    "ConstantOfShape(shape from p's values) + 0": ([helper.make_node("Mul", ["p", "zero"], ["p_zero"]),
                                                   helper.make_node("Cast", ["p_zero"], ["p64"], to=TensorProto.INT64),
                                                   helper.make_node("Add", ["shape3", "p64"], ["c_shape"]),
                                                   helper.make_node("ConstantOfShape", ["c_shape"], ["cz"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.3])),
                                                   helper.make_node("Add", ["cz", "zero"], ["c_start"])],
                                                  "its initial_c ('c_start') is computed from constants alone, the same every call."),
    # the If reads h0 (its shape) so lowering builds it; its branches compute c from c_in alone
    "If(Shape(h0) > 0, c_in * 2, c_in)": ([helper.make_node("Shape", ["h0"], ["hs"]), helper.make_node("ReduceMin", ["hs"], ["hmin"], keepdims=0),
                                           helper.make_node("Cast", ["hmin"], ["hminf"], to=TensorProto.FLOAT), helper.make_node("Greater", ["hminf", "zero"], ["cond"]),
                                           helper.make_node("If", ["cond"], ["c_start"],
                                                            then_branch=_branch("then", [helper.make_node("Mul", ["c_in", "two"], ["t"])], "t"),
                                                            else_branch=_branch("else", [helper.make_node("Identity", ["c_in"], ["e"])], "e"))],
                                          "its initial_c ('c_start') is computed from the plain input(s) 'c_in' alone, fed anew every call."),
    # a Loop passes on everything it and its body read: here a plain input and constants, never a slot
    "Loop(c_in * 2)": (_loop("c_in", "c_start"),
                       "its initial_c ('c_start') is computed from the plain input(s) 'c_in' alone, fed anew every call."),
}

# name -> (nodes from the c slot c0 to c_start, nodes from the LSTM's Y_c to the written-back cn, c slot's shape)
NEAR_MISSES = {
    "Mul(c_slot, 1)": ([helper.make_node("Mul", ["c0", "one"], ["c_start"])], [helper.make_node("Identity", ["yc"], ["cn"])], STATE),
    "Cast round trip": ([helper.make_node("Cast", ["c0"], ["c64"], to=TensorProto.DOUBLE), helper.make_node("Cast", ["c64"], ["c_start"], to=TensorProto.FLOAT)],
                        [helper.make_node("Identity", ["yc"], ["cn"])], STATE),
    "Reshape by a constant shape, times 1": ([helper.make_node("Reshape", ["c0", "shape3"], ["c3"]), helper.make_node("Mul", ["c3", "one"], ["c_start"])],
                                             [helper.make_node("Reshape", ["yc", "flat"], ["cn"])], [1, 2]),
    "If(p > 0, c_slot, c_slot * 1)": (_if([helper.make_node("Identity", ["c0"], ["t"])], "t", [helper.make_node("Mul", ["c0", "one"], ["e"])], "e", "c_start"),
                                      [helper.make_node("Identity", ["yc"], ["cn"])], STATE),
}


RESTARTS.update({
    # shared values: c_in doubled 40 times (zeros stay zeros), outside the IR; and after h0's shape, inside it
    "c_in doubled 40 times": (_doubled("c_in"),
                              "its initial_c ('c_start') is computed from the plain input(s) 'c_in' alone, fed anew every call."),
    "Expand(c_in, Shape(h0)) doubled 40 times": ([helper.make_node("Shape", ["h0"], ["hs"]), helper.make_node("Expand", ["c_in", "hs"], ["ce"]), *_doubled("ce")],
                                                 "its initial_c ('c_start') is computed from the plain input(s) 'c_in' alone, fed anew every call."),
})
SHARED = {"Expand(c_in, Shape(h0)) doubled 40 times", "c_in doubled 40 times"}


def restart_model(name: str, steps: int | str):
    nodes, _ = RESTARTS[name]
    lstm = helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c_start"], ["y", "hn"], hidden_size=2)
    inputs = [vi("x", [steps, 1, 1]), vi("h0", STATE), vi("c_in", STATE), vi("p", [1])]
    return build([*nodes, lstm], inputs, [vi("y", None), vi("hn", STATE)], [*WEIGHTS, *CONSTS])


def near_miss_model(name: str, steps: int | str):
    into, out_of, c_shape = NEAR_MISSES[name]
    lstm = helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c_start"], ["y", "hn", "yc"], hidden_size=2)
    inputs = [vi("x", [steps, 1, 1]), vi("h0", STATE), vi("c0", c_shape), vi("p", [1])]
    return build([*into, lstm, *out_of], inputs, [vi("y", None), vi("hn", STATE), vi("cn", c_shape)], [*WEIGHTS, *CONSTS])


def _ort_run(model, chunk: int, carry: dict[str, str]) -> np.ndarray:
    """y over X in calls of ``chunk`` steps, each state input named in ``carry`` fed its output from the call before
    (zeros at the start); c_in is fed zeros and p one every call, as the check feeds them."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    shapes = {i.name: [d if isinstance(d, int) else 1 for d in i.shape] for i in sess.get_inputs()}
    feeds = {n: np.zeros(shapes[n], np.float32) for n in names - {"x"}}
    feeds["p"] = np.ones([1], np.float32)
    ys = []
    for start in range(0, len(X), chunk):
        outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {**feeds, "x": X[start : start + chunk]})))
        ys.append(outs["y"])
        feeds.update({i: outs[o] for i, o in carry.items()})
    return np.concatenate(ys)


@pytest.mark.parametrize("name", [n for n in RESTARTS if n not in SHARED])
def test_a_cell_state_computed_from_a_plain_input_or_constants_every_call_fails_and_names_it(name):
    # the oracle: h fed back and c restarted as the graph does it loses c (chunked calls differ from one whole call)
    dynamic = restart_model(name, "T")
    assert np.abs(_ort_run(dynamic, 2, {"h0": "hn"}) - _ort_run(dynamic, len(X), {})).max() > 1e-3

    # a static time axis leaves no whole call to compare with: the graph itself must show the restart
    report = check_multicall(restart_model(name, 2), {"x": X}, chunk_sizes=[2], pairs={"h0": "hn"}, input_values={"c_in": 0.0, "p": 1.0})
    assert report.persistent_matches_whole is None
    assert report.status == "fail", report.verdict
    assert report.verdict == PART + RESTARTS[name][1]


def test_a_restart_computed_through_shared_values_is_found_in_one_walk():
    # 2**40 paths back to c_in, inside the IR (after h0's shape) and outside it: each value is looked at once
    for name in ("Expand(c_in, Shape(h0)) doubled 40 times", "c_in doubled 40 times"):
        report = check_multicall(restart_model(name, 2), {"x": X}, chunk_sizes=[2], pairs={"h0": "hn"}, input_values={"c_in": 0.0, "p": 1.0})
        assert report.verdict == PART + RESTARTS[name][1], name


def test_a_restart_from_a_sparse_initializer_is_a_constant_start():
    # ONNX keeps a sparse constant apart from the dense initializers: it is a constant all the same
    sparse = helper.make_sparse_tensor(helper.make_tensor("c_sparse", TensorProto.FLOAT, [1], [0.3]),
                                       helper.make_tensor("c_sparse_at", TensorProto.INT64, [1], [1]), [1, 1, 2])
    model = restart_model("Add(const, 0)", 2)
    model.graph.node[0].input[0] = "c_sparse"
    model.graph.sparse_initializer.append(sparse)
    report = check_multicall(model, {"x": X}, chunk_sizes=[2], pairs={"h0": "hn"}, input_values={"c_in": 0.0, "p": 1.0})
    assert report.verdict == PART + RESTARTS["Add(const, 0)"][1]


def test_a_state_computed_from_a_slot_nothing_writes_back_is_said_once():
    # c0 is a state input without an output: SD001 says it restarts; the computed start adds no second reason
    model = build([helper.make_node("Mul", ["c0", "two"], ["c_start"]),
                   helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c_start"], ["y", "hn"], hidden_size=2)],
                  [vi("x", [2, 1, 1]), vi("h0", STATE), vi("c0", STATE)], [vi("y", None), vi("hn", STATE)], [*WEIGHTS, *CONSTS])
    report = check_multicall(model, {"x": X}, chunk_sizes=[2], pairs={"h0": "hn", "c0": None})
    assert report.verdict == ("FAIL: part of the state restarts on every call while the rest is carried: state input 'c0' has no paired "
                              "output: nothing writes it back, so every call restarts it from its initial value (SD001).")


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_a_cell_state_computed_from_its_own_written_slot_passes(name):
    # the oracle: both states fed back, chunked calls equal one whole call
    dynamic = near_miss_model(name, "T")
    np.testing.assert_allclose(_ort_run(dynamic, 2, {"h0": "hn", "c0": "cn"}), _ort_run(dynamic, len(X), {}), atol=1e-5)

    report = check_multicall(near_miss_model(name, 2), {"x": X}, chunk_sizes=[2], pairs={"h0": "hn", "c0": "cn"}, input_values={"p": 1.0})
    assert report.pairs == [("h0", "hn"), ("c0", "cn")]
    assert report.status == "pass", report.verdict
    assert not any("restart" in n for n in report.notes)


def test_a_restart_computed_in_the_graph_is_noted_when_one_call_is_the_whole_stream():
    # chunked equals whole (one chunk), so the stream shows nothing: the computed restart is a note, not a FAIL
    report = check_multicall(restart_model("Mul(c_in, 2)", "T"), {"x": X}, chunk_sizes=[6], pairs={"h0": "hn"}, input_values={"c_in": 0.0})
    assert report.persistent_matches_whole is True and report.status != "fail"
    assert ("LSTM 'LSTM(y)' carries initial_h across calls but its initial_c ('c_start') is computed from the plain input(s) 'c_in' "
            "alone, fed anew every call; this stream does not show it (chunked calls equal one whole call)") in report.notes


def test_a_cell_state_a_loop_computes_from_its_own_slot_is_not_called_restarted():
    # the Loop's body doubles the carried c once per call: what is fed back is not what one whole call would carry
    # (c doubled once per call, not once), but the slot reaches c, so this is no restart; a wrong write-back of
    # this kind is for the whole-call comparison or rnnir's own write-back check to find, never a partial-restart FAIL;
    # with no whole call here, rnnir's check cannot follow c through the Loop and says so, as it did before
    model = build([*_loop("c0", "c_start"), helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c_start"], ["y", "hn", "cn"], hidden_size=2)],
                  [vi("x", [2, 1, 1]), vi("h0", STATE), vi("c0", STATE)], [vi("y", None), vi("hn", STATE), vi("cn", STATE)], [*WEIGHTS, *CONSTS])
    report = check_multicall(model, {"x": X}, chunk_sizes=[2], pairs={"h0": "hn", "c0": "cn"})
    assert report.status == "inconclusive" and report.verdict.startswith("NOT VERIFIED: the state matters"), report.verdict
    assert "'c0' unverified" in report.verdict and not any("restart" in n for n in report.notes)
