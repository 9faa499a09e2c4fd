"""Readable text form of a Program (stable enough for tests to compare against)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ir import Program


def print_program(program: Program) -> str:
    from .ir import Slot

    lines = [f"program @{program.name} {{"]
    for s in program.slots:
        alias = ""
        if s.alias_of is not None:
            kind = "slot" if isinstance(s.alias_of, Slot) else "out"
            alias = f" aliases {kind}:{s.alias_of.name}"
        lines.append(f"  slot @{s.name} : {s.type} init={s.init}{alias}")
    for o in program.outputs:
        lines.append(f"  output {o.name} : {o.type}")
    for p in program.state_pairs:
        lines.append(f"  pair {p}")
    for p in program.suggested_pairs:
        lines.append(f"  suggested pair {p}")
    lines.append("")
    for node in program.nodes:
        lines.append(f"  {node}")
    lines.append("}")
    return "\n".join(lines)


def to_dot(program: Program) -> str:
    """Graphviz text: slots and outputs as boxes, stores drawn so a fan-out (or a chain) is visible."""
    from .ir import Compute, LoadSlot, Recurrent, Store

    def q(s: str) -> str:
        return '"' + s.replace('"', '\\"') + '"'

    lines = [f"digraph {q(program.name)} {{", "  rankdir=LR;", "  node [fontname=monospace];"]
    for s in program.slots:
        lines.append(f"  {q('slot:' + s.name)} [shape=cylinder, label={q('slot ' + s.name)}];")
    for o in program.outputs:
        lines.append(f"  {q('out:' + o.name)} [shape=box, style=rounded, label={q('output ' + o.name)}];")
    for node in program.nodes:
        shape = {LoadSlot: "invhouse", Recurrent: "box3d", Store: "house", Compute: "ellipse"}.get(type(node), "octagon")
        label = node.opname if not isinstance(node, Store) else f"store {node._attrs_text()}"
        lines.append(f"  {q(node.id)} [shape={shape}, label={q(label + chr(10) + node.describe())}];")
    for u, v, data in program.graph.edges(data=True):
        style = "" if data.get("kind") == "data" else " [style=dashed]"
        lines.append(f"  {q(u)} -> {q(v)}{style};")
    for node in program.nodes:
        if isinstance(node, LoadSlot) and node.slot is not None:
            lines.append(f"  {q('slot:' + node.slot.name)} -> {q(node.id)} [style=dotted];")
        if isinstance(node, Store) and node.dest is not None:
            kind = "slot:" if node.to_slot else "out:"
            lines.append(f"  {q(node.id)} -> {q(kind + node.dest.name)} [style=bold];")
    lines.append("}")
    return "\n".join(lines)


def to_mermaid(program: Program) -> str:
    """Mermaid flowchart text of the same picture as :func:`to_dot`."""
    from .ir import LoadSlot, Store

    ids: dict[str, str] = {}

    def nid(key: str) -> str:
        if key not in ids:
            ids[key] = f"n{len(ids)}"
        return ids[key]

    def esc(s: str) -> str:
        return s.replace('"', "#quot;")

    lines = ["flowchart LR"]
    for s in program.slots:
        lines.append(f'  {nid("slot:" + s.name)}[("slot {esc(s.name)}")]')
    for o in program.outputs:
        lines.append(f'  {nid("out:" + o.name)}(["output {esc(o.name)}"])')
    for node in program.nodes:
        label = node.opname if not isinstance(node, Store) else f"store {node._attrs_text()}"
        lines.append(f'  {nid(node.id)}["{esc(label)}<br/>{esc(node.describe())}"]')
    for u, v, data in program.graph.edges(data=True):
        arrow = "-->" if data.get("kind") == "data" else "-.->"
        lines.append(f"  {nid(u)} {arrow} {nid(v)}")
    for node in program.nodes:
        if isinstance(node, LoadSlot) and node.slot is not None:
            lines.append(f"  {nid('slot:' + node.slot.name)} -.-> {nid(node.id)}")
        if isinstance(node, Store) and node.dest is not None:
            kind = "slot:" if node.to_slot else "out:"
            lines.append(f"  {nid(node.id)} ==> {nid(kind + node.dest.name)}")
    return "\n".join(lines)
