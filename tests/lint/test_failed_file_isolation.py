"""A file that fails mid-way leaves nothing of itself in the report: no pairs, findings, verdicts, cost or counts.

Three samples are linted in one run; the analysis of the middle one is made to fail at each stage after the first
results were recorded (the verdicts, then the cost analysis), as a bug or a resource limit would.  The oracle is the
same run without the failing file: the other files' records and every summary count except ``files``/``failed``
must be what they are there, and the failed file's record holds only its path, config and error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rnnir import cli

ROOT = Path(__file__).resolve().parents[2]
GOOD = ["sd002_hc_swap.onnx", "gru_fanout.onnx"]
FAILING = "rn100_unused_suppression.onnx"  # has findings of its own, two of them suppressed by its rnnir.noqa


@pytest.fixture
def folder(tmp_path, monkeypatch):
    for name in [*GOOD, FAILING]:
        shutil.copy(ROOT / "samples" / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _lint(capsys, *names: str) -> tuple[int, dict]:
    code = cli.main(["lint", "--no-config", "--cost", "--format", "json", *names])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def _failing_at(monkeypatch, stage: str) -> None:
    """Make ``passes.<stage>`` raise for FAILING only, after lowering and pairing succeeded."""
    from rnnir import passes

    real = getattr(passes, stage)

    def broken(program, *args, **kwargs):
        result = real(program, *args, **kwargs)  # the stage did its work: partial results exist
        if program.source is not None and program.source.path is not None and program.source.path.name == FAILING:
            raise RuntimeError(f"injected failure after {stage}")
        return result

    monkeypatch.setattr(passes, stage, broken)


@pytest.mark.parametrize("stage", ["verify", "cost"])
def test_a_file_failing_mid_way_leaks_nothing_into_the_report(folder, capsys, monkeypatch, stage):
    _, alone = _lint(capsys, *GOOD)
    whole_code, whole = _lint(capsys, GOOD[0], FAILING, GOOD[1])
    before = whole["files"][1]
    assert before["suppressed"] > 0 and before["diagnostics"]  # the near miss: intact, the file has results to leak
    _failing_at(monkeypatch, stage)
    code, doc = _lint(capsys, GOOD[0], FAILING, GOOD[1])
    assert code == 2 and whole_code != 2
    failed = doc["files"][1]
    assert failed["error"]["type"] == "InternalError" and f"after {stage}" in failed["error"]["message"]
    assert failed["state_pairs"] == [] and failed["suggested_pairs"] == [] and failed["diagnostics"] == []
    assert failed["verdicts"] is None and failed["cost"] is None
    assert failed["suppressed"] == 0 and failed["baselined"] == 0
    assert [doc["files"][0], doc["files"][2]] == alone["files"]
    expected = dict(alone["summary"], files=3, failed=1, exit_code=2)
    assert doc["summary"] == expected
