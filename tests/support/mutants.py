"""Plant state bugs in real ONNX models: mutants for "never a silent pass" (issue 8).

Every function takes an ``onnx.ModelProto`` and returns a mutated COPY (the
argument is never changed). They work at the ONNX level on any model -- the
exports in ``tests/data/torch``, ``tests/data/torch_cells``, ``tests/data/ort``
and silero-vad's wheel files -- and keep it valid: ``onnx.checker`` (full
check) accepts the result and onnxruntime runs it (``tests/lower/cells/test_cell_data.py``
checks both, and that each mutant changes what the second call returns).

* :func:`swap_outputs` -- h/c swapped on the way out (graph outputs exchange producers).
* :func:`swap_packed_slices` -- a packed state written with slices i and j exchanged.
* :func:`swap_layers` -- stacked layers: written back (or read) in the other layer's slice.
* :func:`swap_in_if_branch` -- a swap in one If branch only.
* :func:`swap_loop_carried` -- two carried results of a Loop/Scan body exchanged.
* :func:`passthrough` -- the state output returns the state input unchanged.
* :func:`ignore_state_input` -- the recurrence reads zeros instead of the caller's state.

:data:`CATALOGUE` lists, for every committed model (and the silero-vad file
the issue names), the mutants that must be caught and the rnnir rule code
that must catch each (see ``rnnir explain CODE``): SD002 wrong-slot, SD001
slot-never-written, SD007 state-ignored.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: suffix of the values a mutant renames so that it can re-route them
_TAG = "__mutant"


class MutantError(ValueError):
    """The model does not have the structure the mutant needs."""


# ----------------------------------------------------------------- helpers


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def _defines(graph: onnx.GraphProto, name: str) -> bool:
    return (any(i.name == name for i in graph.input) or any(i.name == name for i in graph.initializer)
            or any(name in n.output for n in graph.node))


def _rename_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Every read of ``old`` in ``graph`` and in subgraphs that capture it (not shadowed)."""
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == old:
                node.input[k] = new
        for sub in _subgraphs(node):
            if not _defines(sub, old):
                _rename_uses(sub, old, new)
                for out in sub.output:  # a branch may yield an outer value directly
                    if out.name == old:
                        out.name = new


def _rename_value(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Rename a value defined in ``graph`` (by a node) and all its reads; graph outputs keep
    their names, so a graph output named ``old`` is left without a producer (the caller
    re-creates it)."""
    for node in graph.node:
        for k, name in enumerate(node.output):
            if name == old:
                node.output[k] = new
    _rename_uses(graph, old, new)
    for vi in graph.value_info:
        if vi.name == old:
            vi.name = new


def _unique(graph: onnx.GraphProto, base: str) -> str:
    taken = {o for n in graph.node for o in n.output} | {i.name for i in graph.input}
    taken |= {i.name for i in graph.initializer} | {n.name for n in graph.node}
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def _producer(graph: onnx.GraphProto, name: str) -> onnx.NodeProto | None:
    for node in graph.node:
        if name in node.output:
            return node
    return None


def _find_node(graph: onnx.GraphProto, name: str, op_types: tuple[str, ...]) -> onnx.NodeProto:
    """A node by name, searched in the graph and all subgraphs."""
    for node in graph.node:
        if node.name == name:
            if node.op_type not in op_types:
                raise MutantError(f"node '{name}' is a {node.op_type}, not {' or '.join(op_types)}")
            return node
        for sub in _subgraphs(node):
            try:
                return _find_node(sub, name, op_types)
            except KeyError:
                pass
    raise KeyError(name)


def _node_named(graph: onnx.GraphProto, name: str, op_types: tuple[str, ...]) -> onnx.NodeProto:
    try:
        return _find_node(graph, name, op_types)
    except KeyError:
        raise MutantError(f"no node named '{name}'") from None


def _graph_output_names(model: onnx.ModelProto) -> list[str]:
    return [o.name for o in model.graph.output]


def _const(graph: onnx.GraphProto, base: str, value: np.ndarray) -> str:
    name = _unique(graph, base)
    graph.initializer.append(numpy_helper.from_array(value, name))
    return name


def _reroute_output(graph: onnx.GraphProto, output: str) -> str:
    """Detach graph output ``output`` from its producer: the producer now writes a new
    name (returned), which every former reader keeps reading; the caller must add a
    node that produces ``output`` again."""
    if _producer(graph, output) is None:
        raise MutantError(f"'{output}' has no producing node in this graph (a graph input?)")
    src = _unique(graph, output + _TAG)
    _rename_value(graph, output, src)
    return src


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _permute_axis0(graph: onnx.GraphProto, src: str, dest: str, i: int, j: int, size: int, tag: str) -> None:
    """dest = src with index i and j of axis 0 exchanged (a Gather with a permutation)."""
    perm = np.arange(size, dtype=np.int64)
    perm[[i, j]] = perm[[j, i]]
    idx = _const(graph, f"{tag}_perm", perm)
    graph.node.append(helper.make_node("Gather", [src, idx], [dest], axis=0, name=_unique(graph, f"{tag}_gather")))


def _axis0(graph: onnx.GraphProto, name: str) -> int | None:
    for vi in list(graph.output) + list(graph.value_info) + list(graph.input):
        if vi.name == name and vi.type.tensor_type.shape.dim:
            d = vi.type.tensor_type.shape.dim[0]
            return d.dim_value if d.HasField("dim_value") else None
    return None


def _swap_slices_of(graph: onnx.GraphProto, value: str, i: int, j: int, tag: str) -> str:
    """Exchange slices i and j (axis 0) of ``value`` where it is produced: a Concat on
    axis 0 gets its inputs i and j exchanged (how a packed state is written); otherwise
    the value is re-routed through a permuting Gather. Returns what was done."""
    node = _producer(graph, value)
    while node is not None and node.op_type == "Identity":
        node = _producer(graph, node.input[0])
    if node is not None and node.op_type == "Concat":
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), None)
        if axis == 0 and max(i, j) < len(node.input):
            node.input[i], node.input[j] = node.input[j], node.input[i]
            return f"Concat '{node.name}' inputs {i} and {j} exchanged"
    size = _axis0(graph, value)
    if not size:
        raise MutantError(f"'{value}' is not a Concat on axis 0 and its axis-0 size is unknown")
    if node is None:
        raise MutantError(f"'{value}' has no producing node in this graph")
    src = _unique(graph, value + _TAG)
    _rename_value(graph, value, src)
    _permute_axis0(graph, src, value, i, j, size, tag)
    return f"'{value}' = Gather(axis 0) with slices {i} and {j} exchanged"


# ----------------------------------------------------------------- mutants


def swap_outputs(model: onnx.ModelProto, a: str, b: str) -> onnx.ModelProto:
    """Graph outputs ``a`` and ``b`` exchange producers (e.g. ``hn``/``cn``: h and c swapped
    on the way out). Every other reader of the two values still reads the right one."""
    names = _graph_output_names(model)
    for n in (a, b):
        if n not in names:
            raise MutantError(f"'{n}' is not a graph output (outputs: {names})")
    out = _copy(model)
    g = out.graph
    src_a = _reroute_output(g, a)
    src_b = _reroute_output(g, b)
    g.node.append(helper.make_node("Identity", [src_b], [a], name=_unique(g, f"mutant_swap_{a}")))
    g.node.append(helper.make_node("Identity", [src_a], [b], name=_unique(g, f"mutant_swap_{b}")))
    return out


def swap_packed_slices(model: onnx.ModelProto, output: str, i: int = 0, j: int = 1) -> onnx.ModelProto:
    """The packed state output ``output`` is written with its slices ``i`` and ``j`` (axis 0)
    exchanged: for ``stateN = Concat(Unsqueeze(h), Unsqueeze(c))`` the Concat's inputs swap.
    When the output is produced by an If (silero-vad), both branches get the swap."""
    if output not in _graph_output_names(model):
        raise MutantError(f"'{output}' is not a graph output")
    out = _copy(model)
    g = out.graph
    node = _producer(g, output)
    if node is not None and node.op_type == "If":
        k = list(node.output).index(output)
        for sub in _subgraphs(node):
            _swap_slices_of(sub, sub.output[k].name, i, j, "mutant_slices")
        return out
    _swap_slices_of(g, output, i, j, "mutant_slices")
    return out


class Side(enum.Enum):
    """Where a layer swap is planted."""

    WRITE = "write"  # the new state is written back into the other layer's slice
    READ = "read"    # each layer starts from the other layer's slice


def swap_layers(model: onnx.ModelProto, state: str, i: int = 0, j: int = 1, side: Side = Side.WRITE) -> onnx.ModelProto:
    """Stacked layers exchange slices ``i`` and ``j`` of their state tensor.

    ``side=Side.WRITE``: ``state`` is the state OUTPUT, written back with the layers' slices
    exchanged (:func:`swap_packed_slices`). ``side=Side.READ``: ``state`` is the state INPUT and
    the Gather/Slice that selects layer ``i`` now selects ``j`` and vice versa."""
    if side is Side.WRITE:
        return swap_packed_slices(model, state, i, j)
    out = _copy(model)
    g = out.graph
    if state not in {x.name for x in g.input}:
        raise MutantError(f"'{state}' is not a graph input")
    selectors = {}
    for node in g.node:
        if node.input and node.input[0] == state and node.op_type in ("Gather", "Slice"):
            index = _selected_index(g, node)
            if index is not None:
                selectors[index] = node
    if i not in selectors or j not in selectors:
        raise MutantError(f"'{state}' has no Gather/Slice selecting both index {i} and {j} on axis 0 "
                          f"(found {sorted(selectors)})")
    a, b = selectors[i], selectors[j]
    # the index operands may be Constant nodes placed after the selectors: re-home them as
    # initializers so that the swapped graph stays topologically sorted
    a_args = [_as_initializer(g, n) for n in a.input[1:]]
    b_args = [_as_initializer(g, n) for n in b.input[1:]]
    a.input[1:], b.input[1:] = b_args, a_args
    return out


def _as_initializer(graph: onnx.GraphProto, name: str) -> str:
    """An initializer holding the constant ``name`` (itself when it already is one)."""
    if not name or any(t.name == name for t in graph.initializer):
        return name
    for n in graph.node:
        if n.op_type == "Constant" and n.output[0] == name and n.attribute and n.attribute[0].name == "value":
            return _const(graph, name + _TAG, numpy_helper.to_array(n.attribute[0].t))
    raise MutantError(f"'{name}' is not a constant")


def _selected_index(graph: onnx.GraphProto, node: onnx.NodeProto) -> int | None:
    """Which index of axis 0 a Gather (scalar index) or a Slice ([k:k+1] on axis 0) selects."""
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    if node.op_type == "Gather":
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        idx = consts.get(node.input[1])
        return int(idx) if axis == 0 and idx is not None and idx.size == 1 else None
    starts = consts.get(node.input[1])
    axes = consts.get(node.input[3]) if len(node.input) > 3 and node.input[3] else np.array([0])
    if starts is None or axes is None or starts.size != 1 or int(axes.reshape(-1)[0]) != 0:
        return None
    return int(starts.reshape(-1)[0])


def swap_in_if_branch(model: onnx.ModelProto, if_node_name: str, branch: str, i: int, j: int,
                      yield_index: int | None = None) -> onnx.ModelProto:
    """A swap in ONE branch of an If (the other branch stays right).

    ``yield_index=None``: the branch's yields (outputs) ``i`` and ``j`` are exchanged (an If that
    yields h and c separately). ``yield_index=k``: slices ``i`` and ``j`` of the branch's k-th
    yield are exchanged (silero-vad's ``stateN = Concat(Unsqueeze(h), Unsqueeze(c))`` inside
    the branch)."""
    if branch not in ("then_branch", "else_branch"):
        raise MutantError(f"branch must be 'then_branch' or 'else_branch', not {branch!r}")
    out = _copy(model)
    node = _node_named(out.graph, if_node_name, ("If",))
    sub = next(a.g for a in node.attribute if a.name == branch)
    if yield_index is None:
        outs = sub.output
        a, b = onnx.ValueInfoProto(), onnx.ValueInfoProto()
        a.CopyFrom(outs[i])
        b.CopyFrom(outs[j])
        if not _same_tensor_kind(a, b):
            raise MutantError(f"yields {i} and {j} of {if_node_name}.{branch} differ in type: swapping "
                              "them would not run")
        outs[i].CopyFrom(b)
        outs[j].CopyFrom(a)
        return out
    _swap_slices_of(sub, sub.output[yield_index].name, i, j, "mutant_branch")
    return out


def swap_loop_carried(model: onnx.ModelProto, loop_node_name: str, i: int, j: int) -> onnx.ModelProto:
    """The body of Loop (or Scan) ``loop_node_name`` yields its carried values ``i`` and ``j``
    exchanged (counting carried values from 0: for a Loop carrying h, c that is body outputs
    1 and 2, after the condition)."""
    out = _copy(model)
    node = _node_named(out.graph, loop_node_name, ("Loop", "Scan"))
    body = next(_subgraphs(node))
    first = 1 if node.op_type == "Loop" else 0
    n_carried = len(node.input) - (2 if node.op_type == "Loop" else 0)
    if node.op_type == "Scan":
        n_scan = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "num_scan_inputs"), 0)
        n_carried = len(node.input) - n_scan
    if not (0 <= i < n_carried and 0 <= j < n_carried) or i == j:
        raise MutantError(f"{node.op_type} '{loop_node_name}' carries {n_carried} values; cannot swap {i} and {j}")
    a, b = body.output[first + i], body.output[first + j]
    if not _same_tensor_kind(a, b):
        raise MutantError(f"carried values {i} and {j} of '{loop_node_name}' differ in type")
    a.name, b.name = b.name, a.name
    return out


def _same_tensor_kind(a: onnx.ValueInfoProto, b: onnx.ValueInfoProto) -> bool:
    """Same element type, and same rank where both declare a shape (exporters give h and c
    different dim symbols, and If branches often declare no shape at all)."""
    if not a.type.HasField("tensor_type") and not b.type.HasField("tensor_type"):
        return a.type == b.type  # both undeclared (silero's nested If branches): nothing to disagree
    ta, tb = a.type.tensor_type, b.type.tensor_type
    if not (a.type.HasField("tensor_type") and b.type.HasField("tensor_type") and ta.elem_type == tb.elem_type):
        return False
    return not (ta.HasField("shape") and tb.HasField("shape")) or len(ta.shape.dim) == len(tb.shape.dim)


def passthrough(model: onnx.ModelProto, state_output: str, state_input: str) -> onnx.ModelProto:
    """``state_output`` returns ``state_input`` unchanged (Identity): the final state is
    computed (other outputs may still read it) but never handed back."""
    if state_input not in {x.name for x in model.graph.input}:
        raise MutantError(f"'{state_input}' is not a graph input")
    if state_output not in _graph_output_names(model):
        raise MutantError(f"'{state_output}' is not a graph output")
    out = _copy(model)
    g = out.graph
    _reroute_output(g, state_output)
    g.node.append(helper.make_node("Identity", [state_input], [state_output],
                                   name=_unique(g, f"mutant_passthrough_{state_output}")))
    return out


def ignore_state_input(model: onnx.ModelProto, state_input: str) -> onnx.ModelProto:
    """The recurrence reads zeros of the state's shape (``ConstantOfShape(Shape(state))``, as
    exporters write a zero initial state) instead of the caller's state. The input stays in
    the interface -- only its shape is read -- so the caller still feeds it and gets no error."""
    if state_input not in {x.name for x in model.graph.input}:
        raise MutantError(f"'{state_input}' is not a graph input")
    out = _copy(model)
    g = out.graph
    zeros = _unique(g, state_input + "_zeros" + _TAG)
    _rename_uses(g, state_input, zeros)
    # graph outputs that were the input itself (a passthrough) stay the input
    shape = _unique(g, state_input + "_shape" + _TAG)
    elem = next(x.type.tensor_type.elem_type for x in g.input if x.name == state_input)
    zero = helper.make_tensor("value", elem, [1], [0])
    g.node.insert(0, helper.make_node("ConstantOfShape", [shape], [zeros], value=zero,
                                      name=_unique(g, f"mutant_zeros_{state_input}")))
    g.node.insert(0, helper.make_node("Shape", [state_input], [shape], name=_unique(g, f"mutant_shape_{state_input}")))
    return out


# ----------------------------------------------------------------- catalogue


class Rule(enum.Enum):
    """rnnir rule codes a mutant must trigger (``rnnir explain CODE``)."""

    WRONG_SLOT = "SD002"          # h/c swap, layer swap, swap in one If branch, swapped carried values
    NEVER_WRITTEN = "SD001"       # the state is handed straight back (passthrough)
    STATE_IGNORED = "SD007"       # the caller's state is never read by the recurrence


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One planted bug: ``apply(model)`` returns the broken copy; ``rule`` must report it."""

    name: str
    apply: Callable[[onnx.ModelProto], onnx.ModelProto]
    rule: Rule
    why: str
    #: feeds the observing run needs (e.g. ``{"sr": 8000}`` to take an If's else branch)
    feed: dict[str, Any] = dataclasses.field(default_factory=dict)


def _hc(h_out: str = "hn", c_out: str = "cn", h_in: str = "h0", c_in: str = "c0") -> tuple[Mutant, ...]:
    return (
        Mutant("hc_swap", lambda m: swap_outputs(m, h_out, c_out), Rule.WRONG_SLOT,
               f"{h_out}/{c_out} exchange producers: h is written into c's slot and back"),
        Mutant("h_passthrough", lambda m: passthrough(m, h_out, h_in), Rule.NEVER_WRITTEN,
               f"{h_out} = {h_in}: the new h is never handed back"),
        Mutant("c_passthrough", lambda m: passthrough(m, c_out, c_in), Rule.NEVER_WRITTEN,
               f"{c_out} = {c_in}: the new c is never handed back"),
        Mutant("h_ignored", lambda m: ignore_state_input(m, h_in), Rule.STATE_IGNORED,
               f"the cell reads zeros instead of {h_in}"),
        Mutant("c_ignored", lambda m: ignore_state_input(m, c_in), Rule.STATE_IGNORED,
               f"the cell reads zeros instead of {c_in}"),
    )


def _h(h_out: str = "hn", h_in: str = "h0") -> tuple[Mutant, ...]:
    return (
        Mutant("passthrough", lambda m: passthrough(m, h_out, h_in), Rule.NEVER_WRITTEN,
               f"{h_out} = {h_in}: the new state is never handed back"),
        Mutant("state_ignored", lambda m: ignore_state_input(m, h_in), Rule.STATE_IGNORED,
               f"the cell reads zeros instead of {h_in}"),
    )


def _packed(out: str = "stateN", inp: str = "state") -> tuple[Mutant, ...]:
    return (
        Mutant("hc_swap", lambda m: swap_packed_slices(m, out, 0, 1), Rule.WRONG_SLOT,
               f"{out} written as stack(c', h'): slices 0 and 1 exchanged"),
        Mutant("passthrough", lambda m: passthrough(m, out, inp), Rule.NEVER_WRITTEN,
               f"{out} = {inp}: the state is handed straight back"),
        Mutant("state_ignored", lambda m: ignore_state_input(m, inp), Rule.STATE_IGNORED,
               f"the recurrence reads zeros instead of {inp}"),
    )


def _stacked(out: str = "hn", inp: str = "h0") -> tuple[Mutant, ...]:
    return (
        Mutant("layer_swap", lambda m: swap_layers(m, out, 0, 1, Side.WRITE), Rule.WRONG_SLOT,
               f"{out} written as stack(layer 1, layer 0)"),
        Mutant("layer_swap_read", lambda m: swap_layers(m, inp, 0, 1, Side.READ), Rule.WRONG_SLOT,
               f"layer 0 starts from {inp}[1] and layer 1 from {inp}[0]"),
    ) + _h(out, inp)


def _loop(loop: str) -> tuple[Mutant, ...]:
    return (Mutant("carried_swap", lambda m: swap_loop_carried(m, loop, 0, 1), Rule.WRONG_SLOT,
                   f"the body of '{loop}' yields c as the carried h and h as the carried c"),) + _hc()


#: silero's 8 kHz path takes 32 samples of context + 256 new ones (576 would not run)
_SILERO_8K = {"sr": 8000, "input": (0.1 * np.random.default_rng(8).standard_normal((1, 288))).astype(np.float32)}

#: model file (relative to ``tests/data``; ``silero:<file>`` / ``faster-whisper:<file>`` for
#: the files of those wheels, see ``tests/realmodels.py``) -> mutants
CATALOGUE: dict[str, tuple[Mutant, ...]] = {}
for _kind in ("ts", "dynamo"):
    for _name in ("lstm_cell", "lstm_cell_keras", "lstm_cell_unrolled"):
        CATALOGUE[f"torch_cells/{_name}.{_kind}.onnx"] = _hc()
    for _name in ("gru_cell", "rnn_cell", "gru_cell_nobias", "gru_cell_reset_before"):
        CATALOGUE[f"torch_cells/{_name}.{_kind}.onnx"] = _h()
    CATALOGUE[f"torch_cells/lstm_cell_packed.{_kind}.onnx"] = _packed()
    CATALOGUE[f"torch_cells/gru_cell_stacked.{_kind}.onnx"] = _stacked()
    CATALOGUE[f"torch_cells/rnn_cell_stacked.{_kind}.onnx"] = _stacked()
CATALOGUE["torch_cells/lstm_cell_loop.ts.onnx"] = _loop("/Loop")
CATALOGUE["torch_cells/lstm_hand_loop.ts.onnx"] = _loop("/Loop")
CATALOGUE["torch_cells/lstm_cell_scan.dynamo.onnx"] = _loop("node_scan__2")
# the ONNX RNN/GRU/LSTM exports of tests/data/torch (rnnir understands these today: a baseline)
for _kind in ("ts", "dynamo"):
    CATALOGUE[f"torch/lstm_stream.{_kind}.onnx"] = _hc()
    CATALOGUE[f"torch/lstm_batch_first.{_kind}.onnx"] = _hc()
    CATALOGUE[f"torch/gru_stream.{_kind}.onnx"] = _h()
    CATALOGUE[f"torch/gru2_stream.{_kind}.onnx"] = _stacked()
    CATALOGUE[f"torch/lstm_packed_state.{_kind}.onnx"] = _packed()
# onnxruntime's transforms of those (tests/data/ort)
CATALOGUE["ort/lstm_stream.ts.qdyn.onnx"] = _hc()
CATALOGUE["ort/lstm_stream.dynamo.qdyn.onnx"] = _hc()
CATALOGUE["ort/lstm_packed_state.ts.qdyn.onnx"] = _packed()
CATALOGUE["ort/gru2_stream.ts.qdyn.onnx"] = _stacked()
CATALOGUE["ort/lstm_cell.ts.qdyn.onnx"] = _hc()
CATALOGUE["ort/lstm_stream.ts.ortopt.onnx"] = _hc()
CATALOGUE["ort/lstm_cell.ts.ortopt.onnx"] = _hc()
CATALOGUE["ort/lstm_cell_packed.ts.ortopt.onnx"] = _packed()
CATALOGUE["ort/gru_cell_stacked.ts.ortopt.onnx"] = tuple(m for m in _stacked() if m.name != "layer_swap_read")
CATALOGUE["ort/lstm_cell_keras.ts.ortopt.onnx"] = _hc()
CATALOGUE["ort/gru_cell_reset_before.ts.ortopt.onnx"] = _h()
CATALOGUE["ort/lstm_cell_loop.ts.ortopt.onnx"] = _loop("/Loop")
# the silero-vad wheel's hand-written cell in If branches (tests/realmodels.py)
CATALOGUE["silero:silero_vad_op18_ifless.onnx"] = (
    Mutant("hc_swap_then_branch", lambda m: swap_in_if_branch(m, "node_cond__1", "then_branch", 0, 1, yield_index=1),
           Rule.WRONG_SLOT, "16 kHz branch writes stateN = stack(c', h'); the 8 kHz branch is right",
           feed={"sr": 16000}),
    Mutant("hc_swap_else_branch", lambda m: swap_in_if_branch(m, "node_cond__1", "else_branch", 0, 1, yield_index=1),
           Rule.WRONG_SLOT, "8 kHz branch writes stateN = stack(c', h'); the 16 kHz branch is right",
           feed=_SILERO_8K),
    Mutant("hc_swap", lambda m: swap_packed_slices(m, "stateN", 0, 1), Rule.WRONG_SLOT,
           "both branches write stateN = stack(c', h')", feed={"sr": 16000}),
    Mutant("passthrough", lambda m: passthrough(m, "stateN", "state"), Rule.NEVER_WRITTEN,
           "stateN = state", feed={"sr": 16000}),
    Mutant("state_ignored", lambda m: ignore_state_input(m, "state"), Rule.STATE_IGNORED,
           "both branches read zeros instead of state", feed={"sr": 16000}),
)
# silero_vad.onnx: ONNX LSTMs in If branches nested two deep; the inner If of each rate yields
# Y_h and Y_c separately, so one branch's yields can be exchanged (rnnir follows these today)
_SILERO_IF_16K = "If_0_then_branch__Inline_0__/decoder/If_1"
_SILERO_IF_8K = "If_0_else_branch__Inline_0__/decoder/If_1"
CATALOGUE["silero:silero_vad.onnx"] = (
    Mutant("hc_swap_16k_yields", lambda m: swap_in_if_branch(m, _SILERO_IF_16K, "then_branch", 0, 1), Rule.WRONG_SLOT,
           "at 16 kHz the LSTM branch yields (Y_c, Y_h) instead of (Y_h, Y_c)", feed={"sr": 16000}),
    Mutant("hc_swap_8k_yields", lambda m: swap_in_if_branch(m, _SILERO_IF_8K, "then_branch", 0, 1), Rule.WRONG_SLOT,
           "at 8 kHz the LSTM branch yields (Y_c, Y_h) instead of (Y_h, Y_c)", feed=_SILERO_8K),
    Mutant("passthrough", lambda m: passthrough(m, "stateN", "state"), Rule.NEVER_WRITTEN,
           "stateN = state", feed={"sr": 16000}),
    Mutant("state_ignored", lambda m: ignore_state_input(m, "state"), Rule.STATE_IGNORED,
           "every branch reads zeros instead of state", feed={"sr": 16000}),
)
# faster-whisper's silero-vad files: v5's decoder is a plain-op LSTM step whose state output
# is named "35"; v6 is one ONNX LSTM over N frames with h/c in and hn/cn out
CATALOGUE["faster-whisper:silero_decoder_v5.onnx"] = _packed(out="35", inp="state")
CATALOGUE["faster-whisper:silero_vad_v6.onnx"] = _hc(h_out="hn", c_out="cn", h_in="h", c_in="c")


# ----------------------------------------------------------------- cases


@dataclasses.dataclass(frozen=True)
class Case:
    """A catalogued model ready to run: the model, its state pairs and a first-call feed."""

    key: str
    model: onnx.ModelProto
    pairs: dict[str, str]
    feed: dict[str, np.ndarray]


def load_case(key: str, feed: dict[str, Any] | None = None) -> Case:
    """Load a :data:`CATALOGUE` model. Committed models take the first call of their oracle
    (non-zero initial state); silero-vad files a random frame and a random non-zero state
    (raises ``realmodels.RealModelUnavailable`` when the wheel cannot be had), faster-whisper's
    files a random input and state. ``feed``
    overrides inputs (``{"sr": 8000}``)."""
    from tests.support import realmodels as rm  # the tests folder is on sys.path wherever this module is

    if key.startswith("faster-whisper:"):
        file = key.split(":", 1)[1]
        model = onnx.load(str(rm.faster_whisper_path(file)))
        first = rm.faster_whisper_feed(file)
        pairs = dict(rm.FASTER_WHISPER_STATE_PAIRS[file])
    elif key.startswith("silero:"):
        file = key.split(":", 1)[1]
        model = onnx.load(str(rm.silero_path(file)))
        first = rm.silero_feed(file)
        for name, value in first.items():
            if name in rm.SILERO_STATE_PAIRS[file]:
                rng = np.random.default_rng(3)
                first[name] = (0.5 * rng.standard_normal(value.shape)).astype(value.dtype)
        pairs = dict(rm.SILERO_STATE_PAIRS[file])
    else:
        model = onnx.load(str(rm.data_path(key)))
        calls = rm.data_calls(key)
        first = {k[len("call0_in_"):]: v for k, v in calls.items() if k.startswith("call0_in_")}
        pairs = rm.data_pairs(key)
    for name, value in (feed or {}).items():
        # copies: a catalogue's feed is shared by every case that uses it
        first[name] = np.array(value, dtype=first[name].dtype) if name in first else np.array(value)
    return Case(key, model, pairs, first)
