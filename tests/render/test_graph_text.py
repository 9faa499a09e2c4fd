"""The Graphviz and Mermaid texts of ``rnnir show`` read back to the picture they draw, box for box, arrow for arrow.

A small reader of each text (the line forms the renderers write, unescaped as Graphviz and Mermaid read them) turns
``to_dot`` / ``to_mermaid`` back into boxes (key, label, style) and arrows (source, target, label, style), which must
equal :func:`rnnir.render.journey.journey` / :func:`~rnnir.render.journey.full_picture` of the same program, in order.
Styles are checked as the syntax defines them: a box's DOT style and Mermaid shape follow its kind (one style per
kind, distinct kinds distinct), an arrow's Mermaid glyph is Mermaid's own (``-->`` solid, ``-.->`` dotted, ``==>``
thick).  Graphviz itself, when installed, reads every DOT text with the same node and edge counts.  Programs: samples
with fan-outs, If branches, a store chain and an explicit ordering, and one whose names hold quotes, backslashes
and newlines.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

import rnnir
from rnnir.render.graph import print_program, to_dot, to_mermaid
from rnnir.render.journey import ArrowKind, BoxKind, Picture, full_picture, journey

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
NAMES = ["lstm_fanout.onnx", "lstm_packed_if.onnx", "sd002_hc_swap.onnx", "al001_chain.rnnir", "gru_view_load_ordered.rnnir"]

_Q = r'"((?:[^"\\]|\\.)*)"'
_DOT_NODE = re.compile(rf"^  {_Q} \[(.*), label={_Q}\];$")
_DOT_EDGE = re.compile(rf"^  {_Q} -> {_Q}(?: \[(.*)\])?;$")
_MER_NODE = re.compile(r'^  (n\d+)(\[\("(.*)"\)\]|\(\["(.*)"\]\)|\["(.*)"\])$')
_MER_EDGE = re.compile(r'^  (n\d+) (-->|-\.->|==>)(?:\|"(.*)"\|)? (n\d+)$')
MERMAID_GLYPH = {ArrowKind.DATA: "-->", ArrowKind.CHANGED: "-->", ArrowKind.ORDER: "-.->", ArrowKind.READ: "-.->", ArrowKind.WRITE: "==>"}
MERMAID_SHAPE = {BoxKind.SLOT: 2, BoxKind.OUTPUT: 3}  # the regex group: [( cylinder )], ([ stadium ]), else [ box ]


def _dot_unquoted(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)


def _weird_names() -> rnnir.Program:
    b = rnnir.Builder('we"ird\\name')
    x = b.input("x", "float32", (1, 1, 1))
    W = b.const("W", np.ones((1, 1, 1), np.float32))
    R = b.const("R", np.full((1, 1, 1), 0.5, np.float32))
    h = b.slot('h"0\\', "float32", (1, 1, 1))
    _, hn = b.recurrent("RNN", x, W, R, initial_h=b.load(h), hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    b.store(hn, h)
    b.store(hn, b.output("out\nline", "float32", (1, 1, 1)), "value")
    return b.build()


def _programs() -> list[rnnir.Program]:
    return [rnnir.load(SAMPLES / n) for n in NAMES] + [_weird_names()]


def _read_dot(text: str) -> tuple[str, list[str], list[tuple[str, str, str]], list[tuple[str, str, str, str]]]:
    lines = text.split("\n")
    head = re.fullmatch(rf"digraph {_Q} {{", lines[0])
    assert head is not None and lines[-1] == "}", (lines[0], lines[-1])
    settings, boxes, arrows = [], [], []
    for line in lines[1:-1]:
        if (m := _DOT_NODE.match(line)) is not None:
            boxes.append((_dot_unquoted(m.group(1)), m.group(2), _dot_unquoted(m.group(3))))
        elif (m := _DOT_EDGE.match(line)) is not None:
            attrs = m.group(3) or ""
            label = re.search(rf"label={_Q}", attrs)
            style = re.sub(rf",? ?label={_Q}", "", attrs)
            arrows.append((_dot_unquoted(m.group(1)), _dot_unquoted(m.group(2)), _dot_unquoted(label.group(1)) if label else "", style))
        else:
            settings.append(line)
    return _dot_unquoted(head.group(1)), settings, boxes, arrows


def _one_style_per_kind(pairs: list[tuple[object, str]]) -> None:
    style_of: dict[object, str] = {}
    for kind, style in pairs:
        assert style_of.setdefault(kind, style) == style, kind
    assert len(set(style_of.values())) == len(style_of), style_of


def _check_dot(pic: Picture, text: str, journey_only: bool) -> None:
    name, settings, boxes, arrows = _read_dot(text)
    assert name == pic.name
    assert [(k, label) for k, _, label in boxes] == [(b.key, b.label) for b in pic.boxes]
    assert [(s, t, label) for s, t, label, _ in arrows] == [(a.source, a.target, a.label) for a in pic.arrows]
    _one_style_per_kind([(b.kind, style) for b, (_, style, _) in zip(pic.boxes, boxes)])
    # arrows: data plain, the others styled; a changed value stands out from a plain flow
    _one_style_per_kind([(a.kind, style) for a, (_, _, _, style) in zip(pic.arrows, arrows) if a.kind is not ArrowKind.DATA])
    assert all(style == "" for a, (_, _, _, style) in zip(pic.arrows, arrows) if a.kind is ArrowKind.DATA)
    assert settings[:3] == ["  rankdir=LR;", "  fontname=monospace;", "  node [fontname=monospace];"]
    if journey_only:
        title = f"state journey of @{pic.name} (rnnir show --full: every node)"
        assert settings[3:] == ["  edge [fontname=monospace, fontsize=10];", "  nodesep=0.4; ranksep=0.9;", f"  label={_quoted(title)};", "  labelloc=t;"]
    else:
        assert settings[3:] == []


def _quoted(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _check_mermaid(pic: Picture, text: str) -> None:
    lines = text.split("\n")
    assert lines[0] == "flowchart LR"

    def unescaped(s: str) -> str:
        return s.replace("<br/>", "\n").replace("#quot;", '"')

    key_of: dict[str, str] = {}
    boxes, arrows = [], []
    for line in lines[1:]:
        if (m := _MER_NODE.match(line)) is not None:
            group = next(g for g in (2, 3, 4) if m.group(g + 1) is not None)
            boxes.append((m.group(1), unescaped(m.group(group + 1)), group))
        else:
            m = _MER_EDGE.match(line)
            assert m is not None, line
            arrows.append((m.group(1), m.group(2), unescaped(m.group(3) or ""), m.group(4)))
    assert [(label, shape) for _, label, shape in boxes] == [(b.label, MERMAID_SHAPE.get(b.kind, 4)) for b in pic.boxes]
    for (nid, _, _), b in zip(boxes, pic.boxes):
        assert key_of.setdefault(nid, b.key) == b.key
    assert len(key_of) == len(pic.boxes)  # one id per box
    ids = {b.key: nid for nid, b in zip(key_of, pic.boxes)}
    got = [(src, glyph, label, dst) for src, glyph, label, dst in arrows]
    assert [(ids.get(a.source), MERMAID_GLYPH[a.kind], a.label, ids.get(a.target)) for a in pic.arrows] == [
        (g[0] if g[0] in key_of else None, g[1], g[2], g[3] if g[3] in key_of else None) for g in got
    ]


def test_dot_and_mermaid_read_back_to_the_picture_box_for_box():
    kinds: set[ArrowKind] = set()
    for program in _programs():
        for journey_only in (True, False):
            pic = journey(program) if journey_only else full_picture(program)
            kinds |= {a.kind for a in pic.arrows}
            assert pic.boxes and pic.arrows
            _check_dot(pic, to_dot(program, journey=journey_only), journey_only)
            _check_mermaid(pic, to_mermaid(program, journey=journey_only))
    assert kinds == set(ArrowKind)  # every arrow style was read back


def test_graphviz_reads_every_dot_text_with_the_same_nodes_and_edges():
    if shutil.which("dot") is None:
        return  # the reader above is the check; Graphviz is an extra witness where installed
    for program in _programs():
        for journey_only in (True, False):
            pic = journey(program) if journey_only else full_picture(program)
            done = subprocess.run(["dot", "-Tjson0"], input=to_dot(program, journey=journey_only), capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            graph = json.loads(done.stdout)
            # in an ID, Graphviz unescapes only \" (a doubled backslash or \n stays two characters, on every ID alike)
            assert _dot_unquoted(graph["name"]) == pic.name
            assert sorted(_dot_unquoted(o["name"]) for o in graph.get("objects", [])) == sorted(b.key for b in pic.boxes)
            assert len(graph.get("edges", [])) == len(pic.arrows)


def test_print_program_is_the_ir_text_that_parses_back():
    from rnnir.ir.text import parse_program

    program = rnnir.load(SAMPLES / "al001_chain.rnnir")
    text = print_program(program)
    assert text.startswith("program @") and print_program(parse_program(text)) == text
