"""Every bundled sample round-trips: load -> export passes the checker, keeps the interface, and three
calls with the state fed back give the original model's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import rnnir

SAMPLES = sorted((Path(__file__).parents[2] / "samples").glob("*.onnx"))


def _feed(sess: ort.InferenceSession, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feed = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else (3 if k == 0 else 1) for k, d in enumerate(i.shape)]
        if i.type == "tensor(float)":
            feed[i.name] = (0.5 * rng.standard_normal(shape)).astype(np.float32)
        elif i.type == "tensor(int64)":
            feed[i.name] = np.full(shape, 16000, np.int64) if i.name == "sr" else np.full(shape, 3, np.int64)
        elif i.type == "tensor(int32)":
            feed[i.name] = np.full(shape, 3, np.int32)  # sequence_lens: the full length
        elif i.type == "tensor(bool)":
            feed[i.name] = np.zeros(shape, bool)
        else:
            pytest.skip(f"no generator for input type {i.type}")
    return feed


def _three_calls(model_bytes: bytes, pairs: dict[str, str | None], seed: int) -> list[dict[str, np.ndarray]]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    state: dict[str, np.ndarray] = {}
    outs = []
    for _ in range(3):
        feed = _feed(sess, rng)
        feed.update({k: v for k, v in state.items() if k in feed and v.dtype == feed[k].dtype and v.shape == feed[k].shape})
        res = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
        outs.append(res)
        state = {i: res[o] for i, o in pairs.items() if o is not None and o in res}
    return outs


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_sample_round_trips(path):
    expected = json.loads(path.with_suffix("").with_suffix(".expected.json").read_text()) if path.with_suffix(".expected.json").exists() else None
    prog = rnnir.load(path)
    exported = rnnir.export(prog)
    onnx.checker.check_model(exported, full_check=True)
    original = onnx.load(str(path))
    assert [i.name for i in exported.graph.input] == [i.name for i in original.graph.input]
    assert [o.name for o in exported.graph.output] == [o.name for o in original.graph.output]
    pairs = {p.input: p.output for p in prog.state_pairs}
    if expected is not None:
        assert pairs == expected["pairs"]
    a = _three_calls(original.SerializeToString(), pairs, seed=1)
    b = _three_calls(exported.SerializeToString(), pairs, seed=1)
    for ca, cb in zip(a, b):
        assert ca.keys() == cb.keys()
        for k in ca:
            np.testing.assert_allclose(ca[k], cb[k], atol=1e-5, rtol=0)
    again = rnnir.load(exported)  # the pairing survives in metadata, the IR shape too
    assert {p.input: p.output for p in again.state_pairs} == pairs
    assert len(again.stores) == len(prog.stores)
