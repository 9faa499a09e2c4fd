"""``tensor_floats`` reads float32/float64 constants without numpy (the lint-speed change): on every encoding it
accepts, its values are onnx.numpy_helper's own; on every one it cannot read exactly it gives None."""

from __future__ import annotations

import types

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from rnnir.ir.nodes import PendingConst
from rnnir.lower.tensors import small_const
from rnnir.onnxio import proto
from rnnir.onnxio.proto import tensor_floats

VALUES = [0.5, -1.25, 3.0e-8, 1.0e20, 0.0, -0.0]


def _typed(dtype: int, values: list[float], *, raw: bool, dims: tuple[int, ...] | None = None) -> TensorProto:
    shape = dims if dims is not None else (2, len(values) // 2)
    if raw:
        arr = np.asarray(values, dtype=np.float32 if dtype == TensorProto.FLOAT else np.float64).reshape(shape)
        return numpy_helper.from_array(arr, "t")  # raw_data, little-endian
    return onnx.helper.make_tensor("t", dtype, shape, values)  # float_data / double_data


def test_every_float_encoding_reads_as_numpy_helper_reads_it():
    for dtype, field in ((TensorProto.FLOAT, "float_data"), (TensorProto.DOUBLE, "double_data")):
        for raw in (True, False):
            t = _typed(dtype, VALUES, raw=raw)
            assert t.HasField("raw_data") is raw and (len(getattr(t, field)) == 0) is raw
            expected = numpy_helper.to_array(t).ravel().tolist()
            got = tensor_floats(t)
            assert got == expected, (dtype, raw)
            # signs of zero and the float32 rounding survive too (1e20 and 3e-8 are not float32 numbers)
            assert [np.copysign(1.0, v) for v in got] == [np.copysign(1.0, v) for v in expected]
            # lowering's pending constant hands the same values out, and no integers
            pending = small_const(t)
            assert isinstance(pending, PendingConst)
            assert pending.floats() == expected and pending.ints() is None
            assert np.array_equal(pending.array(), numpy_helper.to_array(t))


def test_integer_and_other_element_types_give_none():
    for dtype, values in ((TensorProto.INT64, [1, 2]), (TensorProto.INT32, [1, 2]), (TensorProto.UINT64, [1, 2]),
                          (TensorProto.FLOAT16, [1.0, 2.0]), (TensorProto.INT8, [1, 2])):
        t = onnx.helper.make_tensor("t", dtype, (2,), values)
        assert tensor_floats(t) is None, dtype
    ints = small_const(onnx.helper.make_tensor("i", TensorProto.INT64, (2,), [4, 5]))
    assert isinstance(ints, PendingConst) and ints.floats() is None and ints.ints() == [4, 5]


def test_what_cannot_be_read_exactly_gives_none():
    # more values than the dims promise (raw and typed), a negative dim, a segment
    raw = _typed(TensorProto.FLOAT, VALUES, raw=True)
    raw.dims[:] = [2, 2]
    typed = _typed(TensorProto.DOUBLE, VALUES, raw=False)
    typed.dims[:] = [5]
    negative = _typed(TensorProto.FLOAT, VALUES, raw=False)
    negative.dims[:] = [-1, 3]
    segment = _typed(TensorProto.FLOAT, VALUES, raw=True)
    segment.segment.begin = 0
    segment.segment.end = 6
    for t in (raw, typed, negative, segment):
        assert tensor_floats(t) is None
    # external data: the bytes are in another file, never read here
    external = _typed(TensorProto.FLOAT, VALUES, raw=False)
    del external.float_data[:]
    external.data_location = TensorProto.EXTERNAL
    entry = external.external_data.add()
    entry.key, entry.value = "location", "weights.bin"
    assert tensor_floats(external) is None
    assert not isinstance(small_const(external), PendingConst)


def test_a_big_endian_host_reads_none(monkeypatch):
    # array.array reads the host's byte order, raw_data is little-endian: on a big-endian host nothing is read
    t = _typed(TensorProto.FLOAT, VALUES, raw=True)
    assert tensor_floats(t) is not None
    monkeypatch.setattr(proto, "sys", types.SimpleNamespace(byteorder="big"))
    assert tensor_floats(t) is None
    assert tensor_floats(_typed(TensorProto.DOUBLE, VALUES, raw=False)) is None
