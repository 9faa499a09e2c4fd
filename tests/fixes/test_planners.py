"""The fix table (``rnnir/fixes/planners``): one planner file per fix, each registered, each planning from the
finding's structured fields and never from its message text, and a catalogue that stays free of onnx and numpy."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from rnnir.fixes.catalogue import FIXES
from rnnir.fixes.planners import FIX_TABLE, PLANNERS
from rnnir.passes.rules import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
FIXES_DIR = ROOT / "rnnir" / "fixes"


def test_every_planner_file_is_registered_once_and_named_after_its_rule():
    files = sorted(p.stem for p in (FIXES_DIR / "planners").glob("*.py") if p.stem != "__init__")
    assert sorted(FIX_TABLE) == files and len(set(FIX_TABLE)) == len(FIX_TABLE)
    rule_of = {r.module: r.rule.code for r in CATALOGUE}
    assert {m: PLANNERS[rule_of[m]].module for m in FIX_TABLE} == {m: m for m in FIX_TABLE}
    assert list(FIXES) == [rule_of[m] for m in FIX_TABLE]  # the catalogue is the table, in its order


def _reads_message_text(path: Path) -> list[int]:
    """Lines where a module reads ``<diagnostic>.message`` (a Diagnostic is ``d`` or ``diag`` in the fix modules)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == "message" and isinstance(n.value, ast.Name) and n.value.id in ("d", "diag", "a")
    ]


def test_no_fix_reads_the_message_text_of_a_finding():
    found = {p.relative_to(ROOT).as_posix(): _reads_message_text(p) for p in sorted(FIXES_DIR.rglob("*.py"))}
    # the engine keys a finding it has refused by (code, slot, message) so it is not planned twice; nothing parses it
    assert found.pop("rnnir/fixes/engine.py") == [_engine_key_line()]
    assert {p: lines for p, lines in found.items() if lines} == {}


def _engine_key_line() -> int:
    text = (FIXES_DIR / "engine.py").read_text(encoding="utf-8").splitlines()
    return next(k for k, line in enumerate(text, 1) if "return (d.code, d.slot, d.message)" in line)


def test_the_sd010_fix_names_the_recurrence_from_the_findings_data():
    import onnx
    from onnx import TensorProto, helper

    from rnnir import fix

    # an RNN named 'a: b' (a colon in the name: the first ':' of the message is inside it) that starts from zeros
    # and returns its final state; SD010's fix is unsafe, so it is found and not applied.  Cut at the message's first
    # ':' the subject would read "RNN 'a"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 3])
    hn = helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, 1, 4])
    inits = [helper.make_tensor(n, TensorProto.FLOAT, s, [0.1] * (s[1] * s[2])) for n, s in (("W", [1, 4, 3]), ("R", [1, 4, 4]))]
    node = helper.make_node("RNN", ["x", "W", "R"], ["", "hn"], name="a: b", hidden_size=4)
    model = helper.make_model(helper.make_graph([node], "g", [x], [hn], inits), opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    result = fix(model, codes=["SD010"])
    assert [str(e) for e in result.skipped] == [
        "SD010 [unsafe, not applied] RNN 'a: b' starts afresh on every call: not certain: pass unsafe=True (--unsafe-fixes) to apply it"
    ]


def test_the_fix_catalogue_imports_neither_onnx_nor_numpy():
    code = "import json, sys, rnnir.fixes.catalogue\nprint(json.dumps(['onnx' in sys.modules, 'numpy' in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, False]
