"""Every file a user names is read as a regular file of bounded size (issue 26, "Never hang, never exhaust memory").

A FIFO (nothing ever writes to it) would block a reader forever and ``/dev/zero`` never ends: each must be a clear
error naming what the path is.  The command-line cases run as child processes with a timeout, so a regression
fails the test instead of hanging the suite; the library cases run in a thread with a deadline.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import threading
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rnnir.deploy.inputs import MAX_DATA_FILE_BYTES, read_wav
from rnnir.lint.baseline import Baseline, BaselineError
from rnnir.lint.config import ConfigError, load_config
from rnnir.util.regularfile import read_only_reason

REPO = Path(__file__).resolve().parents[2]
LSTM = REPO / "samples" / "lstm_fanout.onnx"  # x[T, 1, 3], (h0, c0) -> (hn, cn)
GRU = REPO / "samples" / "gru_fanout.onnx"


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread that must finish within ``seconds`` (a blocked read fails the test, never hangs it)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still reading after {seconds} s: it blocked"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def rnnir_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("RNNIR_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "rnnir", *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.fixture(params=["fifo", "dev-zero-link"])
def endless(request, tmp_path) -> Path:
    """A path that is no regular file: a FIFO nobody writes to, or a symlink to /dev/zero."""
    path = tmp_path / "endless"
    if request.param == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


def test_a_fifo_or_dev_zero_as_baseline_is_refused_without_blocking(endless):
    with pytest.raises(BaselineError, match=r"is (a named pipe \(FIFO\)|a character device), not a regular file"):
        within(20, lambda: Baseline.load(endless))


def test_a_fifo_or_dev_zero_as_config_is_refused_without_blocking(endless):
    with pytest.raises(ConfigError, match=r"cannot read: is (a named pipe \(FIFO\)|a character device), not a regular file"):
        within(20, lambda: load_config(endless))


def test_a_fifo_or_dev_zero_as_audio_is_refused_without_blocking(endless):
    with pytest.raises(ValueError, match=r"is (a named pipe \(FIFO\)|a character device), not a regular file"):
        within(20, lambda: read_wav(str(endless)))


def test_the_cli_names_a_fifo_given_as_config_baseline_input_or_ir_text(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "pipe.rnnir").symlink_to(tmp_path / "pipe")
    cases = [
        (["lint", str(LSTM), "--config", "pipe"], "pipe: cannot read: is a named pipe (FIFO), not a regular file"),
        (["lint", str(LSTM), "--no-config", "--baseline", "pipe"], "pipe: cannot read the baseline: is a named pipe (FIFO), not a regular file"),
        (["run", str(LSTM), "--no-config", "--input", "x=pipe"], "--input x=pipe: is a named pipe (FIFO), not a regular file"),
        (["run", str(LSTM), "--no-config", "--audio", "x=pipe"], "--audio x=pipe: is a named pipe (FIFO), not a regular file"),
        (["lint", "pipe.rnnir", "--no-config"], "pipe.rnnir: error: is a named pipe (FIFO), not a regular file"),  # the report line names it once
    ]
    for argv, expected in cases:
        proc = rnnir_cli(*argv, cwd=tmp_path)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert expected in proc.stderr + proc.stdout, (argv, proc.stderr, proc.stdout)
        assert "internal error" not in proc.stderr and "no such configuration file" not in proc.stderr


def test_a_missing_config_is_still_called_missing(tmp_path):
    proc = rnnir_cli("lint", str(LSTM), "--config", "nothere.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "nothere.toml: no such configuration file" in proc.stderr


# -- .npy and WAV: what the header claims is checked against what the file holds ---------------------------------


def _npy_claiming(shape: tuple[int, ...]) -> bytes:
    """A version-1.0 .npy file whose header claims ``shape`` of float32 and holds 12 bytes of data."""
    header = repr({"descr": "<f4", "fortran_order": False, "shape": shape}).encode("latin1")
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\x00" * 12


def test_an_npy_header_claiming_1e12_elements_is_refused_before_any_allocation(tmp_path, capsys):
    from rnnir import cli

    (tmp_path / "big.npy").write_bytes(_npy_claiming((10**12, 1, 3)))
    code = within(60, lambda: cli.main(["run", str(LSTM), "--no-config", "--input", f"x={tmp_path / 'big.npy'}"]))
    err = capsys.readouterr().err
    assert code == 2
    assert "its header promises shape (1000000000000, 1, 3) of float32 (12000000000000 bytes), but the file holds 12 bytes of data" in err


def test_an_npy_that_holds_what_it_claims_still_reads(tmp_path):
    from rnnir.deploy.inputs import _load_npy

    buf = io.BytesIO()
    want = np.arange(12, dtype=np.float32).reshape(4, 1, 3)
    np.save(buf, want)
    assert np.array_equal(_load_npy(buf.getvalue()), want)
    assert np.array_equal(_load_npy(_npy_claiming((1, 1, 3))), np.zeros((1, 1, 3), np.float32))  # the near miss: 12 bytes, 3 floats


def _wav(fmt: bytes, data: bytes, declared: int | None = None) -> bytes:
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data) if declared is None else declared) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


_PCM_GUID = struct.pack("<H", 1) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


def test_a_16_bit_extensible_wav_reads_as_the_same_samples_as_plain_pcm(tmp_path):
    pcm = np.array([[0, 16384], [-32768, 8192], [100, -100]], dtype="<i2")
    with wave.open(str(tmp_path / "plain.wav"), "wb") as w:  # the standard library writes the plain header
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(pcm.tobytes())
    fmt = struct.pack("<HHIIHHHHI", 0xFFFE, 2, 8000, 8000 * 4, 4, 16, 22, 16, 0b11) + _PCM_GUID  # what sox writes
    (tmp_path / "ext.wav").write_bytes(_wav(fmt, pcm.tobytes()))
    plain, ext = read_wav(str(tmp_path / "plain.wav")), read_wav(str(tmp_path / "ext.wav"))
    assert (ext.rate, ext.channels) == (8000, 2)
    assert np.array_equal(ext.samples, plain.samples)
    assert np.array_equal(ext.samples, np.array([8192, -12288, 0], np.float32) / 32768)  # channels averaged by hand


def test_an_extensible_wav_of_float_samples_is_refused_with_the_conversion(tmp_path):
    guid = struct.pack("<H", 3) + _PCM_GUID[2:]
    fmt = struct.pack("<HHIIHHHHI", 0xFFFE, 1, 8000, 8000 * 4, 4, 32, 22, 32, 0) + guid
    (tmp_path / "f.wav").write_bytes(_wav(fmt, b"\x00" * 16))
    with pytest.raises(ValueError, match=r"^floating-point samples; --audio reads 16-bit PCM WAV \(convert: sox"):
        read_wav(str(tmp_path / "f.wav"))


def test_a_wav_declaring_a_4_gb_data_chunk_names_the_limit(tmp_path):
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    (tmp_path / "huge.wav").write_bytes(_wav(fmt, b"\x01\x00" * 8, declared=0xFFFFFFF0))
    with pytest.raises(ValueError, match=rf"its data chunk declares 4294967280 bytes, over the {MAX_DATA_FILE_BYTES}-byte limit"):
        within(60, lambda: read_wav(str(tmp_path / "huge.wav")))
    (tmp_path / "cut.wav").write_bytes(_wav(fmt, b"\x01\x00" * 8, declared=1000))
    with pytest.raises(ValueError, match=r"its data chunk declares 1000 bytes, but the file holds 16 after it: a truncated file"):
        read_wav(str(tmp_path / "cut.wav"))
    (tmp_path / "ok.wav").write_bytes(_wav(fmt, b"\x01\x00" * 8))  # the near miss: what it declares is there
    assert np.array_equal(read_wav(str(tmp_path / "ok.wav")).samples, np.full(8, 1 / 32768, np.float32))


# -- IR text --------------------------------------------------------------------------------------------------------


def test_an_upper_case_rnnir_file_in_a_folder_is_read_as_ir_text(tmp_path, capsys):
    from rnnir import cli

    (tmp_path / "CHAIN.RNNIR").write_bytes((REPO / "samples" / "al001_chain.rnnir").read_bytes())
    code = cli.main(["lint", str(tmp_path), "--no-config", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert [f.get("error") for f in doc["files"]] == [None]
    assert code == 1 and "AL001" in {d["code"] for f in doc["files"] for d in f["diagnostics"]}


def test_ir_text_over_64_mib_names_the_limit(tmp_path):
    import rnnir
    from rnnir.errors import ModelError
    from rnnir.ir.text import MAX_IR_TEXT_BYTES

    path = tmp_path / "big.rnnir"
    with open(path, "wb") as fh:  # sparse: nothing is written but the size
        fh.truncate(MAX_IR_TEXT_BYTES + 1)
    with pytest.raises(ModelError, match=rf"file is {MAX_IR_TEXT_BYTES + 1} bytes, over the {MAX_IR_TEXT_BYTES}-byte limit"):
        rnnir.load(path)


def test_ir_text_with_a_byte_order_mark_reads_as_without(tmp_path):
    import rnnir
    from rnnir.ir.text import print_program

    text = (REPO / "samples" / "al001_chain.rnnir").read_text()
    (tmp_path / "bom.rnnir").write_text("\ufeff" + text, encoding="utf-8")
    (tmp_path / "plain.rnnir").write_text(text, encoding="utf-8")
    assert print_program(rnnir.load(tmp_path / "bom.rnnir")) == print_program(rnnir.load(tmp_path / "plain.rnnir"))


# -- a read-only file is not replaced, even by root ----------------------------------------------------------------


def test_write_baseline_over_a_read_only_file_is_refused_even_as_root(tmp_path, capsys):
    from rnnir import cli

    base = tmp_path / "base.json"
    base.write_text("{}\n")
    base.chmod(0o444)
    code = cli.main(["lint", str(GRU), "--no-config", "--write-baseline", str(base)])
    err = capsys.readouterr().err
    assert code == 2 and "is read-only (mode 0444); make it writable (chmod u+w) to replace it" in err
    assert base.read_text() == "{}\n"
    base.chmod(0o644)  # the near miss: a writable file is replaced
    assert read_only_reason(base) is None
    assert cli.main(["lint", str(GRU), "--no-config", "--write-baseline", str(base)]) == 0
    assert json.loads(base.read_text())["version"] == 1
