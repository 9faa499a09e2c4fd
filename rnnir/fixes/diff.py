"""A fix shown as a diff: the edits, then a unified diff of the two models' weight-free text (``rnnir lint --diff``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import onnx
from onnx import helper

from rnnir.fixes.edits import Edit
from rnnir.fixes.onnx_edit import dims_of, type_text
from rnnir.onnxio.metadata import META_FINGERPRINT as _META_FINGERPRINT
from rnnir.render.escape import printable

__all__ = ["render_diff"]


def _model_lines(model: onnx.ModelProto) -> list[str]:
    """A weight-free text of the model for diffs: graph inputs/outputs, nodes per graph, rnnir metadata."""
    lines: list[str] = []

    def walk(g: onnx.GraphProto, indent: str, title: str) -> None:
        lines.append(f"{indent}graph {title}")
        inits = {t.name for t in g.initializer}
        for vi in g.input:
            dflt = " (default)" if vi.name in inits else ""
            lines.append(f"{indent}  input {vi.name}: {type_text(vi.type.tensor_type.elem_type, dims_of(vi.type) or [])}{dflt}")
        for n in g.node:
            attrs = ", ".join(
                f"{a.name}={helper.get_attribute_value(a)!r}"
                for a in n.attribute
                if a.type not in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.TENSOR)
            )
            attrs = f"<{attrs}>" if attrs else ""
            lines.append(f"{indent}  {', '.join(n.output)} = {n.op_type}{attrs}({', '.join(n.input)})  # {n.name}")
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g, indent + "    ", f"{n.name or n.op_type}.{a.name}")
        for vi in g.output:
            lines.append(f"{indent}  output {vi.name}")

    walk(model.graph, "", model.graph.name or "main")
    for p in model.metadata_props:
        if p.key.startswith("rnnir.") and p.key != _META_FINGERPRINT:
            lines.append(f"metadata {p.key} = {p.value}")
    return [printable(line) for line in lines]  # a name holding a newline stays on its line of the diff


def render_diff(before: onnx.ModelProto, after: onnx.ModelProto, label: str, edits: Iterable[Edit] = ()) -> str:
    """The edits, then a unified diff of the two models' weight-free text (empty when nothing changed)."""
    shown = printable(label)  # a file name holding a newline stays on its header line
    diff = list(difflib.unified_diff(_model_lines(before), _model_lines(after), f"{shown} (before)", f"{shown} (fixed)", lineterm=""))
    if not diff:
        return ""
    head = [f"# {e}" for e in edits]
    return "\n".join([*head, *diff]) + "\n"
