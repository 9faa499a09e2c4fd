"""SD001's fix beyond the float32 samples: a float64 state gets a float64 output (run by onnx.reference, since
onnxruntime's GRU is float32 only, against the model a person fixes by hand), and near misses refused with their
reason, the model untouched: a packed state read in slices, every output name h0 pairs with taken, a GRU in a Loop,
GRUs in If branches that are not one per branch of one If."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rnnir
from tests.fixes.test_planner_near_misses import _codes, _load


def _as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    for vi in [*g.input, *g.output]:
        vi.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    weights = []
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        weights.append(numpy_helper.from_array(a.astype(np.float64) if a.dtype == np.float32 else a, t.name))
    del g.initializer[:]
    g.initializer.extend(weights)
    return model


def _stream(model: onnx.ModelProto, xs: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Every call's outputs, hn fed back as h0 (the pair the fix records)."""
    ev, h = ReferenceEvaluator(model), np.zeros((1, 1, 4), np.float64)
    calls = []
    for x in xs:
        y, hn = ev.run(["y", "hn"], {"x": x, "h0": h})
        calls.append([y, hn])
        h = hn
    return calls


def test_sd001_float64_state_is_returned_as_float64() -> None:
    broken = _as_float64(_load("sd001_no_state_output"))
    onnx.checker.check_model(broken, full_check=True)
    assert _codes(broken) == ["SD001"]
    result = rnnir.fix(broken)
    assert [e.code for e in result.edits] == ["SD001"] and _codes(result.model) == []
    onnx.checker.check_model(result.model, full_check=True)
    (hn,) = [o for o in result.model.graph.output if o.name == "hn"]
    assert hn.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    assert [d.dim_value for d in hn.type.tensor_type.shape.dim] == [1, 1, 4]
    correct = _as_float64(_load("sd001_no_state_output"))  # by hand: the GRU's Y_h is returned as hn
    next(n for n in correct.graph.node if n.op_type == "GRU").output[:] = ["y", "hn"]
    correct.graph.output.append(onnx.helper.make_tensor_value_info("hn", onnx.TensorProto.DOUBLE, [1, 1, 4]))
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((2, 1, 3)) for _ in range(3)]
    for k, (got, want) in enumerate(zip(_stream(result.model, xs), _stream(correct, xs))):
        for a, b in zip(got, want):
            assert a.dtype == np.float64
            np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=f"call {k}")


SEVERAL = "several ops read the slot in the same call: whose final state to return is not certain"
#: every output name the naming conventions (`_NAME_RULES`, rnnir/lower/pairing.py) pair with h0: all taken below
H0_OUTPUT_NAMES = ["hn", "hN", "hout", "h_final", "h_out", "h0_out", "h0_n", "h0n", "h0N", "h0_next", "h0_new", "h0_final",
                   "h0_output", "new_h0", "next_h0", "out_h0"]


def _packed_read_in_slices() -> onnx.ModelProto:
    model = _load("sd002_hc_swap")  # h and c sliced out of `state`, and nothing returned: no new packed output
    g = model.graph
    g.node.remove(next(n for n in g.node if n.op_type == "Concat"))
    kept = [o for o in g.output if o.name != "stateN"]
    del g.output[:]
    g.output.extend(kept)
    return model


def _only_h_of_a_packed_state_read() -> onnx.ModelProto:
    """Only state[0] is read (as the LSTM's h; c starts from zeros): one slice, still not the whole slot."""
    model = _packed_read_in_slices()
    g = model.graph
    del next(n for n in g.node if n.op_type == "LSTM").input[6:]
    g.node.remove(next(n for n in g.node if n.name == "slice_c"))
    return model


def _every_output_name_taken() -> onnx.ModelProto:
    model = _load("sd001_no_state_output")
    model.graph.node.extend(helper.make_node("Identity", ["x"], [c], name=f"take_{c}") for c in H0_OUTPUT_NAMES)
    return model


def _gru_in_a_loop_body() -> onnx.ModelProto:
    """The GRU runs once inside a Loop body (reading h0 from outside): its final state cannot be threaded out."""
    model = _load("sd001_no_state_output")
    g = model.graph
    gru = next(n for n in g.node if n.op_type == "GRU")
    g.node.remove(gru)
    gru.output[:] = ["y_body"]
    body = helper.make_graph(
        [gru, helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")], "body",
        [helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_body", onnx.TensorProto.FLOAT, ["T", 1, 1, 4])],
    )
    g.initializer.extend([numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(True), "yes"),
                          numpy_helper.from_array(np.array([0], np.int64), "axis0")])
    g.node.extend([helper.make_node("Loop", ["one", "yes"], ["ys"], name="loop", body=body),
                   helper.make_node("Squeeze", ["ys", "axis0"], ["y"], name="squeeze")])
    return model


def _grus_in_if_branches(layout: list[tuple[int, int]]) -> onnx.ModelProto:
    """One If per ``(then, else)`` entry of ``layout``, each branch running that many copies of the GRU on h0 (their
    sequences added; a branch without one yields zeros); y is the sum of the Ifs' outputs."""
    model = _load("sd001_no_state_output")
    g = model.graph
    gru = next(n for n in g.node if n.op_type == "GRU")
    g.node.remove(gru)
    g.initializer.append(numpy_helper.from_array(np.zeros((2, 1, 1, 4), np.float32), "y_zeros"))
    made = 0

    def branch(name: str, count: int) -> onnx.GraphProto:
        nonlocal made
        nodes, last = [], "y_zeros"
        for j in range(count):
            copy = onnx.NodeProto()
            copy.CopyFrom(gru)
            copy.name, copy.output[:] = f"gru{made}", [f"y{made}"]
            nodes.append(copy)
            if j:
                nodes.append(helper.make_node("Add", [last, f"y{made}"], [f"sum{made}"], name=f"add{made}"))
            last = f"sum{made}" if j else f"y{made}"
            made += 1
        nodes.append(helper.make_node("Identity", [last], [f"{name}_y"], name=f"{name}_out"))
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_y", onnx.TensorProto.FLOAT, ["T", 1, 1, 4])])

    total = ""
    for i, (then_count, else_count) in enumerate(layout):
        g.input.append(helper.make_tensor_value_info(f"flag{i}", onnx.TensorProto.BOOL, []))
        g.node.append(helper.make_node("If", [f"flag{i}"], [f"if{i}_y"], name=f"if{i}",
                                       then_branch=branch(f"then{i}", then_count), else_branch=branch(f"else{i}", else_count)))
        if total:
            g.node.append(helper.make_node("Add", [total, f"if{i}_y"], [f"total{i}"], name=f"total{i}"))
        total = f"total{i}" if total else f"if{i}_y"
    g.node.append(helper.make_node("Identity", [total], ["y"], name="out"))
    return model


def test_sd001_near_misses_beyond_the_samples_are_refused_with_their_reason() -> None:
    cases = [
        (_packed_read_in_slices(), "state", "the slot is read in slices (packed state): rnnir does not assemble a new packed output"),
        (_only_h_of_a_packed_state_read(), "state", "the slot is read in slices (packed state): rnnir does not assemble a new packed output"),
        (_every_output_name_taken(), "h0", "no free output name pairs with 'h0'"),
        (_grus_in_if_branches([(2, 1)]), "h0", SEVERAL),  # three readers, one If
        (_grus_in_if_branches([(2, 0)]), "h0", SEVERAL),  # two readers in the same branch
        (_grus_in_if_branches([(1, 0), (0, 1)]), "h0", SEVERAL),  # then and else, but of two different Ifs
        (_gru_in_a_loop_body(), "h0", "the final state of GRU 'gru'.initial_h[0] cannot be threaded out"),
    ]
    for model, slot, reason in cases:
        onnx.checker.check_model(model, full_check=True)
        assert _codes(model) == ["SD001"], reason
        result = rnnir.fix(model)
        assert result.edits == [] and result.model.graph == model.graph, reason
        assert [str(e) for e in result.skipped] == [f"SD001 [no fix] SD001 on slot {slot!r}: {reason}"]
