"""What a one-model ``rnnir lint`` leaves unimported: the modules of options it was not given (issue 27, start-up).

The oracle is the list of modules a fresh process imported; the near miss gives the option and needs the module."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "samples" / "gru_fanout.onnx"


def _lint_imports(*options: str) -> dict[str, object]:
    code = textwrap.dedent(
        """
        import contextlib, io, json, sys
        from rnnir.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(["lint", *sys.argv[1:], "--no-config"])
        print(json.dumps({"code": code, "fix": "rnnir.cli.fix" in sys.modules, "out": out.getvalue()}))
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(MODEL), *options], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    got: dict[str, object] = json.loads(done.stdout)
    return got


def test_a_lint_without_fix_options_does_not_import_the_fix_command():
    got = _lint_imports("--format", "json")
    assert got["code"] == 0 and got["fix"] is False
    assert json.loads(str(got["out"]))["files"][0]["error"] is None  # it linted


def test_a_lint_with_diff_imports_the_fix_command_and_runs_it():
    got = _lint_imports("--diff")
    assert got["fix"] is True and got["code"] == 0  # a clean model: nothing to fix
