"""Every writer of rnnir against what a file system can put at the output path (issue 26, "Data loss").

A FIFO, a socket, a folder, a character device (a copy of /dev/full made with mknod inside the test's own
temporary folder: never the system's devices), a symbolic link, a hard link, a read-only file, a full disk
(a write that fails with ENOSPC), a concurrent edit, and a write killed halfway.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rnnir.cli import main
from rnnir.onnxio.metadata import read_noqa
from rnnir.util.writing import FileWriteError, write_file

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


def _model(tmp_path: Path, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    shutil.copy(SAMPLES / "sd002_hc_swap.onnx", path)
    return path


def _full_device(tmp_path: Path) -> Path:
    """A character device like /dev/full (writes fail with ENOSPC), made in ``tmp_path``; skip when not allowed."""
    dev = tmp_path / "full"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except (OSError, AttributeError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return dev


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return fifo


def _socket(tmp_path: Path) -> tuple[Path, socket.socket]:
    path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    return path, s


# -- not a regular file: refused, left as it was -----------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "device", "socket", "folder"])
def test_fix_o_refuses_anything_but_a_regular_file(tmp_path, capsys, kind):
    src = _model(tmp_path)
    sock = None
    if kind == "fifo":
        out = _fifo(tmp_path)
    elif kind == "device":
        out = _full_device(tmp_path)
    elif kind == "socket":
        out, sock = _socket(tmp_path)
    else:
        out = tmp_path / "folder"
        out.mkdir()
    before = os.lstat(out)
    try:
        assert main(["fix", str(src), "-o", str(out)]) == 2
    finally:
        if sock is not None:
            sock.close()
    after = os.lstat(out)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino
    err = capsys.readouterr().err
    assert "not a regular file" in err and "nothing was written" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.onnx", out.name])  # no temporary file left


def test_a_regular_new_file_is_written_near_miss(tmp_path):
    src = _model(tmp_path)
    assert main(["fix", str(src), "-o", str(tmp_path / "new.onnx")]) == 0
    assert stat.S_ISREG(os.lstat(tmp_path / "new.onnx").st_mode)
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "new.onnx").st_mode) == 0o666 & ~mask  # as open() would make it, not mkstemp's 0600


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "{model}", "-o", "{out}"],
        ["lint", "{model}", "-o", "{out}"],
        ["lint", "{model}", "--write-baseline", "{out}"],
    ],
)
def test_report_writers_refuse_a_device_and_a_fifo(tmp_path, capsys, argv):
    model = _model(tmp_path)
    for out in (_full_device(tmp_path), _fifo(tmp_path)):
        code = main([a.format(model=model, out=out) for a in argv])
        assert code == 2, argv
        assert not stat.S_ISREG(os.lstat(out).st_mode)
        assert "not a regular file" in capsys.readouterr().err


def test_state_files_refuse_a_device(tmp_path):
    from rnnir.errors import StateError

    with pytest.raises(StateError, match="a character device, not a regular file"):
        write_file(_full_device(tmp_path), b"x", error=StateError)


# -- never over an input -------------------------------------------------------------------------


def test_show_refuses_to_write_over_its_model(tmp_path, capsys):
    model = _model(tmp_path)
    before = model.read_bytes()
    assert main(["show", str(model), "-o", str(model)]) == 2
    link = tmp_path / "link.onnx"
    link.symlink_to(model.name)
    assert main(["show", str(link), "-o", str(model)]) == 2  # the same file under another name
    assert model.read_bytes() == before
    assert "an input of this command" in capsys.readouterr().err


def test_run_refuses_to_write_over_its_model(tmp_path, capsys):
    model = _model(tmp_path, "gru.onnx")
    shutil.copy(SAMPLES / "gru_fanout.onnx", model)
    before = model.read_bytes()
    assert main(["run", str(model), "-q", "-o", str(model)]) == 2
    assert model.read_bytes() == before
    assert "an input of this command" in capsys.readouterr().err


def test_show_writes_another_file_near_miss(tmp_path):
    model = _model(tmp_path)
    assert main(["show", str(model), "-o", str(tmp_path / "journey.txt")]) == 0
    assert "sd002" in (tmp_path / "journey.txt").read_text() or (tmp_path / "journey.txt").stat().st_size > 0


# -- links ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["lint", "{link}", "--fix"],
        ["fix", "{link}", "--in-place"],
        ["fix", "{link}", "--suppress", "SD002", "--in-place"],
        ["lint", "{link}", "--add-noqa"],
    ],
)
def test_in_place_writers_write_through_a_symlink(tmp_path, argv):
    target = _model(tmp_path, "real.onnx")
    before = target.read_bytes()
    link = tmp_path / "link.onnx"
    link.symlink_to("real.onnx")
    main([a.format(link=link) for a in argv])
    assert link.is_symlink() and os.readlink(link) == "real.onnx"  # the link stays a link
    assert target.read_bytes() != before  # and its target holds the edit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.onnx", "real.onnx"]


def test_fix_o_through_a_symlink_replaces_its_target(tmp_path):
    src = _model(tmp_path)
    target = tmp_path / "target.onnx"
    target.write_bytes(b"old")
    link = tmp_path / "out.onnx"
    link.symlink_to(target)
    assert main(["fix", str(src), "-o", str(link)]) == 0
    assert link.is_symlink() and onnx.load(str(target)).graph.node


def test_a_hard_linked_file_is_refused_and_both_names_keep_their_content(tmp_path, capsys):
    model = _model(tmp_path)
    twin = tmp_path / "twin.onnx"
    os.link(model, twin)
    before = model.read_bytes()
    assert main(["fix", str(model), "--in-place"]) == 2
    assert "has 2 hard links" in capsys.readouterr().err
    assert model.read_bytes() == twin.read_bytes() == before and os.stat(model).st_nlink == 2


def test_a_read_only_file_is_refused_even_as_root(tmp_path, capsys):
    model = _model(tmp_path)
    base = tmp_path / "base.json"
    base.write_text("{}")
    base.chmod(0o444)
    try:
        assert main(["lint", str(model), "--write-baseline", str(base)]) == 2
    finally:
        base.chmod(0o644)
    assert base.read_text() == "{}" and "is read-only (mode 0444); make it writable (chmod u+w) to replace it; nothing was changed" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can fix another user's file")
def test_root_fixing_a_users_file_keeps_its_owner_group_and_mode(tmp_path):
    model = _model(tmp_path)
    os.chown(model, 1234, 5678)
    model.chmod(0o640)
    assert main(["fix", str(model), "--in-place"]) == 0
    st = os.stat(model)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, 0o640)


# -- a failed or killed write leaves the previous file -------------------------------------------


def test_a_full_disk_leaves_the_previous_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "report.txt"
    target.write_text("previous")

    def full(fh):
        fh.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(FileWriteError, match="No space left on device.*previous file, if any, is unchanged"):
        write_file(target, full)
    assert target.read_text() == "previous" and os.listdir(tmp_path) == ["report.txt"]


def test_leftovers_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    pid = int(dead.stdout)  # this process has exited, like one killed with kill -9 before its rename
    leftover = tmp_path / f".out.txt.{pid}.abc123{'.rnnir-tmp'}"
    leftover.write_bytes(b"x" * 1000)
    alive = tmp_path / f".out.txt.1.abc456{'.rnnir-tmp'}"  # pid 1 runs: its file may be in use
    alive.write_bytes(b"y")
    other = tmp_path / f".other.txt.{pid}.abc{'.rnnir-tmp'}"  # another target's: not ours to judge now
    other.write_bytes(b"z")
    write_file(tmp_path / "out.txt", "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.txt", alive.name, other.name])


def test_write_baseline_with_a_non_utf8_file_name_keeps_the_old_baseline_until_the_new_one_is_whole(tmp_path, capsys):
    if sys.platform == "darwin":
        pytest.skip("macOS file systems refuse names that are not UTF-8")
    folder = os.fsencode(tmp_path)
    name = os.path.join(folder, b"m\xff.onnx")
    shutil.copy(SAMPLES / "sd002_hc_swap.onnx", name)
    base = tmp_path / "base.json"
    base.write_text('{"version": 1, "findings": []}\n')
    assert main(["lint", os.fsdecode(name), "--write-baseline", str(base)]) == 0
    doc = json.loads(base.read_text(encoding="utf-8"))  # valid UTF-8, valid JSON
    assert doc["findings"] and all(e["model"] == "m\udcff.onnx" for e in doc["findings"])
    capsys.readouterr()
    assert main(["lint", os.fsdecode(name), "--baseline", str(base)]) == 0  # read back: every finding accepted


def _save_failing_halfway(monkeypatch):
    def savez(f, **kw):
        f.write(b"PK\x03\x04 half an archive")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", savez)


def test_pool_save_state_on_a_full_disk_keeps_the_previous_file(tmp_path, monkeypatch):
    from rnnir.errors import StateError
    from rnnir.serving.pool.pool import SessionPool

    pool = SessionPool(str(SAMPLES / "gru_fanout.onnx"))
    feeds = _pool_feeds(pool)
    pool.run({"a": feeds}, open_missing=True)
    target = tmp_path / "a.state"
    pool.save_state("a", target)
    before = target.read_bytes()
    _save_failing_halfway(monkeypatch)
    with pytest.raises(StateError, match="No space left on device"):
        pool.save_state("a", target)
    assert target.read_bytes() == before and os.listdir(tmp_path) == ["a.state"]


def _pool_feeds(pool):
    solo = pool._solo
    feeds = {}
    for name, spec in solo._model.inputs.items():
        if name in solo._model.slot_by_input:
            continue
        shape = [1 if not isinstance(d, int) or d <= 0 else d for d in (spec.shape or [1])]
        feeds[name] = np.ones(shape, spec.dtype or np.float32)
    return feeds


@pytest.mark.parametrize("case", ["zip_bomb", "truncated", "huge_header", "nested_header", "not_a_zip"])
def test_pool_load_state_refuses_bad_files_with_a_StateError(tmp_path, case):
    import zipfile

    from rnnir.errors import StateError
    from rnnir.serving.pool.pool import SessionPool

    pool = SessionPool(str(SAMPLES / "gru_fanout.onnx"))
    pool.run({"a": _pool_feeds(pool)}, open_missing=True)
    good = tmp_path / "good.state"
    pool.save_state("a", good)
    bad = tmp_path / "bad.state"
    if case == "zip_bomb":
        with zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("__rnnir_state__.npy", good.read_bytes()[:10])
            z.writestr("slot:h0.npy", b"\0" * (100 << 20))  # 100 MB of zeros, 100 KB zipped
    elif case == "truncated":
        bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    elif case in ("huge_header", "nested_header"):
        shape = "(1000000, 1000000)" if case == "huge_header" else "(" * 5000 + ")" * 5000
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }"
        header += " " * (63 - len(header) % 64) + "\n"
        body = b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header.encode()
        with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as z:
            for info in src.infolist():
                z.writestr(info.filename, body if info.filename.startswith("slot:") else src.read(info))
    else:
        bad.write_bytes(b"not a zip at all" * 100)
    # the bomb is refused by its declared size, before anything is decompressed
    with pytest.raises(StateError, match="expands to" if case == "zip_bomb" else "bad.state"):
        pool.load_state("a", bad)
    pool.load_state("a", good)  # near miss: the file save_state wrote loads


# -- concurrent edits ----------------------------------------------------------------------------


def test_concurrent_suppress_in_place_loses_no_update(tmp_path):
    """Four ``fix --suppress CODE --in-place`` at once, ten rounds: every entry lands (separate processes,
    as in CI; a fork of the test process would inherit its onnxruntime threads)."""
    model = _model(tmp_path)
    expected: list[str] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for r in range(10):
        entries = [f"SD009:r{r}p{k}" for k in range(4)]
        procs = [
            subprocess.Popen([sys.executable, "-m", "rnnir", "fix", str(model), "--suppress", e, "--in-place"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for e in entries
        ]
        errors = [p.communicate(timeout=300)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
        expected += entries
        assert sorted(read_noqa(onnx.load(str(model)))) == sorted(expected), f"round {r}"


# -- a model and its external data ---------------------------------------------------------------


def _external_model(tmp_path: Path, name: str, scale: float) -> tuple[Path, np.ndarray]:
    w = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) * scale).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "in.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="in.onnx.data", size_threshold=0)
    return path, np.ones((1, 64), np.float32) @ w


def _output(path: Path) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(["y"], {"x": np.ones((1, 64), np.float32)})[0]


def test_external_data_pair_killed_between_its_renames_keeps_the_old_pair(tmp_path, monkeypatch):
    a, ya = _external_model(tmp_path, "a", 1.0)
    b, yb = _external_model(tmp_path, "b", 2.0)
    out = tmp_path / "out.onnx"
    assert main(["fix", str(a), "-o", str(out)]) == 0
    np.testing.assert_array_equal(_output(out), ya)
    real_replace = os.replace
    calls = []

    def killed_at_the_second_rename(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a kill between the data file's rename and the graph's
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_at_the_second_rename)
    assert main(["fix", str(b), "-o", str(out)]) == 130  # "rnnir: interrupted"
    monkeypatch.undo()
    np.testing.assert_array_equal(_output(out), ya)  # the old graph still reads its own, old weights
    assert main(["fix", str(b), "-o", str(out)]) == 0  # the next write completes and tidies up
    np.testing.assert_array_equal(_output(out), yb)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == sorted(["out.onnx", *(p.name for p in tmp_path.glob("out.onnx.*.data"))])
    assert len(list(tmp_path.glob("out.onnx.*.data"))) == 1


def test_export_refuses_a_fifo_and_writes_a_file_near_miss(tmp_path):
    import rnnir
    from rnnir.errors import ExportError

    program = rnnir.load(str(SAMPLES / "gru_fanout.onnx"))
    fifo = _fifo(tmp_path)
    with pytest.raises(ExportError, match="FIFO"):
        rnnir.export(program, fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    rnnir.export(program, tmp_path / "out.onnx")
    assert onnx.load(str(tmp_path / "out.onnx")).graph.node


def test_a_symlink_loop_is_refused_and_left_alone(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.symlink_to(b.name)
    b.symlink_to(a.name)
    with pytest.raises(FileWriteError, match="symbolic link loop"):
        write_file(a, "x")
    assert os.readlink(a) == "b.txt" and os.readlink(b) == "a.txt"


def test_write_baseline_that_fails_keeps_the_previous_baseline(tmp_path, monkeypatch, capsys):
    model = _model(tmp_path)
    base = tmp_path / "base.json"
    base.write_text("previous\n")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    assert main(["lint", str(model), "--write-baseline", str(base)]) == 2
    monkeypatch.undo()
    assert base.read_text() == "previous\n" and sorted(p.name for p in tmp_path.iterdir()) == ["base.json", "m.onnx"]
    err = capsys.readouterr().err
    assert "No space left on device" in err and "unchanged" in err and "internal error" not in err


def test_kill_9_mid_write_keeps_the_target_and_the_next_write_removes_the_leftover(tmp_path):
    import signal
    import time

    target = tmp_path / "model.onnx"
    target.write_bytes(b"previous")
    script = (
        "import sys, time\n"
        "from rnnir.util.writing import write_file\n"
        "def slow(fh):\n"
        "    fh.write(b'x' * (1 << 20)); fh.flush(); print('writing', flush=True); time.sleep(600)\n"
        "write_file(sys.argv[1], slow)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", script, str(target)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        if proc.stdout is not None:
            proc.stdout.close()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "model.onnx"]
    assert target.read_bytes() == b"previous"
    assert len(leftovers) == 1 and leftovers[0].startswith(f".model.onnx.{proc.pid}.") and leftovers[0].endswith(".rnnir-tmp")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the killed pid is reaped (wait above); nothing reuses it this fast
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    write_file(target, b"new")
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["model.onnx"]
