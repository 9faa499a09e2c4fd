"""Reading models, issue 15's unpinned cases: external-data locations checked when the model comes as a ModelProto or
bytes (no folder to resolve against), drive-letter locations, negative or malformed offsets and lengths, external
tensors inside a Constant node and inside If branches; and the labels errors name. Nothing here is ever opened: the
checks refuse the location before any file is touched."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import ModelError
from rnnir.onnxio.source import iter_tensors, read_model


def external(name, location, **extra):
    t = numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    if location is not None:
        t.external_data.add(key="location", value=location)
    for k, v in extra.items():
        t.external_data.add(key=k, value=v)
    return t


def with_initializer(tensor):
    g = helper.make_graph(
        [helper.make_node("Add", ["x", tensor.name], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1])],
        [tensor],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def with_constant(tensor, in_if=False):
    const = helper.make_node("Constant", [], ["k"], value=tensor)
    add = helper.make_node("Add", ["x", "k"], ["y"])
    if in_if:
        branch = helper.make_graph([const, helper.make_node("Identity", ["k"], ["kb"])], "b", [], [helper.make_tensor_value_info("kb", TensorProto.FLOAT, [1, 1, 1])])
        other = helper.make_graph(
            [helper.make_node("Constant", [], ["z"], value=numpy_helper.from_array(np.zeros((1, 1, 1), np.float32)))],
            "o",
            [],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 1, 1])],
        )
        nodes = [helper.make_node("If", ["c"], ["k"], then_branch=branch, else_branch=other), add]
        ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    else:
        nodes = [const, add]
        ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1])]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


AS = {"proto": lambda m: m, "bytes": lambda m: m.SerializeToString()}


@pytest.mark.parametrize("given", sorted(AS))
@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("/etc/passwd", "is absolute"),
        ("\\\\server\\share\\w.bin", "is absolute"),
        ("C:\\weights\\w.bin", "is absolute"),
        ("D:/data/w.bin", "is absolute"),
        ("c:w.bin", "is absolute"),
        ("../w.bin", "climbs out of the model's folder"),
        ("sub/../../w.bin", "climbs out of the model's folder"),
        ("", "without a location"),
    ],
)
def test_external_locations_are_checked_without_a_folder(given, location, message):
    with pytest.raises(ModelError, match=message) as ei:
        read_model(AS[given](with_initializer(external("w", location))))
    assert "tensor 'w'" in str(ei.value)


@pytest.mark.parametrize("given", sorted(AS))
@pytest.mark.parametrize("location", ["w.bin", "sub/w.bin", "./w.bin"])
def test_locations_that_stay_inside_are_accepted_for_linting(given, location):
    src = read_model(AS[given](with_initializer(external("w", location))))
    assert src.has_external_data
    with pytest.raises(ModelError, match="given as bytes or a ModelProto"):
        src.with_external_data()  # no folder to read them from


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"offset": "-1"}, "offset '-1' is not a non-negative integer"),
        ({"length": "-4"}, "length '-4' is not a non-negative integer"),
        ({"offset": "0", "length": "x4"}, "length 'x4' is not a non-negative integer"),
        ({"offset": "1.5"}, "offset '1.5' is not a non-negative integer"),
    ],
)
def test_negative_or_malformed_offsets_and_lengths_are_refused(extra, message):
    with pytest.raises(ModelError, match=message):
        read_model(with_initializer(external("w", "w.bin", **extra)))


@pytest.mark.parametrize("extra", [{}, {"offset": "0"}, {"length": "4"}, {"offset": "4096", "length": "4"}])
def test_zero_and_positive_offsets_and_lengths_are_accepted(extra):
    assert read_model(with_initializer(external("w", "w.bin", **extra))).has_external_data


@pytest.mark.parametrize("in_if", [False, True])
def test_external_data_inside_a_constant_node_is_checked(in_if):
    with pytest.raises(ModelError, match="climbs out") as ei:
        read_model(with_constant(external("kv", "../kv.bin"), in_if=in_if))
    assert "tensor 'kv'" in str(ei.value)
    src = read_model(with_constant(external("kv", "kv.bin"), in_if=in_if))
    assert src.has_external_data
    assert [t.name for t in iter_tensors(src.model) if t.data_location == TensorProto.EXTERNAL] == ["kv"]


def test_a_model_without_external_tensors_has_none_and_is_returned_as_is():
    m = with_constant(numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "kv"), in_if=True)
    src = read_model(m)
    assert not src.has_external_data
    assert src.with_external_data() is src.model
    assert sorted(t.name for t in iter_tensors(m)) == ["", "kv"]  # the else branch's unnamed zeros, the then branch's kv


def test_an_external_path_of_a_file_model_is_resolved_against_its_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "m.onnx"
    onnx.save_model(with_initializer(external("w", "../w.bin")), str(path))
    with pytest.raises(ModelError, match="leaves the model's folder"):
        read_model(path)
    onnx.save_model(with_initializer(external("w", "w.bin")), str(path))
    assert read_model(path).base_dir == tmp_path / "sub"


@pytest.mark.parametrize(
    ("given", "label"),
    [("proto", "g"), ("bytes", "<bytes>")],
)
def test_errors_name_the_model_by_its_graph_or_as_bytes(given, label):
    with pytest.raises(ModelError) as ei:
        read_model(AS[given](with_initializer(external("w", "/abs.bin"))))
    assert str(ei.value).startswith(f"{label}:") or f"{label}" in str(ei.value).split(":")[0]


def test_an_unnamed_graph_is_labelled_as_a_modelproto_and_a_given_label_wins():
    m = with_initializer(external("w", "/abs.bin"))
    m.graph.name = ""
    with pytest.raises(ModelError, match=r"<ModelProto>"):
        read_model(m)
    with pytest.raises(ModelError, match=r"mine"):
        read_model(m, label="mine")
    with pytest.raises(ModelError, match=r"mine"):
        read_model(m.SerializeToString(), label="mine")


def test_an_empty_file_says_so(tmp_path):
    p = tmp_path / "x.onnx"  # a name without the word "empty" in it, so the match is the message's
    p.write_bytes(b"")
    with pytest.raises(ModelError, match="file is empty"):
        rnnir.load(p)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda m: setattr(m, "ir_version", 0), "no ir_version or no graph"),
        (lambda m: m.ClearField("graph"), "no ir_version or no graph"),
        (lambda m: m.ClearField("opset_import"), "imports no opset"),
        (lambda m: m.graph.ClearField("output"), "has no outputs"),
    ],
)
def test_a_parsed_protobuf_that_is_no_usable_model(mutate, message):
    m = with_initializer(numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "w"))
    mutate(m)
    with pytest.raises(ModelError, match=message):
        read_model(m.SerializeToString())


def test_bytes_that_do_not_parse_say_so_with_the_given_label():
    with pytest.raises(ModelError, match=r"^mine: not a readable ONNX model"):
        read_model(b"\xff\xff\xff\xff", label="mine")
    with pytest.raises(ModelError, match=r"^mine: file is empty"):
        read_model(b"", label="mine")
    with pytest.raises(ModelError, match=r"^<bytes>: file is empty"):
        read_model(b"")


def test_a_location_that_resolves_to_the_folder_itself_is_refused_as_a_folder(tmp_path):
    # inside the model's folder, but a folder is no data file: refused up front (issue 10), naming the tensor
    path = tmp_path / "m.onnx"
    onnx.save_model(with_initializer(external("w", "sub/..")), str(path))
    with pytest.raises(ModelError, match=r"external data path 'sub/\.\.' names a folder, not a data file \(at tensor 'w'\)"):
        read_model(path)


def test_external_data_in_a_graphs_attribute_of_a_custom_node_is_checked():
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=external("kv", "../kv.bin"))], "body", [], [helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 1, 1])]
    )
    node = helper.make_node("Fancy", ["x"], ["y"], domain="com.example", bodies=[body])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    m.ir_version = 8
    with pytest.raises(ModelError, match="climbs out"):
        read_model(m)


@pytest.mark.parametrize("field", ["key", "value"])
def test_an_external_data_entry_that_is_not_utf8_text_is_refused_even_beside_a_valid_location(field):
    # location "w.bin" is fine; the extra entry ("chunk" = "part") has its key or value bytes made invalid UTF-8
    data = with_initializer(external("w", "w.bin", chunk="part")).SerializeToString()
    old = b"chunk" if field == "key" else b"part"
    assert data.count(old) == 1
    with pytest.raises(ModelError, match="external data entry is not valid UTF-8 text") as ei:
        read_model(data.replace(old, b"\xff" + old[1:]))
    assert "tensor 'w'" in str(ei.value)
