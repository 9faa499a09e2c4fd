"""Reading a model (rnnir/onnxio/source.py), the cases its full mutation run left unpinned: protobuf's 2 GiB limit on
a model file, every spelling of an absolute external-data location checked in one test (a parametrized test runs one
case per mutant), a symlink loop, files that change kind or vanish between the stat and the open, /proc files whose
size lies, a label given with a path, the IR version 0/1 boundary and text that is not UTF-8. Every expectation is a
property of the file or model built here, or a documented limit (protobuf refuses messages over 2**31 - 1 bytes)."""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import ModelError
from rnnir.onnxio.source import read_model, read_regular_file

POSIX = os.name == "posix"
LINUX_PROC = sys.platform.startswith("linux") and os.path.exists("/proc/self/status")


def relu_model(*, opset_domain: str = "", ir_version: int = 8) -> onnx.ModelProto:
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(opset_domain, 1)] if opset_domain else [])
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = ir_version
    return m


def with_external(location: str, **extra: str) -> onnx.ModelProto:
    """y = x + w, with w kept (by its entries) in the external file ``location``."""
    w = numpy_helper.from_array(np.zeros((1,), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    for k, v in extra.items():
        w.external_data.add(key=k, value=v)
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [w],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def saved(tmp_path: Path, m: onnx.ModelProto, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    path.write_bytes(m.SerializeToString())
    return path


# -- the model file's size limit -------------------------------------------------------------------------


def test_a_model_file_past_protobufs_2gib_limit_is_refused_by_its_size_before_any_byte_is_read(tmp_path):
    # a sparse file of 4 GiB: nothing is written to disk and, refused from fstat, nothing is read. Protobuf cannot
    # parse a message of 2**31 bytes or more, so the limit named is 2**31 - 1 = 2147483647 bytes
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as fh:
        fh.truncate(2**32)
    with pytest.raises(ModelError) as ei:
        read_model(path)
    assert str(ei.value) == f"{path}: file is 4294967296 bytes, over the 2147483647-byte limit; save weights as external data"


# -- absolute locations ------------------------------------------------------------------------------------


ABSOLUTE = [
    "/etc/passwd",  # POSIX root
    "//host/w.bin",  # POSIX, two slashes
    "\\w.bin",  # Windows root of the current drive: on POSIX a plain name, refused by its leading backslash
    "\\\\server\\share\\w.bin",  # a Windows UNC path
    "C:\\weights\\w.bin",  # a drive letter: on POSIX one plain name holding a colon
    "D:/data/w.bin",
    "c:w.bin",  # drive-relative
]


def test_every_spelling_of_an_absolute_location_is_refused_with_or_without_a_folder(tmp_path):
    for loc in ABSOLUTE:
        expected = f"external data path {loc!r} is absolute; rnnir only reads data files inside the model's folder (at tensor 'w')"
        with pytest.raises(ModelError) as ei:
            read_model(with_external(loc))
        assert str(ei.value) == f"g: {expected}", loc
        path = saved(tmp_path, with_external(loc))
        with pytest.raises(ModelError) as ei:
            read_model(path)
        assert str(ei.value) == f"{path}: {expected}", loc


def test_a_colon_or_backslash_after_the_first_part_stays_inside_the_folder(tmp_path):
    # near misses: only the first part names a drive, only a leading (back)slash names a root
    (tmp_path / "sub").mkdir()
    for loc in ["sub/c:w.bin", "sub/x\\w.bin", "w.bin"]:
        src = read_model(saved(tmp_path, with_external(loc)))
        assert src.has_external_data, loc


# -- external-data entries ---------------------------------------------------------------------------------


def test_an_entry_value_that_is_not_utf8_is_refused_beside_a_valid_location():
    data = with_external("w.bin", chunk="part").SerializeToString()
    assert data.count(b"part") == 1
    with pytest.raises(ModelError) as ei:
        read_model(data.replace(b"part", b"\xffart"))
    assert str(ei.value) == "<bytes>: external data entry is not valid UTF-8 text (at tensor 'w')"
    assert read_model(data).has_external_data  # the same model with the value intact


@pytest.mark.skipif(not POSIX, reason="POSIX symlinks")
def test_a_location_that_is_a_symlink_loop_is_a_model_error(tmp_path):
    os.symlink("loop", tmp_path / "loop")  # loop -> loop
    path = saved(tmp_path, with_external("loop"))
    with pytest.raises(ModelError) as ei:
        read_model(path)
    # pathlib up to 3.12 refuses the loop while resolving; later versions resolve it and the stat that follows fails
    assert re.fullmatch(
        re.escape(f"{path}: external data path 'loop' cannot be ")
        + r"(resolved: Symlink loop from .*|examined: Too many levels of symbolic links) \(at tensor 'w'\)",
        str(ei.value),
    ), str(ei.value)


# -- the model file: what it is, and what it turns into between the stat and the open ------------------------


@pytest.mark.skipif(not POSIX, reason="POSIX sockets")
def test_a_model_path_that_is_a_socket_is_refused_by_its_kind():
    # opening a socket fails (ENXIO): the kind must be named from the stat, before any open
    with tempfile.TemporaryDirectory() as d:  # a short folder: socket paths are limited to ~100 bytes
        path = Path(d) / "m.onnx"
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(str(path))
            with pytest.raises(ModelError) as ei:
                read_model(path)
        finally:
            sock.close()
    assert str(ei.value) == f"{path}: is a socket, not a regular file; only regular files are read as models"


def swap_after_stat(monkeypatch, path: Path, swap) -> None:
    """The race the reader guards against: ``path`` is a regular file when statted and ``swap`` changes it right after."""
    real_stat = os.stat
    done = []

    def stat(p, *args, **kwargs):
        result = real_stat(p, *args, **kwargs)
        if not done and os.fspath(p) == os.fspath(path):
            done.append(True)
            swap()
        return result

    monkeypatch.setattr(os, "stat", stat)


@pytest.mark.skipif(not POSIX, reason="POSIX FIFOs")
def test_a_model_file_swapped_for_a_fifo_after_the_stat_is_refused_without_blocking(tmp_path, monkeypatch):
    path = saved(tmp_path, relu_model())

    def to_fifo():
        path.unlink()
        os.mkfifo(path)

    swap_after_stat(monkeypatch, path, to_fifo)
    with pytest.raises(ModelError) as ei:
        read_model(path)  # a blocking open of a FIFO without a writer would hang here
    assert str(ei.value) == f"{path}: is a named pipe (FIFO), not a regular file; only regular files are read as models"


def test_a_model_file_removed_after_the_stat_is_a_model_error(tmp_path, monkeypatch):
    path = saved(tmp_path, relu_model())
    swap_after_stat(monkeypatch, path, path.unlink)
    with pytest.raises(ModelError) as ei:
        read_model(path)
    assert str(ei.value) == f"{path}: cannot read file: No such file or directory"


def test_a_platform_without_o_nonblock_still_reads_models(tmp_path, monkeypatch):
    # Windows has no os.O_NONBLOCK: the open must then be a plain read-only one
    path = saved(tmp_path, relu_model())
    monkeypatch.delattr(os, "O_NONBLOCK", raising=False)
    assert read_model(path).model.graph.node[0].op_type == "Relu"


@pytest.mark.skipif(not LINUX_PROC, reason="Linux /proc")
def test_a_file_longer_than_its_size_says_is_cut_at_the_limit():
    # /proc files report size 0 and hold text: the size check passes, the bounded read finds more than the limit
    status = Path("/proc/self/status")
    assert os.stat(status).st_size == 0 and len(status.read_bytes()) > 10
    with pytest.raises(ModelError) as ei:
        read_regular_file(status, "st", limit=10)
    assert str(ei.value) == "st: file grew past the 10-byte limit while being read"


@pytest.mark.skipif(not LINUX_PROC or not os.path.exists("/proc/self/mem"), reason="Linux /proc")
def test_a_regular_file_whose_read_fails_is_a_model_error():
    # /proc/self/mem is a regular file that opens read-only, but reading at offset 0 (an unmapped address) fails
    with pytest.raises(ModelError) as ei:
        rnnir.load(Path("/proc/self/mem"))
    assert str(ei.value) == "/proc/self/mem: cannot read file: Input/output error"


# -- labels ------------------------------------------------------------------------------------------------


def test_a_label_given_with_a_path_names_the_model_and_the_path_is_still_read(tmp_path):
    path = saved(tmp_path, relu_model())
    src = read_model(path, label="mine")
    assert (src.label, src.path) == ("mine", path)
    bad = saved(tmp_path, with_external("/abs.bin"), "bad.onnx")
    with pytest.raises(ModelError) as ei:
        read_model(bad, label="mine")
    assert str(ei.value) == "mine: external data path '/abs.bin' is absolute; rnnir only reads data files inside the model's folder (at tensor 'w')"


# -- what parses but is no model -----------------------------------------------------------------------------


def test_ir_version_0_is_no_model_and_1_the_first_ir_version_is_read():
    for ir_version in (0, -1):
        with pytest.raises(ModelError) as ei:
            read_model(relu_model(ir_version=ir_version).SerializeToString())
        assert str(ei.value) == "<bytes>: not an ONNX model: no ir_version or no graph (truncated file, or another format)"
    assert read_model(relu_model(ir_version=1).SerializeToString()).model.ir_version == 1


def test_a_metadata_value_that_is_not_utf8_is_refused():
    m = relu_model()
    m.metadata_props.add(key="note", value="fine")
    data = m.SerializeToString()
    assert data.count(b"fine") == 1
    with pytest.raises(ModelError) as ei:
        read_model(data.replace(b"fine", b"\xffine"))
    assert str(ei.value) == "<bytes>: metadata entry 'note' is not valid UTF-8 text, as ONNX requires (at metadata_props)"
    assert read_model(data).model.metadata_props[0].value == "fine"


def test_an_opset_domain_that_is_not_utf8_is_refused():
    data = relu_model(opset_domain="com.zdomain").SerializeToString()
    assert data.count(b"zdomain") == 1
    with pytest.raises(ModelError) as ei:
        read_model(data.replace(b"zdomain", b"\xffdomain"))
    assert str(ei.value) == "<bytes>: opset domain b'com.\\xffdomain' is not valid UTF-8 text (at opset_import)"
    assert [op.domain for op in read_model(data).model.opset_import] == ["", "com.zdomain"]
