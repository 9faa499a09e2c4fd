"""Same input, same bytes: ``rnnir lint`` (text, JSON, SARIF) and ``rnnir show`` print the same output whatever
Python's hash seed.

Sets of strings iterate in an order that changes with ``PYTHONHASHSEED``; once such an order reached a message
(GTCRN's 13 GRUs were listed in a different order on every run), so CI diffs, snapshot tests and caches saw a new
report for an unchanged model.  Each hash seed runs in its own interpreter (the seed is fixed at start-up); every
process lints every model in each format and the outputs are compared byte for byte.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.support import realmodels

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
HASH_SEEDS = ("0", "1", "2", "12345")

#: runs in a fresh interpreter: every report of the given models, keyed by what produced it, as one JSON object
_REPORTS = """
import contextlib, io, json, sys
from rnnir import cli
paths = sys.argv[1:]
reports = {}
def record(key, argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main(argv)
    reports[key] = f"exit {code}\\n" + out.getvalue()
for fmt in ("text", "json", "sarif"):
    record(f"lint --format {fmt}", ["lint", "--no-config", "--format", fmt, *paths])
record("lint --verbose --cost", ["lint", "--no-config", "--verbose", "--cost", *paths])
for path in paths:
    if path.endswith(".onnx"):
        for fmt in ("text", "json", "dot"):
            record(f"show --format {fmt} {path}", ["show", "--no-config", "--format", fmt, path])
json.dump(reports, sys.stdout)
"""


def reports_under(seed: str, paths: list[pathlib.Path], cwd: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("RNNIR_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", _REPORTS, *map(str, paths)], capture_output=True, text=True, cwd=cwd, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_same_bytes_under_every_seed(paths: list[pathlib.Path], cwd: pathlib.Path) -> None:
    first = reports_under(HASH_SEEDS[0], paths, cwd)
    assert "Traceback" not in "".join(first.values())
    # the reports say something (state slices traced), so the comparison is not of empty reports
    assert re.search(r"[1-9]\d* of [1-9]\d* state slices? verified", first["lint --format text"]), first["lint --format text"][-300:]
    for seed in HASH_SEEDS[1:]:
        other = reports_under(seed, paths, cwd)
        assert other.keys() == first.keys()
        differing = [key for key in first if other[key] != first[key]]
        assert differing == [], f"PYTHONHASHSEED={seed} changes the output of {differing}"


def test_samples_give_the_same_bytes_under_every_hash_seed():
    paths = sorted(p for p in SAMPLES.iterdir() if p.suffix in (".onnx", ".rnnir"))
    assert len(paths) > 30
    assert_same_bytes_under_every_seed([p.relative_to(REPO) for p in paths], cwd=REPO)


def real_models() -> list[pathlib.Path]:
    """Every real model the suite has: silero-vad's six files, faster-whisper's three, GTCRN, FSMN-VAD."""
    try:
        silero = realmodels.silero_vad_dir()
        return [*(silero / name for name in realmodels.SILERO_FILES),
                *(realmodels.faster_whisper_path(name) for name in realmodels.FASTER_WHISPER_INPUTS),
                realmodels.gtcrn_path(), realmodels.fsmn_vad_path()]
    except realmodels.RealModelUnavailable as exc:
        pytest.skip(f"real models unavailable: {exc}")


@pytest.mark.realmodel
def test_real_models_give_the_same_bytes_under_every_hash_seed(tmp_path):
    # GTCRN's 14 GRUs feed three packed caches: the model whose report once changed from run to run
    assert_same_bytes_under_every_seed(real_models(), cwd=tmp_path)


def test_committed_exports_give_the_same_bytes_under_every_hash_seed():
    """Every model committed in tests/data: the Keras exports (two Loop layers whose states are packed on inner axes:
    their recurrences were once listed in set order), the PyTorch exports and cells, the onnxruntime-optimized and
    quantized files."""
    data = REPO / "tests" / "data"
    paths = sorted(data.glob("*/*.onnx"))
    assert len(paths) >= 50
    assert_same_bytes_under_every_seed([p.relative_to(REPO) for p in paths], cwd=REPO)
