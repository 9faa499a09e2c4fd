"""The small things a newcomer tripped over (issue 23), one behaviour per test.

``explain`` starts with the rule's code, name and severity and imports no model machinery; a missing model is
reported once; ``run`` prints streaming verdicts only for streaming checks that were asked for; ``--jobs 0`` is
one worker per CPU; rule names are accepted wherever codes are; ``lint --fix`` says which files it cannot fix;
``show -o`` says what it wrote; a bad ``pairs`` entry names its file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnir import cli

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"


def run_python(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (so ``sys.modules`` starts empty), with this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("RNNIR_DEBUG", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


# -- rnnir explain ------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["SD002", "wrong-slot"])
def test_explain_starts_with_code_name_and_severity(capsys, given):
    assert cli.main(["explain", given]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "SD002 wrong-slot (error)"  # the catalogue's code, slug and severity (`rnnir rules` lists them)


def test_explain_heading_gives_an_info_rules_severity(capsys):
    assert cli.main(["explain", "unverified-state"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "SD009 unverified-state (info)"


@pytest.mark.parametrize("given", ["SD002", "wrong-slot"])
def test_explain_imports_neither_onnx_nor_numpy(given):
    done = run_python(
        "import sys\n"
        "from rnnir import cli\n"
        f"code = cli.main(['explain', {given!r}])\n"
        "heavy = sorted(m for m in ('onnx', 'onnxruntime', 'numpy') if m in sys.modules)\n"
        "print('HEAVY', heavy, code)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "HEAVY [] 0"
    assert "Fix (safe: `rnnir lint --fix`)" in done.stdout  # the fix section still comes (from the fix table, not the fixer)


# -- a model that cannot be read is reported once -----------------------------------------------


def test_missing_model_is_reported_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lint", "--no-config", "missing.onnx"]) == 2
    out, err = capsys.readouterr()
    assert (out + err).count("no such file") == 1, out + err


@pytest.mark.parametrize("flags", [["--format", "json"], ["--format", "sarif"], ["-o", "report.txt"], ["--quiet"], ["--statistics"]])
def test_missing_model_goes_to_stderr_when_the_report_does_not_show_it(tmp_path, monkeypatch, capsys, flags):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lint", "--no-config", "missing.onnx", *flags]) == 2
    out, err = capsys.readouterr()
    assert err.count("rnnir: error: missing.onnx: no such file") == 1
    if flags[0] != "--format":  # machine formats carry it in the document as well
        assert "no such file" not in out


# -- rnnir run: streaming verdicts only for streaming checks ------------------------------------


def run_text(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(["run", "--no-config", *argv])
    return code, capsys.readouterr().out


def test_run_without_a_streaming_flag_prints_no_streaming_verdict(capsys):
    code, out = run_text(capsys, str(SAMPLES / "gru_fanout.onnx"), "--calls", "8")
    assert code == 0 and ": PASS: persistence holds" in out
    assert "streaming checks" not in out  # no drop, restart, burst, long run or pool was asked for
    assert "gru_fanout.onnx: measured over 8 calls\n  latency per call: " in out  # the measurements stay, without a verdict


def test_run_failing_persistence_prints_no_streaming_pass(capsys):
    # sd002_hc_swap.onnx writes c into h's slot: the multi-call check fails; nothing streaming was asked for
    code, out = run_text(capsys, str(SAMPLES / "sd002_hc_swap.onnx"), "--calls", "8", "-q")
    assert code == 1 and ": FAIL: " in out
    assert "PASS" not in out and "streaming" not in out


def test_run_failing_persistence_with_a_passing_drop_check_does_not_say_pass(capsys):
    code, out = run_text(capsys, str(SAMPLES / "sd002_hc_swap.onnx"), "--calls", "8", "--drop", "2")
    assert code == 1 and ": FAIL: " in out
    assert "PASS" not in out
    assert "streaming checks found no failure of their own over 8 calls (tolerance 0.001); the verdict above (FAIL) stands" in out
    assert "chunk 2 dropped (skip): back within 0.001" in out  # the check's own result is still shown


def test_run_passing_persistence_with_a_drop_check_says_streaming_pass(capsys):
    code, out = run_text(capsys, str(SAMPLES / "gru_fanout.onnx"), "--calls", "8", "--drop", "2")
    assert code == 0
    assert "gru_fanout.onnx: streaming checks PASS over 8 calls (tolerance 0.001)" in out


# -- --jobs 0: one worker per CPU, for lint and cost --------------------------------------------


class InlinePool:
    """A stand-in for ProcessPoolExecutor that records its size and runs each job at once (no processes)."""

    sizes: list[int] = []

    def __init__(self, max_workers: int) -> None:
        InlinePool.sizes.append(max_workers)

    def __enter__(self) -> InlinePool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn, *args):
        from concurrent.futures import Future

        future: Future = Future()
        future.set_result(fn(*args))
        return future


@pytest.mark.parametrize("command", ["lint", "cost"])
def test_jobs_0_is_one_worker_per_cpu(tmp_path, monkeypatch, capsys, command):
    for k in range(5):
        (tmp_path / f"m{k}.onnx").write_bytes((SAMPLES / "gru_fanout.onnx").read_bytes())
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    monkeypatch.setattr(cli, "ProcessPoolExecutor", InlinePool, raising=False)
    InlinePool.sizes = []
    assert cli.main([command, "--no-config", str(tmp_path), "--jobs", "0", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert InlinePool.sizes == [3] and out.count('"path"') >= 5
    assert err == ""  # 0 asks for "as many as there are CPUs": nothing was cut down, nothing to say


def test_jobs_0_with_one_file_lints_it_in_process(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "ProcessPoolExecutor", InlinePool, raising=False)
    InlinePool.sizes = []
    assert cli.main(["lint", "--no-config", str(SAMPLES / "gru_fanout.onnx"), "--jobs", "0"]) == 0
    assert InlinePool.sizes == []


def test_jobs_help_says_what_0_means_for_lint_and_cost(capsys):
    for command in ("lint", "cost"):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args([command, "--help"])
        assert "0: one per CPU" in " ".join(capsys.readouterr().out.split())
