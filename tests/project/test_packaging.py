"""What a user installs: the built wheel holds every module and data file of the source tree, and CI runs the README's
test command as written.

An editable install imports the checkout, so a subpackage the wheel misses goes unnoticed until a user's
``rnnir --version`` dies with ModuleNotFoundError (a hand-written package list once missed
``rnnir.passes.store_destinations``).  ``.ci/run`` installs the wheel into a fresh venv; this test says which files
are missing when it fails.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

#: pip's words when the build backend (setuptools) cannot be fetched: no registry, not a packaging bug
_OFFLINE = ("NewConnectionError", "Max retries exceeded", "No matching distribution found for setuptools",
            "Could not find a version that satisfies the requirement setuptools", "Temporary failure in name resolution")


def source_files() -> set[str]:
    """Every file under rnnir/ that belongs in a distribution (bytecode caches excluded), as wheel paths."""
    return {p.relative_to(REPO).as_posix() for p in (REPO / "rnnir").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")}


@dataclasses.dataclass(frozen=True)
class BuiltWheel:
    names: frozenset[str]
    entry_points: str


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> BuiltWheel:
    # build from a copy: setuptools reuses a checkout's build/ directory, which can hold files the source no longer has
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "rnnir", src / "rnnir", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", str(dist), str(src)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        if any(word in proc.stdout + proc.stderr for word in _OFFLINE):
            pytest.skip("cannot build the wheel: pip could not fetch the build backend (setuptools) from its index")
        pytest.fail(f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}")
    (path,) = dist.glob("rnnir-*.whl")
    with zipfile.ZipFile(path) as z:
        (entry_points,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        return BuiltWheel(frozenset(z.namelist()), z.read(entry_points).decode())


def test_the_wheel_ships_every_module_and_data_file_of_the_source_tree(wheel):
    expected = source_files()
    assert "rnnir/passes/store_destinations/__init__.py" in expected  # the subpackage a hand-written list once missed
    assert sorted(expected - wheel.names) == []


def test_the_wheel_ships_nothing_but_rnnir_and_its_metadata(wheel):
    shipped = {n for n in wheel.names if not n.split("/")[0].endswith(".dist-info")}
    assert sorted(shipped - source_files()) == []  # no tests/, tools/, bench/ or stale build files in a user's site-packages


def test_the_wheel_declares_the_console_script_and_the_pytest_plugin(wheel):
    sections = re.split(r"^\[(.+)\]$", wheel.entry_points, flags=re.M)
    entries = {name: {line.replace(" ", "") for line in body.splitlines() if line.strip()} for name, body in zip(sections[1::2], sections[2::2])}
    assert "rnnir=rnnir.cli:main" in entries["console_scripts"]
    assert "rnnir=rnnir.check.pytest_entry" in entries["pytest11"]  # which names rnnir.pytest_plugin (tests/check/test_pytest_plugin.py)


def readme_test_command() -> str:
    """The README quickstart's second command: the one that installs and runs the tests."""
    text = (REPO / "README.md").read_text()
    commands = re.findall(r"^(pip install .*&& python -m pytest.*)$", text, re.M)
    assert len(commands) == 1, commands
    return commands[0]


def test_ci_runs_the_readme_test_command_as_written():
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert readme_test_command() in [line.split("#")[0].strip() for line in lines]


def test_ci_installs_the_built_wheel_not_the_checkout():
    ci = (REPO / ".ci" / "run").read_text()
    assert "pip wheel" in ci and "venv" in ci and " -e " not in ci
    assert "rnnir --version" in ci.replace('"$work/venv/bin/rnnir"', "rnnir")
    assert "rnnir lint \"$repo/samples\"" in ci.replace('"$work/venv/bin/rnnir"', "rnnir")
