"""Running a scaffold tool (``tools/add_rule.py``, ``tools/add_fix.py``) in a copy of the checkout, never the checkout:
copy the paths it needs, snapshot every file before and after, run Python with the copy's ``rnnir`` on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_checkout(tmp_path: Path, paths: Iterable[str]) -> Path:
    """A copy of ``paths`` (files or folders of the checkout) under ``tmp_path/checkout``, without bytecode."""
    copy = tmp_path / "checkout"
    for rel in paths:
        src, dst = ROOT / rel, copy / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    return copy


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (bytecode left out), by its path relative to ``root``."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def run_in(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python *args`` in ``copy``, importing the copy's rnnir, not the checkout's."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=300)
