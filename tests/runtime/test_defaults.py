"""A state input with a same-name initializer (its default, as ``rnnir fix --state-defaults`` writes): onnxruntime
leaves it out of get_inputs() and refuses numpy arrays bound to it, so the runtime binds an OrtValue."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from rnnir.check.multicall.check import check_multicall
from rnnir.runtime import StatefulSession
from tests.support.onnx_models import lstm_h0c0

H, I = 4, 3


def _with_defaults():
    m = lstm_h0c0(I=I, H=H)
    for name in ("h0", "c0"):
        m.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 1, H), np.float32), name))
    m.ir_version = 8
    return m


@pytest.mark.parametrize("native", [True, False])
def test_state_inputs_with_defaults_stream_and_take_a_set_state(native):
    m = _with_defaults()
    plain = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [i.name for i in plain.get_inputs()] == ["x"]  # onnxruntime hides them: the case under test
    x = np.random.default_rng(1).standard_normal((3, 1, I)).astype(np.float32)
    s = StatefulSession(m, native_binding=native)
    first = s.run_dict({"x": x[:1]})
    s.state = {"h0": first["hn"], "c0": first["cn"]}  # bound as arrays: the path that failed
    second = s.run_dict({"x": x[1:2]})
    # oracle: onnxruntime fed the first call's final state explicitly
    want = plain.run(["hn"], {"x": x[1:2], "h0": first["hn"], "c0": first["cn"]})[0]
    np.testing.assert_allclose(second["hn"], want, atol=1e-6)


def test_multicall_check_runs_its_broken_variants_on_such_inputs():
    report = check_multicall(_with_defaults(), chunk_sizes=[1, 2])
    assert report.status == "pass" and report.first_divergence["reinit"] is not None
