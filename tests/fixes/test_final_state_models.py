"""The shared final-state fix (SD003, SD008, SD001 handed back) on models built by hand for each of its decisions:
which slices it refuses and why (a cache window, a constant that is no node's output, a slice read by two ports or
by an op inside an If branch, a cell written as plain ops, a slot of another shape than the final state), when the edit is safe (the state handed straight back,
a step of the reading op's own Y) and when not (a slice handed back next to a final state, another slice's value,
a constant), and the repaired models run by onnxruntime over several calls against a hand-fixed model or against
one call over the whole sequence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.analysis.slicemaps import PortRef
from rnnir.fixes.edits import FixContext
from rnnir.fixes.final_state import plan_final_state, port_key
from rnnir.fixes.planners.sd001_slot_never_written import FIX as SD001_FIX
from rnnir.ir.nodes import Recurrent
from rnnir.runtime import StatefulSession

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
HIDDEN, FEATURES = 4, 3


def _w(name: str, shape: list[int], seed: int) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def _i64(name: str, value: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.int64), name)


def _rnn(name: str, h0: str, outputs: list[str], seed: int, op: str = "GRU", dirs: int = 1) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """A GRU/LSTM over ``x`` (hidden 4), starting from ``h0`` ("" = zeros), with weights of its own."""
    gates = {"GRU": 3, "LSTM": 4}[op]
    weights = [_w(f"{name}_W", [dirs, gates * HIDDEN, FEATURES], seed), _w(f"{name}_R", [dirs, gates * HIDDEN, HIDDEN], seed + 1)]
    inputs = ["x", f"{name}_W", f"{name}_R", "", "", h0] if h0 else ["x", f"{name}_W", f"{name}_R"]
    attrs = {"direction": "bidirectional"} if dirs == 2 else {}
    return helper.make_node(op, inputs, outputs, name=name, hidden_size=HIDDEN, **attrs), weights


def _vi(name: str, shape: list[object] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


X = _vi("x", ["T", 1, FEATURES])
H0 = _vi("h0", [1, 1, HIDDEN])


def _codes(model: onnx.ModelProto) -> list[str]:
    return sorted(d.code for d in passes.run(rnnir.load(model)) if d.severity.value in ("error", "warning"))


def _chunks(seed: int, n: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((2, 1, FEATURES)).astype(np.float32) for _ in range(n)]


def _streamed(model: onnx.ModelProto, xs: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    session = StatefulSession(model)
    return [session.run_dict({"x": x}) for x in xs]


def _same_calls(got: list[dict[str, np.ndarray]], want: list[dict[str, np.ndarray]], what: str) -> None:
    for k, (a, b) in enumerate(zip(got, want)):
        assert set(a) == set(b), what
        for name in b:
            np.testing.assert_allclose(a[name], b[name], atol=1e-6, err_msg=f"{what}: call {k} {name}")


# -- models ---------------------------------------------------------------------------------------------------------


def _first_step_only_output(slot: list[object] | None = [1, 1, HIDDEN]) -> onnx.ModelProto:  # noqa: B006 - read only
    """hn = Y[0] (the state after the first step), and hn is the model's only output; h0 and hn of shape ``slot``."""
    gru, weights = _rnn("gru", "h0", ["y"], seed=1)
    step = helper.make_node("Gather", ["y", "t0"], ["hn"], name="first_step", axis=0)
    return _model([gru, step], [X, _vi("h0", slot)], [_vi("hn", slot)], [*weights, _i64("t0", 0)])


def _window_off_by_one() -> onnx.ModelProto:
    """A 4-frame cache written back with the newest 5 frames of cache ++ new: a window, no recurrent state."""
    cat = helper.make_node("Concat", ["cache", "x"], ["cat"], name="append", axis=1)
    keep = helper.make_node("Slice", ["cat", "start", "end", "axis"], ["cache_out"], name="keep_newest")
    inits = [_i64("start", [-5]), _i64("end", [2**62]), _i64("axis", [1])]
    return _model([cat, keep], [_vi("x", [1, 1, 3]), _vi("cache", [1, 4, 3])], [_vi("cache_out", [1, None, 3])], inits)


def _constant_initializer_output() -> onnx.ModelProto:
    """hn is an initializer returned as an output: a constant, but no node of the graph computes it."""
    gru, weights = _rnn("gru", "h0", ["y"], seed=1)
    zeros = numpy_helper.from_array(np.zeros((1, 1, HIDDEN), np.float32), "hn")
    return _model([gru], [X, H0], [_vi("y", ["T", 1, 1, HIDDEN]), _vi("hn", [1, 1, HIDDEN])], [*weights, zeros])


def _lstm_h_and_c_from_one_slot() -> onnx.ModelProto:
    """h0 starts both h and c of one LSTM, hn = its first step: Y_h or Y_c, which one is h0's is a choice."""
    lstm, weights = _rnn("lstm", "", ["y"], seed=1, op="LSTM")
    lstm.input[:] = ["x", "lstm_W", "lstm_R", "", "", "h0", "h0"]
    return _model([lstm, helper.make_node("Gather", ["y", "t0"], ["hn"], axis=0)], [X, H0], [_vi("hn", [1, 1, HIDDEN])], [*weights, _i64("t0", 0)])


def _reader_inside_if_branch() -> onnx.ModelProto:
    """Only a GRU inside the If's then branch reads h0; hn is the final state of an outer GRU that starts from zeros."""
    inner, inner_weights = _rnn("gi", "h0", ["yi", "hi"], seed=1)
    then = helper.make_graph([inner], "then", [], [_vi("hi", [1, 1, HIDDEN])], inner_weights)
    keep = helper.make_graph([helper.make_node("Identity", ["h0"], ["he"], name="keep")], "else", [], [_vi("he", [1, 1, HIDDEN])])
    outer, weights = _rnn("go", "", ["yo", "hn"], seed=3)
    flag = helper.make_tensor_value_info("flag", TensorProto.BOOL, [])
    pick = helper.make_node("If", ["flag"], ["h_branch"], name="pick", then_branch=then, else_branch=keep)
    outs = [_vi("h_branch", [1, 1, HIDDEN]), _vi("yo", ["T", 1, 1, HIDDEN]), _vi("hn", [1, 1, HIDDEN])]
    return _model([pick, outer], [X, H0, flag], outs, weights)


def _cell_with_c_handed_back() -> onnx.ModelProto:
    """lstm_unrolled_cell (an LSTM cell written as plain ops) writing back the c it loaded, not c_new."""
    model = onnx.load(str(SAMPLES / "lstm_unrolled_cell.onnx"))
    g = model.graph
    g.node.remove(next(n for n in g.node if n.name == "unsqueeze_c"))
    concat = next(n for n in g.node if n.name == "concat_state")
    concat.input[1] = "c_u"
    g.node.insert(list(g.node).index(concat), helper.make_node("Unsqueeze", ["c", "ax0"], ["c_u"], name="unsqueeze_c_loaded"))
    onnx.checker.check_model(model, full_check=True)
    return model


def _slices_on_two_axes() -> onnx.ModelProto:
    """state [1,2,1,4]: ga reads state[0][0], gb state[0][1]; stateN = Unsqueeze(Concat(ga.Y_h, gc.Y_h)) with gc from
    zeros (SD003): the slices are not one per position of the first axis, so Concat(Y_h, Y_h) on axis 0 cannot repair it."""
    ga, wa = _rnn("ga", "s0", ["ya", "ha"], seed=1)
    gb, wb = _rnn("gb", "s1", ["yb"], seed=3)
    gc, wc = _rnn("gc", "", ["yc", "hc"], seed=5)
    nodes = [
        helper.make_node("Gather", ["state", "t0"], ["row"], name="row0", axis=0),
        helper.make_node("Split", ["row", "halves"], ["s0", "s1"], name="split_row", axis=0),
        ga, gb, gc,
        helper.make_node("Concat", ["ha", "hc"], ["cat"], name="assemble", axis=0),
        helper.make_node("Unsqueeze", ["cat", "axis0"], ["stateN"], name="as_row"),
    ]
    inits = [*wa, *wb, *wc, _i64("t0", 0), _i64("halves", [1, 1]), _i64("axis0", [0])]
    return _model(nodes, [X, _vi("state", [1, 2, 1, HIDDEN])], [_vi("yb", ["T", 1, 1, HIDDEN]), _vi("stateN", [1, 2, 1, HIDDEN])], inits)


def _slot_of_another_shape(layout_op: str) -> onnx.ModelProto:
    """h0 reaches the GRU through a layout op (Squeeze of [1,1,4,1] / Transpose of [1,4,1]) and hn is its first step
    put back through the inverse (Unsqueeze / Transpose): Y_h, of shape [1,1,4], does not fit the slot."""
    gru, weights = _rnn("gru", "h_in", ["y"], seed=1)
    inits = [*weights, _i64("t0", 0), _i64("axis3", [3])]
    if layout_op == "Squeeze":  # the same dims as [1,batch,4] as far as they go: only the rank tells them apart
        slot, into = [1, 1, HIDDEN, 1], helper.make_node("Squeeze", ["h0", "axis3"], ["h_in"], name="drop_axis")
        back = helper.make_node("Unsqueeze", ["first", "axis3"], ["hn"], name="add_axis")
    else:
        slot, into = [1, HIDDEN, 1], helper.make_node("Transpose", ["h0"], ["h_in"], name="to_state", perm=[0, 2, 1])
        back = helper.make_node("Transpose", ["first"], ["hn"], name="from_state", perm=[0, 2, 1])
    nodes = [into, gru, helper.make_node("Gather", ["y", "t0"], ["first"], name="first_step", axis=0), back]
    return _model(nodes, [X, _vi("h0", slot)], [_vi("hn", slot)], inits)


def _matmul_reader(hn_from: str = "first") -> onnx.ModelProto:
    """h0 read by GRU ga directly and by GRU gb through MatMul(h0, mix) (a derived reader); hn = ga's first step."""
    ga, wa = _rnn("ga", "h0", ["ya", "ha"], seed=1)
    gb, wb = _rnn("gb", "h_mixed", ["yb"], seed=3)
    nodes = [helper.make_node("MatMul", ["h0", "mix"], ["h_mixed"], name="mix_h0"), ga, gb]
    if hn_from == "first":
        nodes.append(helper.make_node("Gather", ["ya", "t0"], ["hn"], name="first_step", axis=0))
    else:
        ga.output[1] = "hn"
    inits = [*wa, *wb, _i64("t0", 0), _w("mix", [HIDDEN, HIDDEN], 9)]
    return _model(nodes, [X, H0], [_vi("yb", ["T", 1, 1, HIDDEN]), _vi("hn", [1, 1, HIDDEN])], inits)


def _two_grus_one_slot(slice1: str, slice0: str = "s0") -> onnx.ModelProto:
    """state [2,1,4]: GRU ga reads state[0], gb reads state[1]; stateN = Concat(slice0, slice1) of the names given
    (s0/s1: a slice handed back; ha/hb: a final state; zeros: a constant)."""
    ga, wa = _rnn("ga", "s0", ["ya", "ha"], seed=1)
    gb, wb = _rnn("gb", "s1", ["yb", "hb"], seed=3)
    nodes = [helper.make_node("Split", ["state", "halves"], ["s0", "s1"], name="split_state", axis=0), ga, gb]
    nodes.append(helper.make_node("Concat", [slice0, slice1], ["stateN"], name="assemble", axis=0))
    inits = [*wa, *wb, _i64("halves", [1, 1]), numpy_helper.from_array(np.zeros((1, 1, HIDDEN), np.float32), "zeros")]
    outs = [_vi("ya", ["T", 1, 1, HIDDEN]), _vi("yb", ["T", 1, 1, HIDDEN]), _vi("stateN", [2, 1, HIDDEN])]
    return _model(nodes, [X, _vi("state", [2, 1, HIDDEN])], outs, inits)


# -- tests ----------------------------------------------------------------------------------------------------------


def test_final_state_refusals_on_models_built_for_each_one() -> None:
    slices_read = "slice h0 is read by 2 ports: which final state belongs there is ambiguous"
    cases = [
        (_window_off_by_one(), "SD003", "cache", "the value written back is window, not a step, final state or live-in value rnnir can replace"),
        (_constant_initializer_output(), "SD003", "h0", "output 'hn' is not computed by a node of the main graph"),
        (_lstm_h_and_c_from_one_slot(), "SD003", "h0", slices_read),
        (_reader_inside_if_branch(), "SD003", "h0", "slice h0 is read by an op inside an If branch or with two directions"),
        (_cell_with_c_handed_back(), "SD001", "state", "'add_c' is not one ONNX node with a Y_h output"),
        (_slices_on_two_axes(), "SD003", "state", "the slot's slices are not one per position of its first axis"),
        # found by a survivor: the fix wrote Y_h ([1,1,4]) into these slots and failed onnx.checker ("a bug in rnnir fix")
        (_slot_of_another_shape("Squeeze"), "SD003", "h0", "the slot is float32[1,1,4,1], not the [1,batch,4] of the final state: rnnir does not insert the layout change"),
        (_slot_of_another_shape("Transpose"), "SD003", "h0", "the slot is float32[1,4,1], not the [1,batch,4] of the final state: rnnir does not insert the layout change"),
    ]
    for model, code, slot, reason in cases:
        assert _codes(model) == [code], reason
        result = rnnir.fix(model, unsafe=True)  # unsafe: a refusal is never hidden behind "not applied"
        assert result.edits == [] and result.model.graph == model.graph, reason
        assert [str(e) for e in result.skipped] == [f"{code} [no fix] {code} on slot {slot!r}: {reason}"]


def test_the_first_step_repaired_streams_like_one_call_over_the_whole_sequence() -> None:
    """hn = Y[0] becomes Y_h (safe: a step of the reading op's own Y); the Gather is pruned; three calls with the state
    fed back end where one call over all six frames ends, which the broken model does not."""
    model = _first_step_only_output()
    assert _codes(model) == ["SD003"]
    result = rnnir.fix(model)
    assert [str(e) for e in result.edits] == [
        "SD003 [safe] slot 'h0': returned the final state of the op that reads it: output 'hn': Gather 'first_step'(y, t0) -> gru.Y_h"
    ]
    assert _codes(result.model) == []
    assert [n.op_type for n in result.model.graph.node] == ["GRU", "Identity"]  # the first step has no reader left
    xs = _chunks(41)
    whole = StatefulSession(result.model).run_dict({"x": np.concatenate(xs)})["hn"]
    np.testing.assert_allclose(_streamed(result.model, xs)[-1]["hn"], whole, atol=1e-5)
    assert np.abs(_streamed(model, xs)[-1]["hn"] - whole).max() > 1e-3  # the bug showed
    for slot in ([1, "batch", "hidden"], [1, None, None]):  # symbolic or unknown dims may be Y_h's: fixed
        assert [e.after for e in rnnir.fix(_first_step_only_output(slot)).edits] == ["gru.Y_h"], slot


def test_a_reader_through_a_matmul_is_no_candidate_for_the_final_state() -> None:
    """gb reads h0 only through MatMul (derived): the final state that belongs in h0 is ga's alone."""
    model = _matmul_reader()
    assert _codes(model) == ["SD003"]
    result = rnnir.fix(model)
    assert [(e.code, e.safe, e.after) for e in result.edits] == [("SD003", True, "ga.Y_h")]
    assert _codes(result.model) == []
    xs = _chunks(42)
    _same_calls(_streamed(result.model, xs), _streamed(_matmul_reader(hn_from="Y_h"), xs), "matmul reader")


def test_which_final_state_repairs_are_safe() -> None:
    """Safe only when every slice is handed straight back as itself, or every value written back comes from the op
    that reads the slice; a slice handed back beside another's final state, another slice's live-in value or a
    constant is unsafe: found, and applied only with unsafe=True."""
    passthrough = onnx.load(str(SAMPLES / "sd001_state_passthrough.onnx"))
    constant = _model(
        [_rnn("gru", "h0", ["y"], seed=1)[0], helper.make_node("Constant", [], ["hn"], value=numpy_helper.from_array(np.zeros((1, 1, HIDDEN), np.float32)))],
        [X, H0],
        [_vi("y", ["T", 1, 1, HIDDEN]), _vi("hn", [1, 1, HIDDEN])],
        _rnn("gru", "h0", ["y"], seed=1)[1],
    )
    rows = [
        (passthrough, "SD001", True),
        (_first_step_only_output(), "SD003", True),
        (_two_grus_one_slot("hb"), "SD001", False),  # state[0] handed back, state[1] = gb's final state
        (_two_grus_one_slot("s0"), "SD001", False),  # state[0] handed back, state[1] = state[0]'s live-in value
        (constant, "SD003", False),
    ]
    for model, code, safe in rows:
        result = rnnir.fix(model, codes=[code])
        if safe:
            assert [(e.code, e.safe, e.applied) for e in result.edits] == [(code, True, True)], code
        else:
            assert result.edits == [] and result.model.graph == model.graph
            assert [(e.code, e.safe, e.applied, e.fixable) for e in result.skipped] == [(code, False, False, True)]


def test_a_slice_handed_back_beside_a_final_state_repaired_with_unsafe() -> None:
    """stateN = Concat(state[0] handed back, gb.Y_h) becomes Concat(ga.Y_h, gb.Y_h): checked against that model by hand."""
    model = _two_grus_one_slot("hb")
    result = rnnir.fix(model, unsafe=True, codes=["SD001"])
    assert [str(e) for e in result.edits] == [
        "SD001 [unsafe] slot 'state': returned the final state of the op that reads it: output 'stateN': Concat 'assemble'(s0, hb) -> ga.Y_h, gb.Y_h"
    ]
    assert _codes(result.model) == []
    xs = _chunks(43)
    _same_calls(_streamed(result.model, xs), _streamed(_two_grus_one_slot("hb", slice0="ha"), xs), "slice handed back")


def _directions_swapped(operands: tuple[str, str]) -> onnx.ModelProto:
    """A bidirectional GRU reads h0 [2,1,4]; hn = Concat of its Y_h taken at -1 (the last direction) and at 0."""
    gru, weights = _rnn("bi", "h0", ["y", "yh"], seed=1, dirs=2)
    nodes = [
        gru,
        helper.make_node("Gather", ["yh", "last"], ["backward"], name="take_last", axis=0),
        helper.make_node("Gather", ["yh", "first"], ["forward"], name="take_first", axis=0),
        helper.make_node("Concat", list(operands), ["hn"], name="assemble", axis=0),
    ]
    outs = [_vi("y", ["T", 2, 1, HIDDEN]), _vi("hn", [2, 1, HIDDEN])]
    return _model(nodes, [X, _vi("h0", [2, 1, HIDDEN])], outs, [*weights, _i64("last", [-1]), _i64("first", [0])])


def test_sd002_puts_each_direction_of_a_bidirectional_op_back_in_its_slice() -> None:
    """The final states are told apart by direction (port_key): Concat(Y_h[-1], Y_h[0]) becomes Concat(Y_h[0], Y_h[-1]),
    exactly the model fixed by hand (SD006 stays: a backward pass never continues a stream)."""
    model = _directions_swapped(("backward", "forward"))
    assert _codes(model) == ["SD002", "SD006"]
    result = rnnir.fix(model)
    assert [(e.code, e.after) for e in result.edits] == [("SD002", "inputs (forward, backward)")]
    assert result.model.graph == _directions_swapped(("forward", "backward")).graph
    assert _codes(result.model) == ["SD006"]


def test_port_key_names_one_final_state_per_direction() -> None:
    """A ref with no direction on a one-direction op is its direction 0; on a two-direction op (or a plain op) it is
    the whole port, kept apart from either direction (-1); a direction counted from the end (-1, as Gather(Y_h, -1)
    names it) is the last one."""
    one = rnnir.load(_first_step_only_output())
    gru = next(n for n in one.nodes if isinstance(n, Recurrent))
    gather = next(n for n in one.nodes if not isinstance(n, Recurrent) and getattr(n, "op", "") == "Gather")
    two_model = _model([_rnn("bi", "", ["y", "hn"], seed=1, dirs=2)[0]], [X], [_vi("hn", [2, 1, HIDDEN])], _rnn("bi", "", [], seed=1, dirs=2)[1])
    two = rnnir.load(two_model)
    bi = next(n for n in two.nodes if isinstance(n, Recurrent))

    def ref(node_id: str, port: str, direction: int | None) -> PortRef:
        return PortRef(node_id, node_id, "GRU", port, direction)

    assert [port_key(one, ref(gru.id, "Y_h", d)) for d in (None, 0, -1)] == [(gru.id, "Y_h", 0)] * 3
    assert [port_key(two, ref(bi.id, "Y_h", d)) for d in (None, 0, 1, -1, -2)] == [
        (bi.id, "Y_h", -1), (bi.id, "Y_h", 0), (bi.id, "Y_h", 1), (bi.id, "Y_h", 1), (bi.id, "Y_h", 0)
    ]
    assert port_key(one, ref(gather.id, "value", None)) == (gather.id, "value", -1)


def test_a_finding_whose_slot_has_no_paired_output_is_refused() -> None:
    """Planned directly (SD001's own planner never passes such a finding on): no output, nothing to rewrite."""
    model = onnx.load(str(SAMPLES / "sd001_no_state_output.onnx"))
    program = rnnir.load(model)
    (d,) = [d for d in passes.run(program) if d.code == "SD001"]
    edit = plan_final_state(FixContext(model, program, None, "m"), d, SD001_FIX)
    assert str(edit) == "SD001 [no fix] SD001 on slot 'h0': the slot has no paired output to rewrite"
