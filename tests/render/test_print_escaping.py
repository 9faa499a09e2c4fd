"""No name from a model or a file system reaches a terminal or a CI log raw (issue 26, "Injection").

A model whose graph, node and value names, and whose file name, carry ESC/OSC sequences, BEL, CR, a bidi
override, newlines and GitHub workflow commands (``::set-env``, ``::error``) goes through every command
that prints names.  Nothing printed may hold a raw control character, and no line may start (after
spaces) with ``::``: GitHub's runner would execute it.  Every such name goes through
:func:`rnnir.render.printable`.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from rnnir.cli import main

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b]0;owned\x07\x1b[31m\u202e\r\n::set-env name=X::1\n  ::error::forged\n"
FILE_NAME = "::set-env name=Y::2\x1b[2J\u202e\r\n::error::f.onnx"


def _hostile_model(folder: Path) -> str:
    """samples/sd002_hc_swap.onnx (a fixable SD002, runnable) with every name prefixed by ``HOSTILE``."""
    m = onnx.load(str(ROOT / "samples" / "sd002_hc_swap.onnx"))
    g = m.graph
    names = {v.name for v in [*g.input, *g.output, *g.value_info]} | {t.name for t in g.initializer}
    for n in g.node:
        names.update(n.input)
        names.update(n.output)
    names.discard("")
    for v in [*g.input, *g.output, *g.value_info]:
        v.name = HOSTILE + v.name
    for t in g.initializer:
        t.name = HOSTILE + t.name
    for n in g.node:
        n.input[:] = [HOSTILE + x if x else x for x in n.input]
        n.output[:] = [HOSTILE + x if x else x for x in n.output]
        n.name = HOSTILE + (n.name or n.op_type)
    g.name = HOSTILE + "graph"
    (folder / FILE_NAME).write_bytes(m.SerializeToString())
    return FILE_NAME


def _assert_clean(text: str, argv: list[str]) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in text if not c.isprintable() and c != "\n"})
    assert not raw, f"{argv}: raw control characters {raw} reach the output"
    forged = [line for line in text.split("\n") if line.lstrip().startswith("::")]
    assert not forged, f"{argv}: lines a CI runner would execute: {forged[:3]}"
    assert "internal error" not in text and "Traceback" not in text, argv


COMMANDS = [
    ["lint", "{m}"],
    ["lint", "{m}", "--diff"],
    ["lint", "{m}", "--statistics"],
    ["lint", "{m}", "--show-settings"],
    ["cost", "{m}"],
    ["fix", "{m}", "--diff"],
    ["fix", "{m}", "-o", "out.onnx"],
    ["fix", "{m}", "--suppress", "SD009:" + HOSTILE + "node", "-o", "out2.onnx"],
    ["fix", "{m}", "--suppress", "SD009", "--in-place"],
    ["lint", "{m}", "--fix"],
    ["lint", "{m}", "--add-noqa"],
    ["show", "{m}"],
    ["show", "{m}", "--full"],
    ["show", "{m}", "--format", "dot"],
    ["show", "{m}", "--format", "mermaid"],
    ["run", "{m}", "--calls", "3"],
    ["run", "{m}", "--calls", "3", "-q"],
    ["fix", "missing" + FILE_NAME, "-o", "x.onnx"],  # an error message naming the file
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(x for x in a if x.isprintable())[:40])
def test_no_name_reaches_the_terminal_raw(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    model = _hostile_model(tmp_path)
    args = [a.format(m=model) if a == "{m}" else a for a in argv]
    code = main(args)
    captured = capsys.readouterr()
    _assert_clean(captured.out, args)
    _assert_clean(captured.err, args)
    assert code in (0, 1) or argv[1].startswith("missing"), (code, captured.err[-500:])


def test_a_name_with_a_newline_stays_on_its_line_of_the_diff(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    model = _hostile_model(tmp_path)
    assert main(["lint", model, "--diff"]) == 1
    out = capsys.readouterr().out
    assert "\\n::set-env" in out  # escaped inside its line, not broken into a new one
    assert all(not line.startswith("\\x3a") for line in out.split("\n"))


def test_printable_neutralises_workflow_commands_and_leaves_the_rest_alone():
    from rnnir.render import printable, printable_lines

    assert printable("::error::x") == "\\x3a:error::x"
    assert printable("  ::set-env name=A::1") == "  \\x3a:set-env name=A::1"
    assert printable("a::b") == "a::b"  # near miss: not at the start of a line
    assert printable(": x") == ": x"
    assert printable_lines("ok\n::warning::w\nfine") == "ok\n\\x3a:warning::w\nfine"
