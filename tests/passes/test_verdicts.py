"""Never a silent pass: every state slice verified, violated or unverified (with the reason), every
recurrence stateful, stateless by design or not exposed -- from the API, the CLI, JSON and SARIF."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import rnnir
from rnnir import cli, passes
from rnnir.check.multicall.check import check_multicall
from rnnir.runtime import StatefulSession
from tests.support.onnx_models import const, lstm_h0c0, model, packed_lstm_in_if, vi

H, I = 4, 3


def verdicts(m, **kw) -> dict[str, tuple[str, str]]:
    v = passes.verify(rnnir.load(m, **kw))
    return {s.slice: (s.verdict.value, s.reason) for s in v.slices}


def states(m) -> dict[str, str]:
    return {r.node: r.state.value for r in passes.verify(rnnir.load(m)).recurrences}


# -- slice verdicts -------------------------------------------------------------------------------


def test_fanout_lstm_slices_are_verified():
    assert verdicts(lstm_h0c0()) == {"h0": ("verified", ""), "c0": ("verified", "")}


def test_packed_state_in_if_branches_is_verified_per_slice():
    assert {k: v for k, (v, _) in verdicts(packed_lstm_in_if()).items()} == {"state[0]": "verified", "state[1]": "verified"}


def test_hc_swap_in_one_if_branch_makes_both_slices_violated_with_SD002():
    v = passes.verify(rnnir.load(packed_lstm_in_if(swap=True)))
    assert {s.slice: s.verdict for s in v.slices} == {"state[0]": passes.Verdict.VIOLATED, "state[1]": passes.Verdict.VIOLATED}
    assert all(s.codes == ("SD002",) for s in v.slices)


def test_hn_cn_swapped_outputs_are_violated_not_verified():
    m = lstm_h0c0()
    m.graph.node[0].output[1], m.graph.node[0].output[2] = "cn", "hn"  # Y_h -> cn, Y_c -> hn
    assert {k: v for k, (v, _) in verdicts(m).items()} == {"h0": "violated", "c0": "violated"}


# three different reasons rnnir stops understanding: each reported, none silent


def _gru_then(tail_nodes, extra_inits=()):
    rng = np.random.default_rng(3)
    inits = [
        const("W", rng.standard_normal((1, 3 * H, I)).astype(np.float32)),
        const("R", rng.standard_normal((1, 3 * H, H)).astype(np.float32)),
        *extra_inits,
    ]
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"), *tail_nodes]
    return model(nodes, [vi("x", ["T", 1, I]), vi("h0", [1, 1, H])], [vi("Y", ["T", 1, 1, H]), vi("hn", [1, 1, H])], inits)


def test_unverified_write_back_through_matmul_names_the_matmul():
    proj = const("P", np.eye(H, dtype=np.float32)[::-1].copy())
    (verdict, reason), = verdicts(_gru_then([helper.make_node("MatMul", ["Yh", "P"], ["hn"], name="project")], [proj])).values()
    assert verdict == "unverified" and reason == "write-back of 'h0' passes through MatMul 'project'"


def test_near_miss_layout_only_write_back_is_verified():
    # Reshape to the same shape changes no value: the slice stays verified
    shape = const("shape", np.array([1, 1, H], np.int64))
    (verdict, _), = verdicts(_gru_then([helper.make_node("Reshape", ["Yh", "shape"], ["hn"], name="same_shape")], [shape])).values()
    assert verdict == "verified"


def _loop_carrying_state(body_op: str):
    """h0 -> Loop carrying h (body: h' = body_op(h, x_t)) -> hn; not a recurrence rnnir recognises."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node(body_op, ["h_in", "x_t"], ["h_out"], name="body_update"),
        ],
        "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("h_in", [1, 1, H])],
        [vi("cond_out", [], TensorProto.BOOL), vi("h_out", [1, 1, H])],
    )
    nodes = [helper.make_node("Loop", ["trip", "", "h0"], ["hn"], name="time_loop", body=body)]
    return model(
        nodes,
        [vi("x_t", [1, 1, H]), vi("h0", [1, 1, H]), vi("trip", [], TensorProto.INT64)],
        [vi("hn", [1, 1, H])],
    )


def test_state_carried_by_a_loop_rnnir_does_not_understand_is_unverified_naming_the_loop():
    (verdict, reason), = verdicts(_loop_carrying_state("Add")).values()
    assert verdict == "unverified" and reason == "state 'h0' reaches Loop 'time_loop' whose body is not understood"
    diags = passes.run(rnnir.load(_loop_carrying_state("Add")))
    assert [(d.code, d.severity, d.locations[0].onnx_node) for d in diags] == [("SD009", passes.Severity.INFO, "time_loop")]


def test_state_into_plain_ops_that_are_no_cell_is_unverified_at_the_first_op():
    nodes = [helper.make_node("Mul", ["h0", "half"], ["m"], name="decay"), helper.make_node("Add", ["m", "x"], ["hn"], name="inject")]
    m = model(nodes, [vi("x", [1, 1, H]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], [const("half", np.float32(0.5))])
    (verdict, reason), = verdicts(m).values()
    assert verdict == "unverified" and reason == "state 'h0' reaches Mul 'decay' and no recurrence rnnir recognises"


def test_unverified_is_reported_even_when_another_slot_is_verified():
    # one LSTM slot verified, a second state input only decayed by hand: one SD009, never "no findings"
    m = lstm_h0c0()
    m.graph.input.append(vi("aux", [1, 1, H]))
    m.graph.output.append(vi("aux_out", [1, 1, H]))
    m.graph.node.append(helper.make_node("Neg", ["aux"], ["aux_out"], name="flip"))
    v = passes.verify(rnnir.load(m, pairs={"h0": "hn", "c0": "cn", "aux": "aux_out"}))
    assert {s.slice: s.verdict.value for s in v.slices} == {"h0": "verified", "c0": "verified", "aux": "unverified"}
    assert [d.code for d in v.diagnostics] == ["SD009"]


# -- recurrence verdicts ----------------------------------------------------------------------------


def _gru_without_initial_state(return_hn: bool, direction: str = "forward"):
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(5)
    inits = [const("W", rng.standard_normal((dirs, 3 * H, I)).astype(np.float32)), const("R", rng.standard_normal((dirs, 3 * H, H)).astype(np.float32))]
    outs = ["Y", "hn"] if return_hn else ["Y"]
    n = helper.make_node("GRU", ["x", "W", "R"], outs, hidden_size=H, name="gru", direction=direction)
    graph_outs = [vi("Y", ["T", dirs, 1, H])] + ([vi("hn", [dirs, 1, H])] if return_hn else [])
    return model([n], [vi("x", ["T", 1, I])], graph_outs, inits)


def test_recurrence_starting_from_zeros_while_returning_its_state_is_not_exposed_SD010():
    m = _gru_without_initial_state(return_hn=True)
    assert states(m) == {"gru": "not-exposed"}
    (d,) = passes.run(rnnir.load(m))
    assert (d.code, d.severity) == ("SD010", passes.Severity.WARNING)
    assert "'hn'" in d.message and "expose-state" in d.hint


def test_near_miss_final_state_not_returned_is_stateless_by_design():
    m = _gru_without_initial_state(return_hn=False)
    assert states(m) == {"gru": "stateless"} and passes.run(rnnir.load(m)) == []


def test_near_miss_bidirectional_encoder_is_stateless_by_design():
    m = _gru_without_initial_state(return_hn=True, direction="bidirectional")
    assert states(m) == {"gru": "stateless"} and passes.run(rnnir.load(m)) == []


def test_declaring_only_h_leaves_c_not_exposed_and_the_hint_says_declare_the_pair():
    m = lstm_h0c0()
    diags = passes.run(rnnir.load(m, pairs={"h0": "hn"}))  # a declaration is the whole contract: c0 is unpaired
    assert [d.code for d in diags] == ["SD010"]
    assert "initial_c is 'c0', which comes from no paired state input" in diags[0].message and "'cn'" in diags[0].message
    assert "--pair" in diags[0].hint
    assert states(m) == {"lstm": "stateful"}  # near-miss: both pairs found by convention


def test_a_model_with_no_state_and_no_recurrence_says_nothing_was_verified():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [1, 3])], [vi("y", [1, 3])])
    (d,) = passes.run(rnnir.load(m))
    assert (d.code, d.slot) == ("SD009", None) and "verified nothing" in d.message


def test_paired_recurrence_is_stateful():
    assert states(lstm_h0c0()) == {"lstm": "stateful"}


# -- strict, CLI, JSON, SARIF ------------------------------------------------------------------------


def test_strict_makes_unverified_and_not_exposed_errors():
    prog = rnnir.load(_gru_without_initial_state(return_hn=True))
    assert [d.severity for d in passes.run(prog, strict=True)] == [passes.Severity.ERROR]
    prog = rnnir.load(_loop_carrying_state("Add"))
    assert [d.severity for d in passes.run(prog, strict=True)] == [passes.Severity.ERROR]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    onnx.save(lstm_h0c0(), tmp_path / "clean.onnx")
    onnx.save(_loop_carrying_state("Add"), tmp_path / "loop.onnx")
    return tmp_path


def test_cli_text_summary_counts_verified_slices_and_strict_fails_ci(folder, capsys):
    assert cli.main(["lint", "--no-config", "clean.onnx", "loop.onnx"]) == 0  # info only: exit 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == "0 errors, 0 warnings, 1 info in 2 files; 2 of 3 state slices verified (1 unverified)"
    assert cli.main(["lint", "--no-config", "--strict", "clean.onnx", "loop.onnx"]) == 1
    assert "loop.onnx: time_loop: SD009 [error]" in capsys.readouterr().out


def test_strict_from_pyproject(folder, capsys):
    (folder / "pyproject.toml").write_text("[tool.rnnir]\nstrict = true\n")
    assert cli.main(["lint", "loop.onnx"]) == 1
    (folder / "pyproject.toml").write_text('[tool.rnnir]\nstrict = "yes"\n')
    assert cli.main(["lint", "loop.onnx"]) == 2
    assert "strict must be true or false" in capsys.readouterr().err


def test_json_and_sarif_carry_each_slices_verdict(folder, capsys):
    cli.main(["lint", "--no-config", "clean.onnx", "loop.onnx", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    by_path = {f["path"]: f["verdicts"] for f in doc["files"]}
    assert [(s["slice"], s["verdict"]) for s in by_path["clean.onnx"]["slices"]] == [("h0", "verified"), ("c0", "verified")]
    (loop,) = by_path["loop.onnx"]["slices"]
    assert loop["verdict"] == "unverified" and loop["where"] == "time_loop"
    assert doc["summary"]["slices_verified"] == 2 and doc["summary"]["slices_unverified"] == 1
    cli.main(["lint", "--no-config", "clean.onnx", "loop.onnx", "--format", "sarif"])
    sarif = json.loads(capsys.readouterr().out)
    arts = {a["location"]["uri"]: a["properties"]["rnnirVerdicts"] for a in sarif["runs"][0]["artifacts"]}
    assert arts["loop.onnx"]["unverified"] == 1 and arts["clean.onnx"]["verified"] == 2


# -- onnxruntime's contrib recurrence: DynamicQuantizeLSTM (quantize_dynamic output) ---------------


@pytest.fixture(scope="module")
def quantized(tmp_path_factory) -> str:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = tmp_path_factory.mktemp("q")
    src = folder / "lstm.onnx"
    m = lstm_h0c0(I=I, H=8)
    onnx.save(m, src)
    dst = folder / "lstm.qdyn.onnx"
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["LSTM"])
    ops = {(n.op_type, n.domain) for n in onnx.load(dst).graph.node}
    assert ("DynamicQuantizeLSTM", "com.microsoft") in ops  # what users ship, not an LSTM any more
    return str(dst)


def test_quantize_dynamic_lstm_is_lowered_as_a_recurrence_and_verified(quantized):
    prog = rnnir.load(quantized)
    (rec,) = prog.recurrents
    assert rec.kind == "DynamicQuantizeLSTM" and rec.semantics == "LSTM"
    assert {k: v for k, (v, _) in verdicts(quantized).items()} == {"h0": "verified", "c0": "verified"}


def test_quantize_dynamic_lstm_with_hc_swapped_on_the_way_out_is_SD002(quantized):
    m = onnx.load(quantized)
    q = next(n for n in m.graph.node if n.op_type == "DynamicQuantizeLSTM")
    q.output[1], q.output[2] = q.output[2], q.output[1]
    assert sorted({d.code for d in passes.run(rnnir.load(m))}) == ["SD002"]


# quantize_dynamic quantizes X with the range of each call's own input, so a chunk and the whole sequence
# differ by quantization error (up to ~0.04 here) from call 0 on; losing the state costs ten times more (0.3-0.55)
QUANT_TOL = 0.05


def test_quantize_dynamic_lstm_streams_through_the_runtime(quantized):
    # onnxruntime is the oracle: chunked calls through StatefulSession equal one call over the sequence
    report = check_multicall(quantized, chunk_sizes=[1, 3], tol=QUANT_TOL)
    assert report.status == "pass", report
    assert report.first_divergence["reinit"] is not None  # the stream shows a lost state
    x = np.random.default_rng(0).standard_normal((12, 1, I)).astype(np.float32)
    whole = ort.InferenceSession(quantized, providers=["CPUExecutionProvider"]).run(
        ["Y"], {"x": x, "h0": np.zeros((1, 1, 8), np.float32), "c0": np.zeros((1, 1, 8), np.float32)}
    )[0]
    s = StatefulSession(quantized)
    chunked = np.concatenate([s.run({"x": x[t : t + 1]})["Y"] for t in range(12)])
    np.testing.assert_allclose(chunked, whole, atol=QUANT_TOL)
    restarted = []
    for t in range(12):
        s.reset()
        restarted.append(s.run({"x": x[t : t + 1]})["Y"])
    assert np.abs(np.concatenate(restarted) - whole).max() > 4 * QUANT_TOL


def test_export_keeps_the_contrib_op_and_its_domain(quantized):
    exported = rnnir.export(rnnir.load(quantized))
    node = next(n for n in exported.graph.node if n.op_type == "DynamicQuantizeLSTM")
    assert node.domain == "com.microsoft" and any(o.domain == "com.microsoft" for o in exported.opset_import)
    ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])  # loads and is valid


def test_registry_is_the_one_place_for_ports():
    from rnnir.ir.recurrence import KINDS, kind_for_op

    assert kind_for_op("LSTM") is KINDS["LSTM"] and kind_for_op("LSTM", "ai.onnx") is KINDS["LSTM"]
    assert kind_for_op("DynamicQuantizeLSTM", "com.microsoft") is KINDS["DynamicQuantizeLSTM"]
    assert kind_for_op("DynamicQuantizeLSTM") is None  # the contrib op only in its own domain
    lstm = KINDS["LSTM"]
    assert lstm.input_index("initial_c") == 6 and lstm.exit_of("initial_c") == "Y_c" and lstm.state_inputs == (4, 5, 6)
    assert KINDS["GRU"].entries == ("initial_h",) and KINDS["GRU"].input_index("initial_c") is None
    with pytest.raises(TypeError):
        KINDS["X"] = lstm  # type: ignore[index]  # read-only: no global mutable state
