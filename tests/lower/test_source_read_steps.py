"""Reading a model file costs memory in proportion to the file, not to the 2 GiB protobuf limit, and a file whose
size stat under-reports (it grew, or /proc says 0) is still read whole in steps."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir import ModelError
from rnnir.lower import read_model
from rnnir.onnxio import source as source_module


def small_model_bytes() -> bytes:
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_reading_a_small_model_file_allocates_about_its_size(tmp_path):
    path = tmp_path / "tiny.onnx"
    data = small_model_bytes()
    path.write_bytes(data)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        source_module.read_regular_file(path, "tiny")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # reading limit + 1 bytes in one go asked Python for a 2 GiB buffer (peak 2,147,483,7xx) for a 100-byte file
    assert len(data) < 200 and peak < 64 * 1024


def test_a_file_larger_than_stat_says_is_read_whole_in_steps(tmp_path, monkeypatch):
    payload = np.arange(900_000, dtype=np.float32)  # 3.6 MB of weights: four 1 MiB steps after the first byte
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [900_000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [900_000])],
        [numpy_helper.from_array(payload, "w")],
    )
    path = tmp_path / "weights.onnx"
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    path.write_bytes(data)
    real_fstat = os.fstat

    def says_empty(fd: int) -> os.stat_result:  # as /proc does, or a file appended to after the stat
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 0, st.st_atime, st.st_mtime, st.st_ctime))

    monkeypatch.setattr(source_module.os, "fstat", says_empty)
    assert source_module.read_regular_file(path, "weights") == data
    src = read_model(path)
    assert np.array_equal(numpy_helper.to_array(src.model.graph.initializer[0]), payload)
    # the limit still holds across steps: one byte under the file's size is refused while reading
    with pytest.raises(ModelError, match=r"^weights: file grew past the .*-byte limit while being read$"):
        source_module.read_regular_file(path, "weights", limit=len(data) - 1)
    assert len(source_module.read_regular_file(path, "weights", limit=len(data))) == len(data)


def test_a_file_that_keeps_growing_is_read_only_to_the_limit(tmp_path, monkeypatch):
    # a log being appended to faster than it is read: stat says 0 bytes, every read returns all it is asked for
    path = tmp_path / "growing.onnx"
    path.write_bytes(b"")
    asked: list[int] = []

    class Endless:
        def __init__(self, fd: int) -> None:
            self.fd = fd

        def __enter__(self) -> Endless:
            return self

        def __exit__(self, *exc: object) -> None:
            os.close(self.fd)

        def fileno(self) -> int:
            return self.fd

        def read(self, n: int) -> bytes:
            asked.append(n)
            if sum(asked) > 10_000_000:  # a reader that never stops would go on for ever: fail instead
                raise AssertionError("read past the limit")
            return b"\0" * n

    monkeypatch.setattr(source_module.os, "fdopen", lambda fd, mode: Endless(fd))
    with pytest.raises(ModelError, match=r"^growing: file grew past the 3000000-byte limit while being read$"):
        source_module.read_regular_file(path, "growing", limit=3_000_000)
    # the empty file's byte, then 1 MiB steps, then exactly what is left to pass the limit by one byte
    assert asked == [1, 1 << 20, 1 << 20, 3_000_001 - 1 - 2 * (1 << 20)]
