"""Renderings of a Program: its IR text (see :mod:`rnnir.irtext`), Graphviz and Mermaid pictures.

``to_dot`` / ``to_mermaid`` draw the whole program by default; ``journey=True`` draws only the
state's journey (:mod:`rnnir.render.journey`), which is what ``rnnir show`` draws unless ``--full``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rnnir.render.journey import ArrowKind, BoxKind, Picture, full_picture
from rnnir.render.journey import journey as state_journey

if TYPE_CHECKING:
    from rnnir.ir.core import Program


def print_program(program: Program) -> str:
    """The program as IR text: the format :func:`rnnir.irtext.parse_program` reads back."""
    from rnnir.ir.text import print_program as print_ir

    return print_ir(program)


def _chosen(program: Program, journey_only: bool) -> Picture:
    return state_journey(program) if journey_only else full_picture(program)


_DOT_SHAPES = {
    BoxKind.SLOT: 'shape=cylinder, style=filled, fillcolor="#fde9c4"',
    BoxKind.OUTPUT: 'shape=box, style="rounded,filled", fillcolor="#d9ead3"',
    BoxKind.LOAD: 'shape=invhouse, style=filled, fillcolor="#fff8e1"',
    BoxKind.RECURRENT: 'shape=box3d, style=filled, fillcolor="#dbe8f7"',
    BoxKind.STORE: 'shape=house, style=filled, fillcolor="#f4e1f5"',
    BoxKind.COMPUTE: "shape=ellipse",
    BoxKind.OTHER: "shape=octagon",
}
_DOT_ARROWS = {
    ArrowKind.DATA: "",
    ArrowKind.CHANGED: 'color="#c0392b", fontcolor="#c0392b", style=bold',
    ArrowKind.ORDER: "style=dashed",
    ArrowKind.READ: "style=dotted",
    ArrowKind.WRITE: "style=bold",
}


def to_dot(program: Program, *, journey: bool = False) -> str:
    """Graphviz text: slots and outputs as boxes, stores drawn so a fan-out (or a chain) is visible.

    ``journey=True``: only the state's journey, layout-only ops and If nests folded into arrow labels.
    """

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    pic = _chosen(program, journey)
    lines = [f"digraph {q(pic.name)} {{", "  rankdir=LR;", "  fontname=monospace;", "  node [fontname=monospace];"]
    if journey:
        lines += ['  edge [fontname=monospace, fontsize=10];', '  nodesep=0.4; ranksep=0.9;', f"  label={q(f'state journey of @{pic.name} (rnnir show --full: every node)')};", "  labelloc=t;"]
    lines += [f"  {q(b.key)} [{_DOT_SHAPES[b.kind]}, label={q(b.label)}];" for b in pic.boxes]
    for a in pic.arrows:
        attrs = [x for x in (_DOT_ARROWS[a.kind], f"label={q(a.label)}" if a.label else "") if x]
        lines.append(f"  {q(a.source)} -> {q(a.target)}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines)


def to_mermaid(program: Program, *, journey: bool = False) -> str:
    """Mermaid flowchart text of the same picture as :func:`to_dot` (for Markdown)."""
    ids: dict[str, str] = {}

    def nid(key: str) -> str:
        return ids.setdefault(key, f"n{len(ids)}")

    def text(s: str) -> str:
        return s.replace('"', "#quot;").replace("\n", "<br/>")

    def box(kind: BoxKind, label: str) -> str:
        t = text(label)
        return {BoxKind.SLOT: f'[("{t}")]', BoxKind.OUTPUT: f'(["{t}"])'}.get(kind, f'["{t}"]')

    arrow = {ArrowKind.DATA: "-->", ArrowKind.CHANGED: "-->", ArrowKind.ORDER: "-.->", ArrowKind.READ: "-.->", ArrowKind.WRITE: "==>"}
    pic = _chosen(program, journey)
    lines = ["flowchart LR"]
    lines += [f"  {nid(b.key)}{box(b.kind, b.label)}" for b in pic.boxes]
    for a in pic.arrows:
        label = f'|"{text(a.label)}"|' if a.label else ""
        lines.append(f"  {nid(a.source)} {arrow[a.kind]}{label} {nid(a.target)}")
    return "\n".join(lines)
