"""The collector pauses: a command that ends its process leaves its heap frozen; lint output never depends on it."""

from __future__ import annotations

import gc
import io
import subprocess
import sys
from pathlib import Path

import pytest

from rnnir.util.gcpause import paused_for_the_process

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
TWO = [str(SAMPLES / "gru_fanout.onnx"), str(SAMPLES / "lstm_unrolled_cell.onnx")]


def test_the_process_pause_freezes_what_the_block_built_and_resumes_the_collector():
    assert gc.isenabled()
    before = gc.get_freeze_count()
    try:
        with paused_for_the_process():
            assert not gc.isenabled()
            kept = [[] for _ in range(1000)]  # tracked objects made inside the block
        assert gc.isenabled()  # resumed: it was running before
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()


def test_a_collector_disabled_before_the_process_pause_stays_disabled():
    gc.disable()
    try:
        with paused_for_the_process():
            pass
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_pause_ends_even_when_the_command_fails():
    try:
        with pytest.raises(RuntimeError), paused_for_the_process():
            raise RuntimeError("boom")
        assert gc.isenabled()
    finally:
        gc.unfreeze()


_PROBE = """
import gc, sys
from rnnir.cli import main
sys.argv = ["rnnir", *sys.argv[1:]]
explicit = sys.argv[1] == "--explicit"
if explicit:
    del sys.argv[1]
code = main(sys.argv[1:]) if explicit else main()
print(f"frozen={gc.get_freeze_count() > 0} enabled={gc.isenabled()}", file=sys.stderr)
sys.exit(code)
"""


def _probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("paths", [TWO[:1], TWO], ids=["one model", "two models"])
def test_the_console_lint_leaves_its_heap_frozen_and_prints_what_an_in_process_lint_prints(paths):
    from rnnir.cli import main

    console = _probe("lint", *paths, "--format", "json", "--no-config")
    assert "frozen=True enabled=True" in console.stderr
    in_process = _probe("--explicit", "lint", *paths, "--format", "json", "--no-config")
    assert "frozen=False enabled=True" in in_process.stderr  # main(argv): a caller's process goes on, nothing frozen
    assert console.returncode == in_process.returncode
    assert console.stdout == in_process.stdout and console.stdout.startswith("{")
    out = io.StringIO()
    old, sys.stdout = sys.stdout, out
    try:
        main(["lint", *paths, "--format", "json", "--no-config"])
    finally:
        sys.stdout = old
    assert out.getvalue() == console.stdout


def test_other_commands_do_not_freeze_the_heap():
    shown = _probe("rules")
    assert shown.returncode == 0 and "frozen=False" in shown.stderr


def test_a_serial_lint_of_many_models_under_the_pause_collects_between_models_not_after_the_last(monkeypatch):
    from rnnir.cli import lint as cli_lint
    from rnnir.lint.jobs import LintJob

    calls: list[int] = []
    monkeypatch.setattr(cli_lint.gc, "collect", lambda generation=2: calls.append(generation) or 0)
    jobs = [LintJob(path=p) for p in (*TWO, TWO[0])]
    gc.disable()
    try:
        results = cli_lint._run_jobs(jobs, 1, cli_lint.Progress(len(jobs), io.StringIO()))
    finally:
        gc.enable()
    assert [r.path for r in results] == [j.path for j in jobs]
    assert calls == [0, 0]
    calls.clear()
    cli_lint._run_jobs(jobs, 1, cli_lint.Progress(len(jobs), io.StringIO()))
    assert calls == []  # the collector runs by itself: nothing to do
