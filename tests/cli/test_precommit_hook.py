"""The ``rnnir-lint`` pre-commit hook, run as a user runs it: ``pre-commit try-repo <this checkout> rnnir-lint``
on a temporary git repository holding one good and one bad model.  pre-commit installs rnnir from the
checkout into its own environment (from PyPI for the dependencies), so this test takes a minute or two the
first time; PRE_COMMIT_HOME is kept per test session under pytest's tmp folder.  Skipped with a message when
pre-commit or git is missing, or when the hook's environment cannot be installed (no registry reachable).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


def _pre_commit() -> list[str]:
    exe = shutil.which("pre-commit")
    if exe:
        return [exe]
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (pip install 'rnnir[deploy-test]'): the hook cannot be tried")
    return [sys.executable, "-m", "pre_commit"]


@pytest.fixture(scope="module")
def hook_env(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed: pre-commit needs it")
    return {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home")), "PRE_COMMIT_COLOR": "never"}


def _repo(tmp_path: Path, env: dict, files: dict[str, Path]) -> Path:
    repo = tmp_path / "models"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True, env=env)
    for name, source in files.items():
        shutil.copy(source, repo / name)
    (repo / "notes.txt").write_text("not a model\n")
    subprocess.run([*git, "add", "."], cwd=repo, check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "models"], cwd=repo, check=True, env=env)
    return repo


def _try_repo(repo: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*_pre_commit(), "try-repo", str(ROOT), "rnnir-lint", "--all-files", "--verbose"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=1200,
    )
    if "An unexpected error has occurred" in done.stdout + done.stderr and "CalledProcessError" in done.stdout + done.stderr:
        pytest.skip(f"pre-commit could not install the hook's environment (no registry?): {(done.stdout + done.stderr)[-400:]}")
    return done


def test_hook_fails_on_the_swapped_model_and_names_it(tmp_path, hook_env):
    repo = _repo(tmp_path, hook_env, {"good.onnx": SAMPLES / "lstm_fanout.onnx", "bad.onnx": SAMPLES / "sd002_hc_swap.onnx"})
    done = _try_repo(repo, hook_env)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "rnnir lint" in out and "Failed" in out
    assert "bad.onnx" in out and "SD002" in out
    assert "good.onnx" not in out.replace("bad.onnx", "")  # a clean model is not reported
    assert "notes.txt" not in out  # files: only .onnx/.rnnir reach the hook


def test_hook_passes_a_clean_repository(tmp_path, hook_env):
    repo = _repo(tmp_path, hook_env, {"good.onnx": SAMPLES / "lstm_fanout.onnx", "also_good.rnnir": SAMPLES / "gru_view_load_ordered.rnnir"})
    done = _try_repo(repo, hook_env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Passed" in out
