"""`rnnir run` on models that leave input dims open: --shape and --value fill them in."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from rnnir.cli import main
from tests.support.onnx_models import const, model, vi


def _open_dims_model(tmp_path):
    # h_out = tanh(h @ R + x @ W) * gain; x declares [?, 4], gain is a scalar input the caller sets
    H = 4
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["h", "R"], ["hr"]),
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["hr", "xw"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["t"]),
        helper.make_node("Mul", ["t", "gain"], ["h_out"]),
        helper.make_node("ReduceSum", ["h_out"], ["score"], keepdims=0),
    ]
    m = model(
        nodes,
        [vi("x", [None, H]), vi("h", [1, H]), vi("gain", [], TensorProto.FLOAT)],
        [vi("score", []), vi("h_out", [1, H])],
        [const("R", 0.5 * rng.standard_normal((H, H)).astype(np.float32)), const("W", rng.standard_normal((H, H)).astype(np.float32))],
    )
    p = tmp_path / "open.onnx"
    p.write_bytes(m.SerializeToString())
    return p


def test_open_dims_without_shape_is_a_clear_error(tmp_path, capsys):
    assert main(["run", str(_open_dims_model(tmp_path)), "--calls", "5"]) == 2
    err = capsys.readouterr().err
    assert "--shape" in err and "'x'" in err and "Traceback" not in err


def test_shape_and_value_make_the_run_possible(tmp_path, capsys):
    code = main(["run", str(_open_dims_model(tmp_path)), "--calls", "6", "--shape", "x=1,4", "--value", "gain=1.0", "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert '"status": "pass"' in out


def test_bad_shape_flag_is_a_usage_error(tmp_path, capsys):
    assert main(["run", str(_open_dims_model(tmp_path)), "--shape", "x=1,-4"]) == 2
    assert main(["run", str(_open_dims_model(tmp_path)), "--value", "gain"]) == 2
