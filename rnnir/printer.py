"""Renderings of a Program: its IR text (see :mod:`rnnir.irtext`), Graphviz and Mermaid pictures."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ir import Program


def print_program(program: Program) -> str:
    """The program as IR text: the format :func:`rnnir.irtext.parse_program` reads back."""
    from .irtext import print_program as print_ir

    return print_ir(program)


def _picture(program: Program) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """The fan-out picture both renderers draw: boxes ``(key, kind, label)`` and arrows ``(from, to, kind)``.

    Box kinds: slot, output, load, recurrent, store, compute, other.  Arrow kinds: data, order
    (explicit ordering), read (a slot into its load), write (a store into its slot or output).
    """
    from .ir import Compute, LoadSlot, Recurrent, Store

    boxes = [(f"slot:{s.name}", "slot", f"slot {s.name}") for s in program.slots]
    boxes += [(f"out:{o.name}", "output", f"output {o.name}") for o in program.outputs]
    arrows: list[tuple[str, str, str]] = []
    for node in program.nodes:
        kind = {LoadSlot: "load", Recurrent: "recurrent", Store: "store", Compute: "compute"}.get(type(node), "other")
        label = f"store {node._attrs_text()}" if isinstance(node, Store) else node.opname
        boxes.append((node.id, kind, f"{label}\n{node.describe()}"))
        if isinstance(node, LoadSlot) and node.slot is not None:
            arrows.append((f"slot:{node.slot.name}", node.id, "read"))
        if isinstance(node, Store) and node.dest is not None:
            arrows.append((node.id, ("slot:" if node.to_slot else "out:") + node.dest.name, "write"))
    edges = [(u, v, "data" if d.get("kind") == "data" else "order") for u, v, d in program.graph.edges(data=True)]
    return boxes, edges + arrows


def to_dot(program: Program) -> str:
    """Graphviz text: slots and outputs as boxes, stores drawn so a fan-out (or a chain) is visible."""
    shapes = {"slot": "shape=cylinder", "output": "shape=box, style=rounded", "load": "shape=invhouse",
              "recurrent": "shape=box3d", "store": "shape=house", "compute": "shape=ellipse", "other": "shape=octagon"}
    styles = {"data": "", "order": " [style=dashed]", "read": " [style=dotted]", "write": " [style=bold]"}

    def q(s: str) -> str:
        return '"' + s.replace('"', '\\"').replace("\n", "\\n") + '"'

    boxes, arrows = _picture(program)
    lines = [f"digraph {q(program.name)} {{", "  rankdir=LR;", "  node [fontname=monospace];"]
    lines += [f"  {q(key)} [{shapes[kind]}, label={q(label)}];" for key, kind, label in boxes]
    lines += [f"  {q(u)} -> {q(v)}{styles[kind]};" for u, v, kind in arrows]
    lines.append("}")
    return "\n".join(lines)


def to_mermaid(program: Program) -> str:
    """Mermaid flowchart text of the same picture as :func:`to_dot`."""
    ids: dict[str, str] = {}

    def nid(key: str) -> str:
        return ids.setdefault(key, f"n{len(ids)}")

    def box(kind: str, text: str) -> str:
        text = text.replace('"', "#quot;").replace("\n", "<br/>")
        return {"slot": f'[("{text}")]', "output": f'(["{text}"])'}.get(kind, f'["{text}"]')

    arrow = {"data": "-->", "order": "-.->", "read": "-.->", "write": "==>"}
    boxes, arrows = _picture(program)
    lines = ["flowchart LR"]
    lines += [f"  {nid(key)}{box(kind, label)}" for key, kind, label in boxes]
    lines += [f"  {nid(u)} {arrow[kind]} {nid(v)}" for u, v, kind in arrows]
    return "\n".join(lines)
