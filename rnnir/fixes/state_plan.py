"""Where a recurrence's hidden state would be exposed: :class:`StatePlan` values (where the initial state is read,
which values are the final state, per If alternative), for ONNX recurrences and for cells written as plain ops.

Planning only reads the model; :mod:`rnnir.fixes.expose` wires the plans in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from rnnir.analysis.slices import slice_maps
from rnnir.fixes.edits import EXPOSE, Edit
from rnnir.fixes.onnx_edit import GraphRef, dims_of, graph_refs, initializer, node_label, producer, value_types
from rnnir.ir.core import Program
from rnnir.ir.recurrence import ENTRY_OF, FINAL_OF, STATE_C, STATE_H, kind_for_op
from rnnir.lower.recognise import recognise
from rnnir.lower.scope import ModelIndex
from rnnir.lower.scope import attribute_value as _attr

__all__ = ["Alternative", "StatePlan", "default_state", "plan_states"]


@dataclass
class Alternative:
    """One recurrence (or, later, a recognised cell) carrying the state in one graph."""

    graph: GraphRef
    sites: list[tuple[onnx.NodeProto, int]]  # (node, input index) that read the initial state: the op's port,
    # or every reader of a recognised cell's incoming state
    final: str  # name of the final-state value in ``graph`` ("" when the op does not produce it yet)
    final_node: onnx.NodeProto
    final_index: int
    before: str  # what the initial state was


@dataclass
class StatePlan:
    """One state tensor to expose: its role, type and every alternative (If branch) that carries it.

    ``alternatives`` are mutually exclusive (the two branches of one If) or a single one.  ``default``
    is the value a caller that does not feed the state gets (None: the input is required).
    """

    role: str  # "h" or "c"
    op: str  # RNN / GRU / LSTM (or a cell's name)
    label: str  # the op (or If) that owns it, for names and messages
    dtype: int
    shape: list[int | str | None]
    alternatives: list[Alternative]
    default: np.ndarray | None
    layout: int = 0

    @property
    def what(self) -> str:
        """``GRU '/rnn/GRU'``, or ``LSTM 'then_lstm'/'else_lstm' in If 'if_sr'`` for grouped alternatives."""
        ops = "/".join(repr(node_label(a.final_node)) for a in self.alternatives)
        return f"{self.op} {ops}" + (f" in If {self.label!r}" if len(self.alternatives) > 1 else "")


def classify_initial(ref: GraphRef, name: str) -> tuple[str, np.ndarray | None, str]:
    """What an initial-state operand is: ("zeros"|"constant"|"input"|"computed", value, description)."""
    if not name:
        return "zeros", None, "absent (zeros)"
    seen = 0
    cur = name
    while seen < 16:
        seen += 1
        node, where, kind = producer(ref, cur)
        if kind == "input":
            return "input", None, f"graph input {cur!r}"
        if kind == "initializer":
            t = initializer(ref, cur)
            if t is None or t.data_location == onnx.TensorProto.EXTERNAL:
                return "computed", None, f"initializer {cur!r}"
            arr = numpy_helper.to_array(t)
            if not np.any(arr):
                return "zeros", arr, f"zeros (initializer {cur!r})"
            return "constant", arr, f"constant initializer {cur!r}"
        if kind != "node" or node is None or where is None:
            return "computed", None, repr(cur)
        if node.op_type == "Constant":
            t = _attr(node, "value")
            if isinstance(t, onnx.TensorProto):
                arr = numpy_helper.to_array(t)
                return ("zeros" if not np.any(arr) else "constant"), arr, f"Constant {node_label(node)!r}"
            return "computed", None, f"Constant {node_label(node)!r}"
        if node.op_type == "ConstantOfShape":
            t = _attr(node, "value")
            value = numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else np.zeros(1, np.float32)
            if not np.any(value):
                return "zeros", None, f"zeros (ConstantOfShape {node_label(node)!r})"
            return "computed", None, f"ConstantOfShape {node_label(node)!r} of {value.ravel()[0]!r}"
        if node.op_type in ("Identity", "Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Slice", "Gather", "Transpose") and node.input:
            ref, cur = where, node.input[0]
            continue
        return "computed", None, f"{node.op_type} {node_label(node)!r}"
    return "computed", None, repr(name)


def exposed_finals(program: Program) -> set[tuple[int, str]]:
    """(``id`` of the ONNX node, exit port) of every final state some state pair of ``program`` already writes back
    (``program`` is lowered from the very model being edited, so its ONNX nodes are that model's).  Per port: a
    pair may carry an LSTM's h while its c starts from zeros every call."""
    taken: set[tuple[int, str]] = set()
    for p in slice_maps(program).declared:
        for sm in p.slices:
            for r in sm.exit:
                node = program.node(r.node_id)
                onnx_node = getattr(node, "onnx_node", None)
                if onnx_node is not None:
                    taken.add((id(onnx_node), FINAL_OF.get(ENTRY_OF.get(r.port, ""), r.port)))  # Y's steps are h's
    return taken


def plan_states(model: onnx.ModelProto, program: Program, skipped: list[Edit], defaults: bool = False) -> list[StatePlan]:
    refs = graph_refs(model)
    types = value_types(model)
    taken = exposed_finals(program)
    fallback_batch = fallback_batch_of(model)
    found: list[tuple[onnx.NodeProto, GraphRef, list[StatePlan]]] = []
    for ref in refs:
        for node in ref.graph.node:
            spec = kind_for_op(node.op_type, node.domain)
            if spec is None:
                continue
            label = node_label(node)
            if any(not b.startswith(("then_branch", "else_branch")) for _, b in ref.owners):
                skipped.append(not_exposed(label, "it runs inside a Loop/Scan body, whose state rnnir does not thread out"))
                continue
            direction = str(_attr(node, "direction", "forward"))
            if direction != "forward":
                skipped.append(not_exposed(label, f"a {direction} recurrence runs each chunk backwards: chunked calls can never equal one call"))
                continue
            # read as lowering reads them: it refused an op without hidden_size before any plan is made
            hidden = int(_attr(node, "hidden_size"))
            layout = int(_attr(node, "layout", 0))
            x_dims = dims_of(types.get(node.input[0])) if node.input else None
            batch = x_dims[1 if layout == 0 else 0] if x_dims and len(x_dims) == 3 else None
            if batch is None or (isinstance(batch, str) and batch.startswith("unk__")):
                batch = fallback_batch  # shape inference could not tell: an invented symbol helps nobody
            shape: list[int | str | None] = [1, batch, hidden] if layout == 0 else [batch, 1, hidden]
            dtype = elem_type(ref, types, node.input[:3])  # X, W and R share one type
            plans: list[StatePlan] = []
            for port in spec.states:
                # every registered kind lists its states' ports (rnnir.ir.recurrence.KINDS)
                role, idx, out_idx = port.role, spec.inputs.index(port.entry), spec.outputs.index(port.exit)
                if (id(node), port.exit) in taken:
                    skipped.append(not_exposed(f"{label}.{port.exit}", "this final state is already written back by a state pair"))
                    continue
                name = node.input[idx] if idx < len(node.input) else ""
                kind, value, before = classify_initial(ref, name)
                if kind in ("input", "computed"):
                    skipped.append(not_exposed(f"{label}.initial_{role}", f"its initial state is {before}, not a constant"))
                    continue
                default = default_state(shape, value)
                if kind == "constant" and (not defaults or default is None):
                    why = "pass state_defaults=True (--state-defaults) to keep it as the new input's default" if default is not None else (
                        "its shape is not static, so it cannot be the new input's default"
                    )
                    skipped.append(
                        not_exposed(f"{label}.initial_{role}", f"its initial state is a non-zero {before}: a required state input would start from zeros; {why}")
                    )
                    continue
                final = node.output[out_idx] if out_idx < len(node.output) else ""
                alt = Alternative(ref, [(node, idx)], final, node, out_idx, before)
                plans.append(StatePlan(role, spec.name, label, dtype, list(shape), [alt], default, layout))
            if plans:
                found.append((node, ref, plans))
    found.extend(plan_cells(model, program, refs[0], types, fallback_batch, skipped))
    return group_alternatives(found)


#: ops through which a recognised cell's zero start reaches the cell's own ops (its readers' outputs lead there)


_CELL_READER_HOPS = 8


def plan_cells(
    model: onnx.ModelProto, program: Program, root: GraphRef, types: dict[str, onnx.TypeProto], fallback_batch: int | str, skipped: list[Edit]
) -> list[tuple[onnx.NodeProto, GraphRef, list[StatePlan]]]:
    """Plans for cells written as plain ops in the main graph that start from zeros (rnnir.lower.cells).

    The zeros the cell reads are replaced by the new state input at every reader, so the input has the zeros'
    own shape ([batch, hidden] as the cell reads it); zeros shared with something other than this cell's state
    (an LSTM's h and c made from one tensor, or any reader whose result does not flow into the cell's new state)
    are left alone and reported, since rewiring them would feed the state where no state was read.
    """
    index = ModelIndex(model, "fix")
    sources = [(index.root, p.input) for p in program.state_pairs if p.input in index.root.inputs]
    try:
        recognised = recognise(index, sources, {p.output for p in program.state_pairs if p.output is not None})
    except (ValueError, IndexError, TypeError, KeyError, ArithmeticError):
        return []
    written = {
        (r.node_id, r.port)
        for p in slice_maps(program).declared
        for sm in p.slices
        for r in sm.exit
    }
    rec_of = {rec.recognised_from: rec for rec in program.recurrents if rec.recognised_from}
    producers = {o: (n, k) for n in model.graph.node for k, o in enumerate(n.output) if o}
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for n in model.graph.node:
        for k, i in enumerate(n.input):
            if i:
                consumers.setdefault(i, []).append((n, k))
    out: list[tuple[onnx.NodeProto, GraphRef, list[StatePlan]]] = []

    for site in recognised.sites:
        if not site.zero_starts:
            continue  # its cells read state inputs (a Loop's recurrence: its carried state is a Loop input already)
        first, last = site.cells[0], site.cells[-1]
        rec = rec_of.get(site.recognised_from)
        if site.scope is not index.root:
            if not (rec is not None and any(node == rec.id for node, _port in written)):
                skipped.append(not_exposed(f"{site.kind} {site.anchor!r}", "a cell inside an If branch or a Loop body is not exposed yet (main graph only)"))
            continue
        roles = [(STATE_H.role, first.h_source, last.h_out, STATE_H.exit)]
        if first.c_source is not None and last.c_out is not None:
            roles.append((STATE_C.role, first.c_source, last.c_out, STATE_C.exit))
        plans: list[StatePlan] = []
        for role, source, final, exit_port in roles:
            label = f"{site.kind} {site.anchor!r}.initial_{role}"
            if f"initial_{role}" not in site.zero_starts:
                continue  # a cell that reads a state input (or a computed value) keeps its state already
            kind, value, before = classify_initial(root, source)
            if kind != "zeros":
                skipped.append(not_exposed(label, f"its initial state is {before}, not a constant"))
                continue
            if rec is not None and (rec.id, exit_port) in written:
                skipped.append(not_exposed(label, "this final state is already written back by a state pair"))
                continue
            if first.h_source == first.c_source:
                skipped.append(not_exposed(label, f"its zeros {source!r} start both h and c: one input cannot become two states"))
                continue
            readers = consumers.get(source, [])
            foreign = [n for n, _ in readers if not reaches(n, {final}, consumers, _CELL_READER_HOPS)]
            if foreign or not readers:
                what = ", ".join(repr(node_label(n)) for n in foreign) or "nothing"
                skipped.append(not_exposed(label, f"its zeros {source!r} are also read by {what}, which is not this cell's state"))
                continue
            dims = dims_of(types.get(source))
            if dims is None and value is not None:
                dims = list(value.shape)
            if dims:
                dims[-1] = site.hidden_size  # the cell's state is [..., hidden]: what recognition measured (a declared dim may be a name)
            if dims is None or len(dims) < 2 or any(not isinstance(d, int) for d in dims[1:]):
                skipped.append(not_exposed(label, f"the shape of its zeros {source!r} is unknown"))
                continue
            if dims[0] is None or dims[0] == 1 or (isinstance(dims[0], str) and dims[0].startswith("unk__")):
                # the cell's input holds its rows batch first: share its batch symbol, so a caller (and
                # check_multicall) sizing the input sizes the state alike; zeros [1, hidden] broadcast over the
                # batch start one state per row all the same, and the new state fed back is [batch, hidden]
                x_dims = dims_of(types.get(first.x[0])) if first.x else None
                x_batch = x_dims[0] if x_dims else None
                dims[0] = x_batch if x_batch is not None and not (isinstance(x_batch, str) and x_batch.startswith("unk__")) else fallback_batch
            dtype = elem_type(root, types, [final, source])
            final_node, final_index = producers[final]
            alt = Alternative(root, list(readers), final, final_node, final_index, before)
            plans.append(StatePlan(role, site.kind, site.anchor, dtype, list(dims), [alt], default_state(list(dims), value), layout=0))
        if plans:
            out.append((plans[0].alternatives[0].final_node, root, plans))
    return out


def reaches(node: onnx.NodeProto, targets: set[str], consumers: dict[str, list[tuple[onnx.NodeProto, int]]], hops: int) -> bool:
    """One of ``node``'s results flows into one of ``targets`` within ``hops`` ops."""
    frontier = [o for o in node.output if o]
    seen: set[str] = set()
    for _ in range(hops):
        if any(o in targets for o in frontier):
            return True
        nxt: list[str] = []
        for v in frontier:
            if v in seen:
                continue
            seen.add(v)
            for n, _k in consumers.get(v, ()):
                nxt.extend(o for o in n.output if o)
        frontier = nxt
    return any(o in targets for o in frontier)


def fallback_batch_of(model: onnx.ModelProto) -> int | str:
    """The batch of a state whose op input shape inference cannot type: the leading dim of the first graph
    input when it is static (silero's audio is [1, 576]; its LSTM's input is computed), else ``"batch"``."""
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = dims_of(vi.type)
        if dims and isinstance(dims[0], int) and dims[0] > 0 and len(dims) >= 2:
            return dims[0]
        break
    return "batch"


def elem_type(ref: GraphRef, types: dict[str, onnx.TypeProto], names: Sequence[str]) -> int:
    """The element type of the first of ``names`` whose type is known: from shape inference, else an initializer's
    own (an op's float64 weights when inference could not type its X, which a contrib op before it hides); float."""
    for name in names:
        t = types.get(name)
        if t is not None and t.tensor_type.elem_type:
            return int(t.tensor_type.elem_type)
        init = initializer(ref, name) if name else None
        if init is not None:
            return int(init.data_type)
    return onnx.TensorProto.FLOAT


def not_exposed(what: str, reason: str) -> Edit:
    return Edit(EXPOSE, what, "", "", True, f"state of {what} not exposed", applied=False, reason=reason, fixable=False)


def default_state(shape: list[int | str | None], value: np.ndarray | None) -> np.ndarray | None:
    if not all(isinstance(d, int) and d > 0 for d in shape):
        return None
    dims = [int(d) for d in shape if isinstance(d, int)]
    if value is None:
        return np.zeros(dims, np.float32)
    try:
        out: np.ndarray = np.broadcast_to(value.astype(np.float32), dims).copy()
    except ValueError:
        return None
    return out


def group_alternatives(found: list[tuple[onnx.NodeProto, GraphRef, list[StatePlan]]]) -> list[StatePlan]:
    """Ops of the same kind and size in the two branches of one If share one state (one runs per call)."""
    out: list[StatePlan] = []
    by_if: dict[int, dict[str, list[list[StatePlan]]]] = {}
    order: list[list[StatePlan] | int] = []  # a plain op's plans, or the id of an If whose branches hold ops
    for _node, ref, plans in found:
        if ref.owners:
            owner, branch = ref.owners[-1]
            if id(owner) not in by_if:
                by_if[id(owner)] = {}
                order.append(id(owner))
            by_if[id(owner)].setdefault(branch, []).append(plans)
        else:
            order.append(plans)
    for item in order:
        if not isinstance(item, int):
            out.extend(item)
            continue
        then, other = by_if[item].get("then_branch", []), by_if[item].get("else_branch", [])
        if len(then) == len(other) and all(same_shape(a, b) for a, b in zip(then, other)):
            for a, b in zip(then, other):
                for pa, pb in zip(a, b):
                    owner = pa.alternatives[0].graph.owners[-1][0]
                    pa.alternatives.extend(pb.alternatives)
                    pa.label = node_label(owner)
                    out.append(pa)
        else:
            for plans in [*then, *other]:
                out.extend(plans)
    return out


def same_shape(a: list[StatePlan], b: list[StatePlan]) -> bool:
    return len(a) == len(b) and all(x.op == y.op and x.role == y.role and x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))
