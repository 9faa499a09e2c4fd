"""The input fuzzers in CI: IR text, pyproject.toml, baselines, noqa metadata, WAV and .npy (issue 26).

Each target's cases come from ``tests/support/fuzz_inputs.py`` with a fixed seed; the default run does a few hundred per
target, the long run ``RNNIR_FUZZ_CASES=10000`` (or ``python tests/support/fuzz_inputs.py --cases 10000``) ten thousand.
The run is a child process under a 4 GiB address-space limit and a timeout: a reader that allocates what a header
claims, or blocks, fails this test instead of taking the suite down.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import pytest

from tests.support import fuzz_inputs

SEED = 20261226


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4096 * 2**20, 4096 * 2**20))


def test_every_input_reader_ends_in_its_own_error_never_another_exception_or_a_hang(tmp_path):
    cases = fuzz_inputs.default_cases()
    proc = subprocess.run(
        [sys.executable, str(fuzz_inputs.REPO / "tests" / "support" / "fuzz_inputs.py"), "--cases", str(cases), "--seed", str(SEED), "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=max(600, cases), preexec_fn=_limit_memory,
    )
    doc = json.loads(proc.stdout)
    assert doc["failures"] == [] and proc.returncode == 0, json.dumps(doc["failures"][:10], indent=1)
    assert doc["cases"] == {name: cases for name in fuzz_inputs.TARGETS}
    for name in fuzz_inputs.TARGETS:  # the generators reach both sides: inputs that read and inputs refused
        assert doc["outcomes"].get(f"{name}:ok", 0) > cases // 20, name
        assert doc["outcomes"].get(f"{name}:error", 0) > cases // 20, name


def test_the_checker_would_find_an_escaping_exception_and_a_hang(tmp_path, monkeypatch):
    real = fuzz_inputs.TARGETS["wav"]

    def crash(path):
        raise KeyError("boom")

    monkeypatch.setitem(fuzz_inputs.TARGETS, "wav", fuzz_inputs.Target("wav", real.seeds, real.mutate, crash, real.allowed, real.suffix))
    summary = fuzz_inputs.run(3, SEED, tmp_path, ["wav"])
    assert [f["what"] for f in summary.failures] == ["KeyError: 'boom'"] * 3

    def hang(path):
        time.sleep(30)

    monkeypatch.setitem(fuzz_inputs.TARGETS, "wav", fuzz_inputs.Target("wav", real.seeds, real.mutate, hang, real.allowed, real.suffix))
    t0 = time.perf_counter()
    summary = fuzz_inputs.run(2, SEED, tmp_path, ["wav"], case_seconds=0.2)
    assert time.perf_counter() - t0 < 10
    assert [f["what"] for f in summary.failures] == ["no result after 0.2 s (a hang)"] * 2


@pytest.mark.parametrize("name", sorted(fuzz_inputs.TARGETS))
def test_the_generator_is_deterministic_and_mutates(name):
    import random

    target = fuzz_inputs.TARGETS[name]
    seeds = target.seeds()

    def cases(seed: int) -> list[bytes]:
        rng = random.Random(seed)
        return [target.mutate(rng, rng.choice(seeds)) for _ in range(20)]

    a, b = cases(1), cases(1)
    assert a == b
    assert sum(c not in seeds for c in a) >= 15
