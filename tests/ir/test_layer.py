"""The IR layer (rnnir/ir/): one folder at the bottom of the package, importing nothing above it, with no cycle
inside, printing itself with its own code, and keeping the public names of rnnir.ir and rnnir.irtext.

Every import counts here: at module level, inside functions and under ``if TYPE_CHECKING:`` (a function-level
import of a render module is still the IR depending on rendering).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx
import pytest

import rnnir
import rnnir.ir
import rnnir.ir.text
from rnnir.ir.text import read_program

ROOT = Path(__file__).resolve().parents[2]


def _ir_imports(package: Path, name: str) -> set[tuple[str, str]]:
    """(module, rnnir module it imports) for every import statement of every module under ``package``."""
    edges: set[tuple[str, str]] = set()
    for path in sorted(package.rglob("*.py")):
        parts = [name, *path.relative_to(package).with_suffix("").parts]
        is_init = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_init else parts)
        base = module.split(".") if is_init else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                prefix = base[: len(base) - node.level + 1] if node.level else []
                target = ".".join(prefix + ([node.module] if node.module else []))
                targets = [target]
            else:
                continue
            edges |= {(module, t) for t in targets if t == "rnnir" or t.startswith("rnnir.")}
    return edges


def _inside(target: str) -> bool:
    return target.startswith(("rnnir.ir.", "rnnir.util.")) or target in ("rnnir.ir", "rnnir.errors", "rnnir.util")


def _upward(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(m, t) for m, t in edges if not _inside(t)}


def test_the_ir_layer_imports_nothing_above_it():
    edges = _ir_imports(ROOT / "rnnir" / "ir", "rnnir.ir")
    assert ("rnnir.ir.core", "rnnir.ir.printer") in edges  # the scan reads function-level imports (Program.__str__)
    assert _upward(edges) == set()


def test_the_scan_sees_a_function_level_and_a_type_checking_import_upward(tmp_path: Path):
    package = tmp_path / "ir"
    package.mkdir()
    (package / "__init__.py").write_text("from rnnir.ir.core import Program\n", encoding="utf-8")
    (package / "core.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        from rnnir.util.lazymod import numpy
        if TYPE_CHECKING:
            from rnnir.lower.source import ModelSource
        class Program:
            def __str__(self):
                from rnnir.printer import print_program
                return print_program(self)
        """), encoding="utf-8")
    assert _upward(_ir_imports(package, "rnnir.ir")) == {("rnnir.ir.core", "rnnir.lower.source"), ("rnnir.ir.core", "rnnir.printer")}


def test_no_import_cycle_inside_the_ir_layer():
    graph = nx.DiGraph()
    graph.add_edges_from((m, t) for m, t in _ir_imports(ROOT / "rnnir" / "ir", "rnnir.ir") if t.startswith("rnnir.ir.") and m != t)
    assert graph.number_of_edges() > 10  # the layer's modules do import each other
    assert list(nx.simple_cycles(graph)) == []


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_a_program_prints_itself_with_ir_code_only():
    done = _fresh(textwrap.dedent("""
        import sys
        from rnnir.ir import LoadSlot, Output, Program, Return, Slot, Store, StoreResult, TensorType, Value
        p = Program("p")
        s = p.add_slot(Slot("h", TensorType("float32", (1, 4))))
        o = p.add_output(Output("hn", TensorType("float32", (1, 4))))
        v = Value("h")
        p.add(LoadSlot(outputs=(v,), slot=s))
        t = Value("st", kind="token")
        p.add(Store(inputs=(v,), outputs=(t,), dest=o, result=StoreResult.VALUE))
        p.add(Return(inputs=(t,)))
        print(str(p))
        print(*sorted(m for m in sys.modules if m.startswith("rnnir.") and not m.startswith(("rnnir.ir", "rnnir.util"))))
        """))
    assert done.returncode == 0, done.stderr
    *text, loaded = done.stdout.splitlines()
    assert text == [
        "program @p {",
        "  slot @h : float32[1,4] init=zeros",
        "  output hn : float32[1,4]",
        "",
        "  %h = load_slot<@h, copy>() loc{'id': 'loadslot0'}",
        "  %st = store<out:hn, value>(%h) loc{'id': 'store0'}",
        "  return<by runtime>(%st) loc{'id': 'return0'}",
        "}",
    ]
    # the façade's own imports only: no rendering, no lowering
    assert set(loaded.split()) <= {"rnnir.errors"}


def test_rnnir_ir_and_rnnir_irtext_keep_their_public_names():
    import rnnir.irtext  # a documented path of its own: the IR text, also rnnir.ir.text

    ir_names = {"Compute", "FrozenProgramError", "IRTuple", "ImmutableIRError", "LoadKind", "LoadSlot", "Node", "OrderingLayer",
                "Output", "PendingConst", "Program", "Provenance", "QuantParams", "Recognition", "Recurrent", "Region", "Return",
                "Slot", "SlotInit", "Store", "StoreResult", "TensorType", "Value", "check_acyclic"}
    assert ir_names <= set(dir(rnnir.ir))
    assert rnnir.ir.Program is rnnir.Program and rnnir.ir.TensorType is rnnir.TensorType
    text_names = {"IR_SUFFIX", "MAX_IR_TEXT_BYTES", "MAX_PRINTED_ELEMENTS", "ELIDED_FLOATS", "MAX_DENSE_ELEMENTS", "MAX_LITERAL_CHARS",
                  "IRParseError", "parse_program", "print_program", "read_program", "iter_programs"}
    assert text_names <= set(dir(rnnir.irtext))
    assert issubclass(rnnir.irtext.IRParseError, rnnir.IRError)


def test_read_program_refuses_what_is_not_a_regular_file_in_its_own_words(tmp_path: Path):
    folder = tmp_path / "folder.rnnir"
    folder.mkdir()
    with pytest.raises(rnnir.ModelError) as refused:
        read_program(folder)
    assert str(refused.value) == f"{folder}: is a folder, not a regular file; only regular files are read as programs"
    # near miss: the same program as a regular file is read
    good = tmp_path / "good.rnnir"
    good.write_text("program @p {\n  slot @h : float32[1,4] init=zeros\n}\n", encoding="utf-8")
    assert read_program(good).slot("h").type.shape == (1, 4)
