"""Hostile and broken input (issue 10): never hang, never blank a report, never lose a state.

Each section is one item of the issue; every test failed on the code before the fix.  Tests that
could hang or eat memory on a regression run the CLI in a subprocess with a timeout and a memory
limit, so a regression fails the test instead of the test run.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_models as om
import pytest
from onnx import helper

import rnnir
from rnnir import cli

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "gru_fanout.onnx"
_POSIX = os.name == "posix"


def run_cli(*argv: str, cwd: Path, timeout: float = 60, memory_mb: int = 4096) -> subprocess.CompletedProcess[bytes]:
    """The real command in a child process: a hang becomes a TimeoutExpired, runaway memory a MemoryError/kill."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("RNNIR_DEBUG", None)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))

    return subprocess.run(
        [sys.executable, "-m", "rnnir.cli", *argv], capture_output=True, cwd=cwd, env=env, timeout=timeout, preexec_fn=limit
    )


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- 1. FIFOs, devices, symlinks to /dev/zero ----------------------------------------------------


@pytest.fixture
def odd_files(tmp_path):
    """A folder with one good model, a FIFO and a symlink to /dev/zero, all named *.onnx."""
    if not _POSIX or not os.path.exists("/dev/zero"):
        pytest.skip("needs POSIX FIFOs and /dev/zero")
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(SAMPLE, d / "good.onnx")
    os.mkfifo(d / "pipe.onnx")
    (d / "zero.onnx").symlink_to("/dev/zero")
    return d


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_fifo_and_dev_zero_among_models_are_per_file_errors(odd_files, jobs):
    proc = run_cli("lint", "d", "--no-config", "--format", "json", "--jobs", jobs, cwd=odd_files.parent)
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    by_name = {Path(f["path"]).name: f for f in doc["files"]}
    assert by_name["good.onnx"]["error"] is None and by_name["good.onnx"]["state_pairs"]
    assert "named pipe" in by_name["pipe.onnx"]["error"]["message"]
    assert "character device" in by_name["zero.onnx"]["error"]["message"]
    assert b"internal error" not in proc.stderr


@pytest.mark.parametrize("name", ["pipe.onnx", "zero.onnx"])
def test_show_refuses_a_fifo_or_device_without_blocking(odd_files, name):
    proc = run_cli("show", f"d/{name}", "--no-config", cwd=odd_files.parent)
    assert proc.returncode == 2
    assert b"not a regular file" in proc.stderr


def test_loader_refuses_devices_before_opening(odd_files):
    with pytest.raises(rnnir.ModelError, match="named pipe"):
        rnnir.load(odd_files / "pipe.onnx")  # would block forever in open() without the stat check
    with pytest.raises(rnnir.ModelError, match="character device"):
        rnnir.load(odd_files / "zero.onnx")


def test_symlink_to_a_regular_model_is_still_a_model(tmp_path):
    (tmp_path / "link.onnx").symlink_to(SAMPLE)
    assert rnnir.load(tmp_path / "link.onnx").state_pairs


def _with_external_w(tmp_path: Path, location: str) -> Path:
    m = om.lstm_h0c0()
    w = next(t for t in m.graph.initializer if t.name == "W")
    w.data_location = onnx.TensorProto.EXTERNAL
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.external_data.add(key="location", value=location)
    p = tmp_path / "ext" / "m.onnx"
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(m.SerializeToString())
    return p


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_external_data_target_must_be_a_regular_file(tmp_path, kind):
    if not _POSIX or not os.path.exists("/dev/zero"):
        pytest.skip("needs POSIX FIFOs and /dev/zero")
    p = _with_external_w(tmp_path, "w.bin")
    if kind == "fifo":
        os.mkfifo(p.parent / "w.bin")
    else:
        (p.parent / "w.bin").symlink_to("/dev/zero")
    # a symlink to /dev/zero also resolves out of the folder; either refusal is before any read
    with pytest.raises(rnnir.ModelError, match="not a regular file" if kind == "fifo" else "not a regular file|leaves the model's folder") as ei:
        rnnir.load(p)
    assert "'W'" in str(ei.value)


def test_external_data_that_is_a_regular_file_near_miss(tmp_path):
    p = _with_external_w(tmp_path, "w.bin")
    (p.parent / "w.bin").write_bytes(np.zeros(48, np.float32).tobytes())
    assert rnnir.load(p).state_pairs


@pytest.mark.parametrize("location", [".", "sub/..", "a\0b.bin"])
def test_external_data_location_naming_a_folder_or_holding_nul_is_a_model_error(tmp_path, location):
    p = _with_external_w(tmp_path, location)
    with pytest.raises(rnnir.ModelError, match="folder|NUL") as ei:
        rnnir.load(p)
    assert "'W'" in str(ei.value)
    with pytest.raises(rnnir.ModelError):
        rnnir.load(p.read_bytes())  # also when there is no folder to resolve against


# -- 6. fuzzed models that ended as "internal error" ------------------------------------------


def _copy(m: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.ModelProto.FromString(m.SerializeToString())


def _set_attr(m: onnx.ModelProto, op: str, name: str, value) -> onnx.ModelProto:
    m = _copy(m)
    for node in m.graph.node:
        if node.op_type == op:
            for a in [a for a in node.attribute if a.name == name]:
                node.attribute.remove(a)
            node.attribute.append(helper.make_attribute(name, value))
    return m


def _if_renamed_branch() -> onnx.ModelProto:
    m = _copy(om.packed_lstm_in_if())
    node = next(n for n in m.graph.node if n.op_type == "If")
    next(a for a in node.attribute if a.name == "then_branch").name = "then_brunch"
    return m


def _if_without_cond() -> onnx.ModelProto:
    m = _copy(om.packed_lstm_in_if())
    del next(n for n in m.graph.node if n.op_type == "If").input[:]
    return m


def _elem_type(where: str) -> onnx.ModelProto:
    m = om.lstm_h0c0()
    (m.graph.input if where == "input" else m.graph.output)[1].type.tensor_type.elem_type = 1000
    return m


def _duplicated_output() -> onnx.ModelProto:
    m = om.lstm_h0c0()
    m.graph.output.append(m.graph.output[1])
    return m


def _bytes_replaced(old: bytes, new: bytes) -> bytes:
    data = om.lstm_h0c0().SerializeToString()
    assert data.count(old) >= 1
    return data.replace(old, new)


def deep_if(depth: int) -> onnx.ModelProto:
    """If nested ``depth`` deep, built in memory top-down (protobuf cannot parse it from bytes)."""
    m = helper.make_model(
        helper.make_graph([], "g", [om.vi("x", [1]), om.vi("c", [], onnx.TensorProto.BOOL)], [om.vi("y0", [1])]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    g = m.graph
    for d in range(depth):
        n = g.node.add(op_type="If", name=f"if{d}")
        n.input.append("c")
        n.output.append(f"y{d}")
        then = n.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH)
        other = n.attribute.add(name="else_branch", type=onnx.AttributeProto.GRAPH)
        other.g.CopyFrom(helper.make_graph([helper.make_node("Identity", ["x"], [f"e{d}"])], "e", [], [om.vi(f"e{d}", [1])]))
        then.g.name = f"t{d}"
        then.g.output.append(om.vi(f"y{d + 1}", [1]))
        g = then.g
    g.node.append(helper.make_node("Identity", ["x"], [f"y{depth}"]))
    return m


FUZZED = {
    "if_renamed_then_branch": (_if_renamed_branch, "else_branch|then_branch", "sr_if"),
    "if_without_condition": (_if_without_cond, "required input", "sr_if"),
    "hidden_size_string": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "hidden_size", "4"), "hidden_size", "lstm"),
    "hidden_size_ints": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "hidden_size", [4, 4]), "hidden_size", "lstm"),
    "hidden_size_zero": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "hidden_size", 0), "hidden_size", "lstm"),
    "activations_float": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "activations", 1.5), "activations", "lstm"),
    "clip_tensor": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "clip", om.const("c", np.array(1.0, np.float32))), "clip", "lstm"),
    "direction_unknown": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "direction", "sideways"), "direction", "lstm"),
    "layout_string": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "layout", "x"), "layout", "lstm"),
    "elem_type_1000_input": (lambda: _elem_type("input"), "1000", "h0"),
    "elem_type_1000_output": (lambda: _elem_type("output"), "1000", "hn"),
    "non_utf8_op_type": (lambda: _bytes_replaced(b"LSTM", b"\xffSTM"), "UTF-8", "lstm"),
    "non_utf8_node_name": (lambda: _bytes_replaced(b"\x1a\x04lstm", b"\x1a\x04\xffstm"), "UTF-8", "xffstm"),
    "non_utf8_value_name": (lambda: _bytes_replaced(b"hn", b"\xffn"), "UTF-8", "xffn"),
    "non_utf8_direction": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "direction", b"\xff"), "UTF-8", "direction"),
    "duplicated_graph_output": (_duplicated_output, "twice", "hn"),
    "if_1000_deep": (lambda: deep_if(1000), "nested", "if0"),
}


@pytest.mark.parametrize("case", sorted(FUZZED))
def test_fuzzed_models_are_model_errors_naming_the_element(case):
    make, message, element = FUZZED[case]
    with pytest.raises(rnnir.ModelError, match=message) as ei:
        prog = rnnir.load(make())
        import passes

        passes.run(prog)  # the clip-as-tensor case used to fail only here
    assert element in str(ei.value)


def test_if_nesting_within_the_limit_near_miss():
    prog = rnnir.load(deep_if(40))  # deeper than any file protobuf can parse, still analysed
    assert prog.state_pairs == []


def test_attribute_of_the_right_type_near_miss():
    m = _set_attr(om.lstm_h0c0(), "LSTM", "clip", 3.0)
    m = _set_attr(m, "LSTM", "activations", ["Sigmoid", "Tanh", "Tanh"])
    assert {p.input for p in rnnir.load(m).state_pairs} == {"h0", "c0"}


@pytest.mark.parametrize("case", ["hidden_size_ints", "non_utf8_value_name", "if_without_condition"])
def test_fuzzed_model_in_the_cli_is_a_model_error_not_an_internal_error(tmp_path, capsys, case):
    make = FUZZED[case][0]
    model = make()
    data = model if isinstance(model, bytes) else model.SerializeToString()
    (tmp_path / "m.onnx").write_bytes(data)
    code, out, err = run_main(capsys, "lint", str(tmp_path / "m.onnx"), "--no-config", "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert doc["files"][0]["error"]["type"] == "ModelError"
    assert "internal error" not in err


# -- 8. models the checker rejects must not pass lint ------------------------------------------


def test_graph_output_nothing_defines_is_refused():
    m = om.lstm_h0c0()
    m.graph.output.append(om.vi("ghost", [1]))
    with pytest.raises(rnnir.ModelError, match="'ghost'"):
        rnnir.load(m)


def test_graph_output_defined_by_an_input_near_miss():
    m = om.lstm_h0c0()
    m.graph.output.append(om.vi("x", ["T", 1, 3]))
    assert rnnir.load(m).outputs


def _external(t: onnx.TensorProto, location: str) -> None:
    t.data_location = onnx.TensorProto.EXTERNAL
    t.ClearField("raw_data")
    t.ClearField("int64_data")
    t.ClearField("float_data")
    t.external_data.add(key="location", value=location)


def _constant_of_shape_model(location: str) -> onnx.ModelProto:
    value = om.const("v", np.array([0.0], np.float32))
    _external(value, location)
    nodes = [helper.make_node("Shape", ["h0"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["z"], value=value), helper.make_node("Add", ["h0", "z"], ["hn"])]
    return om.model(nodes, [om.vi("h0", [1, 1, 4])], [om.vi("hn", [1, 1, 4])])


def _constant_sparse_model(location: str) -> onnx.ModelProto:
    values = om.const("sv", np.array([1.0], np.float32))
    indices = om.const("si", np.array([0], np.int64))
    _external(values, location)
    sparse = helper.make_sparse_tensor(values, indices, [4])
    nodes = [helper.make_node("Constant", [], ["k"], sparse_value=sparse), helper.make_node("Identity", ["h0"], ["hn"])]
    return om.model(nodes, [om.vi("h0", [1, 1, 4])], [om.vi("hn", [1, 1, 4]), om.vi("k", [4])])


def _sparse_initializer_model(location: str) -> onnx.ModelProto:
    values = om.const("sv", np.array([1.0], np.float32))
    indices = om.const("si", np.array([0], np.int64))
    _external(indices, location)
    m = om.model([helper.make_node("Add", ["h0", "k"], ["hn"])], [om.vi("h0", [1, 1, 4])], [om.vi("hn", [1, 1, 4])])
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [4]))
    m.graph.sparse_initializer[0].values.name = "k"
    return m


@pytest.mark.parametrize("make", [_constant_of_shape_model, _constant_sparse_model, _sparse_initializer_model], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd"])
def test_external_data_escape_inside_attribute_or_sparse_tensor_is_refused(tmp_path, make, location):
    p = tmp_path / "m" / "m.onnx"
    p.parent.mkdir()
    p.write_bytes(make(location).SerializeToString())
    with pytest.raises(rnnir.ModelError, match="leaves the model's folder|absolute"):
        rnnir.load(p)


@pytest.mark.parametrize("make", [_constant_of_shape_model, _constant_sparse_model, _sparse_initializer_model], ids=lambda f: f.__name__.strip("_"))
def test_external_data_inside_the_folder_near_miss(tmp_path, make):
    p = tmp_path / "m" / "m.onnx"
    p.parent.mkdir()
    p.write_bytes(make("data.bin").SerializeToString())
    assert rnnir.load(p) is not None
