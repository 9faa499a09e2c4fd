"""Bad input gets one documented exception type (rnnir.ModelError) with a clear message, never a raw traceback."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper

import rnnir
from tests.support.onnx_models import const, lstm_h0c0, model, vi


def test_truncated_file_is_a_model_error(tmp_path):
    data = lstm_h0c0().SerializeToString()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 7):
        p = tmp_path / f"cut{cut}.onnx"
        p.write_bytes(data[:cut])
        with pytest.raises(rnnir.ModelError) as ei:
            rnnir.load(p)
        assert str(p) in str(ei.value)


def test_random_bytes_are_a_model_error(tmp_path):
    rng = np.random.default_rng(7)
    for i in range(20):
        p = tmp_path / f"r{i}.onnx"
        p.write_bytes(rng.integers(0, 256, size=int(rng.integers(1, 4000)), dtype=np.uint8).tobytes())
        with pytest.raises(rnnir.ModelError):
            rnnir.load(p)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "e.onnx").write_bytes(b"")
    with pytest.raises(rnnir.ModelError, match="empty"):
        rnnir.load(tmp_path / "e.onnx")
    with pytest.raises(rnnir.ModelError, match="no such file"):
        rnnir.load(tmp_path / "nope.onnx")
    with pytest.raises(rnnir.ModelError, match="folder"):
        rnnir.load(tmp_path)


def test_cycle_is_named():
    nodes = [
        helper.make_node("Relu", ["b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Identity", ["a"], ["y"], name="out"),
    ]
    m = model(nodes, [vi("x", [1])], [vi("y", [1])])
    with pytest.raises(rnnir.ModelError, match="cycle") as ei:
        rnnir.load(m)
    assert "first" in str(ei.value) and "second" in str(ei.value)


def test_unknown_standard_op():
    m = model([helper.make_node("FooBarOp", ["x"], ["y"], name="weird")], [vi("x", [1])], [vi("y", [1])])
    with pytest.raises(rnnir.ModelError, match="unknown op 'FooBarOp'") as ei:
        rnnir.load(m)
    assert "weird" in str(ei.value)


def test_custom_domain_op_is_opaque_not_an_error():
    n = helper.make_node("MyOp", ["x"], ["y"], domain="com.example", name="custom")
    m = model([n], [vi("x", [1])], [vi("y", [1])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    prog = rnnir.load(m)
    assert prog.state_pairs == ()


def test_missing_input_is_named():
    m = model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")], [vi("x", [1])], [vi("y", [1])])
    with pytest.raises(rnnir.ModelError, match="'ghost'"):
        rnnir.load(m)


def test_negative_dim():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [-3, 2])], [vi("y", [2])])
    with pytest.raises(rnnir.ModelError, match="negative"):
        rnnir.load(m)


def test_huge_dims_are_fine_for_lowering():
    # a dim of 2**40 is legal ONNX; nothing is allocated when lowering
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [2**40])], [vi("y", [2**40])])
    assert len(rnnir.load(m).outputs) == 1


def _external_model(tmp_path, location):
    m = lstm_h0c0()
    w = next(t for t in m.graph.initializer if t.name == "W")
    w.data_location = onnx.TensorProto.EXTERNAL
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.external_data.add(key="location", value=location)
    p = tmp_path / "model" / "m.onnx"
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(m.SerializeToString())
    return p


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "/etc/passwd"])
def test_external_data_outside_the_folder_is_refused(tmp_path, location):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 1024)
    before = os.stat(secret).st_atime_ns
    p = _external_model(tmp_path, location)
    with pytest.raises(rnnir.ModelError, match="folder|absolute"):
        rnnir.load(p)
    assert os.stat(secret).st_atime_ns == before


def test_external_data_symlink_escape_is_refused(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * 1024)
    p = _external_model(tmp_path, "link.bin")
    (p.parent / "link.bin").symlink_to(outside)
    with pytest.raises(rnnir.ModelError, match="leaves the model's folder"):
        rnnir.load(p)


def test_external_data_beside_the_model_is_read(tmp_path):
    m = lstm_h0c0()
    d = tmp_path / "ok"
    d.mkdir()
    onnx.save_model(m, str(d / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    prog = rnnir.load(d / "m.onnx")
    exported = rnnir.export(prog)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in exported.graph.initializer)


def test_declared_pair_with_unknown_name():
    with pytest.raises(rnnir.PairingError, match="'nope'"):
        rnnir.load(lstm_h0c0(), pairs={"nope": "hn"})
    with pytest.raises(rnnir.PairingError, match="'hz'"):
        rnnir.load(lstm_h0c0(), pairs={"h0": "hz"})


def test_all_errors_share_a_base_class():
    assert issubclass(rnnir.ModelError, rnnir.RnnirError)
    assert issubclass(rnnir.PairingError, rnnir.RnnirError)


def test_not_a_model_object():
    with pytest.raises(rnnir.ModelError):
        rnnir.load(12345)


def test_constant_unused_shape():
    # a graph whose output is a constant still lowers (nothing carries state)
    m = model([helper.make_node("Constant", [], ["y"], value=const("c", np.ones(2, np.float32)))], [], [vi("y", [2])])
    assert rnnir.load(m).state_pairs == ()
