"""`rnnir run --plot`: the per-call data it draws, checked against a hand-written onnxruntime loop,
and the optional matplotlib extra (imported only for --plot; a clear error when it is missing)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from rnnir import cli
from rnnir.check.multicall.check import check_multicall

REPO = Path(__file__).resolve().parents[2]
FANOUT = REPO / "samples" / "lstm_fanout.onnx"  # x[T,1,3], h0/c0[1,1,5] -> y[T,1,1,5], hn, cn


def hand_loop(x: np.ndarray, chunk: int, mode: str) -> tuple[list[float], list[dict[str, np.ndarray]]]:
    """The chunked run written out by hand with onnxruntime: mean of y per call, and every call's outputs.

    ``persistent`` feeds hn/cn back; ``reinit`` feeds zeros every call; ``stale`` feeds what call k-2 returned.
    """
    sess = ort.InferenceSession(str(FANOUT), providers=["CPUExecutionProvider"])
    zeros = {"h0": np.zeros((1, 1, 5), np.float32), "c0": np.zeros((1, 1, 5), np.float32)}
    outs: list[dict[str, np.ndarray]] = []
    for k, start in enumerate(range(0, x.shape[0], chunk)):
        if mode == "persistent":
            state = zeros if k == 0 else {"h0": outs[-1]["hn"], "c0": outs[-1]["cn"]}
        elif mode == "stale":
            state = zeros if k < 2 else {"h0": outs[k - 2]["hn"], "c0": outs[k - 2]["cn"]}
        else:
            state = zeros
        y, hn, cn = sess.run(None, {"x": x[start : start + chunk], **state})
        outs.append({"y": y, "hn": hn, "cn": cn})
    return [float(o["y"].astype(np.float64).mean()) for o in outs], outs


def stream(steps: int = 24) -> np.ndarray:
    return np.random.default_rng(7).standard_normal((steps, 1, 3)).astype(np.float32)


def test_report_carries_per_call_traces_equal_to_a_hand_loop():
    x = stream()
    report = check_multicall(str(FANOUT), {"x": x}, chunk_sizes=[3])
    assert report.watched == "y"  # the first output that is not state
    for variant in ("persistent", "reinit", "stale"):
        expected, _ = hand_loop(x, 3, variant)
        np.testing.assert_allclose(report.variant(variant, 3).trace, expected, rtol=1e-5, atol=1e-6)
    # per-call distance from persistent: 0 at call 0 for every variant (same initial state), and reinit
    # differs from call 1 on by what the hand loop says
    _, persistent = hand_loop(x, 3, "persistent")
    _, reinit = hand_loop(x, 3, "reinit")
    expected_diff = [max(float(np.abs(a[n] - b[n]).max()) for n in ("y", "hn", "cn")) for a, b in zip(reinit, persistent)]
    got = report.variant("reinit", 3).per_call
    assert got[0] == 0.0 and all(d > 1e-4 for d in got[1:])
    np.testing.assert_allclose(got, expected_diff, rtol=1e-4, atol=1e-6)
    _, stale = hand_loop(x, 3, "stale")
    expected_stale = [max(float(np.abs(a[n] - b[n]).max()) for n in ("y", "hn", "cn")) for a, b in zip(stale, persistent)]
    np.testing.assert_allclose(report.variant("stale", 3).per_call, expected_stale, rtol=1e-4, atol=1e-6)
    assert report.variant("stale", 3).per_call[0] == 0.0  # call 0 starts from the initial state in both


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_run_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "run.png"
    code = cli.main(["run", "--no-config", str(FANOUT), "--calls", "12", "--chunk", "2", "--plot", str(target)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(f"{FANOUT}: PASS")  # the text report is still printed
    width, height = png_size(target)
    assert width > 600 and height > 600


def test_plot_draws_the_report_data():
    pytest.importorskip("matplotlib")
    from rnnir.check.plot import plot_report

    x = stream()
    report = check_multicall(str(FANOUT), {"x": x}, chunk_sizes=[3])
    fig = plot_report(report)
    ax_out, ax_diff, ax_norm = fig.axes
    lines = {line.get_label(): list(line.get_ydata()) for line in ax_out.get_lines()}
    expected, _ = hand_loop(x, 3, "reinit")
    np.testing.assert_allclose(lines["reinit"], expected, rtol=1e-5, atol=1e-6)
    assert {"persistent", "reinit", "stale"} <= set(lines)
    assert ax_diff.get_yscale() == "log"
    norms = {line.get_label(): list(line.get_ydata()) for line in ax_norm.get_lines()}
    _, persistent = hand_loop(x, 3, "persistent")
    h0_label = next(label for label in norms if label.startswith("h0 "))
    np.testing.assert_allclose(norms[h0_label], [float(np.linalg.norm(o["hn"])) for o in persistent], rtol=1e-5)
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_plot_without_matplotlib_is_a_clear_error_before_running(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    target = tmp_path / "run.png"
    code = cli.main(["run", "--no-config", str(FANOUT), "--calls", "4", "--plot", str(target)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""  # refused before the run, not after printing a report
    assert "--plot needs matplotlib" in err and "rnnir[plot]" in err and err.count("\n") == 1
    assert not target.exists()


def test_run_without_plot_never_imports_matplotlib():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    code = (
        "import sys; from rnnir import cli; "
        f"rc = cli.main(['run', '--no-config', {str(FANOUT)!r}, '--calls', '4']); "
        "print('RESULT', rc, 'matplotlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "RESULT 0 False", done.stderr


def test_plot_into_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "no" / "such" / "run.png"
    code = cli.main(["run", "--no-config", str(FANOUT), "--calls", "4", "--plot", str(target)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""  # refused before the run
    assert err.startswith(f"rnnir: error: {target}: cannot write the plot: no folder") and err.count("\n") == 1


def test_plot_that_matplotlib_cannot_write_is_a_clear_error(tmp_path):
    pytest.importorskip("matplotlib")
    from rnnir.check.plot import PlotError, plot_report

    report = check_multicall(str(FANOUT), {"x": stream(6)}, chunk_sizes=[3])
    with pytest.raises(PlotError, match="cannot write the plot"):
        plot_report(report, tmp_path / "run.notaformat")
