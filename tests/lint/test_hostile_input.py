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
import pytest
from onnx import helper

import rnnir
from rnnir import cli
from rnnir.cli import lint as cli_lint
from tests.support import onnx_models as om

REPO = Path(__file__).resolve().parents[2]
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


def run_python(code: str, *args: str, timeout: float = 60, memory_mb: int = 4096) -> subprocess.CompletedProcess[str]:
    """A snippet in a child process, for checks whose regression would block or exhaust memory."""
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))

    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=limit)


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


_LOAD_CHILD = """
import sys, rnnir
try:
    rnnir.load(sys.argv[1])
except rnnir.ModelError as exc:
    print("ModelError", exc)
"""


@pytest.mark.parametrize(("name", "kind"), [("pipe.onnx", "named pipe"), ("zero.onnx", "character device")])
def test_loader_refuses_devices_before_opening(odd_files, name, kind):
    # in a child: without the stat check the FIFO blocks open() forever and /dev/zero fills memory
    proc = run_python(_LOAD_CHILD, str(odd_files / name))
    assert proc.stdout.startswith("ModelError") and kind in proc.stdout, proc.stdout + proc.stderr


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


def _with_metadata_bytes() -> bytes:
    m = om.lstm_h0c0(names=("a", "b", "p", "q"))
    m.metadata_props.add(key="rnnir.pairs", value='{"a": "p"}')
    return m.SerializeToString().replace(b"rnnir.pairs", b"rnnir.pair\xff")


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
    "if_renamed_then_branch": (_if_renamed_branch, "then_brunch|else_branch|then_branch", "sr_if"),
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
    "non_utf8_graph_name": (lambda: _bytes_replaced(b"\x12\x01g", b"\x12\x01\xff"), "UTF-8", "graph name"),
    "non_utf8_metadata": (lambda: _with_metadata_bytes(), "UTF-8", "metadata"),
    "non_utf8_dim_param": (lambda: _bytes_replaced(b"\x12\x01T", b"\x12\x01\xff"), "UTF-8", "a dim of value"),
    "non_utf8_direction": (lambda: _set_attr(om.lstm_h0c0(), "LSTM", "direction", b"\xff"), "UTF-8", "direction"),
    "duplicated_graph_output": (_duplicated_output, "twice", "hn"),
    "if_1000_deep": (lambda: deep_if(1000), "nested", "if0"),
}


@pytest.mark.parametrize("case", sorted(FUZZED))
def test_fuzzed_models_are_model_errors_naming_the_element(case):
    make, message, element = FUZZED[case]
    with pytest.raises(rnnir.ModelError, match=message) as ei:
        prog = rnnir.load(make())
        from rnnir import passes

        passes.run(prog)  # the clip-as-tensor case used to fail only here
    assert element in str(ei.value)


def test_if_nesting_within_the_limit_near_miss():
    prog = rnnir.load(deep_if(40))  # deeper than any file protobuf can parse, still analysed
    assert prog.state_pairs == ()


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


# -- 2. one bad name never blanks a report ----------------------------------------------------

_SARIF_SCHEMA = REPO / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json"  # OASIS's official schema, shipped


def _bad_name_folder(tmp_path: Path) -> Path:
    """Good models, one whose value name is not UTF-8, and good models with hostile file names."""
    d = tmp_path / "models"
    d.mkdir()
    for k in range(3):
        shutil.copy(SAMPLE, d / f"good{k}.onnx")
    (d / "bad_name.onnx").write_bytes(_bytes_replaced(b"hn", b"\xffn"))
    if _POSIX:
        shutil.copy(SAMPLE, os.fsdecode(bytes(d) + b"/file\xff.onnx"))  # a name that is not UTF-8
        shutil.copy(SAMPLE, d / "evil\n\x1b[31mred.onnx")
    return d


def _validate_sarif(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads(_SARIF_SCHEMA.read_text()))


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_a_bad_name_is_that_files_error_and_the_report_is_complete(tmp_path, monkeypatch, capsys, fmt):
    d = _bad_name_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "lint", "models", "--no-config", "--format", fmt)
    assert code == 2
    out.encode("utf-8")  # valid Unicode throughout: no lone surrogate
    doc = json.loads(out)
    n_files = len(os.listdir(d))
    if fmt == "json":
        assert len(doc["files"]) == n_files
        errors = {Path(f["path"]).name: f["error"] for f in doc["files"] if f["error"]}
        assert list(errors) == ["bad_name.onnx"] and "UTF-8" in errors["bad_name.onnx"]["message"]
        if _POSIX:
            assert any(f["path"].endswith("file\\xff.onnx") for f in doc["files"])
    else:
        run = doc["runs"][0]
        assert len(run["artifacts"]) == n_files
        assert [n["message"]["text"] for n in run["invocations"][0]["toolExecutionNotifications"] if "bad_name" in n["message"]["text"]]
        if _POSIX:
            assert any(a["location"]["uri"].endswith("file%FF.onnx") for a in run["artifacts"])
        _validate_sarif(doc)
    assert "internal error" not in err


@pytest.mark.skipif(not _POSIX, reason="POSIX file names")
@pytest.mark.parametrize("fmt", ["text", "github"])
def test_text_output_escapes_newlines_and_escape_codes_from_names(tmp_path, monkeypatch, capsys, fmt):
    _bad_name_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "lint", "models", "--no-config", "--format", fmt, *(["-v"] if fmt == "text" else []))
    assert code == 2
    assert "\x1b" not in out and "\x1b" not in err
    assert "\udcff" not in out + err
    if fmt == "text":  # github lists only findings and errors; the clean files do not appear
        assert "evil\\n\\x1b[31mred.onnx" in out and "file\\xff.onnx" in out
        assert "[31mred.onnx" not in out.splitlines()


def test_printable_leaves_ordinary_text_alone_near_miss():
    from rnnir.render import printable

    assert printable("models/vad é 16k.onnx") == "models/vad é 16k.onnx"
    assert printable("a\u202eb") == "a\\u202eb"  # a bidi override is not shown raw either


def test_show_escapes_names_in_every_format(tmp_path, capsys):
    m = om.lstm_h0c0(names=("h0", "c0", "h\x1b[31m\nn", "cn"))
    p = tmp_path / "weird.onnx"
    p.write_bytes(m.SerializeToString())
    for fmt in ("text", "dot", "mermaid", "json"):
        code, out, err = run_main(capsys, "show", str(p), "--no-config", "--pair", "h0=h\x1b[31m\nn", "--pair", "c0=cn", "--format", fmt)
        assert code == 0, err
        assert "\x1b" not in out
        if fmt == "json":
            assert json.loads(out)["state_pairs"][0]["output"] == "h\x1b[31m\nn"


def test_renderer_quarantines_a_record_it_cannot_write(capsys):
    from rnnir.passes import RULES
    from rnnir.render import FileResult, LintResult, render

    good = FileResult("good.onnx", state_pairs=[{"input": "h0", "output": "hn", "source": "name", "slices": []}])
    odd = FileResult("odd.onnx", state_pairs=[{"input": b"\xff", "output": "hn", "source": "name", "slices": []}])
    result = LintResult([good, odd], RULES, "0")
    doc = json.loads(render(result, "json"))
    assert doc["files"][0]["error"] is None and doc["files"][0]["state_pairs"]
    assert doc["files"][1]["error"]["type"] == "RenderError"
    assert doc["summary"]["exit_code"] == 2


# -- 3, 4, 5. state files: validated, atomic, bounded --------------------------------------------


@pytest.fixture
def session(tmp_path):
    from rnnir.runtime import StatefulSession

    p = tmp_path / "lstm.onnx"
    p.write_bytes(om.lstm_h0c0().SerializeToString())
    s = StatefulSession(p)
    rng = np.random.default_rng(3)
    for _ in range(3):
        s.run({"x": rng.standard_normal((2, 1, 3)).astype(np.float32)})
    return s


def _state_file(tmp_path: Path, name: str, **arrays) -> Path:
    p = tmp_path / name
    with open(p, "wb") as f:
        np.savez(f, **arrays)
    return p


def _meta(s, slots=None) -> np.ndarray:
    return np.array(json.dumps({"format": "rnnir.state/1", "fingerprint": s.fingerprint, "model": s.label, "slots": slots or {}}))


def _bad_state_files(s, tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "good.state"
    s.save_state(good)
    data = good.read_bytes()
    files = {
        "empty": tmp_path / "empty.state",
        "truncated": tmp_path / "truncated.state",
        "not_npz": tmp_path / "not_npz.state",
        "npy": tmp_path / "plain.npy",
    }
    files["empty"].write_bytes(b"")
    files["truncated"].write_bytes(data[: len(data) // 2])
    files["not_npz"].write_bytes(b"this is not a zip archive at all" * 10)
    np.save(files["npy"], np.zeros(3))
    h = np.zeros((1, 1, 4), np.float32)
    files["meta_list"] = _state_file(tmp_path, "meta_list.state", __rnnir_state__=np.array("[1, 2]"), **{"slot:h0": h, "slot:c0": h})
    files["meta_garbage"] = _state_file(tmp_path, "meta_garbage.state", __rnnir_state__=np.array("{not json"), **{"slot:h0": h, "slot:c0": h})
    files["meta_numeric"] = _state_file(tmp_path, "meta_numeric.state", __rnnir_state__=np.zeros(3), **{"slot:h0": h, "slot:c0": h})
    files["wrong_shape"] = _state_file(tmp_path, "wrong_shape.state", __rnnir_state__=_meta(s), **{"slot:h0": np.zeros((1, 1, 5), np.float32), "slot:c0": h})
    files["wrong_rank"] = _state_file(tmp_path, "wrong_rank.state", __rnnir_state__=_meta(s), **{"slot:h0": np.zeros((4,), np.float32), "slot:c0": h})
    files["wrong_dtype"] = _state_file(tmp_path, "wrong_dtype.state", __rnnir_state__=_meta(s), **{"slot:h0": h.astype(np.float64), "slot:c0": h})
    bomb = tmp_path / "bomb.state"
    with open(bomb, "wb") as f:  # compresses to ~100 KB, expands to 100 MB: over what two 16-byte slots may hold
        np.savez_compressed(f, __rnnir_state__=_meta(s), **{"slot:h0": np.zeros((25_000_000,), np.float32), "slot:c0": h})
    files["zip_bomb"] = bomb
    return files


def test_a_bad_state_file_is_a_state_error_and_the_live_state_survives(session, tmp_path):
    before = {k: v.copy() for k, v in session.state.items()}
    x = np.ones((2, 1, 3), np.float32)
    for why, path in _bad_state_files(session, tmp_path).items():
        with pytest.raises(rnnir.StateError) as ei:
            session.load_state(path)
        assert str(path) in str(ei.value), why
        now = session.state
        assert all(np.array_equal(now[k], before[k]) for k in before), why
    # and the stream goes on from the state it had
    twin = session.fork()
    assert np.array_equal(session.run_dict({"x": x})["hn"], twin.run_dict({"x": x})["hn"])


def test_zip_bomb_is_refused_before_decompressing(session, tmp_path):
    bomb = _bad_state_files(session, tmp_path)["zip_bomb"]
    assert bomb.stat().st_size < 2_000_000
    with pytest.raises(rnnir.StateError, match="expands to"):
        session.load_state(bomb)


_LOAD_STATE_CHILD = """
import sys, rnnir
from rnnir.runtime import StatefulSession
s = StatefulSession(sys.argv[1])
try:
    s.load_state(sys.argv[2])
except rnnir.StateError as exc:
    print("StateError", exc)
"""


def test_a_state_file_that_is_a_fifo_is_refused_without_blocking(session, tmp_path):
    if not _POSIX:
        pytest.skip("POSIX FIFOs")
    os.mkfifo(tmp_path / "pipe.state")
    proc = run_python(_LOAD_STATE_CHILD, str(tmp_path / "lstm.onnx"), str(tmp_path / "pipe.state"))
    assert proc.stdout.startswith("StateError") and "regular file" in proc.stdout, proc.stdout + proc.stderr


def test_a_good_state_file_round_trips_near_miss(session, tmp_path):
    session.save_state(tmp_path / "s.state")
    other = session.fork(reset=True)
    other.load_state(tmp_path / "s.state")
    assert all(np.array_equal(other.state[k], session.state[k]) for k in session.state)


_FSIZE_CHILD = """
import sys, resource, numpy as np
from rnnir.runtime import StatefulSession
s = StatefulSession(sys.argv[1], max_slot_bytes=2**30, state_shapes={"h0": (1, 1, 4), "c0": (1, 1, 4)})
s.run({"x": np.ones((2, 1, 3), np.float32)})
resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))   # a full disk, for this process
try:
    s.save_state(sys.argv[2])
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_save_state_is_atomic_under_a_full_disk(session, tmp_path):
    target = tmp_path / "keep.state"
    session.save_state(target)
    good = target.read_bytes()
    model = tmp_path / "lstm.onnx"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", _FSIZE_CHILD, str(model), str(target)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.startswith("StateError"), proc.stdout + proc.stderr
    assert target.read_bytes() == good  # the old state is intact and loadable
    session.load_state(target)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


def test_save_state_failing_midway_keeps_the_previous_file(session, tmp_path, monkeypatch):
    target = tmp_path / "keep.state"
    session.save_state(target)
    good = target.read_bytes()

    def broken_savez(f, **arrays):
        f.write(b"PK partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(rnnir.StateError, match="No space left"):
        session.save_state(target)
    assert target.read_bytes() == good


def _big_state_model(dims) -> onnx.ModelProto:
    m = om.lstm_h0c0()
    for vi in (m.graph.input[1], m.graph.input[2]):
        shape = vi.type.tensor_type.shape
        for d, n in zip(shape.dim, dims):
            d.dim_value = n
    return m


@pytest.mark.parametrize("dims", [(40_000, 10_000, 4), (10**9, 10**9, 4)])
def test_an_absurd_declared_state_is_refused_before_allocating(tmp_path, dims):
    from rnnir.runtime import StatefulSession

    s = StatefulSession(_big_state_model(dims))
    with pytest.raises(rnnir.StateError, match="over the .*-byte limit per slot"):
        s.run({"x": np.ones((2, 1, 3), np.float32)})


def test_state_bound_can_be_raised_near_miss():
    from rnnir.runtime import StatefulSession

    m = _big_state_model((1, 1, 4))
    s = StatefulSession(m, max_slot_bytes=15)  # the 16-byte slot is over a 15-byte bound
    with pytest.raises(rnnir.StateError, match="limit per slot"):
        s.initial_state()
    assert StatefulSession(m, max_slot_bytes=16).initial_state()["h0"].shape == (1, 1, 4)


def test_rnnir_run_refuses_an_absurd_state_with_a_clear_message(tmp_path):
    (tmp_path / "big.onnx").write_bytes(_big_state_model((40_000, 10_000, 4)).SerializeToString())
    proc = run_cli("run", "big.onnx", "--no-config", "--calls", "3", "--chunk", "2", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert b"limit per slot" in proc.stderr and b"--max-slot-mb" in proc.stderr
    assert b"internal error" not in proc.stderr


def test_rnnir_run_reports_an_onnxruntime_failure_as_the_models_problem(tmp_path, capsys):
    m = om.lstm_h0c0()
    next(a for a in m.graph.node[0].attribute if a.name == "hidden_size").i = 5  # W says 4
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    code, out, err = run_main(capsys, "run", str(tmp_path / "m.onnx"), "--no-config", "--calls", "3", "--chunk", "2")
    assert code == 2
    assert "onnxruntime cannot run the model" in err and "internal error" not in err


# -- 7. an empty selection is a usage error ---------------------------------------------------


@pytest.mark.parametrize("select", ["", ",", " , "])
def test_empty_select_flag_is_a_usage_error(capsys, select):
    code, out, err = run_main(capsys, "lint", str(SAMPLE), "--no-config", "--select", select)
    assert code == 2 and "--select" in err


@pytest.mark.parametrize("body", ["select = []", 'select = [""]'])
def test_empty_select_in_pyproject_is_a_config_error(tmp_path, monkeypatch, capsys, body):
    (tmp_path / "pyproject.toml").write_text(f"[tool.rnnir]\n{body}\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "lint", str(SAMPLE))
    assert code == 2 and "select" in err and "internal error" not in err


def test_non_empty_select_near_miss(capsys):
    code, out, err = run_main(capsys, "lint", str(SAMPLE), "--no-config", "--select", "SD,")
    assert code == 0, err


# -- 10. --jobs, -o, configuration, Triton -------------------------------------------------------


@pytest.mark.parametrize("jobs", ["-1", "-4"])  # 0 is one worker per CPU (tests/cli/test_newcomer.py)
def test_jobs_below_zero_is_a_usage_error(capsys, jobs):
    code, out, err = run_main(capsys, "lint", str(SAMPLE), "--no-config", "--jobs", jobs)
    assert code == 2 and "--jobs" in err


def test_jobs_is_clamped_to_files_and_cpus_and_says_so(tmp_path, monkeypatch, capsys):
    for k in range(3):
        shutil.copy(SAMPLE, tmp_path / f"m{k}.onnx")
    started: list[int] = []

    class CountingPool(cli_lint.ProcessPoolExecutor):
        def __init__(self, max_workers=None, **kw):
            started.append(max_workers)
            super().__init__(max_workers=max_workers, **kw)

    monkeypatch.setattr(cli_lint, "ProcessPoolExecutor", CountingPool)
    code, out, err = run_main(capsys, "lint", str(tmp_path), "--no-config", "--jobs", "1000", "--format", "json")
    assert code == 0
    expected = min(3, os.cpu_count() or 1)
    assert started in ([expected], []) and (started or expected == 1)
    assert f"using {expected} worker" in err


def test_output_over_a_linted_model_is_refused(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    shutil.copy(SAMPLE, model)
    before = model.read_bytes()
    code, out, err = run_main(capsys, "lint", str(model), "--no-config", "-o", str(model))
    assert code == 2 and "--output" in err
    assert model.read_bytes() == before
    code, out, err = run_main(capsys, "lint", str(tmp_path), "--no-config", "-o", str(tmp_path / "." / "m.onnx"))
    assert code == 2 and model.read_bytes() == before


def test_output_beside_the_model_near_miss(tmp_path, capsys):
    shutil.copy(SAMPLE, tmp_path / "m.onnx")
    code, out, err = run_main(capsys, "lint", str(tmp_path / "m.onnx"), "--no-config", "-o", str(tmp_path / "report.txt"), "-v")
    assert code == 0 and "no findings" in (tmp_path / "report.txt").read_text()


@pytest.mark.parametrize("body", ["tool = 5", 'tool = "rnnir"'])
def test_tool_not_a_table_is_a_config_error(tmp_path, monkeypatch, capsys, body):
    (tmp_path / "pyproject.toml").write_text(body + "\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "lint", str(SAMPLE))
    assert code == 2 and "tool" in err and "must be a table" in err and "internal error" not in err


def _triton_layout(root: Path, version_folder: str, config_at: str) -> Path:
    m = om.lstm_h0c0(names=("IN_H", "IN_C", "OUT_H", "OUT_C"))
    d = root / "lstm" / version_folder
    d.mkdir(parents=True)
    (d / "model.onnx").write_bytes(m.SerializeToString())
    cfg = d / "config.pbtxt" if config_at == "beside" else root / "lstm" / "config.pbtxt"
    cfg.write_text('sequence_batching { state [ { input_name: "IN_H" output_name: "OUT_C" }, { input_name: "IN_C" output_name: "OUT_H" } ] }')
    return d / "model.onnx"


def _sources(path: Path) -> set[tuple[str, str | None, str]]:
    return {(p.input, p.output, p.source.value) for p in rnnir.load(path).state_pairs}


def test_triton_config_beside_the_model_is_read(tmp_path):
    assert ("IN_H", "OUT_C", "triton") in _sources(_triton_layout(tmp_path, "anything", "beside"))


def test_triton_config_above_a_numbered_version_folder_is_read(tmp_path):
    assert ("IN_H", "OUT_C", "triton") in _sources(_triton_layout(tmp_path, "3", "parent"))


def test_triton_config_above_an_ordinary_folder_is_not_read(tmp_path):
    # models/lstm/config.pbtxt does not describe models/lstm/exports/model.onnx: names decide instead
    assert all(src != "triton" for _, _, src in _sources(_triton_layout(tmp_path, "exports", "parent")))


def test_triton_config_that_is_a_fifo_is_not_opened(tmp_path):
    if not _POSIX:
        pytest.skip("POSIX FIFOs")
    d = tmp_path / "lstm" / "1"
    d.mkdir(parents=True)
    (d / "model.onnx").write_bytes(om.lstm_h0c0().SerializeToString())
    os.mkfifo(d / "config.pbtxt")
    assert {p.input for p in rnnir.load(d / "model.onnx").state_pairs} == {"h0", "c0"}


# -- 9. long state paths: linear work ------------------------------------------------------------
# Speed is measured in bench/long_path.py; here the *work* is counted, so the test cannot flake on a
# busy machine yet fails the day a visit becomes quadratic in the path length.


def chain_on_state_path(n: int) -> onnx.ModelProto:
    """LSTM -> Y_h -> n Relu nodes -> hn: every Relu is on the state's way back to its slot."""
    H = 4
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["Y", "e0", "cn"], hidden_size=H, name="lstm")]
    nodes += [helper.make_node("Relu", [f"e{i}"], [f"e{i + 1}"], name=f"relu{i}") for i in range(n)]
    nodes.append(helper.make_node("Identity", [f"e{n}"], ["hn"]))
    return om.model(
        nodes,
        [om.vi("x", ["T", 1, 3]), om.vi("h0", [1, 1, H]), om.vi("c0", [1, 1, H])],
        [om.vi("Y", ["T", 1, 1, H]), om.vi("hn", [1, 1, H]), om.vi("cn", [1, 1, H])],
        om.lstm_weights(H=H),
    )


def _count_work(monkeypatch, n: int) -> dict[str, int]:
    from rnnir import passes
    from rnnir.analysis import tracer
    from rnnir.ir import digraph
    from rnnir.lower import scope

    counts: dict[str, int] = {}

    def counting(cls, name):
        original = getattr(cls, name)

        def wrapper(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    for cls, name in ((scope.Scope, "resolve"), (tracer.Tracer, "_eval"), (digraph.DiGraph, "add_edge"), (digraph.DiGraph, "successors")):
        counting(cls, name)
    passes.run(rnnir.load(chain_on_state_path(n)))
    monkeypatch.undo()
    return counts


def test_work_on_a_long_state_path_grows_linearly(monkeypatch):
    small, large = _count_work(monkeypatch, 500), _count_work(monkeypatch, 2000)
    for name, count in large.items():
        assert count <= 4.4 * max(small.get(name, 0), 1) + 50, (name, small.get(name), count)
    assert large["_eval"] >= 2000  # each node on the path is traced, not skipped


def test_gc_is_paused_while_lowering_and_resumed_after():
    import gc

    from rnnir.util.gcpause import paused_gc

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block does not resume what the outer one paused
    assert gc.isenabled()
    with pytest.raises(rnnir.ModelError):
        rnnir.load(b"junk")
    assert gc.isenabled()  # resumed after a failure too


@pytest.mark.parametrize("fmt", ["text", "dot", "mermaid", "json"])
def test_show_of_a_model_with_a_non_utf8_name_is_a_model_error(tmp_path, capsys, fmt):
    p = tmp_path / "bad.onnx"
    p.write_bytes(_bytes_replaced(b"hn", b"\xffn"))
    code, out, err = run_main(capsys, "show", str(p), "--no-config", "--format", fmt)
    assert code == 2 and out == ""
    assert "not valid UTF-8" in err and "internal error" not in err


def test_if_branch_with_fewer_outputs_than_the_if_is_a_model_error():
    # found by the 100,000-case fuzz run: the slice tracer indexed past the else branch's outputs
    m = _copy(om.packed_lstm_in_if())
    node = next(n for n in m.graph.node if n.op_type == "If")
    node.output.append("extra")  # two outputs, each branch yields one
    with pytest.raises(rnnir.ModelError, match="branch has 0 input.*1 output.*need 0 and 2") as ei:
        rnnir.load(m)
    assert "sr_if" in str(ei.value)


def test_if_branches_matching_the_if_near_miss():
    assert rnnir.load(om.packed_lstm_in_if()).state_pairs
