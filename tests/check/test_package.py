"""rnnir/check/ (the dynamic checks) keeps the shape issue 24 gave it: modules of one concept each, the streaming
checks using only the public names of what they share with the multi-call checker, and the old import paths
(rnnir.testing, rnnir.streaming, rnnir.simulate, rnnir.pytest_plugin, rnnir.check.plot) the same objects as the new."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "rnnir" / "check"


def _modules() -> list[pathlib.Path]:
    found = sorted(CHECK.rglob("*.py"))
    assert len(found) >= 15  # multicall/ and streaming/ as packages, not two files
    return found


def _private_imports(path: pathlib.Path) -> list[str]:
    """Every ``from rnnir.x import _name`` in ``path`` (a name private to the module it comes from)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rnnir"):
            out += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return out


def test_no_module_of_rnnir_check_is_a_megamodule():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in _modules()}
    assert {p: n for p, n in sizes.items() if n > 600} == {}


def test_the_checks_import_no_private_name_of_another_module():
    assert {str(p.relative_to(ROOT)): _private_imports(p) for p in _modules() if _private_imports(p)} == {}


def test_the_private_import_finder_finds_one(tmp_path):
    # the near miss: the line streaming.py had before the split
    bad = tmp_path / "old.py"
    bad.write_text("from rnnir.testing import _FP16_MAX, ProgressCallback, _trend\n")
    assert _private_imports(bad) == ["rnnir.testing._FP16_MAX", "rnnir.testing._trend"]


@pytest.mark.parametrize(
    "old, new",
    [("rnnir.streaming", "rnnir.check.streaming"), ("rnnir.simulate", "rnnir.check.simulate"),
     ("rnnir.check.plot", "rnnir.check.plot"), ("rnnir.pytest_plugin", "rnnir.check.pytest_plugin")],
)
def test_a_module_moved_whole_is_the_same_object_at_its_old_path(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_rnnir_testing_offers_the_multicall_checkers_public_names():
    testing = importlib.import_module("rnnir.testing")
    multicall = importlib.import_module("rnnir.check.multicall")
    assert sorted(testing.__all__) == sorted(multicall.__all__)
    assert {n for n in multicall.__all__ if getattr(testing, n) is not getattr(multicall, n)} == set()
    assert {"check_multicall", "report_to_text", "MulticallReport", "StreamError", "time_axes"} <= set(testing.__all__)
