"""Which constants a state-path node reads keep their data in the IR (rnnir/lower/tensors.py). One test in its own
file on purpose: every lowering reads constants, and tools/mutate.py gives such a line only the fastest covering
test of each file."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

import rnnir
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def _offset_gru():
    nodes = [
        helper.make_node("Add", ["h0", "offsets"], ["h_in"]),
        helper.make_node("GRU", ["x", "W", "R", "", "", "h_in"], ["Y", "Yh"], hidden_size=H, name="gru"),
        helper.make_node("Identity", ["Yh"], ["hn"]),
    ]
    offsets = numpy_helper.from_array(np.arange(H, dtype=np.float32).reshape(1, 1, H), "offsets")
    return model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], [*weights("GRU"), offsets])


def test_a_constant_kept_in_external_data_or_malformed_keeps_its_type_but_not_its_data(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_offset_gru(), path, save_as_external_data=True, all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    ext = rnnir.load(path).externals["offsets"]
    assert ext.type.shape == (1, 1, H) and ext.type.dtype == "float32"
    assert not ext.has_const and ext.const is None  # its bytes are not read
    inline = rnnir.load(_offset_gru()).externals["offsets"]  # near-miss: the same constant inside the model
    assert inline.has_const and inline.const.tolist() == [[[0.0, 1.0, 2.0, 3.0]]]
    short = _offset_gru()
    offsets = short.graph.initializer[-1]
    offsets.ClearField("raw_data")
    offsets.float_data.extend([0.0, 1.0, 2.0])  # a value short of the dims
    malformed = rnnir.load(short).externals["offsets"]
    assert malformed.type.shape == (1, 1, H) and not malformed.has_const  # a constant numpy cannot read is not used
