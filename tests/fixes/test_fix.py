"""``rnnir.fix``: exposing hidden recurrent state, and the safe fixes of SD002 / SD003 / SD008 / AL001.

The oracles do not come from rnnir: PyTorch's output of one call over the whole sequence (committed in
``tests/data/torch_stateless``), the original stateless model run once over the whole stream in
onnxruntime, the original *stateful* sample (same weights) run chunk by chunk, and "correct" models
written here by hand (the broken sample with the fix a person would make) or by ``make_samples.py``'s
correct builders with the broken sample's seed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
TORCH = ROOT / "tests" / "data" / "torch"
STATELESS = ROOT / "tests" / "data" / "torch_stateless"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import rnnir  # noqa: E402
from rnnir import passes  # noqa: E402
from rnnir.analysis.slices import slice_maps  # noqa: E402
from rnnir.check.multicall.check import check_multicall  # noqa: E402
from rnnir.check.simulate import Simulator  # noqa: E402
from rnnir.fixes.catalogue import FIXES  # noqa: E402
from rnnir.fixes.diff import render_diff  # noqa: E402
from rnnir.fixes.edits import Edit, FixError  # noqa: E402
from rnnir.fixes.engine import fix  # noqa: E402
from rnnir.ir.text import print_program  # noqa: E402
from rnnir.runtime import StatefulSession  # noqa: E402
from tests.support.runnable_samples import exported_ir_sample  # noqa: E402  # tests/ is on sys.path (rootdir conftest)


def _make_samples():
    spec = importlib.util.spec_from_file_location("make_samples_for_fix", SAMPLES / "make_samples.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


MS = _make_samples()


def _ort(model: onnx.ModelProto | str | Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    what = str(model) if isinstance(model, (str, Path)) else model.SerializeToString()
    return ort.InferenceSession(what, opts, providers=["CPUExecutionProvider"])


def _errors(model: onnx.ModelProto | str | Path) -> list[str]:
    return sorted(d.code for d in passes.run(rnnir.load(model)) if d.severity.value in ("error", "warning"))


def _strip_meta(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.metadata_props[:]
    return m


def _chunks(session: StatefulSession, x: np.ndarray, size: int, **extra: np.ndarray) -> list[dict[str, np.ndarray]]:
    return [session.run_dict({"x": x[k : k + size], **extra}) for k in range(0, x.shape[0], size)]


# -- exposing state: PyTorch exports -------------------------------------------------------------


@pytest.mark.parametrize("name", ["lstm_encoder_stateless", "gru2_encoder_stateless"])
@pytest.mark.parametrize("packed", [False, True])
def test_stateless_torch_export_streams_like_one_torch_call(name: str, packed: bool) -> None:
    data = np.load(STATELESS / f"{name}.npz")
    x, y_torch = data["x"], data["y"]
    original = str(STATELESS / f"{name}.ts.onnx")
    result = fix(original, expose_state=True, packed=packed)
    onnx.checker.check_model(result.model, full_check=True)
    assert _errors(result.model) == []
    # chunks of 4 through StatefulSession equal PyTorch's single call over all 12 steps
    ys = [o["y"] for o in _chunks(StatefulSession(result.model), x, 4)]
    np.testing.assert_allclose(np.concatenate(ys), y_torch, atol=1e-5)
    # the original, called the same way, forgets: its chunked output is not PyTorch's
    lost = np.concatenate([_ort(original).run(["y"], {"x": x[k : k + 4]})[0] for k in (0, 4, 8)])
    assert np.abs(lost - y_torch).max() > 1e-3
    report = check_multicall(result.model, {"x": x}, chunk_sizes=[1, 4])
    assert report.status == "pass" and report.persistent_matches_whole is True


def test_stateless_lstm_export_gets_h0_c0_named_for_pairing() -> None:
    result = fix(str(STATELESS / "lstm_encoder_stateless.ts.onnx"), expose_state=True)
    g = result.model.graph
    assert [i.name for i in g.input] == ["x", "h0", "c0"]
    assert [o.name for o in g.output] == ["y", "hn", "cn"]
    # the names alone pair them (metadata stripped), and the metadata says the same
    by_name = {p.input: (p.output, p.source.value) for p in rnnir.load(_strip_meta(result.model)).state_pairs}
    assert by_name == {"h0": ("hn", "name"), "c0": ("cn", "name")}
    meta = {p.key: p.value for p in result.model.metadata_props}
    assert meta["rnnir.pairs"] == '{"c0": "cn", "h0": "hn"}'
    # the dynamic batch stays symbolic, so the new inputs have no default and are required
    assert [d.dim_param or d.dim_value for d in g.input[1].type.tensor_type.shape.dim] == [1, "B", 16]
    assert not any(t.name in ("h0", "c0") for t in g.initializer)


def test_two_layer_export_packed_pairs_by_name() -> None:
    result = fix(str(STATELESS / "gru2_encoder_stateless.ts.onnx"), expose_state=True, packed=True)
    pairs = {p.input: p.output for p in rnnir.load(_strip_meta(result.model)).state_pairs}
    assert pairs == {"state": "stateN"}
    prog = rnnir.load(result.model)
    labels = {sm.label: [e.onnx_node for e in sm.entry] for sm in slice_maps(prog).pair("state").slices}
    assert labels == {"state[0]": ["/rnn/GRU"], "state[1]": ["/rnn/GRU_1"]}  # layer order along axis 0


def test_packed_edit_text() -> None:
    result = fix(str(STATELESS / "gru2_encoder_stateless.ts.onnx"), expose_state=True, packed=True)
    assert str(result.edits[0]) == (
        "EXPOSE [safe] exposed packed state float32[2,B,16] (required: feed zeros on the first call; StatefulSession "
        "does): graph input 'state' / output 'stateN': GRU '/rnn/GRU' initial_h: zeros (ConstantOfShape "
        "'/rnn/ConstantOfShape'); GRU '/rnn/GRU_1' initial_h: zeros (ConstantOfShape '/rnn/ConstantOfShape'); final "
        "states not returned -> state[0] = h of GRU '/rnn/GRU', state[1] = h of GRU '/rnn/GRU_1'"
    )


def test_two_layer_export_separate_names_per_op() -> None:
    result = fix(str(STATELESS / "gru2_encoder_stateless.ts.onnx"), expose_state=True)
    pairs = {p.input: p.output for p in rnnir.load(_strip_meta(result.model)).state_pairs}
    assert pairs == {"rnn_GRU_h0": "rnn_GRU_hn", "rnn_GRU_1_h0": "rnn_GRU_1_hn"}


@pytest.mark.parametrize("exporter", ["ts", "dynamo"])
def test_gru_encoder_stateless_chunked_equals_original_whole_call(exporter: str) -> None:
    """The original stateless model run once over 12 steps is the truth streaming must reproduce."""
    x = np.random.default_rng(5).standard_normal((12, 1, 8)).astype(np.float32)
    whole = _ort(TORCH / "gru_encoder_stateless.ts.onnx").run(["y"], {"x": x})[0]
    result = fix(str(TORCH / f"gru_encoder_stateless.{exporter}.onnx"), expose_state=True)
    onnx.checker.check_model(result.model, full_check=True)
    ys = [o["y"] for o in _chunks(StatefulSession(result.model), x, 4)]  # the dynamo file is fixed at T=4
    np.testing.assert_allclose(np.concatenate(ys), whole, atol=1e-5)
    if exporter == "ts":
        assert check_multicall(result.model, {"x": x}, chunk_sizes=[1, 4]).status == "pass"
        assert check_multicall(str(TORCH / "gru_encoder_stateless.ts.onnx"), {"x": x}, chunk_sizes=[4]).status == "no-state"


def test_first_call_unchanged_when_fed_zeros() -> None:
    x = np.random.default_rng(6).standard_normal((5, 1, 8)).astype(np.float32)
    original = str(STATELESS / "lstm_encoder_stateless.ts.onnx")
    result = fix(original, expose_state=True)
    zeros = np.zeros((1, 1, 16), np.float32)
    got = _ort(result.model).run(["y"], {"x": x, "h0": zeros, "c0": zeros})[0]
    np.testing.assert_array_equal(got, _ort(original).run(["y"], {"x": x})[0])


def test_expose_edit_text() -> None:
    result = fix(str(TORCH / "gru_encoder_stateless.dynamo.onnx"), expose_state=True)
    assert [str(e) for e in result.edits] == [
        "EXPOSE [safe] exposed the h state of GRU 'node_gru__1': GRU 'node_gru__1' initial_h / Y_h: "
        "initial state zeros (initializer 'val_9'), final state not returned -> graph input 'h0' float32[1,1,16] "
        "(required: feed zeros on the first call; StatefulSession does), graph output 'hn'",
    ]
    assert not any(t.name == "val_9" for t in result.model.graph.initializer)  # the old zeros are gone


def test_state_defaults_only_for_static_shapes() -> None:
    x = np.random.default_rng(7).standard_normal((4, 1, 8)).astype(np.float32)
    static = fix(str(TORCH / "gru_encoder_stateless.dynamo.onnx"), expose_state=True, state_defaults=True)
    h0 = next(t for t in static.model.graph.initializer if t.name == "h0")
    assert not numpy_helper.to_array(h0).any()
    sess = _ort(static.model)
    np.testing.assert_array_equal(sess.run(["y"], {"x": x})[0], sess.run(["y"], {"x": x, "h0": np.zeros((1, 1, 16), np.float32)})[0])
    dynamic = fix(str(TORCH / "gru_encoder_stateless.ts.onnx"), expose_state=True, state_defaults=True)
    assert not any(t.name == "h0" for t in dynamic.model.graph.initializer)  # batch 'B' is symbolic


# -- exposing state: silero-style packed state through If ---------------------------------------


def _stateless_packed_if() -> onnx.ModelProto:
    """lstm_packed_if with its state removed by hand: both LSTMs start from zeros, nothing returns state."""
    m = onnx.load(str(SAMPLES / "lstm_packed_if.onnx"))
    g = m.graph
    state_nodes = ("gather_h", "gather_c", "unsqueeze_h", "unsqueeze_c", "concat_state")
    for node in g.node:
        if node.op_type != "If":
            continue
        del node.output[1:]
        for a in node.attribute:
            b = a.g
            prefix = "then_" if a.name == "then_branch" else "else_"
            keep = [n for n in b.node if n.name not in {prefix + s for s in state_nodes} and not n.name.endswith(("i0", "i1", "ax0"))]
            for n in keep:
                if n.op_type == "LSTM":
                    n.input[5] = ""
                    n.input[6] = ""
                    del n.output[1:]
            del b.node[:]
            b.node.extend(keep)
            del b.output[1:]
    ins = [i for i in g.input if i.name != "state"]
    del g.input[:]
    g.input.extend(ins)
    outs = [o for o in g.output if o.name != "stateN"]
    del g.output[:]
    g.output.extend(outs)
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("sr", [16000, 8000])
def test_silero_style_packed_state_restored(sr: int) -> None:
    stateless = _stateless_packed_if()
    assert rnnir.load(stateless).state_pairs == ()
    result = fix(stateless, expose_state=True, packed=True)
    onnx.checker.check_model(result.model, full_check=True)
    assert _errors(result.model) == []
    assert {p.input: p.output for p in rnnir.load(_strip_meta(result.model)).state_pairs} == {"state": "stateN"}
    x = np.random.default_rng(8).standard_normal((12, 1, 2)).astype(np.float32)
    rate = np.array(sr, np.int64)
    fixed = _chunks(StatefulSession(result.model), x, 4, sr=rate)
    sample = _chunks(StatefulSession(str(SAMPLES / "lstm_packed_if.onnx")), x, 4, sr=rate)  # same weights, stateful by hand
    for a, b in zip(fixed, sample):
        np.testing.assert_allclose(a["output"], b["output"], atol=1e-6)
        np.testing.assert_allclose(a["stateN"], b["stateN"], atol=1e-6)  # state[0] = h, state[1] = c, as silero packs it
    whole = _ort(stateless).run(["output"], {"x": x, "sr": rate})[0]
    np.testing.assert_allclose(np.concatenate([o["output"] for o in fixed]), whole, atol=1e-5)
    report = check_multicall(result.model, {"x": x}, chunk_sizes=[2, 4], input_values={"sr": float(sr)})
    assert report.status == "pass" and report.persistent_matches_whole is True


def test_if_branches_share_one_state_and_say_so() -> None:
    result = fix(_stateless_packed_if(), expose_state=True)
    assert [str(e) for e in result.edits] == [
        "EXPOSE [safe] exposed the h state of LSTM 'then_lstm'/'else_lstm' in If 'if_sr': LSTM 'then_lstm'/'else_lstm' in If "
        "'if_sr' initial_h / Y_h: initial state absent (zeros), final state not returned -> graph input 'h0' float32[1,1,4] "
        "(required: feed zeros on the first call; StatefulSession does), graph output 'hn'",
        "EXPOSE [safe] exposed the c state of LSTM 'then_lstm'/'else_lstm' in If 'if_sr': LSTM 'then_lstm'/'else_lstm' in If "
        "'if_sr' initial_c / Y_c: initial state absent (zeros), final state not returned -> graph input 'c0' float32[1,1,4] "
        "(required: feed zeros on the first call; StatefulSession does), graph output 'cn'",
    ]


def test_branch_without_the_op_hands_the_state_back() -> None:
    """An If whose else branch has no LSTM: that branch yields the incoming state, so it survives the call."""
    m = _stateless_packed_if()
    if_node = next(n for n in m.graph.node if n.op_type == "If")
    else_branch = next(a for a in if_node.attribute if a.name == "else_branch").g
    del else_branch.node[:]
    else_branch.node.append(helper.make_node("Concat", ["x", "x"], ["else_out"], name="else_no_lstm", axis=2))  # [T,1,4] like then's
    onnx.checker.check_model(m, full_check=True)
    result = fix(m, expose_state=True)
    assert _errors(result.model) == []
    sess = StatefulSession(result.model)
    x = np.random.default_rng(9).standard_normal((4, 1, 2)).astype(np.float32)
    first = sess.run_dict({"x": x, "sr": np.array(16000, np.int64)})
    kept = sess.run_dict({"x": x, "sr": np.array(8000, np.int64)})  # no LSTM runs: the state is handed back unchanged
    resumed = sess.run_dict({"x": x, "sr": np.array(16000, np.int64)})
    np.testing.assert_array_equal(kept["hn"], first["hn"])
    np.testing.assert_array_equal(kept["cn"], first["cn"])
    assert np.abs(first["hn"]).max() > 0
    # the 16 kHz LSTM resumes from its own state: two 16 kHz calls in a row give the same result
    again = StatefulSession(result.model)
    again.run({"x": x, "sr": np.array(16000, np.int64)})
    np.testing.assert_allclose(again.run({"x": x, "sr": np.array(16000, np.int64)})["output"], resumed["output"], atol=1e-6)


# -- exposing state: what is not exposed, and why ------------------------------------------------


def test_already_stateful_model_is_left_alone() -> None:
    result = fix(str(SAMPLES / "lstm_fanout.onnx"), expose_state=True)
    assert result.edits == []
    assert [(e.target, e.reason) for e in result.skipped] == [
        ("lstm.Y_h", "this final state is already written back by a state pair"),
        ("lstm.Y_c", "this final state is already written back by a state pair"),
    ]


def test_nonzero_constant_initial_state_needs_state_defaults() -> None:
    path = str(SAMPLES / "sd010_constant_init.onnx")
    result = fix(path, expose_state=True)
    assert result.edits == []
    assert "non-zero constant initializer 'h_init'" in result.skipped[0].reason
    kept = fix(path, expose_state=True, state_defaults=True)  # the constant becomes the new input's default
    assert [str(e) for e in kept.edits] == [
        "EXPOSE [safe] exposed the h state of RNN 'rnn': RNN 'rnn' initial_h / Y_h: initial state constant initializer "
        "'h_init', final state returned as 'h_final' but not paired -> graph input 'h' float32[1,1,3] (default: the op's "
        "former constant initial state), paired with the returned 'h_final'"
    ]
    assert _errors(kept.model) == []
    x = np.random.default_rng(13).standard_normal((6, 1, 2)).astype(np.float32)
    original = _ort(path)
    # a caller who never feeds the state gets the original model; one who feeds it back streams
    np.testing.assert_array_equal(_ort(kept.model).run(["y"], {"x": x})[0], original.run(["y"], {"x": x})[0])
    chunked = np.concatenate([o["y"] for o in _chunks(StatefulSession(kept.model), x, 2)])
    np.testing.assert_allclose(chunked, original.run(["y"], {"x": x})[0], atol=1e-6)


def test_sd010_returned_final_state_is_paired_not_duplicated() -> None:
    path = str(SAMPLES / "sd010_gru_no_initial_state.onnx")
    assert _errors(path) == ["SD010"]
    refused = fix(path)
    assert refused.edits == [] and [e.reason for e in refused.skipped] == ["not certain: pass unsafe=True (--unsafe-fixes) to apply it"]
    result = fix(path, unsafe=True)
    assert [e.code for e in result.edits] == ["SD010", "EXPOSE"]
    assert [o.name for o in result.model.graph.output] == ["y", "hn"]  # the returned hn is the state output now
    assert {p.input: p.output for p in rnnir.load(_strip_meta(result.model)).state_pairs} == {"h0": "hn"}
    assert _errors(result.model) == []
    x = np.random.default_rng(14).standard_normal((6, 1, 3)).astype(np.float32)
    whole = _ort(path).run(["y", "hn"], {"x": x})
    outs = _chunks(StatefulSession(result.model), x, 2)
    np.testing.assert_allclose(np.concatenate([o["y"] for o in outs]), whole[0], atol=1e-6)
    np.testing.assert_allclose(outs[-1]["hn"], whole[1], atol=1e-6)


def test_bidirectional_op_is_not_exposed() -> None:
    m = onnx.load(str(SAMPLES / "sd006_bilstm.onnx"))
    g = m.graph
    lstm = next(n for n in g.node if n.op_type == "LSTM")
    lstm.input[5] = ""
    lstm.input[6] = ""
    del lstm.output[1:]
    ins = [i for i in g.input if i.name == "x"]
    del g.input[:]
    g.input.extend(ins)
    outs = [o for o in g.output if o.name == "y"]
    del g.output[:]
    g.output.extend(outs)
    result = fix(m, expose_state=True)
    assert result.edits == []
    assert "bidirectional recurrence runs each chunk backwards" in result.skipped[0].reason


# -- repairing findings: the samples ----------------------------------------------------------


def _correct_hc_swap() -> onnx.ModelProto:
    model, _ = MS.sd002_hc_swap()
    node = next(n for n in model.graph.node if n.name == "concat_state_swapped")
    del node.input[:]
    node.input.extend(["Y_h", "Y_c"])  # what a person fixing the sample writes
    return model


def _correct_if_branch() -> onnx.ModelProto:
    return MS.model_of(MS._packed_if("sd002_hc_swap_if_branch", 204, swap_else=False), "correct")


def _correct_layer_swap() -> onnx.ModelProto:
    g, _ = MS._stacked_gru("sd002_layer_swap", 205, swap=False)
    return MS.model_of(g, "correct")


SD002_CASES = {
    "sd002_hc_swap": (_correct_hc_swap, {}, "SD002 [safe] slot 'state': wrote each final state back into the slice its op reads: "
                      "Concat 'concat_state_swapped': inputs (Y_c, Y_h) -> inputs (Y_h, Y_c)"),
    "sd002_hc_swap_if_branch": (_correct_if_branch, {"sr": np.array(8000, np.int64)},
                                "SD002 [safe] slot 'state': wrote each final state back into the slice its op reads: "
                                "Concat 'else_concat_state': inputs (else_Y_c, else_Y_h) -> inputs (else_Y_h, else_Y_c)"),
    "sd002_layer_swap": (_correct_layer_swap, {}, "SD002 [safe] slot 'h0': wrote each final state back into the slice its op reads: "
                         "Concat 'concat_hn': inputs (hn_l1, hn_l0) -> inputs (hn_l0, hn_l1)"),
}


def _x_for(model: onnx.ModelProto | str, T: int = 9) -> np.ndarray:
    sess = _ort(model)
    shape = next(i.shape for i in sess.get_inputs() if i.name == "x")
    dims = [T if not isinstance(d, int) else d for d in shape]
    return np.random.default_rng(11).standard_normal(dims).astype(np.float32)


@pytest.mark.parametrize("name", sorted(SD002_CASES))
def test_sd002_sample_repaired(name: str) -> None:
    correct_of, extra, text = SD002_CASES[name]
    path = SAMPLES / f"{name}.onnx"
    assert _errors(path) == ["SD002"]
    result = fix(str(path))
    assert [str(e) for e in result.edits] == [text]
    assert _errors(result.model) == []
    correct = correct_of()
    assert _errors(correct) == []
    x = _x_for(result.model)
    fixed = _chunks(StatefulSession(result.model), x, 3, **extra)
    broken = _chunks(StatefulSession(str(path)), x, 3, **extra)
    right = _chunks(StatefulSession(correct), x, 3, **extra)
    state_out = next(p.output for p in rnnir.load(str(path)).state_pairs)
    for k in fixed[0]:  # first call: every output but the state written back is the original's
        if k != state_out:
            np.testing.assert_array_equal(fixed[0][k], broken[0][k])
    for got, want in zip(fixed, right):  # every call, every output: the correct model's
        for k in want:
            np.testing.assert_allclose(got[k], want[k], atol=1e-6)
    assert any(np.abs(b[k] - r[k]).max() > 1e-4 for b, r in zip(broken[1:], right[1:]) for k in r)  # the bug showed


def test_al001_sample_repaired_in_its_ir_text() -> None:
    broken = exported_ir_sample("al001_chain")  # the chain lives in the export's rnnir.ir IR text
    assert _errors(broken) == ["AL001"]
    result = fix(broken)
    assert [str(e) for e in result.edits] == [
        "AL001 [safe] slot 'h0': the output store reads the final state (fan-out), not the slot store's result: "
        "rnnir.ir store 'store.hn': reads 'store:store.h0' -> reads 'value:hn'"
    ]
    assert _errors(result.model) == []
    onnx.checker.check_model(result.model, full_check=True)
    assert "%store.hn = store<out:hn, value>(%hn)" in {p.key: p.value for p in result.model.metadata_props}["rnnir.ir"]
    correct = _strip_meta(broken)  # the same graph with no store structure recorded: lowering's default fan-out
    x = _x_for(broken, T=3)
    feeds = [{"x": x[k : k + 1]} for k in range(3)]
    for model, stable in ((result.model, True), (correct, True), (broken, False)):
        sim = Simulator(rnnir.load(model))
        held, at_return = [], []
        for f in feeds:
            out = sim.run(f)
            held.append(out["hn"])
            at_return.append(np.array(out["hn"], copy=True))
        same = all(np.array_equal(h, r) for h, r in zip(held, at_return))
        assert same is stable  # the chain hands out the slot's memory: the caller's hn changes under it
    # first call and later calls equal the correct model's (onnxruntime ignores the metadata: same graph)
    fixed_sim, right_sim = Simulator(rnnir.load(result.model)), Simulator(rnnir.load(correct))
    for f in feeds:
        a, b = fixed_sim.run(f), right_sim.run(f)
        for k in b:
            np.testing.assert_allclose(a[k], b[k], atol=1e-6)


def _returns_y_h(model: onnx.ModelProto, drop: set[str]) -> onnx.ModelProto:
    """The hand fix of an SD003/SD008 sample: hn is the GRU's Y_h, the bad step extraction removed."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [n for n in m.graph.node if n.name not in drop]
    for n in keep:
        if n.op_type == "GRU":
            del n.output[:]
            n.output.extend(["y", "hn"])
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m


@pytest.mark.parametrize(
    ("name", "drop", "text"),
    [
        ("sd003_first_step", {"first_step"}, "SD003 [safe] slot 'h0': returned the final state of the op that reads it: output 'hn': Gather 'first_step'(y, t0) -> gru.Y_h"),
        ("sd008_last_step_seqlens", {"last_step", "squeeze_last"},
         "SD008 [safe] slot 'h0': returned the final state of the op that reads it: output 'hn': Squeeze 'squeeze_last'(y_last, ax0) -> gru.Y_h"),
    ],
)
def test_step_of_y_replaced_by_final_state(name: str, drop: set[str], text: str) -> None:
    path = SAMPLES / f"{name}.onnx"
    result = fix(str(path))
    assert [str(e) for e in result.edits] == [text]
    assert _errors(result.model) == []
    correct = _returns_y_h(onnx.load(str(path)), drop)
    extra = {"seq_lens": np.array([3, 2], np.int32)} if "seqlens" in name else {}
    x = _x_for(result.model, T=3)
    fixed = _chunks(StatefulSession(result.model), x, 3, **extra)[:1] + [StatefulSession(result.model).run_dict({"x": x, **extra})]
    right = _chunks(StatefulSession(correct), x, 3, **extra)[:1] + [StatefulSession(correct).run_dict({"x": x, **extra})]
    broken = StatefulSession(str(path)).run_dict({"x": x, **extra})
    np.testing.assert_array_equal(fixed[0]["y"], broken["y"])  # the first call's y is untouched
    for got, want in zip(fixed, right):
        for k in want:
            np.testing.assert_allclose(got[k], want[k], atol=1e-6)
    s_fixed, s_right = StatefulSession(result.model), StatefulSession(correct)
    for _ in range(3):  # later calls with the state fed back
        a, b = s_fixed.run_dict({"x": x, **extra}), s_right.run_dict({"x": x, **extra})
        for k in b:
            np.testing.assert_allclose(a[k], b[k], atol=1e-6)


def test_other_op_fix_is_unsafe() -> None:
    path = str(SAMPLES / "sd003_other_op.onnx")
    result = fix(path)
    assert result.edits == []
    assert [str(e) for e in result.skipped] == [
        "SD003 [unsafe, not applied] slot 'h0': returned the final state of the op that reads it: not certain: pass "
        "unsafe=True (--unsafe-fixes) to apply it"
    ]
    forced = fix(path, unsafe=True)
    assert [e.safe for e in forced.edits] == [False]
    assert _errors(forced.model) == []


@pytest.mark.parametrize("name", ["sd005_fp16_state", "sd006_bilstm", "sd007_zero_init", "sd010_constant_init"])
def test_rules_without_a_fix_are_left_alone(name: str) -> None:
    path = str(SAMPLES / f"{name}.onnx")
    result = fix(path)
    assert result.edits == []
    assert result.model.graph == onnx.load(path).graph


def test_correct_samples_are_unchanged() -> None:
    for path in sorted(SAMPLES.glob("*.onnx")):
        if _errors(path):
            continue
        result = fix(str(path))
        assert result.edits == [] and result.skipped == [], path.name


# -- repairing findings: mutants of real models --------------------------------------------------


def _mutant(path: Path, mutate) -> onnx.ModelProto:
    m = onnx.load(str(path))
    mutate(m.graph)
    onnx.checker.check_model(m, full_check=True)
    return m


def _swap_concat(graph: onnx.GraphProto) -> None:
    node = next(n for n in graph.node if n.op_type == "Concat" and len(n.input) == 2 and any("Squeeze" not in i for i in n.input))
    a, b = node.input
    node.input[0], node.input[1] = b, a


def _hn_first_step(graph: onnx.GraphProto) -> None:
    lstm = next(n for n in graph.node if n.op_type == "LSTM")
    hn_index = [o.name for o in graph.output].index("hn")
    assert hn_index == 1
    lstm.output[1] = "Y_h_unused"
    graph.initializer.append(numpy_helper.from_array(np.array(0, np.int64), "t_first"))
    graph.node.append(helper.make_node("Gather", [lstm.output[0], "t_first"], ["hn"], name="mutant_first_step", axis=0))


def _packed_h_first_step(graph: onnx.GraphProto) -> None:
    """stateN = Concat(Y[0], Y_c): the h slice gets the state after the first step."""
    lstm = next(n for n in graph.node if n.op_type == "LSTM")
    concat = next(n for n in graph.node if "stateN" in n.output)
    graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "t_first"))
    first = helper.make_node("Gather", [lstm.output[0], "t_first"], ["y_first_4d"], name="mutant_gather", axis=0)
    squeeze = helper.make_node("Squeeze", ["y_first_4d", "t_first"], ["y_first"], name="mutant_squeeze")
    concat.input[0] = "y_first"
    nodes = [n for n in graph.node if n is not concat]
    rebuilt = [*nodes, first, squeeze, concat]
    copies = [onnx.NodeProto() for _ in rebuilt]
    for c, n in zip(copies, rebuilt):
        c.CopyFrom(n)
    del graph.node[:]
    graph.node.extend(copies)


@pytest.mark.parametrize(
    ("file", "mutate", "code"),
    [
        ("gru2_stream.ts.onnx", _swap_concat, "SD002"),
        ("lstm_packed_state.ts.onnx", _swap_concat, "SD002"),
        ("lstm_stream.ts.onnx", _hn_first_step, "SD003"),
        ("lstm_packed_state.ts.onnx", _packed_h_first_step, "SD003"),
    ],
)
def test_real_model_mutant_repaired(file: str, mutate, code: str) -> None:
    original = TORCH / file
    mutant = _mutant(original, mutate)
    assert _errors(mutant) == [code]
    result = fix(mutant)
    assert [e.code for e in result.edits] == [code]
    assert _errors(result.model) == []
    oracle = np.load(TORCH / file.replace(".ts.onnx", ".calls.npz"))
    pairs = [tuple(p) for p in oracle["pairs"]]
    s = StatefulSession(result.model)
    for k in range(3):  # PyTorch's three calls with the state fed back: the repaired mutant reproduces them
        if k == 0:
            feed = {n[len("call0_in_") :]: oracle[n] for n in oracle.files if n.startswith("call0_in_")}
        else:
            feed = {"x": oracle[f"call{k}_in_x"]}
        out = s.run_dict(feed)
        for _, o in pairs:
            np.testing.assert_allclose(out[o], oracle[f"call{k}_out_{o}"], atol=1e-5)
        np.testing.assert_allclose(out["y"], oracle[f"call{k}_out_y"], atol=1e-5)


# -- API details ----------------------------------------------------------------------------------


def test_fix_never_changes_the_callers_model() -> None:
    m = onnx.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    before = m.SerializeToString()
    assert fix(m).edits
    assert m.SerializeToString() == before


def test_unknown_code_is_a_clear_error() -> None:
    with pytest.raises(FixError, match="no automatic fix for SD005"):
        fix(str(SAMPLES / "sd005_fp16_state.onnx"), codes=["SD005"])


def test_codes_limit_the_fixes() -> None:
    assert fix(str(SAMPLES / "sd002_hc_swap.onnx"), codes=["AL001"]).edits == []
    assert fix(str(SAMPLES / "sd002_hc_swap.onnx"), codes=[]).edits == []


def test_diff_shows_the_changed_node_only() -> None:
    path = str(SAMPLES / "sd002_hc_swap.onnx")
    result = fix(path)
    text = render_diff(onnx.load(path), result.model, "m.onnx", result.edits)
    changed = [line for line in text.splitlines() if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    assert changed == [
        "-  stateN = Concat<axis=0>(Y_c, Y_h)  # concat_state_swapped",
        "+  stateN = Concat<axis=0>(Y_h, Y_c)  # concat_state_swapped",
    ]
    assert render_diff(onnx.load(path), onnx.load(path), "m.onnx") == ""


def _rules_added_since_the_fix_catalogue() -> set[str]:
    """Codes of the code table after RN100, the last rule when every rule was sorted into "has a fix" or not: a new
    rule does not have to edit this file (its fix, if it gets one, is another change)."""
    codes = list(passes.RULES)
    return set(codes[codes.index("RN100") + 1 :])


def test_fix_catalogue_matches_the_rules() -> None:
    assert set(FIXES) <= set(passes.RULES)
    assert {c for c, f in FIXES.items() if f.safe == "safe"} == {"SD001", "SD002", "SD004", "SD008", "AL001", "AL002", "AL003", "OR001", "OR002"}
    no_fix = {"SD005", "SD006", "SD009", "RN100"}  # no automatic fix (RN100: rnnir fix --unsuppress)
    assert no_fix <= set(passes.RULES) and no_fix.isdisjoint(FIXES)
    assert set(FIXES) | no_fix >= set(passes.RULES) - _rules_added_since_the_fix_catalogue()
    assert FIXES["SD007"].safe == "unsafe"  # the constant may be a deliberate reset
    assert FIXES["SD010"].safe == "unsafe"  # a new required input changes the interface
    assert isinstance(Edit("X", "t", "a", "b", True, "m"), Edit)


# -- a real silero-vad file made stateless, then streamable again ---------------------------------


def _stateless_silero(path: Path) -> onnx.ModelProto:
    """silero_vad_openvino_16k with its packed state cut out by hand: the LSTM starts from zeros every call."""
    m = onnx.load(str(path))
    g = m.graph
    lstm = next(n for n in g.node if n.op_type == "LSTM")
    lstm.input[5] = ""
    lstm.input[6] = ""
    readers = {"state"}
    keep = []
    for n in g.node:  # drop what reads the state input (Gather/Unsqueeze) and what builds stateN
        if any(i in readers for i in n.input) or "stateN" in n.output:
            readers.update(n.output)
            continue
        keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    ins = [i for i in g.input if i.name != "state"]
    del g.input[:]
    g.input.extend(ins)
    outs = [o for o in g.output if o.name != "stateN"]
    del g.output[:]
    g.output.extend(outs)
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.realmodel
def test_real_silero_made_stateless_is_streamable_again(silero_dir: Path) -> None:
    path = silero_dir / "silero_vad_openvino_16k.onnx"
    stateless = _stateless_silero(path)
    assert rnnir.load(stateless).state_pairs == ()
    result = fix(stateless, expose_state=True, packed=True)
    onnx.checker.check_model(result.model, full_check=True)
    assert _errors(result.model) == []
    state_in = next(i for i in result.model.graph.input if i.name == "state")
    # h and c of the one LSTM; the batch comes from the audio input [1, 576] (inference cannot type the LSTM's input)
    assert [d.dim_value for d in state_in.type.tensor_type.shape.dim] == [2, 1, 128]
    rng = np.random.default_rng(12)
    frames = [(0.1 * rng.standard_normal((1, 576))).astype(np.float32) for _ in range(6)]
    fixed, original = StatefulSession(result.model), StatefulSession(str(path))
    for k, frame in enumerate(frames):  # both start from zeros and keep their state: every call agrees
        a, b = fixed.run_dict({"input": frame}), original.run_dict({"input": frame})
        np.testing.assert_allclose(a["output"], b["output"], atol=1e-6, err_msg=f"call {k}")
        np.testing.assert_allclose(a["stateN"], b["stateN"], atol=1e-6, err_msg=f"call {k}")
    cut = _ort(stateless)  # the cut model forgets: from the second call on it is not silero any more
    streamed = StatefulSession(str(path))
    diffs = [np.abs(cut.run(["output"], {"input": f})[0] - streamed.run({"input": f})["output"]).max() for f in frames]
    assert diffs[0] < 1e-6 and max(diffs[1:]) > 1e-4


def test_names_that_are_taken_are_not_reused() -> None:
    m = onnx.load(str(STATELESS / "lstm_encoder_stateless.ts.onnx"))
    m.graph.input.append(helper.make_tensor_value_info("h0", onnx.TensorProto.FLOAT, [3]))  # an unrelated input named h0
    result = fix(m, expose_state=True)
    names = [i.name for i in result.model.graph.input]
    assert names == ["x", "h0", "rnn_LSTM_h0", "c0"]
    pairs = {p.input: p.output for p in rnnir.load(_strip_meta(result.model)).state_pairs}
    assert pairs == {"rnn_LSTM_h0": "rnn_LSTM_hn", "c0": "cn"}


def test_expose_edit_text_of_a_torchscript_export() -> None:
    result = fix(str(TORCH / "gru_encoder_stateless.ts.onnx"), expose_state=True)
    assert [str(e) for e in result.edits] == [
        "EXPOSE [safe] exposed the h state of GRU '/rnn/GRU': GRU '/rnn/GRU' initial_h / Y_h: initial state zeros "
        "(ConstantOfShape '/rnn/ConstantOfShape'), final state not returned -> graph input 'h0' float32[1,B,16] "
        "(required: feed zeros on the first call; StatefulSession does), graph output 'hn'",
        "EXPOSE [safe] dropped the constant initial states: former initial states: /rnn/Shape, /rnn/Constant, "
        "/rnn/Gather, /rnn/Constant_1, Constant_9, /rnn/Unsqueeze, /rnn/Constant_2, /rnn/Concat, /rnn/ConstantOfShape "
        "-> removed (nothing reads them)",
    ]
    kept = {n.op_type for n in result.model.graph.node}
    assert "ConstantOfShape" not in kept and "Shape" not in kept


def test_exposed_model_metadata_matches_export_conventions() -> None:
    from rnnir.onnxio.source import graph_fingerprint

    result = fix(str(SAMPLES / "sd010_gru_no_initial_state.onnx"), expose_state=True)
    meta = {p.key: p.value for p in result.model.metadata_props}
    assert meta["rnnir.fingerprint"] == graph_fingerprint(result.model)
    assert meta["rnnir.pairs"] == '{"h0": "hn"}'
    assert '"init": "zeros"' in meta["rnnir.slots"]


def test_a_state_exposed_in_a_model_with_recorded_stores_gets_the_default_fan_out() -> None:
    """The IR text (rnnir.ir) records the stores of the export; a slot exposed afterwards is not in it, so the
    lowering gives it the default fan-out: the exposed pair is written back (no SD001) and hn keeps its one store."""
    m = onnx.load(str(SAMPLES / "sd010_gru_no_initial_state.onnx"))
    recorded = rnnir.load(m)
    m.metadata_props.add(key="rnnir.ir", value=print_program(recorded))
    assert _errors(m) == ["SD010"]
    result = fix(m, expose_state=True)
    assert _errors(result.model) == []
    program = rnnir.load(result.model)
    assert [st.dest.name for st in program.stores_to(program.slot("h0"))] == ["h0"]
    assert len(program.stores_to(program.output("hn"))) == 1
    assert {p.key: p.value for p in result.model.metadata_props}["rnnir.ir"] == print_program(recorded)  # the text is kept as recorded


@pytest.mark.realmodel
def test_real_silero_hc_swap_mutant_repaired(silero_dir: Path) -> None:
    path = silero_dir / "silero_vad_openvino_16k.onnx"
    mutant = onnx.load(str(path))
    concat = next(n for n in mutant.graph.node if "stateN" in n.output)
    concat.input[0], concat.input[1] = concat.input[1], concat.input[0]  # stateN = Concat(c, h)
    assert _errors(mutant) == ["SD002"]
    result = fix(mutant)
    assert [e.code for e in result.edits] == ["SD002"] and _errors(result.model) == []
    rng = np.random.default_rng(15)
    fixed, original, broken = StatefulSession(result.model), StatefulSession(str(path)), StatefulSession(mutant)
    diverged = 0.0
    for _ in range(5):
        frame = {"input": (0.1 * rng.standard_normal((1, 576))).astype(np.float32)}
        a, b, c = fixed.run_dict(frame), original.run_dict(frame), broken.run_dict(frame)
        np.testing.assert_allclose(a["output"], b["output"], atol=1e-6)
        np.testing.assert_allclose(a["stateN"], b["stateN"], atol=1e-6)
        diverged = max(diverged, float(np.abs(c["output"] - b["output"]).max()))
    assert diverged > 1e-5  # the swap was a real bug on this stream


def test_lstm_with_only_h_carried_gets_its_c_exposed() -> None:
    """h0 -> hn is paired but c starts from zeros every call: only c is exposed, and then chunks stream."""
    m = onnx.load(str(SAMPLES / "lstm_fanout.onnx"))
    g = m.graph
    lstm = next(n for n in g.node if n.op_type == "LSTM")
    lstm.input[6] = ""
    lstm.output[2] = ""
    ins = [i for i in g.input if i.name != "c0"]
    del g.input[:]
    g.input.extend(ins)
    outs = [o for o in g.output if o.name != "cn"]
    del g.output[:]
    g.output.extend(outs)
    result = fix(m, expose_state=True)
    assert [e.target for e in result.edits] == ["LSTM 'lstm' initial_c / Y_c"]
    assert [e.reason for e in result.skipped] == ["this final state is already written back by a state pair"]
    assert {p.input: p.output for p in rnnir.load(result.model).state_pairs} == {"h0": "hn", "c0": "cn"}
    x = np.random.default_rng(16).standard_normal((6, 1, 3)).astype(np.float32)
    zeros = np.zeros((1, 1, 5), np.float32)
    whole = _ort(SAMPLES / "lstm_fanout.onnx").run(["y"], {"x": x, "h0": zeros, "c0": zeros})[0]  # the full model, same weights
    chunked = np.concatenate([o["y"] for o in _chunks(StatefulSession(result.model), x, 2)])
    np.testing.assert_allclose(chunked, whole, atol=1e-6)


def _nested_if_gru() -> onnx.ModelProto:
    """A GRU two If levels down (outer then -> inner then), starting from zeros; the other branches have no GRU."""
    from onnx import TensorProto as TP

    rng = np.random.default_rng(3)
    H, I = 3, 2
    W = numpy_helper.from_array((rng.standard_normal((1, 3 * H, I)) * 0.5).astype(np.float32), "W")
    R = numpy_helper.from_array((rng.standard_normal((1, 3 * H, H)) * 0.5).astype(np.float32), "R")
    ax = numpy_helper.from_array(np.array([1], np.int64), "ax1")
    inner_then = helper.make_graph(
        [helper.make_node("GRU", ["x", "W", "R"], ["Y", ""], name="gru", hidden_size=H),
         helper.make_node("Squeeze", ["Y", "ax1"], ["it_y"], name="sq")],
        "inner_then", [], [helper.make_tensor_value_info("it_y", TP.FLOAT, ["T", 1, H])])
    inner_else = helper.make_graph(
        [helper.make_node("Concat", ["x", "x", "x"], ["ie_c"], name="ie_cat", axis=2),
         helper.make_node("Slice", ["ie_c", "s0", "s3", "ax2"], ["ie_y"], name="ie_slice")],
        "inner_else", [], [helper.make_tensor_value_info("ie_y", TP.FLOAT, ["T", 1, H])])
    outer_then = helper.make_graph(
        [helper.make_node("If", ["b"], ["ot_y"], name="inner_if", then_branch=inner_then, else_branch=inner_else)],
        "outer_then", [], [helper.make_tensor_value_info("ot_y", TP.FLOAT, ["T", 1, H])])
    outer_else = helper.make_graph(
        [helper.make_node("Concat", ["x", "x", "x"], ["oe_c"], name="oe_cat", axis=2),
         helper.make_node("Slice", ["oe_c", "s0", "s3", "ax2"], ["oe_y"], name="oe_slice")],
        "outer_else", [], [helper.make_tensor_value_info("oe_y", TP.FLOAT, ["T", 1, H])])
    inits = [W, R, ax] + [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("s0", 0), ("s3", 3), ("ax2", 2))]
    g = helper.make_graph(
        [helper.make_node("If", ["a"], ["y"], name="outer_if", then_branch=outer_then, else_branch=outer_else)],
        "nested", [helper.make_tensor_value_info("x", TP.FLOAT, ["T", 1, I]), helper.make_tensor_value_info("a", TP.BOOL, []),
                   helper.make_tensor_value_info("b", TP.BOOL, [])],
        [helper.make_tensor_value_info("y", TP.FLOAT, ["T", 1, H])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def test_nested_if_state_threads_out_through_every_level() -> None:
    m = _nested_if_gru()
    result = fix(m, expose_state=True)
    onnx.checker.check_model(result.model, full_check=True)
    assert _errors(result.model) == []
    x = np.random.default_rng(17).standard_normal((6, 1, 2)).astype(np.float32)
    yes, no = np.array(True), np.array(False)
    whole = _ort(m).run(["y"], {"x": x, "a": yes, "b": yes})[0]
    s = StatefulSession(result.model)
    chunked = np.concatenate([s.run({"x": x[k : k + 2], "a": yes, "b": yes})["y"] for k in (0, 2, 4)])
    np.testing.assert_allclose(chunked, whole, atol=1e-6)
    s = StatefulSession(result.model)
    first = s.run_dict({"x": x[:2], "a": yes, "b": yes})["hn"]
    for a, b in ((no, yes), (yes, no)):  # a branch without the GRU, at either level, hands the state back
        np.testing.assert_array_equal(s.run_dict({"x": x[2:4], "a": a, "b": b})["hn"], first)


def test_sd001_missing_state_output_added() -> None:
    path = SAMPLES / "sd001_no_state_output.onnx"
    result = fix(str(path))
    assert [str(e) for e in result.edits] == [
        "SD001 [safe] slot 'h0': returned the final state of the op that reads it: state input 'h0': read by GRU 'gru', "
        "final state not returned -> graph output 'hn' = Y_h, paired with 'h0'"
    ]
    assert _errors(result.model) == []
    assert {p.input: p.output for p in rnnir.load(_strip_meta(result.model)).state_pairs} == {"h0": "hn"}
    correct = onnx.load(str(path))  # by hand: the GRU's Y_h returned as hn
    gru = next(n for n in correct.graph.node if n.op_type == "GRU")
    gru.output.append("hn")
    correct.graph.output.append(helper.make_tensor_value_info("hn", onnx.TensorProto.FLOAT, [1, 1, 4]))
    x = _x_for(str(path), T=6)
    fixed, right = _chunks(StatefulSession(result.model), x, 2), _chunks(StatefulSession(correct), x, 2)
    first = _ort(path).run(["y"], {"x": x[:2], "h0": np.zeros((1, 1, 4), np.float32)})[0]
    np.testing.assert_array_equal(fixed[0]["y"], first)
    for a, b in zip(fixed, right):
        for k in b:
            np.testing.assert_allclose(a[k], b[k], atol=1e-6)


def test_sd007_feeding_the_state_input_is_unsafe_and_works() -> None:
    path = SAMPLES / "sd007_zero_init.onnx"
    assert fix(str(path)).edits == []
    result = fix(str(path), unsafe=True)
    assert [str(e) for e in result.edits] == [
        "SD007 [unsafe] slot 'h0': fed the state input to the op whose final state it gets: GRU 'gru'.initial_h: 'h_zero' -> 'h0'"
    ]
    assert _errors(result.model) == []
    assert not any(n.op_type == "ConstantOfShape" for n in result.model.graph.node)
    correct = onnx.load(str(path))  # by hand: initial_h = h0
    next(n for n in correct.graph.node if n.op_type == "GRU").input[5] = "h0"
    x = _x_for(str(path), T=6)
    for a, b in zip(_chunks(StatefulSession(result.model), x, 2), _chunks(StatefulSession(correct), x, 2)):
        for k in b:
            np.testing.assert_allclose(a[k], b[k], atol=1e-6)


def test_unfixable_findings_say_so() -> None:
    result = fix(str(SAMPLES / "sd010_constant_init.onnx"), unsafe=True)
    assert [str(e) for e in result.skipped] == [
        "SD010 [no fix] SD010 on RNN 'rnn' starts afresh on every call: rnn.initial_h: its initial state is a non-zero "
        "constant initializer 'h_init': a required state input would start from zeros; pass state_defaults=True "
        "(--state-defaults) to keep it as the new input's default"
    ]
    assert result.skipped[0].to_json()["fixable"] is False


def test_state_handed_straight_back_is_replaced_by_the_final_state() -> None:
    path = SAMPLES / "sd001_state_passthrough.onnx"
    result = fix(str(path))
    assert [str(e) for e in result.edits] == [
        "SD001 [safe] slot 'state': returned the final state of the op that reads it: output 'stateN': "
        "Identity 'state_passthrough'(state) -> lstm.Y_h, lstm.Y_c"
    ]
    assert _errors(result.model) == []
    correct = onnx.load(str(path))  # by hand: stateN = Concat(Y_h, Y_c) of the LSTM
    g = correct.graph
    lstm = next(n for n in g.node if n.op_type == "LSTM")
    lstm.output.extend(["Y_h", "Y_c"])
    passthrough = next(n for n in g.node if n.name == "state_passthrough")
    g.node.remove(passthrough)
    g.node.append(helper.make_node("Concat", ["Y_h", "Y_c"], ["stateN"], name="concat_state", axis=0))
    x = _x_for(str(path), T=6)
    fixed, right, broken = (_chunks(StatefulSession(m), x, 2) for m in (result.model, correct, str(path)))
    np.testing.assert_array_equal(fixed[0]["y"], broken[0]["y"])
    for a, b in zip(fixed, right):
        for k in b:
            np.testing.assert_allclose(a[k], b[k], atol=1e-6)
    assert np.abs(broken[2]["y"] - right[2]["y"]).max() > 1e-4


# -- the store structure an export records (rnnir.ir IR text): simulated, never run by onnxruntime ----------

STRUCTURE_CASES = {
    "or001_return_no_wait": ("OR001", "OR001 [safe] slot 'h0': the call's Return waits for the slot store: rnnir.ir return waits: "
                             '["store.y", "store.hn"] -> ["store.y", "store.hn", "store.h0"]'),
    "or002_view_war": ("OR002", "OR002 [safe] slot 'state': the slot is loaded as a copy: rnnir.ir slot 'state' load: "
                       '"view" -> "copy" (a private copy: the store cannot clobber a reader)'),
    "sd004_double_store": ("SD004", "SD004 [safe] slot 'h0': one store per call: rnnir.ir stores into slot 'h0': store.h0, store.h0@ -> store.h0"),
    "al002_output_alias": ("AL002", "AL002 [safe] slot 'h0': the slot has its own storage: rnnir.ir slot 'h0': alias_of 'out:hn' -> "
                           "own storage, store 'fix_st_h0' reads 'value:hn'"),
    "al003_shared_address": ("AL003", "AL003 [safe] slot 'c0': every state instance has its own storage: rnnir.ir slots 'c0', 'h0': "
                             "one storage -> one storage each"),
}


def _simulate(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]], faults) -> list[dict[str, np.ndarray]]:
    """Outputs as the caller holds them after the last call (aliasing shows), every call, under ``faults``."""
    sim = Simulator(rnnir.load(model), faults)
    held = [sim.run(f) for f in feeds]
    return [{k: np.array(v, copy=True) for k, v in out.items()} for out in held]


@pytest.mark.parametrize("name", sorted(STRUCTURE_CASES))
def test_store_structure_sample_repaired(name: str) -> None:
    from rnnir.check.simulate import Faults

    code, text = STRUCTURE_CASES[name]
    original = exported_ir_sample(name)
    assert _errors(original) == [code]
    result = fix(original)
    assert [str(e) for e in result.edits] == [text]
    assert _errors(result.model) == []
    assert result.model.graph == original.graph  # only the metadata changed: onnxruntime runs the same graph
    correct = _strip_meta(original)  # no store structure recorded: the lowering's default fan-out
    x = _x_for(original, T=3)
    feeds = [{"x": x[k : k + 1]} for k in range(3)]
    worst = 0.0
    for faults in (Faults(late=True), Faults(schedule="stores-first")):
        got, want = _simulate(result.model, feeds, faults), _simulate(correct, feeds, faults)
        for a, b in zip(got, want):
            assert set(a) == set(b)
            for k in b:
                np.testing.assert_allclose(a[k], b[k], atol=1e-6, err_msg=f"{name} {faults} {k}")
        broken = _simulate(original, feeds, faults)
        worst = max(worst, max(float(np.abs(a[k] - b[k]).max()) for a, b in zip(broken, want) for k in b))
    # the original's bug shows as a wrong number under one of the faults (two identical stores into one slot do not)
    assert (worst > 1e-3) is (code != "SD004")
