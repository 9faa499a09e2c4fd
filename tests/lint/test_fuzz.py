"""The fuzz suite in CI: thousands of mutated models, none may end as an internal error (issue 10).

The cases come from ``tests/fuzz.py`` (the same generator the long run uses: ``python tests/fuzz.py
--cases 100000``), with a fixed seed so a failure here reproduces by its case number.  Most cases run
in-process for speed; a few go through the real ``rnnir`` command under a memory limit and a timeout,
and saved state files are fuzzed the same way through ``load_state``.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rnnir
from tests.support import fuzz
from tests.support import onnx_models as om

CI_CASES = 2000
CI_SEED = 20261201


def test_two_thousand_mutated_models_end_in_exit_0_1_or_2_never_an_internal_error(tmp_path):
    rss_before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the suite's high-water mark so far
    summary = fuzz.run(CI_CASES, CI_SEED, tmp_path, case_seconds=10.0)
    assert summary.cases == CI_CASES
    assert not summary.failures, "\n".join(f"case {f.case} ({f.seed}, {f.mutator}): {f.what}" for f in summary.failures[:10])
    # the generator must reach both sides: models that lint and models that are refused
    assert summary.outcomes["ok"] > CI_CASES // 20 and summary.outcomes["error"] > CI_CASES // 20
    assert summary.slowest < 10.0
    assert summary.peak_rss_mb < max(rss_before_mb, 1024) + 1024  # no case may balloon the process


def test_the_generator_is_deterministic_and_mutates(tmp_path):
    a = [c.data for c in fuzz.cases_of(7, 20, tmp_path / "a")]
    b = [c.data for c in fuzz.cases_of(7, 20, tmp_path / "b")]
    assert a == b
    seeds = {s.data for s in fuzz.load_seeds(tmp_path / "c")}
    assert sum(d not in seeds for d in a) >= 15


def test_the_checker_would_find_an_internal_error(tmp_path, monkeypatch):
    # the oracle itself can fail: a lowering that crashes is reported as a failure with its case number
    def crash(*args, **kwargs):
        raise KeyError("boom")

    import rnnir.lower.load

    monkeypatch.setattr(rnnir, "load", crash)
    monkeypatch.setattr(rnnir.lower.load, "load", crash)  # what the lint library calls
    summary = fuzz.run(5, CI_SEED, tmp_path)
    assert len(summary.failures) == 5 and all("internal error" in f.what for f in summary.failures)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4096 * 2**20, 4096 * 2**20))


def test_mutated_models_through_the_real_command(tmp_path):
    """A few dozen cases as real processes (every format), so nothing the in-process run hides slips by."""
    folder = tmp_path / "cases"
    folder.mkdir()
    for k, case in enumerate(fuzz.cases_of(CI_SEED + 1, 40, tmp_path / "seeds")):
        (folder / f"case{k:02d}.onnx").write_bytes(case.data)
    env = dict(os.environ, PYTHONPATH=str(fuzz.REPO))
    env.pop("RNNIR_DEBUG", None)
    for fmt in ("json", "sarif", "text"):
        proc = subprocess.run(
            [sys.executable, "-m", "rnnir.cli", "lint", str(folder), "--no-config", "--format", fmt, "--jobs", "2"],
            capture_output=True, env=env, timeout=300, preexec_fn=_limit_memory,
        )
        assert proc.returncode in (0, 1, 2)
        assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr
        if fmt != "text":
            doc = json.loads(proc.stdout)
            n = len(doc["files"]) if fmt == "json" else len(doc["runs"][0]["artifacts"])
            assert n == 40


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    name = rng.choice(sorted(set(fuzz.BYTE_MUTATORS) - {"non_utf8_name"}))
    return fuzz.BYTE_MUTATORS[name](rng, data)


def test_mutated_state_files_are_state_errors_and_never_touch_the_live_state(tmp_path):
    from rnnir.runtime import StatefulSession

    s = StatefulSession(om.lstm_h0c0())
    s.run({"x": np.ones((3, 1, 3), np.float32)})
    good = tmp_path / "good.state"
    s.save_state(good)
    before = s.state
    data = good.read_bytes()
    rng = random.Random(CI_SEED)
    loaded = refused = 0
    for k in range(300):
        p = tmp_path / f"m{k}.state"
        p.write_bytes(_mutate_bytes(rng, data))
        try:
            s.load_state(p)
            loaded += 1
            s.load_state(good)
        except rnnir.StateError:
            refused += 1
            now = s.state
            assert all(np.array_equal(now[n], before[n]) for n in before)
    assert loaded + refused == 300 and refused > 100


@pytest.mark.parametrize("seed_name", ["gru_fanout.onnx", "lstm_packed_if.onnx"])
def test_every_mutator_applies_to_real_seeds(tmp_path, seed_name):
    """Each protobuf mutator changes a sample (a mutator that silently does nothing tests nothing)."""
    import onnx

    data = (Path(fuzz.REPO) / "samples" / seed_name).read_bytes()
    rng = random.Random(1)
    for name, mutate in fuzz.PROTO_MUTATORS.items():
        changed = False
        for _ in range(10):
            m = onnx.ModelProto.FromString(data)
            mutate(rng, m)
            changed |= m.SerializeToString() != data
        assert changed, name


def test_mutated_models_that_lint_also_run_without_an_internal_error(tmp_path, capsys):
    """``rnnir run`` on fuzzed models that lint: onnxruntime failures are the model's problem (exit 2), not a bug."""
    from rnnir import cli

    seeds = fuzz.load_seeds(tmp_path)
    rng = random.Random(CI_SEED + 2)
    ran = 0
    codes: set[int] = set()
    while ran < 25:
        case = fuzz.generate(seeds, rng)
        path = case.seed.folder / "case.onnx"
        if fuzz.check_case(case, path)[0] != "ok":
            continue
        ran += 1
        code = cli.main(["run", str(path), "--no-config", "--calls", "3", "--chunk", "2"])
        err = capsys.readouterr().err
        assert code in (0, 1, 2) and "internal error" not in err, err
        codes.add(code)
    assert 2 in codes and codes & {0, 1}  # both sides reached: runs that work and models onnxruntime refuses
