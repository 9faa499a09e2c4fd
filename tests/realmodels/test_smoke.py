"""Smoke tests on models nobody here wrote: PyTorch exports and silero-vad.

The torch exports are committed (tests/data/torch, see its README.md); the
silero-vad files come from the PyPI wheel through ``realmodels.silero_vad_dir``
and these tests are skipped, with the reason, when it cannot be downloaded.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.support import realmodels as rm  # noqa: E402

pytestmark = pytest.mark.realmodel

EXPORTS = ("ts", "dynamo")
TOL = 1e-5


def _session(path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # silence "Removing initializer" warnings
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _torch_path(name, kind) -> pathlib.Path:
    return rm.torch_models_dir() / f"{name}.{kind}.onnx"


# ---------------------------------------------------------------- torch exports


@pytest.mark.parametrize("kind", EXPORTS)
@pytest.mark.parametrize("name", rm.TORCH_MODELS)
def test_torch_model_passes_full_check(name, kind):
    path = _torch_path(name, kind)
    onnx.checker.check_model(str(path), full_check=True)


@pytest.mark.parametrize("name", rm.TORCH_MODELS)
def test_dynamo_export_keeps_weights_in_external_data(name):
    path = _torch_path(name, "dynamo")
    model = onnx.load(str(path), load_external_data=False)
    locations = {e.value for init in model.graph.initializer for e in init.external_data
                 if e.key == "location"}
    assert locations == {path.name + ".data"}
    assert (path.parent / (path.name + ".data")).is_file()


@pytest.mark.parametrize("kind", EXPORTS)
@pytest.mark.parametrize("name", rm.TORCH_MODELS)
def test_torch_names_and_pairs(name, kind):
    calls = rm.torch_calls(name)
    assert {str(i): str(o) for i, o in calls["pairs"]} == rm.TORCH_STATE_PAIRS[name]
    pairs = rm.TORCH_STATE_PAIRS[name]
    sess = _session(_torch_path(name, kind))
    ins = [i.name for i in sess.get_inputs()]
    outs = [o.name for o in sess.get_outputs()]
    assert ins == ["x", *pairs]
    assert outs == ["y", *pairs.values()]


@pytest.mark.parametrize("kind", EXPORTS)
@pytest.mark.parametrize("name", rm.TORCH_MODELS)
def test_torch_three_calls_with_state_fed_back(name, kind):
    """onnxruntime, state carried by this test, reproduces PyTorch's calls."""
    calls = rm.torch_calls(name)
    pairs = rm.TORCH_STATE_PAIRS[name]
    sess = _session(_torch_path(name, kind))
    out_names = [o.name for o in sess.get_outputs()]
    state = {i: calls[f"call0_in_{i}"] for i in pairs}
    for k in range(3):
        feed = dict(state, x=calls[f"call{k}_in_x"])
        got = dict(zip(out_names, sess.run(None, feed)))
        for out, value in got.items():
            np.testing.assert_allclose(value, calls[f"call{k}_out_{out}"], rtol=0, atol=TOL,
                                       err_msg=f"{name}.{kind} call {k} output {out}")
        state = {i: got[o] for i, o in pairs.items()}


@pytest.mark.parametrize("name", rm.TORCH_MODELS)
def test_torch_whole_sequence_vs_chunks(name):
    """One T=12 call (TorchScript export: dynamic T) against the chunked oracle.

    Forward models give the same result chunked with persistence; the
    bidirectional one does not (its reverse direction needs the future), which
    is why persisting its state across calls is suspicious; the stateless one
    does not either (every chunk restarts from zeros).
    """
    calls = rm.torch_calls(name)
    sess = _session(_torch_path(name, "ts"))
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(None, {i.name: calls[f"full_in_{i.name}"]
                                          for i in sess.get_inputs()})))
    for out, value in got.items():
        np.testing.assert_allclose(value, calls[f"full_out_{out}"], rtol=0, atol=TOL)
    tax = int(calls["time_axis"])
    chunked = np.concatenate([calls[f"call{k}_out_y"] for k in range(3)], axis=tax)
    same = np.allclose(chunked, got["y"], rtol=0, atol=TOL)
    assert same == (name not in ("bilstm_stream", "gru_encoder_stateless"))
    for o in rm.TORCH_STATE_PAIRS[name].values():
        final_same = np.allclose(calls[f"call2_out_{o}"], got[o], rtol=0, atol=TOL)
        assert final_same == (name != "bilstm_stream"), (name, o)


def test_torch_data_stays_small():
    folder = rm.torch_models_dir()
    total = sum(p.stat().st_size for p in folder.iterdir())
    assert total < 2 * 1024 * 1024
    readme = (folder / "README.md").read_text()
    for p in folder.iterdir():
        if p.name != "README.md":
            assert f"`{p.name}`" in readme, p.name


# ---------------------------------------------------------------- silero-vad


@pytest.fixture(scope="module")
def silero_dir():
    try:
        return rm.silero_vad_dir()
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"silero-vad {rm.SILERO_VERSION} wheel unavailable: {exc}")


def _walk(graph, path=""):
    for node in graph.node:
        yield path, node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                sub = f"{node.name}.{attr.name}"
                yield from _walk(attr.g, f"{path}/{sub}" if path else sub)


def test_silero_files_fetched(silero_dir):
    assert sorted(p.name for p in silero_dir.glob("*.onnx")) == sorted(rm.SILERO_FILES)
    for name in rm.SILERO_FILES:
        assert rm._sha256(silero_dir / name) == rm.SILERO_FILE_SHA256[name]
    assert rm.silero_vad_dir() == silero_dir  # idempotent, served from the cache


@pytest.mark.parametrize("name", rm.SILERO_FILES)
def test_silero_one_call(silero_dir, name):
    sess = _session(silero_dir / name)
    assert [i.name for i in sess.get_inputs()] == list(rm.SILERO_INPUTS[name])
    feed = rm.silero_feed(name, frames=3)
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
    for i, o in rm.SILERO_STATE_PAIRS[name].items():
        assert got[o].shape == feed[i].shape and got[o].dtype == feed[i].dtype
        assert np.abs(got[o]).max() > 0
    probs = got["speech_probs" if "sequence" in name else "output"]
    assert np.all((probs >= 0) & (probs <= 1))


@pytest.mark.parametrize("name", rm.SILERO_FILES)
def test_silero_ground_truth_matches_graph(silero_dir, name):
    model = onnx.load(str(silero_dir / name))
    graph_ins = [i.name for i in model.graph.input]
    graph_outs = [o.name for o in model.graph.output]
    for i, o in rm.SILERO_STATE_PAIRS[name].items():
        assert i in graph_ins and o in graph_outs
    nodes = {(path, n.name): n for path, n in _walk(model.graph)}
    lstms = {key for key, n in nodes.items() if n.op_type == "LSTM"}
    sites = rm.SILERO_RECURRENT_SITES[name]
    if name == "silero_vad_op18_ifless.onnx":
        assert not lstms
        for site in sites:
            gemm = site["node"].split()[0]
            node = nodes[(site["branch"], gemm)]
            assert node.op_type == "Gemm" and "weight_hh" in node.input[1]
    else:
        assert lstms == {(s["branch"], s["node"]) for s in sites}
        for s in sites:
            node = nodes[(s["branch"], s["node"])]
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            assert attrs["hidden_size"] == s["hidden_size"]
            assert attrs.get("direction", b"forward").decode() == s["direction"]


def _packed_vs_sequence(silero_dir, name, state):
    """Run `name` for 3 one-frame calls and the h/c sequence model over 3 frames."""
    frames = rm.silero_feed("silero_vad_16k_sequence.onnx", frames=3, seed=7)["input"]
    sess = _session(silero_dir / name)
    outs = [o.name for o in sess.get_outputs()]
    probs, cur = [], state
    for k in range(3):
        feed = rm.silero_feed(name)
        feed.update(input=frames[k:k + 1], state=cur)
        got = dict(zip(outs, sess.run(None, feed)))
        probs.append(float(got["output"].ravel()[0]))
        cur = got["stateN"]
    seq = _session(silero_dir / "silero_vad_16k_sequence.onnx")
    p, hn, cn = seq.run(["speech_probs", "hn", "cn"],
                        {"input": frames, "h": state[0:1], "c": state[1:2]})
    return np.array(probs), cur, p, hn, cn


@pytest.mark.parametrize("name", [n for n in rm.SILERO_FILES
                                  if rm.SILERO_STATE_PAIRS[n] == {"state": "stateN"}])
def test_silero_packed_state_slices(silero_dir, name):
    """state[0] is h and state[1] is c: checked numerically against the model
    whose h and c are separate inputs, with a non-zero starting state; 3 calls
    with stateN fed back equal one 3-frame sequence call."""
    rng = np.random.default_rng(3)
    state = (0.3 * rng.standard_normal((2, 1, 128))).astype(np.float32)
    probs, stateN, p, hn, cn = _packed_vs_sequence(silero_dir, name, state)
    if name == "silero_vad_half.onnx":  # other weights: only the layout is shared
        assert stateN.shape == (2, 1, 128)
        return
    assert rm.SILERO_SLICES[name]["state[0]"] == "initial_h"
    np.testing.assert_allclose(probs, p, rtol=0, atol=TOL)
    np.testing.assert_allclose(stateN[0:1], hn, rtol=0, atol=TOL)  # stateN[0] = Y_h
    np.testing.assert_allclose(stateN[1:2], cn, rtol=0, atol=TOL)  # stateN[1] = Y_c
    # and the swap is observable: feeding c as h changes the result
    swapped, *_ = _packed_vs_sequence(silero_dir, name, state[::-1].copy())
    assert np.abs(swapped - probs).max() > 1e-4
