"""The sample models of ``samples/``: valid, runnable, numerically right, and lowered and diagnosed as expected.

Each ``samples/<name>.onnx`` comes with ``<name>.expected.json`` (see
``samples/make_samples.py``).  The evidence here does not depend on rnnir's
own numeric reference: the recurrences are checked against onnxruntime, the
hand-checked numbers of docs/design.md and a small numpy LSTM / GRU written in this
file from the ONNX operator definitions.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import rnnir  # noqa: E402
import rnnir.passes  # noqa: E402  (the façade imports its submodules lazily: named here, this file collects first too)

ONNX_NAMES = sorted(p.name[: -len(".onnx")] for p in SAMPLES.glob("*.onnx"))
IR_NAMES = sorted(p.name[: -len(".rnnir")] for p in SAMPLES.glob("*.rnnir"))  # store structures ONNX cannot express
NAMES = sorted(ONNX_NAMES + IR_NAMES)


def _path(name: str) -> Path:
    """The sample's file: ``.rnnir`` IR text or an ``.onnx`` model."""
    return SAMPLES / f"{name}.rnnir" if name in IR_NAMES else SAMPLES / f"{name}.onnx"
RULES = tuple(rnnir.passes.RULES)  # the catalogue: a new rule needs a broken sample or a fixture folder (tests/rules/<CODE>/)


def _expected(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.expected.json").read_text(encoding="utf-8"))


def _session(name: str) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(SAMPLES / f"{name}.onnx"), opts, providers=["CPUExecutionProvider"])


def _make_samples_module():
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


_NP = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def _generic_feeds(sess: ort.InferenceSession, T: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [T if not isinstance(d, int) else d for d in i.shape]
        dt = _NP[i.type]
        if i.name == "sr":
            feeds[i.name] = np.array(16000, np.int64)
        elif i.name == "seq_lens":
            feeds[i.name] = np.full(shape, T, np.int32)
        elif dt is np.bool_:
            feeds[i.name] = np.zeros(shape, np.bool_)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
    return feeds


# ------------------------------------------------------------------------------ numpy oracles


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_lstm(x, W, R, B, h, c, seq_lens=None):
    """ONNX LSTM, forward, one direction, default activations; gate order i, o, f, c. Returns (Y, h, c)."""
    W, R, B = W[0], R[0], B[0]
    H = R.shape[1]
    h, c = h[0].astype(np.float64), c[0].astype(np.float64)
    ys = []
    for t in range(x.shape[0]):
        g = x[t] @ W.T + h @ R.T + B[: 4 * H] + B[4 * H :]
        i, o, f, cc = _sig(g[:, :H]), _sig(g[:, H : 2 * H]), _sig(g[:, 2 * H : 3 * H]), np.tanh(g[:, 3 * H :])
        c_new = f * c + i * cc
        h_new = o * np.tanh(c_new)
        live = np.ones((x.shape[1], 1), bool) if seq_lens is None else (t < np.asarray(seq_lens))[:, None]
        c, h = np.where(live, c_new, c), np.where(live, h_new, h)
        ys.append(np.where(live, h, 0.0))
    return np.stack(ys)[:, None], h[None], c[None]


def np_gru(x, W, R, B, h, seq_lens=None, linear_before_reset=0):
    """ONNX GRU, forward, one direction, default activations; gate order z, r, h. Returns (Y, h)."""
    W, R, B = W[0], R[0], B[0]
    H = R.shape[1]
    Wb, Rb = B[: 3 * H], B[3 * H :]
    h = h[0].astype(np.float64)
    ys = []
    for t in range(x.shape[0]):
        gx = x[t] @ W.T + Wb
        z = _sig(gx[:, :H] + h @ R[:H].T + Rb[:H])
        r = _sig(gx[:, H : 2 * H] + h @ R[H : 2 * H].T + Rb[H : 2 * H])
        if linear_before_reset:
            n = np.tanh(gx[:, 2 * H :] + r * (h @ R[2 * H :].T + Rb[2 * H :]))
        else:
            n = np.tanh(gx[:, 2 * H :] + (r * h) @ R[2 * H :].T + Rb[2 * H :])
        h_new = (1 - z) * n + z * h
        live = np.ones((x.shape[1], 1), bool) if seq_lens is None else (t < np.asarray(seq_lens))[:, None]
        h = np.where(live, h_new, h)
        ys.append(np.where(live, h, 0.0))
    return np.stack(ys)[:, None], h[None]


def _inits(name: str) -> dict[str, np.ndarray]:
    m = onnx.load(str(SAMPLES / f"{name}.onnx"))
    return {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}


def _chunks(rng, n_calls, T, B, I):
    return [rng.standard_normal((T, B, I)).astype(np.float32) for _ in range(n_calls)]


# ------------------------------------------------------------------------------ (a) valid and runnable


def test_every_sample_has_its_expectation_and_generator_entry():
    exp = sorted(p.name[: -len(".expected.json")] for p in SAMPLES.glob("*.expected.json"))
    assert NAMES and NAMES == exp
    mod = _make_samples_module()
    assert sorted(f.__name__ for f in mod.SAMPLES) == NAMES


def test_generator_is_deterministic_and_committed_files_are_current(tmp_path):
    mod = _make_samples_module()
    mod.write_all(tmp_path)
    for name in NAMES:
        for suffix in (_path(name).suffix, ".expected.json"):
            fresh = (tmp_path / f"{name}{suffix}").read_bytes()
            assert fresh == (SAMPLES / f"{name}{suffix}").read_bytes(), f"{name}{suffix} is stale: rerun python samples/make_samples.py"
    assert (tmp_path / "README.md").read_bytes() == (SAMPLES / "README.md").read_bytes(), "samples/README.md is stale"


@pytest.mark.parametrize("name", IR_NAMES)
def test_ir_sample_is_a_fixed_point_of_parse_and_print(name):
    from rnnir.ir.text import parse_program, print_program

    text = _path(name).read_text(encoding="utf-8")
    assert print_program(parse_program(text)) + "\n" == text


def test_ir_samples_exist_and_have_no_onnx_twin():
    """The store structures plain ONNX cannot express are IR text, not ONNX plus a metadata side channel."""
    assert {"al001_chain", "al002_output_alias", "al003_shared_address", "or001_return_no_wait", "or002_view_war", "sd004_double_store"} <= set(IR_NAMES)
    assert not set(IR_NAMES) & set(ONNX_NAMES)
    for name in ONNX_NAMES:
        assert not any(p.key in ("rnnir.program", "rnnir.ir") for p in onnx.load(str(_path(name))).metadata_props), name


@pytest.mark.parametrize("name", ONNX_NAMES)
def test_sample_passes_checker_and_runs_in_onnxruntime(name):
    path = SAMPLES / f"{name}.onnx"
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    assert model.ir_version == 8
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    sess = _session(name)
    outs = sess.run(None, _generic_feeds(sess))
    assert all(np.all(np.isfinite(np.asarray(o, np.float64))) for o in outs)


@pytest.mark.parametrize("name", NAMES)
def test_expectation_is_well_formed(name):
    exp = _expected(name)
    assert set(exp) >= {"description", "pairs", "findings", "correct"}
    assert exp["description"]
    sev = [f["severity"] for f in exp["findings"]]
    assert set(sev) <= {"error", "warning", "info"}
    assert all(f["code"] in RULES for f in exp["findings"])
    # correct: no error or warning expected -- unless an info is all rnnir can say about a real bug (SD009)
    assert exp["correct"] == (not any(s in ("error", "warning") for s in sev)) or (not exp["correct"] and "SD009" in {f["code"] for f in exp["findings"]})
    prefix = name.split("_")[0].upper()
    if prefix in RULES:  # a broken sample is named after the rule it breaks
        assert not exp["correct"]
        assert prefix in {f["code"] for f in exp["findings"]}
    else:
        assert exp["correct"], f"{name}: a sample not named after a rule must be correct"


def test_every_rule_has_a_broken_sample():
    covered = {f["code"] for n in NAMES for f in _expected(n)["findings"]}
    fixtures = {d.name for d in (ROOT / "tests" / "rules").iterdir() if any(d.glob("bad*.rnnir"))}
    assert covered | fixtures >= set(RULES)


# ------------------------------------------------------------------------------ (b) the numbers


def _scalar_calls(name: str, xs, persist: bool) -> list[float]:
    sess = _session(name)
    h = np.zeros((1, 1, 1), np.float32)
    out = []
    for x in xs:
        y, hn = sess.run(["y", "hn"], {"x": np.full((1, 1, 1), x, np.float32), "h0": h})
        assert float(y[-1].ravel()[0]) == float(hn.ravel()[0])
        out.append(float(hn.ravel()[0]))
        h = hn if persist else np.zeros((1, 1, 1), np.float32)
    return out


def test_half_decay_reference_numbers():
    # docs/design.md: h_t = 0.5 h_{t-1} + x_t, x = [1, 0, 2], h0 = 0 -> 1, 0.5, 2.25
    assert _scalar_calls("rnn_half_decay", [1, 0, 2], persist=True) == [1.0, 0.5, 2.25]
    assert _scalar_calls("rnn_half_decay", [1, 0, 2], persist=False) == [1.0, 0.0, 2.0]
    sess = _session("rnn_half_decay")
    y, hn = sess.run(None, {"x": np.array([1, 0, 2], np.float32).reshape(3, 1, 1), "h0": np.zeros((1, 1, 1), np.float32)})
    assert y.ravel().tolist() == [1.0, 0.5, 2.25] and hn.ravel().tolist() == [2.25]


def test_linear_fanout_persistence_and_reinit_diverge_from_call_2():
    xs = [1, 1, 1, 1]
    persist = _scalar_calls("rnn_linear_fanout", xs, persist=True)
    reinit = _scalar_calls("rnn_linear_fanout", xs, persist=False)
    assert persist == [1.0, 3.0, 7.0, 15.0]  # h = 2h + 1
    assert reinit == [1.0, 1.0, 1.0, 1.0]
    first_diff = next(k for k, (a, b) in enumerate(zip(persist, reinit), start=1) if a != b)
    assert first_diff == 2


@pytest.mark.parametrize("sr", [16000, 8000])
def test_lstm_packed_if_matches_numpy_lstm_over_three_calls(sr):
    w = _inits("lstm_packed_if")
    stem = "lstm16k" if sr == 16000 else "lstm8k"
    sess = _session("lstm_packed_if")
    rng = np.random.default_rng(7)
    state = rng.standard_normal((2, 1, 4)).astype(np.float32)
    h, c = state[:1].astype(np.float64), state[1:].astype(np.float64)
    for x in _chunks(rng, 3, 4, 1, 2):
        out, state = sess.run(["output", "stateN"], {"x": x, "state": state, "sr": np.array(sr, np.int64)})
        Y, h, c = np_lstm(x, w[f"{stem}_W"], w[f"{stem}_R"], w[f"{stem}_B"], h, c)
        np.testing.assert_allclose(out, Y[:, 0], atol=1e-5)
        np.testing.assert_allclose(state[0], h[0], atol=1e-5)
        np.testing.assert_allclose(state[1], c[0], atol=1e-5)


def test_lstm_unrolled_cell_is_an_lstm_step():
    w = _inits("lstm_unrolled_cell")
    H = 3
    # the cell's gates are i, f, g, o columns of Wx / Wh; ONNX LSTM rows are i, o, f, c
    order = [0, 3, 1, 2]
    W = np.concatenate([w["Wx"].T[k * H : (k + 1) * H] for k in order])[None]
    R = np.concatenate([w["Wh"].T[k * H : (k + 1) * H] for k in order])[None]
    bias = np.concatenate([w["bias"][k * H : (k + 1) * H] for k in order])
    B = np.concatenate([bias, np.zeros_like(bias)])[None]
    sess = _session("lstm_unrolled_cell")
    rng = np.random.default_rng(8)
    state = np.zeros((2, 1, H), np.float32)
    h, c = np.zeros((1, 1, H)), np.zeros((1, 1, H))
    for _ in range(3):
        x = rng.standard_normal((1, 2)).astype(np.float32)
        y, state = sess.run(["y", "stateN"], {"x": x, "state": state})
        _, h, c = np_lstm(x[None], W, R, B, h, c)
        np.testing.assert_allclose(y, h[0], atol=1e-5)
        np.testing.assert_allclose(state, np.concatenate([h, c]), atol=1e-5)


def test_gru_stacked_2layer_matches_numpy_over_three_calls():
    w = _inits("gru_stacked_2layer")
    sess = _session("gru_stacked_2layer")
    rng = np.random.default_rng(9)
    state = rng.standard_normal((2, 1, 4)).astype(np.float32)
    h = state.astype(np.float64)
    for x in _chunks(rng, 3, 3, 1, 3):
        y, state = sess.run(["y", "hn"], {"x": x, "h0": state})
        Y0, h0 = np_gru(x, w["gru_l0_W"], w["gru_l0_R"], w["gru_l0_B"], h[:1])
        Y1, h1 = np_gru(Y0[:, 0], w["gru_l1_W"], w["gru_l1_R"], w["gru_l1_B"], h[1:])
        h = np.concatenate([h0, h1])
        np.testing.assert_allclose(y, Y1[:, 0], atol=1e-5)
        np.testing.assert_allclose(state, h, atol=1e-5)


def test_gru_fanout_uses_linear_before_reset():
    w = _inits("gru_fanout")
    rng = np.random.default_rng(10)
    x, h0 = rng.standard_normal((3, 1, 3)).astype(np.float32), rng.standard_normal((1, 1, 4)).astype(np.float32)
    y, hn = _session("gru_fanout").run(None, {"x": x, "h0": h0})
    Y, h = np_gru(x, w["gru_W"], w["gru_R"], w["gru_B"], h0, linear_before_reset=1)
    np.testing.assert_allclose(hn, h, atol=1e-5)
    np.testing.assert_allclose(y, Y, atol=1e-5)


def test_gru_reset_branch_restarts_only_when_asked():
    w = _inits("gru_reset_branch")
    sess = _session("gru_reset_branch")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    state = rng.standard_normal((1, 1, 4)).astype(np.float32)
    _, from_state = np_gru(x, w["gru_W"], w["gru_R"], w["gru_B"], state)
    _, from_zero = np_gru(x, w["gru_W"], w["gru_R"], w["gru_B"], np.zeros_like(state))
    _, kept = sess.run(None, {"x": x, "state": state, "reset": np.array(False)})
    _, reset = sess.run(None, {"x": x, "state": state, "reset": np.array(True)})
    np.testing.assert_allclose(kept, from_state, atol=1e-5)
    np.testing.assert_allclose(reset, from_zero, atol=1e-5)


# The numeric bugs really show across calls: run the broken model with its state
# fed back and compare with the correct recurrence.


def _broken_lstm_packed(name: str, calls: int = 3):
    w = _inits(name)
    sess = _session(name)
    rng = np.random.default_rng(12)
    state = rng.standard_normal((2, 1, 3)).astype(np.float32)
    h, c = state[:1].astype(np.float64), state[1:].astype(np.float64)
    got, want = [], []
    for x in _chunks(rng, calls, 2, 1, 2):
        state = sess.run(["stateN"], {"x": x, "state": state})[0]
        _, h, c = np_lstm(x, w["lstm_W"], w["lstm_R"], w["lstm_B"], h, c)
        got.append(state.copy())
        want.append(np.concatenate([h, c]))
    return got, want


def test_sd001_passthrough_never_advances_the_state():
    got, want = _broken_lstm_packed("sd001_state_passthrough")
    assert all(np.array_equal(g, got[0]) for g in got)
    assert not np.allclose(got[0], want[0], atol=1e-3)


def test_sd002_hc_swap_writes_c_into_the_h_slice():
    w = _inits("sd002_hc_swap")
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 1, 2)).astype(np.float32)
    state = rng.standard_normal((2, 1, 3)).astype(np.float32)
    (stateN,) = _session("sd002_hc_swap").run(["stateN"], {"x": x, "state": state})
    _, h, c = np_lstm(x, w["lstm_W"], w["lstm_R"], w["lstm_B"], state[:1], state[1:])
    np.testing.assert_allclose(stateN, np.concatenate([c, h]), atol=1e-5)


def test_sd003_first_step_returns_y0_not_the_final_state():
    w = _inits("sd003_first_step")
    rng = np.random.default_rng(14)
    x = rng.standard_normal((3, 1, 3)).astype(np.float32)
    h0 = rng.standard_normal((1, 1, 4)).astype(np.float32)
    (hn,) = _session("sd003_first_step").run(["hn"], {"x": x, "h0": h0})
    Y, h = np_gru(x, w["gru_W"], w["gru_R"], w["gru_B"], h0)
    np.testing.assert_allclose(hn, Y[0], atol=1e-5)
    assert not np.allclose(hn, h, atol=1e-3)


def test_sd007_zero_init_ignores_the_callers_state():
    sess = _session("sd007_zero_init")
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    a = sess.run(["hn"], {"x": x, "h0": rng.standard_normal((1, 1, 4)).astype(np.float32)})[0]
    b = sess.run(["hn"], {"x": x, "h0": np.zeros((1, 1, 4), np.float32)})[0]
    np.testing.assert_array_equal(a, b)


def test_sd008_last_step_is_padding_for_a_short_sequence():
    w = _inits("sd008_last_step_seqlens")
    rng = np.random.default_rng(16)
    x = rng.standard_normal((3, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((1, 2, 4)).astype(np.float32)
    lens = np.array([3, 1], np.int32)
    (hn,) = _session("sd008_last_step_seqlens").run(["hn"], {"x": x, "h0": h0, "seq_lens": lens})
    _, h = np_gru(x, w["gru_W"], w["gru_R"], w["gru_B"], h0, seq_lens=lens)
    np.testing.assert_allclose(hn[:, 0], h[:, 0], atol=1e-5)  # full-length entry: last step is the final state
    np.testing.assert_array_equal(hn[:, 1], 0.0)  # short entry: Y past its length is zero
    assert not np.allclose(h[:, 1], 0.0)


def test_sd005_returns_float16_state():
    sess = _session("sd005_fp16_state")
    outs = {o.name: o.type for o in sess.get_outputs()}
    ins = {i.name: i.type for i in sess.get_inputs()}
    assert ins["h0"] == "tensor(float)" and outs["hn"] == "tensor(float16)"


# ------------------------------------------------------------------------------ (c) lowering finds the pairs


@pytest.mark.parametrize("name", NAMES)
def test_load_finds_the_expected_pairs(name):
    prog = rnnir.load(str(_path(name)))
    got = {p.input: p.output for p in prog.state_pairs}
    assert got == _expected(name)["pairs"]
    assert {s.name for s in prog.slots} == set(got)


def test_constant_entry_policy_makes_a_slot_of_the_constant_initial_state():
    exp = _expected("sd010_constant_init")["entry_constant"]
    prog = rnnir.load(str(SAMPLES / "sd010_constant_init.onnx"), entry="constant")
    assert {p.input: p.output for p in prog.state_pairs} == exp["pairs"]
    slot = prog.slot("h_init")
    assert slot.init.kind == "constant"
    np.testing.assert_array_equal(slot.init.value, np.full((1, 1, 3), 0.25, np.float32))


def test_constant_entry_load_precedes_its_reader_in_the_graph():
    import networkx as nx

    prog = rnnir.load(str(SAMPLES / "sd010_constant_init.onnx"), entry="constant")
    (load,) = prog.loads
    (rec,) = prog.recurrents
    assert rec.port("initial_h") is load.outputs[0]
    assert nx.has_path(prog.graph.to_networkx(), load.id, rec.id)


# ------------------------------------------------------------------------------ (d) the findings


def _passes():
    from rnnir import passes  # landed: a missing or broken passes package is a failure here, not a skip

    return passes


def _codes(diags) -> collections.Counter:
    return collections.Counter((d.code, d.severity.value) for d in diags)


@pytest.mark.parametrize("name", NAMES)
def test_passes_report_exactly_the_expected_findings(name):
    passes = _passes()
    diags = passes.run(rnnir.load(str(_path(name))))
    want = collections.Counter((f["code"], f["severity"]) for f in _expected(name)["findings"])
    assert _codes(diags) == want, "\n".join(f"{d.code} {d.severity.value}: {d.message}" for d in diags)


def test_passes_on_constant_entry():
    passes = _passes()
    exp = _expected("sd010_constant_init")["entry_constant"]
    diags = passes.run(rnnir.load(str(SAMPLES / "sd010_constant_init.onnx"), entry="constant"))
    want = collections.Counter((f["code"], f["severity"]) for f in exp["findings"])
    assert _codes(diags) == want, "\n".join(f"{d.code} {d.severity.value}: {d.message}" for d in diags)
