"""IR → ONNX.

Every slot becomes a graph input / graph output pair; the pairing, the slots'
initial values, the store structure and the model fingerprint go into
``metadata_props`` so any ONNX runtime can run the file and rnnir can find the
pairs again.  A program lowered from ONNX keeps that model's input and output
names, so the exported file is a drop-in replacement for the original.

onnxruntime refuses recurrent ops with ``layout=1``; export rewrites them to
``layout=0`` between transposes, which computes the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rnnir.errors import ExportError
from rnnir.ir.attributes import LoadKind, OrderingLayer, StoreResult, TensorType
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, LoadSlot, Output, Recurrent, Slot, Store, Value
from rnnir.ir.pairs import PairSource
from rnnir.ir.text import print_program
from rnnir.onnxio.metadata import META_FINGERPRINT, META_IR, META_PAIRS, META_PROGRAM_V0, META_SLOTS
from rnnir.onnxio.metadata import drop as _drop_meta
from rnnir.onnxio.metadata import write as _set_meta
from rnnir.onnxio.source import graph_fingerprint, iter_graphs

_INLINE_INIT = 65536  # elements of a constant initial value written inline as JSON

__all__ = ["export", "META_SLOTS", "META_FINGERPRINT"]


def _elem_type(dtype: str | None) -> int:
    if dtype is None:
        return onnx.TensorProto.FLOAT
    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (TypeError, KeyError, ValueError):
        return onnx.TensorProto.FLOAT


def _value_info(name: str, t: TensorType) -> onnx.ValueInfoProto:
    shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None for d in t.shape]
    return helper.make_tensor_value_info(name, _elem_type(t.dtype), shape)


def export(program: Program, path: str | Path | None = None, *, check: bool = True) -> onnx.ModelProto:
    """Write ``program`` as ONNX; checked with ``onnx.checker`` (full_check) unless ``check=False``."""
    if program.source is not None:
        model = _export_lowered(program)
    else:
        model = _export_built(program)
    _rewrite_layout1(model.graph)
    for g in iter_graphs(model.graph):
        if g is not model.graph:
            _rewrite_layout1(g)
    _set_meta(model, META_FINGERPRINT, graph_fingerprint(model))
    if check:
        try:
            onnx.checker.check_model(model, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            raise ExportError(f"exported model of {program.name!r} does not pass onnx.checker: {exc}") from None
    if path is not None:
        from rnnir.util.writing import write_file  # atomic; never over a device, FIFO or hard-linked file

        write_file(path, model.SerializeToString(), what="export", error=ExportError)
    return model


# -- shared metadata -------------------------------------------------------------------------


def _slot_meta(program: Program, out_names: Mapping[str, str | None]) -> dict[str, Any]:
    slots: dict[str, Any] = {}
    for s in program.slots:
        entry: dict[str, Any] = {
            "output": out_names.get(s.name),
            "dtype": s.type.dtype,
            "shape": None if s.type.shape is None else list(s.type.shape),
            "init": s.init.kind,
        }
        if s.init.kind == "constant" and s.init.value is not None:
            arr = np.asarray(s.init.value)
            if arr.size <= _INLINE_INIT:
                entry["value"] = arr.tolist()
                entry["value_dtype"] = str(arr.dtype)
                entry["value_shape"] = list(arr.shape)
        slots[s.name] = entry
    return slots


def _default_structure(program: Program) -> bool:
    """True when the program's stores are what lowering makes by default (fan-out, copy loads, runtime order)."""
    if any(ld.kind is LoadKind.VIEW for ld in program.loads):
        return False
    if any(s.alias_of is not None or s.address != f"slot:{s.name}" for s in program.slots):
        return False
    for st in program.stores:
        if st.value is not None and isinstance(st.value.producer, Store):
            return False
        expected = StoreResult.TOKEN if isinstance(st.dest, Slot) else StoreResult.VALUE
        if st.result is not expected:
            return False
    dests: list[Slot | Output] = [*program.slots, *program.outputs]
    for dest in dests:
        if len(program.stores_to(dest)) > 1:  # e.g. a slot written twice: only the IR text can say so
            return False
    rets = program.returns
    if len(rets) != 1 or rets[0].layer is not OrderingLayer.RUNTIME:
        return False
    waited = {id(w.producer) for w in rets[0].waits}
    return all(id(st) in waited for st in program.stores)


# -- programs lowered from ONNX --------------------------------------------------------------


def _export_lowered(program: Program) -> onnx.ModelProto:
    src = program.source
    assert src is not None  # export() sends only programs lowered from ONNX here
    base = src.with_external_data()
    model = onnx.ModelProto()
    model.CopyFrom(base)
    graph = model.graph
    outputs = {o.name for o in graph.output}
    inputs = {i.name for i in graph.input}
    for p in program.state_pairs:
        if p.input not in inputs:
            _constant_to_input(graph, p.input, p.slot)
        if p.output is not None and p.output not in outputs:
            raise ExportError(f"state output {p.output!r} of slot {p.input!r} is not a graph output of {src.label}")
    pairs = _persisted_pairs(program)
    _set_meta(model, META_PAIRS, json.dumps(pairs, sort_keys=True))
    _set_meta(model, META_SLOTS, json.dumps({k: v for k, v in _slot_meta(program, pairs).items() if k in pairs}, sort_keys=True))
    if not _default_structure(program):
        _set_meta(model, META_IR, print_program(program))
    else:
        _drop_meta(model, META_IR)
    _drop_meta(model, META_PROGRAM_V0)
    return model


#: pair sources that are a contract by themselves: the caller's word, what an earlier export recorded, or a slot
#: rnnir made (entry=constant, a built program)
_CONTRACT_SOURCES = frozenset({PairSource.DECLARED, PairSource.METADATA, PairSource.TRITON, PairSource.CONSTANT, PairSource.BUILDER})


def _persisted_pairs(program: Program) -> dict[str, str | None]:
    """The pairs worth recording in ``rnnir.pairs``, where they outrank every other source on the next load: the ones the
    caller declared (or an earlier export recorded) and the ones rnnir verified slice by slice.  A guess from names,
    dataflow or position that rnnir could not verify stays a guess: the next load makes it again from the same graph,
    and a wrong guess (a scanned input paired with a scan output) is not written down as the caller's contract."""
    guessed = [p for p in program.state_pairs if p.source not in _CONTRACT_SOURCES]
    verified: set[str] = set()
    if guessed:
        from rnnir.passes import verify
        from rnnir.passes.coverage import Verdict

        by_input: dict[str, list[Verdict]] = {}
        for s in verify(program, noqa=False).slices:
            by_input.setdefault(s.input, []).append(s.verdict)
        verified = {i for i, verdicts in by_input.items() if verdicts and all(v is Verdict.VERIFIED for v in verdicts)}
    return {p.input: p.output for p in program.state_pairs if p.source in _CONTRACT_SOURCES or p.input in verified}


def _constant_to_input(graph: onnx.GraphProto, name: str, slot: Slot | None) -> None:
    """The constant-entry policy's slot: the constant becomes a graph input (its value is recorded as the slot's init)."""
    for i, t in enumerate(graph.initializer):
        if t.name == name:
            arr = numpy_helper.to_array(t)
            del graph.initializer[i]
            graph.input.append(helper.make_tensor_value_info(name, t.data_type, list(arr.shape)))
            return
    for i, n in enumerate(graph.node):
        if n.op_type == "Constant" and list(n.output) == [name]:
            t = next(a.t for a in n.attribute if a.name == "value")
            del graph.node[i]
            graph.input.append(helper.make_tensor_value_info(name, t.data_type, list(t.dims)))
            return
    raise ExportError(f"slot {name!r} is neither a graph input nor a constant of the main graph")


# -- programs built with the Builder ---------------------------------------------------------


def _export_built(program: Program) -> onnx.ModelProto:
    nodes: list[onnx.NodeProto] = []
    inputs: list[onnx.ValueInfoProto] = []
    outputs: list[onnx.ValueInfoProto] = []
    inits: list[onnx.TensorProto] = []
    used_names: set[str] = set()

    def name_of(v: Value | None) -> str:
        if v is None:
            return ""
        if isinstance(v.producer, Store):
            # a store result is not a tensor in ONNX; a chained reader gets the stored value itself
            return name_of(v.producer.value)
        return v.name

    for v in program.externals.values():
        if v.const is not None:
            inits.append(numpy_helper.from_array(np.asarray(v.const), v.name))
        elif v.uses:
            inputs.append(_value_info(v.name, v.type))
    pair_out: dict[str, str | None] = {p.input: p.output for p in program.state_pairs}
    for s in program.slots:
        inputs.append(_value_info(s.name, s.type))
    for node in program.nodes:
        if isinstance(node, LoadSlot):
            out = node.outputs[0]
            if out is not None and node.slot is not None and out.name != node.slot.name:
                nodes.append(helper.make_node("Identity", [node.slot.name], [out.name], name=node.id))
        elif isinstance(node, Recurrent):
            spec = node.spec
            ins = [name_of(v) for v in node.inputs[: len(spec.inputs)]]
            while ins and not ins[-1]:
                ins.pop()
            outs = [v.name if v is not None else "" for v in node.outputs]
            attrs = {k: v for k, v in node.attributes().items() if v is not None}
            if node.layout:
                attrs["layout"] = node.layout
            nodes.append(helper.make_node(spec.op_type, ins, outs, name=node.provenance.node or node.id, domain=spec.domain, **attrs))
        elif isinstance(node, Compute):
            if node.op == "If":
                nodes.append(_if_node(node, name_of))
                continue
            if node.onnx_node is not None:
                n = onnx.NodeProto()
                n.CopyFrom(node.onnx_node)
                nodes.append(n)
                continue
            attrs = {k: v for k, v in node.attributes.items()}
            nodes.append(
                helper.make_node(
                    node.op,
                    [name_of(v) for v in node.inputs],
                    [v.name if v is not None else "" for v in node.outputs],
                    name=node.provenance.node or node.id,
                    domain=node.domain or None,
                    **attrs,
                )
            )
        elif isinstance(node, Store):
            dest = node.dest
            if dest is None:
                continue
            if isinstance(dest, Slot):
                out_name = pair_out.get(dest.name) or f"{dest.name}_out"
                if any(o.name == out_name for o in program.outputs):
                    continue  # the caller-visible output of the same value is the slot's write-back too
            else:
                out_name = dest.name
            if out_name in used_names:
                raise ExportError(f"two stores write graph output {out_name!r}")
            used_names.add(out_name)
            src_name = name_of(node.value)
            if src_name != out_name:  # a program lowered from ONNX (or its IR text) names the value as the output
                nodes.append(helper.make_node("Identity", [src_name], [out_name], name=f"{node.id}.{out_name}"))
            outputs.append(_value_info(out_name, dest.type if dest.type.dtype else (node.value.type if node.value else TensorType())))
    for s in program.slots:
        out_name = pair_out.get(s.name) or f"{s.name}_out"
        if out_name not in used_names and any(st.dest is s for st in program.stores):
            raise ExportError(f"slot {s.name!r} has a store but no output to export it as")
    graph = helper.make_graph(nodes, program.name, inputs, outputs, initializer=inits)
    # contrib ops (DynamicQuantizeLSTM, a custom op kept as Compute) need their domain imported
    domains = sorted({n.domain for n in nodes if n.domain not in ("", "ai.onnx")})
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="rnnir")
    model.ir_version = 8
    # a slot no store writes (read-only state) has no output: recorded as null, not as an output the graph lacks
    stored = {st.dest.name for st in program.stores if isinstance(st.dest, Slot)}
    pairs = {s.name: (pair_out.get(s.name) or f"{s.name}_out") if s.name in stored else None for s in program.slots}
    _set_meta(model, META_PAIRS, json.dumps(pairs, sort_keys=True))
    _set_meta(model, META_SLOTS, json.dumps(_slot_meta(program, pairs), sort_keys=True))
    _set_meta(model, META_IR, print_program(program))
    return model


def _if_node(node: Compute, name_of: Callable[[Value | None], str]) -> onnx.NodeProto:
    n = len(node.outputs)
    branches = {}
    for k, region in enumerate(("then_branch", "else_branch")):
        yields = node.inputs[1 + k * n : 1 + (k + 1) * n]
        bnodes, bouts = [], []
        for i, (y, out) in enumerate(zip(yields, node.outputs)):
            oname = f"{node.id}.{region}.{i}"
            bnodes.append(helper.make_node("Identity", [name_of(y)], [oname]))
            t = out.type if out is not None and out.type.dtype else (y.type if y is not None else TensorType())
            bouts.append(_value_info(oname, t))
        branches[region] = helper.make_graph(bnodes, f"{node.id}_{region}", [], bouts)
    return helper.make_node(
        "If", [name_of(node.inputs[0])], [v.name if v is not None else "" for v in node.outputs], name=node.provenance.node or node.id, **branches
    )


# -- layout=1 → layout=0 ---------------------------------------------------------------------


def _rewrite_layout1(graph: onnx.GraphProto) -> None:
    """Replace each layout=1 RNN/GRU/LSTM by transposes around a layout=0 op (onnxruntime refuses layout=1)."""
    new_nodes: list[onnx.NodeProto] = []
    changed = False
    for node in graph.node:
        layout = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "layout"), 0)
        if node.op_type not in ("RNN", "GRU", "LSTM") or node.domain not in ("", "ai.onnx") or layout != 1:
            new_nodes.append(node)
            continue
        changed = True
        base = (node.name or node.output[0] or "rec") + ".layout0"
        ins = list(node.input)
        # X: [B, T, I] -> [T, B, I]; initial states: [B, D, H] -> [D, B, H]
        for idx in (0, 5, 6):
            if idx < len(ins) and ins[idx]:
                t = f"{base}.in{idx}"
                new_nodes.append(helper.make_node("Transpose", [ins[idx]], [t], perm=[1, 0, 2], name=t))
                ins[idx] = t
        outs = list(node.output)
        inner_outs = []
        posts = []
        for idx, name in enumerate(outs):
            if not name:
                inner_outs.append("")
                continue
            t = f"{base}.out{idx}"
            inner_outs.append(t)
            perm = [2, 0, 1, 3] if idx == 0 else [1, 0, 2]  # Y: [T, D, B, H] -> [B, T, D, H]
            posts.append(helper.make_node("Transpose", [t], [name], perm=perm, name=f"{t}.t"))
        rec = onnx.NodeProto()
        rec.CopyFrom(node)
        del rec.input[:]
        rec.input.extend(ins)
        del rec.output[:]
        rec.output.extend(inner_outs)
        keep = [a for a in rec.attribute if a.name != "layout"]
        del rec.attribute[:]
        rec.attribute.extend(keep)
        new_nodes.append(rec)
        new_nodes.extend(posts)
    if changed:
        del graph.node[:]
        graph.node.extend(new_nodes)
