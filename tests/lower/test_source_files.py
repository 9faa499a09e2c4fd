"""Reading models and their data files (mutation survivors of rnnir/onnxio/source.py): which tensors can live in
external files, loading them from beside the model, the fingerprint, what kind of file a data path is, and the size
limit on a model file. Every expectation is a property of the file or graph made here."""

from __future__ import annotations

import os
import socket

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir import ModelError
from rnnir.onnxio.source import graph_fingerprint, iter_graphs, iter_tensors, read_model, read_regular_file
from rnnir.util.regularfile import file_kind as _file_kind

F32 = TensorProto.FLOAT
POSIX = os.name == "posix"


def vi(name, shape=(1,)):
    return helper.make_tensor_value_info(name, F32, list(shape))


def model(nodes, inits=(), ins=("x",), outs=("y",), domains=()):
    g = helper.make_graph(nodes, "g", [vi(i) for i in ins], [vi(o) for o in outs], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), *[helper.make_opsetid(d, 1) for d in domains]])
    m.ir_version = 8
    return m


def arr(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def saved_with_external_data(tmp_path, values=(1.0, 2.0, 3.0)):
    """A model whose initializer w lives in w.bin beside it (onnx's own writer)."""
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [arr("w", values)])
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    return path


# -- which tensors may live in files ----------------------------------------------------------------


def test_iter_tensors_yields_initializers_sparse_halves_and_tensor_attributes_of_custom_ops():
    sparse = helper.make_sparse_tensor(arr("sv", [1.0]), numpy_helper.from_array(np.array([0], np.int64), "si"), [2])
    custom = helper.make_node("Fancy", ["x"], ["y"], domain="com.example", t=arr("ta", [1.0]), ts=[arr("tb", [1.0]), arr("tc", [2.0])])
    custom.attribute.append(helper.make_attribute("sp", sparse))
    custom.attribute.append(helper.make_attribute("sps", [helper.make_sparse_tensor(arr("s2v", [1.0]), numpy_helper.from_array(np.array([1], np.int64), "s2i"), [2])]))
    plain = helper.make_node("Relu", ["x"], ["r"], name="relu")
    cos = helper.make_node("ConstantOfShape", ["shape"], ["z"], value=arr("cv", [0.0]))
    m = model([custom, plain, cos], [arr("w", [1.0]), numpy_helper.from_array(np.array([1], np.int64), "shape")], outs=("y", "r", "z"), domains=["com.example"])
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(arr("gv", [3.0]), numpy_helper.from_array(np.array([1], np.int64), "gi"), [2]))
    names = [t.name for t in iter_tensors(m)]
    assert sorted(names) == sorted(["w", "shape", "gv", "gi", "ta", "tb", "tc", "sv", "si", "s2v", "s2i", "cv"])


def test_iter_graphs_walks_if_bodies_and_a_custom_ops_graph_list():
    inner = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "inner", [], [vi("t")])
    body = helper.make_graph([helper.make_node("If", ["c"], ["t"], then_branch=inner, else_branch=inner)], "body", [], [vi("t")])
    custom = helper.make_node("Fancy", ["x"], ["y"], domain="com.example", bodies=[body, inner])
    ignored = helper.make_node("Relu", ["x"], ["r"])
    ignored.attribute.append(helper.make_attribute("hidden", inner))  # a standard op holding no subgraph in practice: not walked
    m = model([custom, ignored], outs=("y", "r"), domains=["com.example"])
    assert sorted(g.name for g in iter_graphs(m.graph)) == ["body", "g", "inner", "inner", "inner"]


# -- loading external data --------------------------------------------------------------------------


def test_external_data_is_loaded_from_beside_the_file(tmp_path):
    path = saved_with_external_data(tmp_path)
    src = read_model(path)
    assert src.has_external_data
    assert src.model.graph.initializer[0].data_location == TensorProto.EXTERNAL  # lint never reads it
    full = src.with_external_data()
    assert full is not src.model
    assert numpy_helper.to_array(full.graph.initializer[0]).tolist() == [1.0, 2.0, 3.0]
    assert src.model.graph.initializer[0].data_location == TensorProto.EXTERNAL  # the source is left as it was


def test_a_missing_data_file_is_a_model_error_only_when_loaded(tmp_path):
    path = saved_with_external_data(tmp_path)
    (tmp_path / "w.bin").unlink()
    src = read_model(path)  # linting needs no weights
    with pytest.raises(ModelError, match="cannot read external data"):
        src.with_external_data()


def test_a_data_file_shorter_than_its_offset_and_length_is_a_model_error(tmp_path):
    path = saved_with_external_data(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"\0\0\0\0")
    with pytest.raises(ModelError, match="cannot read external data"):
        read_model(path).with_external_data()


# -- the fingerprint ----------------------------------------------------------------------------------


def test_the_fingerprint_covers_the_graph_and_opsets_but_not_metadata():
    m = model([helper.make_node("Relu", ["x"], ["y"])])
    base = read_model(m).fingerprint
    assert base == graph_fingerprint(m) and len(base) == 64
    m.metadata_props.add(key="k", value="v")
    assert read_model(m).fingerprint == base
    m.opset_import[0].version = 16
    assert read_model(m).fingerprint != base
    m.opset_import[0].version = 17
    m.graph.node[0].op_type = "Sigmoid"
    assert read_model(m).fingerprint != base
    src = read_model(model([helper.make_node("Relu", ["x"], ["y"])]))
    assert src.fingerprint is src.fingerprint  # computed once


# -- what kind of file a path is -----------------------------------------------------------------------


def test_file_kinds_name_every_non_regular_file(tmp_path):
    import stat

    assert _file_kind(os.stat(__file__).st_mode) is None
    assert _file_kind(os.stat(tmp_path).st_mode) == "a folder"
    assert _file_kind(stat.S_IFCHR) == "a character device"
    assert _file_kind(stat.S_IFBLK) == "a block device"
    assert _file_kind(stat.S_IFIFO) == "a named pipe (FIFO)"
    assert _file_kind(stat.S_IFSOCK) == "a socket"
    assert _file_kind(0) == "not a regular file"


@pytest.mark.skipif(not POSIX, reason="POSIX sockets")
def test_a_data_path_that_is_a_socket_is_refused(tmp_path):
    path = saved_with_external_data(tmp_path)
    (tmp_path / "w.bin").unlink()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "w.bin"))
        with pytest.raises(ModelError, match="external data path 'w.bin' is a socket, not a regular file; refusing to read it"):
            read_model(path)
    finally:
        sock.close()


def test_a_data_path_that_is_a_folder_inside_is_refused(tmp_path):
    path = saved_with_external_data(tmp_path)
    (tmp_path / "w.bin").unlink()
    (tmp_path / "w.bin").mkdir()
    with pytest.raises(ModelError, match="'w.bin' is a folder, not a regular file") as ei:
        read_model(path)
    assert str(ei.value).startswith(f"{path}: ") and str(ei.value).endswith("(at tensor 'w')")


# -- the model file itself ----------------------------------------------------------------------------


def test_a_model_file_over_the_limit_is_refused_and_one_at_the_limit_is_read(tmp_path):
    p = tmp_path / "m.onnx"
    p.write_bytes(b"x" * 10)
    assert read_regular_file(p, "m", limit=10) == b"x" * 10
    with pytest.raises(ModelError, match="file is 10 bytes, over the 9-byte limit"):
        read_regular_file(p, "m", limit=9)


def test_a_name_holding_nul_or_a_folder_is_refused(tmp_path):
    with pytest.raises(ModelError, match="cannot read file"):
        read_regular_file(tmp_path / "a\0b", "m")
    with pytest.raises(ModelError, match="is a folder, not an .onnx file"):
        read_regular_file(tmp_path, "m")


@pytest.mark.skipif(not POSIX or not os.path.exists("/dev/null"), reason="POSIX devices")
def test_a_device_is_refused_before_it_is_opened():
    with pytest.raises(ModelError, match="is a character device, not a regular file"):
        read_regular_file(__import__("pathlib").Path("/dev/null"), "m")


def test_anything_but_a_path_bytes_or_a_modelproto_is_refused():
    with pytest.raises(ModelError, match="expected a path, bytes or onnx.ModelProto, got int"):
        read_model(3)  # type: ignore[arg-type]


def test_bytearray_and_memoryview_are_bytes():
    data = model([helper.make_node("Relu", ["x"], ["y"])]).SerializeToString()
    assert read_model(bytearray(data)).label == "<bytes>"
    assert read_model(memoryview(data), label="mv").label == "mv"
    src = read_model(data)
    assert src.path is None and src.base_dir is None


def test_a_path_model_is_labelled_by_its_path_and_knows_its_folder(tmp_path):
    p = tmp_path / "m.onnx"
    p.write_bytes(model([helper.make_node("Relu", ["x"], ["y"])]).SerializeToString())
    src = read_model(str(p))
    assert (src.label, src.path, src.base_dir) == (str(p), p, tmp_path)


def test_iter_tensors_skips_the_attributes_of_standard_ops_that_hold_no_tensors_in_practice():
    # a Relu given a tensor and a graph attribute (no schema has them): not walked, as iter_graphs does not walk it
    inner = helper.make_graph([], "inner", [], [vi("x")], initializer=[arr("inner_w", [1.0])])
    odd = helper.make_node("Relu", ["x"], ["y"], t=arr("ta", [1.0]))
    odd.attribute.append(helper.make_attribute("hidden", inner))
    assert [t.name for t in iter_tensors(model([odd], [arr("w", [1.0])]))] == ["w"]
