"""Folder walks never pass silently and one bad path never stops the others (issue 26).

A folder that cannot be listed (no permission, a path longer than PATH_MAX) was skipped without a word (exit 0,
"in 1 file"); a symlink loop or 1,200 nested folders ended the whole run as an internal error.  Each is now an
error record for that path (exit 2) while every other model is still linted.  Tests run as root, who may list
any folder, so "no permission" is simulated by an ``os.scandir`` that refuses one folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnnir import cli

REPO = Path(__file__).resolve().parents[2]
SD002 = REPO / "samples" / "sd002_hc_swap.onnx"
CLEAN = REPO / "samples" / "gru_fanout.onnx"


def lint_json(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main(["lint", "--no-config", "--format", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


def errors_of(doc: dict) -> dict[str, str]:
    return {f["path"]: f["error"]["message"] for f in doc["files"] if f.get("error")}


def test_an_unlistable_subfolder_is_reported_and_the_others_still_linted(tmp_path, monkeypatch, capsys):
    shutil.copy(CLEAN, tmp_path / "clean.onnx")
    (tmp_path / "locked").mkdir()
    shutil.copy(SD002, tmp_path / "locked" / "hidden_bug.onnx")
    real = os.scandir

    def scandir(path):  # what a non-root user meets in a folder of mode 0700 owned by someone else
        if os.path.basename(os.fspath(path)) == "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, doc = lint_json(capsys, str(tmp_path))
    assert code == 2
    assert errors_of(doc) == {str(tmp_path / "locked"): "cannot list this folder: Permission denied; its models were not linted"}
    assert [f["path"] for f in doc["files"] if not f.get("error")] == [str(tmp_path / "clean.onnx")]


def test_an_unlistable_folder_given_itself_says_so_not_that_it_holds_no_models(tmp_path, monkeypatch, capsys):
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: (_ for _ in ()).throw(PermissionError(13, "Permission denied")) if os.fspath(p) == str(tmp_path) else real(p))
    code, doc = lint_json(capsys, str(tmp_path))
    assert code == 2 and errors_of(doc) == {str(tmp_path): "cannot list this folder: Permission denied; its models were not linted"}


def _as_nobody() -> None:
    os.setgid(65534)
    os.setuid(65534)


@pytest.mark.skipif(os.geteuid() != 0 or not hasattr(os, "setuid"), reason="needs root to become nobody")
def test_an_unreadable_subfolder_as_a_real_non_root_user(tmp_path):
    tmp_path.chmod(0o755)
    top = tmp_path / "models"
    (top / "locked").mkdir(parents=True)
    shutil.copy(CLEAN, top / "clean.onnx")
    shutil.copy(SD002, top / "locked" / "hidden_bug.onnx")
    (top / "locked").chmod(0o700)  # root's: nobody cannot list it
    for p in (top, top / "clean.onnx"):
        p.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(REPO), HOME=str(tmp_path))
    env.pop("RNNIR_DEBUG", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "rnnir", "lint", "--no-config", str(top)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120, preexec_fn=_as_nobody)
    except (PermissionError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot run as nobody here: {exc}")
    if "Permission denied" in proc.stderr and "locked" not in proc.stderr:
        pytest.skip(f"nobody cannot run Python here: {proc.stderr[:200]}")
    assert proc.returncode == 2, proc.stderr
    assert f"{top / 'locked'}: error: cannot list this folder: Permission denied" in proc.stdout + proc.stderr


def test_a_folder_deeper_than_path_max_is_reported(tmp_path, capsys, monkeypatch):
    shutil.copy(CLEAN, tmp_path / "top.onnx")
    monkeypatch.chdir(tmp_path)
    name = "d" * 200
    depth = 0
    while len(str(tmp_path)) + depth * (len(name) + 1) < 4200:  # past Linux's PATH_MAX of 4096
        os.mkdir(name)
        os.chdir(name)
        depth += 1
    shutil.copy(CLEAN, "deep.onnx")
    monkeypatch.chdir(tmp_path)
    try:
        code, doc = lint_json(capsys, ".")
    finally:
        _remove_chain(tmp_path, name, depth)
    errors = errors_of(doc)
    assert code == 2 and len(errors) == 1
    (path, message), = errors.items()
    assert message.startswith("cannot list this folder: File name too long") and path.startswith(os.path.join(name, name))
    assert [f["path"] for f in doc["files"] if not f.get("error")] == ["top.onnx"]


def test_1300_nested_folders_are_walked_without_recursion(tmp_path, capsys, monkeypatch):
    shutil.copy(CLEAN, tmp_path / "top.onnx")
    monkeypatch.chdir(tmp_path)
    for _ in range(1300):
        os.mkdir("d")
        os.chdir("d")
    shutil.copy(SD002, "deep.onnx")
    monkeypatch.chdir(tmp_path)
    try:
        code, doc = lint_json(capsys, ".")
    finally:
        _remove_chain(tmp_path, "d", 1300)
    assert code == 1 and errors_of(doc) == {}
    assert [f["path"] for f in doc["files"]] == ["top.onnx", os.path.join(*["d"] * 1300, "deep.onnx")]


def _remove_chain(top: Path, name: str, depth: int) -> None:
    """Remove ``depth`` nested folders ``name`` below ``top`` bottom up (shutil.rmtree recurses once per level)."""
    here = os.getcwd()
    os.chdir(top)
    try:
        for _ in range(depth):
            os.chdir(name)
        for entry in os.listdir("."):
            os.unlink(entry)
        for _ in range(depth):
            os.chdir("..")
            os.rmdir(name)
    finally:
        os.chdir(here)


def test_a_symlink_loop_is_reported_and_the_other_models_linted(tmp_path, capsys):
    (tmp_path / "a.onnx").symlink_to("b.onnx")
    (tmp_path / "b.onnx").symlink_to("a.onnx")
    shutil.copy(SD002, tmp_path / "real.onnx")
    code, doc = lint_json(capsys, str(tmp_path))
    assert code == 2
    assert errors_of(doc) == {str(tmp_path / n): "cannot read file: Too many levels of symbolic links" for n in ("a.onnx", "b.onnx")}
    assert {d["code"] for f in doc["files"] for d in f["diagnostics"]} == {"SD002"}


def test_a_symlinked_model_takes_the_config_of_the_folder_it_was_found_in(tmp_path, capsys, monkeypatch):
    # as Ruff: the path as given decides, not where the link points
    (tmp_path / "store").mkdir()
    (tmp_path / "project").mkdir()
    shutil.copy(SD002, tmp_path / "store" / "model.onnx")
    (tmp_path / "store" / "pyproject.toml").write_text('[tool.rnnir]\nignore = ["SD002"]\n')
    (tmp_path / "project" / "pyproject.toml").write_text('[tool.rnnir]\nselect = ["SD"]\n')
    (tmp_path / "project" / "linked.onnx").symlink_to(tmp_path / "store" / "model.onnx")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["lint", "--format", "json", "project/linked.onnx"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and [d["code"] for d in doc["files"][0]["diagnostics"]] == ["SD002"]
    assert doc["files"][0]["config"].endswith(os.path.join("project", "pyproject.toml"))
    code = cli.main(["lint", "--format", "json", "store/model.onnx"])  # the near miss: the target itself keeps its folder's
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["files"][0]["diagnostics"] == []
