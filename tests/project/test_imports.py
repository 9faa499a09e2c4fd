"""Import structure of rnnir: no import cycle at all, each entry point imports first, one top-level name.

Every import is an edge: at module level, inside functions, under ``if TYPE_CHECKING:``.  A function-level
import cannot fail at import time, but a cycle through it is still two modules that need each other, which is
what the layers forbid (pyproject.toml's import-linter contract checks the direction; this test checks there is
no cycle at all, inside a layer too).  The one exception is the package itself, ``rnnir/__init__.py``: the lazy
façade imports from every layer on first use and is imported by none of them.
The passes are ``rnnir.passes``: a compiler project with a ``passes`` package of its own must not shadow them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rnnir",)


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, wherever it stands."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def _known(name: str, mods: dict[str, Path]) -> str | None:
    """The module ``name`` names, or the nearest enclosing one (``rnnir.ir.Program`` -> ``rnnir.ir``)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, packages: tuple[str, ...]) -> nx.DiGraph:
    """Module -> module it imports, within ``packages``, counting every import statement.

    ``from .x import y`` is an edge to ``pkg.x.y`` when that is a module, else to ``pkg.x``.  A top-level
    package (the façade) is left out: see the module docstring.
    """
    mods = _modules(root, packages)
    graph = nx.DiGraph()
    for name, path in mods.items():
        if name in packages:
            continue
        graph.add_node(name)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for imp in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(imp, ast.Import):
                targets = [a.name for a in imp.names]
            else:
                base = package[: len(package) - imp.level + 1] if imp.level else []
                module = ".".join(base + ([imp.module] if imp.module else []))
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in imp.names]
            for target in targets:
                known = _known(target, mods)
                if known is not None and known != name and known not in packages:
                    graph.add_edge(name, known)
    return graph


def _cycle(graph: nx.DiGraph) -> list[str]:
    try:
        return [u for u, _ in nx.find_cycle(graph)]
    except nx.NetworkXNoCycle:
        return []


def test_no_import_cycle_in_rnnir_counting_every_import():
    graph = import_graph(ROOT, PACKAGES)
    assert {"rnnir.ir", "rnnir.passes.manager", "rnnir.lower.build"} <= set(graph)  # the scan found the packages
    assert graph.has_edge("rnnir.passes.manager", "rnnir.ir.core")  # and reads their imports
    cycles = [c for c in nx.simple_cycles(graph, length_bound=4)]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join([*c, c[0]]) for c in sorted(cycles)[:10])
    cycle = _cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join([*cycle, cycle[0]])


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_the_scan_finds_a_cycle_through_relative_imports(tmp_path: Path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import g\ndef f(): return 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from ..a import f\ndef g(): return f()\n",
    })
    # pkg/a.py imports pkg.b, which does not exist: only pkg.sub.b -> pkg.a is an edge, no cycle
    assert _cycle(import_graph(tmp_path, ("pkg",))) == []
    (tmp_path / "pkg/a.py").write_text("from .sub.b import g\ndef f(): return 1\n", encoding="utf-8")
    assert sorted(_cycle(import_graph(tmp_path, ("pkg",)))) == ["pkg.a", "pkg.sub.b"]


def test_function_local_and_type_checking_imports_are_edges_the_facade_is_not(tmp_path: Path):
    _write(tmp_path, {
        "pkg/__init__.py": "from . import a\n",
        "pkg/a.py": """
            from typing import TYPE_CHECKING
            from . import b
            if TYPE_CHECKING:
                from .c import C
        """,
        "pkg/b.py": "def lazy():\n    from . import a\n    return a\n",
        "pkg/c.py": "from .a import b\nclass C: ...\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert set(graph.edges) == {("pkg.a", "pkg.b"), ("pkg.a", "pkg.c"), ("pkg.b", "pkg.a"), ("pkg.c", "pkg.a")}
    assert sorted(_cycle(graph)) in (["pkg.a", "pkg.b"], ["pkg.a", "pkg.c"])


_IMPORT_EACH = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("rnnir",)]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ":\\n" + traceback.format_exc(limit=3))
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


#: what a user or a tool imports first (each is imported first, with every rnnir/passes module unloaded
#: before it); the import graph test above covers the rest without paying ~0.4 s per module here
ENTRY_POINTS = [
    "rnnir.exporter", "rnnir.fixes", "rnnir.lower", "rnnir.runtime", "rnnir.cli", "rnnir.check.simulate", "rnnir.passes",
    "rnnir.passes.coverage", "rnnir.analysis.slices", "rnnir.lint", "rnnir.render", "rnnir.serving.pool", "rnnir.check.multicall",
    "rnnir.deploy", "rnnir.ir.text",
]


def test_each_entry_point_imports_first_in_a_fresh_set_of_modules():
    """No module relies on another having been imported before it (the package's import order)."""
    assert set(ENTRY_POINTS) <= set(_modules(ROOT, PACKAGES))
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH, *ENTRY_POINTS], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_users_own_passes_package_does_not_shadow_rnnirs(tmp_path: Path):
    """A compiler project with its own ``passes/`` runs ``rnnir lint`` from its root: rnnir must not import it."""
    (tmp_path / "passes").mkdir()
    (tmp_path / "passes" / "__init__.py").write_text("raise ImportError('the user project passes package was imported')\n")
    model = ROOT / "samples" / "lstm_fanout.onnx"
    done = subprocess.run([sys.executable, "-m", "rnnir", "lint", str(model)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "user project" not in done.stderr
    checked = subprocess.run([sys.executable, "-c", "import rnnir.passes, passes; print(passes.__file__, rnnir.passes.__file__)"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "the user project passes package was imported" in checked.stderr  # the user's package is the only top-level `passes`


def test_no_top_level_passes_is_installed(tmp_path: Path):
    """Outside the checkout, ``import passes`` finds nothing: the install puts only ``rnnir`` on the path."""
    done = subprocess.run([sys.executable, "-c", "import importlib.util, rnnir.passes; print(importlib.util.find_spec('passes'))"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


def test_the_functions_export_and_fix_are_never_shadowed_by_their_modules():
    """``rnnir.export`` and ``rnnir.fix`` stay the functions whatever is imported, with no module magic: their
    modules are named apart from them (``rnnir.exporter``, ``rnnir.fixes``)."""
    code = (
        "import types, rnnir\n"
        "assert callable(rnnir.export) and callable(rnnir.fix)\n"
        "import rnnir.exporter, rnnir.fixes, rnnir.fixes.engine\n"
        "assert rnnir.export is rnnir.exporter.export and rnnir.fix is rnnir.fixes.engine.fix\n"
        "assert isinstance(rnnir.exporter, types.ModuleType) and type(rnnir) is types.ModuleType\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr


_IMPORT_ALL = """
import importlib, pkgutil, sys
import rnnir
names = [m.name for m in pkgutil.walk_packages(rnnir.__path__, "rnnir.")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def test_importing_any_module_runs_no_command():
    # a tool that walks the package (CI's wheel check, an IDE, pydoc) imports __main__ modules too: with arguments
    # of its own on the command line, a module that runs the CLI at import would exit instead of importing
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL, "not-a-command", "--nor-a-flag"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert int(done.stdout) > 150
