"""Planners on variants of the samples made by hand: near misses a planner must refuse (with its reason, the model
untouched) and variants it must repair exactly as a person would (the hand-fixed model is the oracle, run by
onnxruntime over several calls with the state fed back)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.runtime import StatefulSession

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _load(name: str) -> onnx.ModelProto:
    return onnx.load(str(SAMPLES / f"{name}.onnx"))


def _codes(model: onnx.ModelProto) -> list[str]:
    return sorted(d.code for d in passes.run(rnnir.load(model)) if d.severity.value in ("error", "warning"))


def _calls(model: onnx.ModelProto, xs: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    session = StatefulSession(model)
    return [session.run_dict({"x": x}) for x in xs]


def _xs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((2, 1, 3)).astype(np.float32) for _ in range(3)]


def _assert_same_calls(got: list[dict[str, np.ndarray]], want: list[dict[str, np.ndarray]], what: str) -> None:
    for k, (a, b) in enumerate(zip(got, want)):
        assert set(a) == set(b), what
        for name in b:
            np.testing.assert_allclose(a[name], b[name], atol=1e-6, err_msg=f"{what}: call {k} {name}")


def _with_second_gru(name: str) -> onnx.ModelProto:
    """The sample with a copy of its GRU (same inputs, so it reads the slot too) whose sequence is returned as y2."""
    model = _load(name)
    second = onnx.NodeProto()
    second.CopyFrom(next(n for n in model.graph.node if n.op_type == "GRU"))
    second.name, second.output[:] = "gru2", ["y2"]
    model.graph.node.append(second)
    model.graph.output.append(helper.make_tensor_value_info("y2", onnx.TensorProto.FLOAT, ["T", 1, 1, 4]))
    return model


def test_sd001_near_misses_are_refused_with_their_reason() -> None:
    reverse = _load("sd001_no_state_output")  # a reverse GRU: a chunk runs backwards, its final state is not a stream's
    next(n for n in reverse.graph.node if n.op_type == "GRU").attribute.append(helper.make_attribute("direction", "reverse"))
    two = _with_second_gru("sd001_no_state_output")  # two GRUs read h0: whose final state is the state is a choice
    both_roles = _load("lstm_fanout")  # h0 starts both h and c of the LSTM: which final state is h0's is a choice
    g = both_roles.graph
    lstm = next(n for n in g.node if n.op_type == "LSTM")
    lstm.input[6] = "h0"
    del lstm.output[1:]
    kept_in, kept_out = [i for i in g.input if i.name != "c0"], [o for o in g.output if o.name == "y"]
    del g.input[:], g.output[:]
    g.input.extend(kept_in)
    g.output.extend(kept_out)
    cases = [
        (both_roles, "the slot is not read as one state of recurrent ops"),
        (reverse, "GRU 'gru'.initial_h[0] is not a forward recurrent op rnnir can edit"),
        (two, "several ops read the slot in the same call: whose final state to return is not certain"),
    ]
    for model, reason in cases:
        onnx.checker.check_model(model, full_check=True)
        assert _codes(model) == ["SD001"], reason
        result = rnnir.fix(model)
        assert result.edits == [], reason
        assert [str(e) for e in result.skipped] == [f"SD001 [no fix] SD001 on slot 'h0': {reason}"]
        assert result.model.graph == model.graph


def test_sd007_op_without_an_initial_state_input_is_given_the_state_input() -> None:
    """The GRU has no initial_h operand at all (zeros by default): the fix appends the operand, as a person would."""
    model = _load("sd007_zero_init")
    g = model.graph
    gru = next(n for n in g.node if n.op_type == "GRU")
    del gru.input[4:]  # no sequence_lens, no initial_h
    g.node.remove(next(n for n in g.node if n.name == "zeros"))
    kept = [t for t in g.initializer if t.name != "zshape"]
    del g.initializer[:]
    g.initializer.extend(kept)
    onnx.checker.check_model(model, full_check=True)
    assert _codes(model) == ["SD007"]
    result = rnnir.fix(model, unsafe=True)
    assert [str(e) for e in result.edits] == [
        "SD007 [unsafe] slot 'h0': fed the state input to the op whose final state it gets: GRU 'gru'.initial_h: absent (zeros) -> 'h0'"
    ]
    assert _codes(result.model) == []
    correct = onnx.ModelProto()
    correct.CopyFrom(model)
    next(n for n in correct.graph.node if n.op_type == "GRU").input.extend(["", "h0"])
    xs = _xs(31)
    _assert_same_calls(_calls(result.model, xs), _calls(correct, xs), "sd007")
    forgot = _calls(model, xs)
    assert np.abs(forgot[2]["y"] - _calls(correct, xs)[2]["y"]).max() > 1e-4  # the bug showed


def test_sd003_fix_leaves_other_readers_of_the_replaced_value_as_they_were() -> None:
    """hn (the first step) is also read by another output: that reader keeps the first step, only hn becomes Y_h."""
    model = _load("sd003_first_step")
    model.graph.node.append(helper.make_node("Add", ["hn", "hn"], ["hn_twice"], name="twice"))
    model.graph.output.append(helper.make_tensor_value_info("hn_twice", onnx.TensorProto.FLOAT, [1, 1, 4]))
    onnx.checker.check_model(model, full_check=True)
    assert _codes(model) == ["SD003"]
    result = rnnir.fix(model)
    assert [e.code for e in result.edits] == ["SD003"] and _codes(result.model) == []
    correct = onnx.ModelProto()  # by hand: the GRU returns Y_h as hn; the Add keeps reading the first step
    correct.CopyFrom(model)
    for n in correct.graph.node:
        if n.op_type == "GRU":
            n.output[:] = ["y", "hn"]
        elif n.name == "first_step":
            n.output[:] = ["first"]
        elif n.name == "twice":
            n.input[:] = ["first", "first"]
    xs = _xs(32)
    fixed = _calls(result.model, xs)
    _assert_same_calls(fixed, _calls(correct, xs), "sd003")
    np.testing.assert_array_equal(fixed[0]["hn_twice"], _calls(model, xs)[0]["hn_twice"])  # the first call's other output


def _hc_swap_variant(inputs: list[str], after: str | None = None) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """sd002_hc_swap with the state Concat's operands ``inputs`` (and an ``after`` op between it and stateN), and the
    same model as a person fixes it (operands Y_h, Y_c)."""
    models = []
    for operands in (inputs, ["Y_h", "Y_c"]):
        m = _load("sd002_hc_swap")
        concat = next(n for n in m.graph.node if n.name == "concat_state_swapped")
        concat.input[:] = operands
        if after is not None:
            concat.output[0] = "state_cat"
            attrs = {"to": onnx.TensorProto.FLOAT} if after == "Cast" else {}
            m.graph.node.append(helper.make_node(after, ["state_cat"], ["stateN"], name="after_concat", **attrs))
        onnx.checker.check_model(m, full_check=True)
        models.append(m)
    return models[0], models[1]


def test_sd002_concat_behind_value_preserving_ops_and_operands_that_do_not_fit() -> None:
    concat = "Concat 'concat_state_swapped'"
    rows = [
        (["Y_c", "Y_h"], "Identity", None),  # found through the Identity, and repaired
        (["Y_c", "Y_h"], "Cast", None),
        (["Y_h", "Y_h"], None, f"several operands could belong at position 0 of {concat}"),
        (["Y_c", "Y_c"], None, f"no operand belongs at position 0 of {concat}"),
    ]
    for inputs, after, refused in rows:
        model, correct = _hc_swap_variant(inputs, after)
        assert _codes(model) == ["SD002"], (inputs, after)
        result = rnnir.fix(model)
        if refused is None:
            assert [e.code for e in result.edits] == ["SD002"] and _codes(result.model) == []
            assert result.model.graph == correct.graph, after  # exactly the person's fix
        else:
            assert result.edits == [] and result.model.graph == model.graph
            assert [str(e) for e in result.skipped] == [f"SD002 [no fix] SD002 on slot 'state': {refused}"]


def test_sd003_near_misses_are_refused_with_their_reason() -> None:
    two = _with_second_gru("sd003_first_step")  # a second GRU reads h0 too: whose final state belongs in the slot is a choice
    both = _load("sd003_first_step")  # the GRU runs both ways: a chunk's backward pass never continues a stream
    weights = []
    for t in both.graph.initializer:
        a = numpy_helper.to_array(t)
        weights.append(numpy_helper.from_array(np.concatenate([a, a]) if t.name.startswith("gru_") else a, t.name))
    del both.graph.initializer[:]
    both.graph.initializer.extend(weights)
    next(n for n in both.graph.node if n.op_type == "GRU").attribute.append(helper.make_attribute("direction", "bidirectional"))
    for vi, axis in ((both.graph.input[1], 0), (both.graph.output[1], 0), (both.graph.output[0], 1)):
        vi.type.tensor_type.shape.dim[axis].dim_value = 2
    cases = [
        (two, ["SD003"], "slice h0 is read by 2 ports: which final state belongs there is ambiguous"),
        (both, ["SD003", "SD006"], "slice h0[0] is read by an op inside an If branch or with two directions"),
    ]
    for model, codes, reason in cases:
        onnx.checker.check_model(model, full_check=True)
        assert _codes(model) == codes, reason
        result = rnnir.fix(model)
        assert result.edits == [] and result.model.graph == model.graph, reason
        assert [str(e) for e in result.skipped] == [f"SD003 [no fix] SD003 on slot 'h0': {reason}"]


def test_sd001_threads_the_final_state_out_of_both_if_branches() -> None:
    """The silero-style model exposed by rnnir (h0/c0 read by the LSTM of either If branch), with hn/cn cut off again:
    SD001's fix returns each state through the If, and the model streams like the exposed one (the oracle)."""
    from tests.fixes.test_fix import _stateless_packed_if

    exposed = rnnir.fix(_stateless_packed_if(), expose_state=True).model
    broken = onnx.ModelProto()
    broken.CopyFrom(exposed)
    del broken.metadata_props[:]
    g = broken.graph
    kept_out, kept_nodes = [o for o in g.output if o.name not in ("hn", "cn")], [n for n in g.node if not {"hn", "cn"} & set(n.output)]
    del g.output[:], g.node[:]
    g.output.extend(kept_out)
    g.node.extend(kept_nodes)
    assert sorted((d.code, d.slot) for d in passes.run(rnnir.load(broken))) == [("SD001", "c0"), ("SD001", "h0")]
    result = rnnir.fix(broken)
    assert [(e.code, e.target, e.after) for e in result.edits] == [
        ("SD001", "state input 'c0'", "graph output 'cn' = Y_c, paired with 'c0'"),
        ("SD001", "state input 'h0'", "graph output 'hn' = Y_h, paired with 'h0'"),
    ]
    assert _codes(result.model) == []
    x = np.random.default_rng(71).standard_normal((8, 1, 2)).astype(np.float32)
    fixed, right = StatefulSession(result.model), StatefulSession(exposed)
    for k, rate in enumerate((16000, 8000, 8000, 16000)):
        feed = {"x": x[2 * k : 2 * k + 2], "sr": np.array(rate, np.int64)}
        a, b = fixed.run_dict(feed), right.run_dict(feed)
        for name in b:
            np.testing.assert_allclose(a[name], b[name], atol=1e-6, err_msg=f"call {k} {name}")
