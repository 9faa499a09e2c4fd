"""Model edits derived from rnnir's analysis: expose a recurrence's hidden state, repair write-back findings.

    import rnnir
    result = rnnir.fix("encoder.onnx", expose_state=True)     # stateless export -> streaming model
    result = rnnir.fix("model.onnx")                           # the safe fixes of every rule in FIXES
    for edit in result.edits: print(edit)                      # what changed, and whether it was certain
    onnx.save(result.model, "fixed.onnx")

Exposing state
--------------
A recurrence whose initial state is absent or constant zeros (as exporters
write ``nn.GRU(x)`` without ``h0``) and whose final state nobody pairs forgets
everything between calls.  :func:`fix` with ``expose_state=True`` gives each
such state a graph input and a graph output, wires them to the op's
``initial_h``/``initial_c`` and ``Y_h``/``Y_c`` ports (through ``If`` branches:
the branch that holds the op yields its final state, the other branch hands the
state back unchanged; ops of the same kind and size in the two alternatives of
one ``If`` share one state, as silero-vad's 8 kHz and 16 kHz LSTMs do), and
records the pairs in the ``rnnir.pairs``/``rnnir.slots`` metadata as
:func:`rnnir.export` does.  Names follow a convention rnnir's pairing
recognises: ``h0``/``c0`` -> ``hn``/``cn`` for one recurrence,
``<op>_h0`` -> ``<op>_hn`` per op when there are several, and ``state`` ->
``stateN`` when ``packed=True`` puts every state slice in one tensor
(silero-style, ``[h, c, h', c', ...]`` along axis 0).

A final state the model already returns (as itself or through Identity: SD010's
case) is paired with the new input instead of being returned a second time.
Each state port is its own decision: an LSTM whose h a pair already carries gets
only its c exposed.

Default value of a new state input: ONNX graph inputs have no default values
except through an initializer of the same name, which onnxruntime treats as an
input the caller may override (IR version 4 and later).  onnxruntime's
``run()`` accepts such an override, but its IOBinding refuses to bind a numpy
array to it (``bind_input``: ``Failed to find NodeArg ... in the def list``,
onnxruntime 1.32; an ``OrtValue`` binds), so :class:`rnnir.runtime.StatefulSession`
runs such a model but fails when a state is fed explicitly (as
``check_multicall``'s broken variants do).  So by default a new state input is
*required*, with zeros recorded as the slot's ``init`` in the ``rnnir.slots``
metadata; ``StatefulSession`` feeds zeros on the first call by itself.
``state_defaults=True`` (``--state-defaults``) adds the same-name initializer as
well, for callers that use ``run()`` and never feed the state, when the state's
shape is fully static (an initializer cannot have a symbolic batch dim); it is
also the only way a non-zero constant initial state is exposed (as the default).

The wiring is planned on :class:`StatePlan` values (where the initial state is
consumed, which values are the final state, per If alternative).  A cell
written as plain ops that starts from zeros (rnnir.lower.cells) is exposed the
same way: the new input replaces the zeros at every reader, in the main graph.

Repairing findings
------------------
Each fixable rule has a planner that turns a diagnostic into an ONNX (or
``rnnir.ir`` IR text) edit; see :data:`FIXES`.  A fix is *safe* when its
result is certain and leaves the first call's other outputs as they were (the
slices of a Concat put back in the order the slot is read; a chained output
store re-pointed at the value the slot store reads; the op's own final state
instead of a step of its output sequence; a missing state output added),
*unsafe* when a choice was made for the user (which op's state to keep, whether
a constant start was a reset) or the model's interface changes (a new required
input); unsafe fixes are only applied with ``unsafe=True``.  Every applied fix is checked by linting again: a
fix that does not clear its finding is rolled back and reported as skipped.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .analysis.slicemaps import ExitKind
from .analysis.slices import slice_maps
from .errors import RnnirError
from .fix_catalogue import FIXES, FixInfo
from .ir import Compute, Program, Recurrent, Value
from .lower.scope import attribute_value as _attr
from .lower.source import graph_fingerprint, iter_graphs, read_model
from .metadata import META_FINGERPRINT as _META_FINGERPRINT
from .metadata import META_IR, META_PAIRS
from .metadata import META_SLOTS as _META_SLOTS
from .metadata import read as metadata
from .metadata import write as _set_meta
from .render import printable

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

    from .analysis.slicemaps import PortRef
    from .analysis.slices import TracedPair

__all__ = ["FIXES", "Edit", "FixError", "FixInfo", "FixResult", "StatePlan", "fix", "render_diff"]

EXPOSE = "EXPOSE"
_MAX_ROUNDS = 32


class FixError(RnnirError):
    """A fix cannot be made (a model rnnir cannot edit safely, or an edit that breaks the model)."""


# -- the public data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """One change to the model: which rule (or ``EXPOSE``), what it touched, before and after."""

    code: str
    target: str  # node, value or metadata key edited
    before: str
    after: str
    safe: bool
    message: str
    applied: bool = True
    reason: str = ""  # why a fix was not applied
    fixable: bool = True  # False: rnnir found no certain edit at all (``reason`` says why), not just an unsafe one

    def __str__(self) -> str:
        kind = "safe" if self.safe else "unsafe"
        if not self.fixable:
            return f"{self.code} [no fix] {self.message}: {self.reason}"
        if not self.applied:
            return f"{self.code} [{kind}, not applied] {self.message}: {self.reason}"
        return f"{self.code} [{kind}] {self.message}: {self.target}: {self.before} -> {self.after}"

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "target": self.target,
            "before": self.before,
            "after": self.after,
            "safe": self.safe,
            "message": self.message,
            "applied": self.applied,
            "fixable": self.fixable,
            **({"reason": self.reason} if self.reason else {}),
        }


@dataclass
class FixResult:
    """The edited model, the edits applied and the fixes found but not applied (with their reason)."""

    model: onnx.ModelProto
    edits: list[Edit] = field(default_factory=list)
    skipped: list[Edit] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.edits)


def fix(
    model: object,
    expose_state: bool = False,
    codes: Sequence[str] | None = None,
    unsafe: bool = False,
    *,
    packed: bool = False,
    state_defaults: bool = False,
    pairs: Mapping[str, str | None] | None = None,
) -> FixResult:
    """Edit ``model`` (a path, bytes or ``onnx.ModelProto``; never changed in place) and say what changed.

    ``expose_state`` exposes every hidden recurrent state as an input/output pair (``packed``: one
    ``state`` tensor; ``state_defaults``: a same-name initializer as each new input's default, see the module
    docstring).  ``codes`` chooses the rules whose findings are repaired (default: every rule of
    :data:`FIXES`; ``[]`` repairs none); ``unsafe`` also applies fixes that are not certain.  ``pairs``
    declares the state pairs as for :func:`rnnir.load`.  Raises :class:`ModelError` for an unreadable
    model and :class:`FixError` when an edit would break it.
    """
    src = read_model(model)  # type: ignore[arg-type]
    work = onnx.ModelProto()
    work.CopyFrom(src.with_external_data())
    result = FixResult(work)
    from .passes.catalogue import selector_code  # a rule name (wrong-slot) is its code, as everywhere codes are taken

    chosen = list(FIXES) if codes is None else [selector_code(c) for c in codes]
    unknown = [c for c in chosen if c not in FIXES]
    if unknown:
        raise FixError(f"no automatic fix for {', '.join(unknown)}; fixable codes: {', '.join(FIXES)}")
    if expose_state:
        _expose(work, result, packed=packed, defaults=state_defaults, pairs=pairs, label=src.label)
        chosen = [c for c in chosen if c != "SD010"]  # just done, with the caller's options; what is left says why
    if chosen:
        _repair(work, result, chosen, unsafe, pairs, src.label)
    if result.edits:
        _check(work, src.with_external_data(), src.label)
        if any(p.key == _META_FINGERPRINT for p in work.metadata_props):
            _set_meta(work, _META_FINGERPRINT, graph_fingerprint(work))
    return result


# -- small ONNX helpers ------------------------------------------------------------------------


def _check_error(model: onnx.ModelProto) -> str | None:
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        return str(exc)
    return None


def _check(model: onnx.ModelProto, original: onnx.ModelProto, label: str) -> None:
    """The edited model passes onnx.checker's full check, unless the original already did not (not ours to judge)."""
    problem = _check_error(model)
    if problem is not None and _check_error(original) is None:
        raise FixError(f"{label}: the edited model does not pass onnx.checker ({problem}); this is a bug in rnnir fix")


class _Names:
    """Every name used anywhere in the model, and fresh ones that collide with none."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.used: set[str] = set()
        for g in iter_graphs(model.graph):
            self.used.update(vi.name for vi in (*g.input, *g.output, *g.value_info))
            self.used.update(t.name for t in g.initializer)
            for n in g.node:
                self.used.update(n.input)
                self.used.update(n.output)
                if n.name:
                    self.used.add(n.name)

    def fresh(self, stem: str) -> str:
        name, k = stem, 1
        while name in self.used:
            name = f"{stem}_{k}"
            k += 1
        self.used.add(name)
        return name

    def free(self, name: str) -> bool:
        return name not in self.used


@dataclass
class _GraphRef:
    """A graph of the model and how to reach it: the If nodes and branch names from the main graph."""

    graph: onnx.GraphProto
    owners: tuple[tuple[onnx.NodeProto, str], ...] = ()  # (If node, "then_branch"/"else_branch"), outermost first
    parent: _GraphRef | None = None


def _graph_refs(model: onnx.ModelProto) -> list[_GraphRef]:
    """Every graph of the model with its owner chain, the main graph first."""
    root = _GraphRef(model.graph)
    refs = [root]
    stack = [root]
    while stack:
        ref = stack.pop()
        for node in ref.graph.node:
            for a in node.attribute:
                subs = [(a.name, a.g)] if a.type == onnx.AttributeProto.GRAPH else [(f"{a.name}[{k}]", g) for k, g in enumerate(a.graphs)]
                for tag, g in subs:
                    child = _GraphRef(g, ref.owners + ((node, tag),), ref)
                    refs.append(child)
                    stack.append(child)
    return refs


def _node_label(node: onnx.NodeProto) -> str:
    return node.name or f"{node.op_type}({next((o for o in node.output if o), '')})"


def _producer(ref: _GraphRef, name: str) -> tuple[onnx.NodeProto | None, _GraphRef | None, str]:
    """Who defines ``name`` seen from ``ref``: (node, its graph, kind) with kind node/input/initializer/missing."""
    r: _GraphRef | None = ref
    while r is not None:
        for n in r.graph.node:
            if name in n.output:
                return n, r, "node"
        if any(vi.name == name for vi in r.graph.input):
            return None, r, "input"
        if any(t.name == name for t in r.graph.initializer):
            return None, r, "initializer"
        r = r.parent
    return None, None, "missing"


def _initializer(ref: _GraphRef, name: str) -> onnx.TensorProto | None:
    r: _GraphRef | None = ref
    while r is not None:
        for t in r.graph.initializer:
            if t.name == name:
                return cast(onnx.TensorProto, t)  # protobuf messages are untyped here
        r = r.parent
    return None


def _use_counts(model: onnx.ModelProto) -> dict[str, int]:
    """How many node inputs and graph outputs name each value, over every graph of the model."""
    uses: dict[str, int] = {}
    for g in iter_graphs(model.graph):
        for n in g.node:
            for i in n.input:
                if i:
                    uses[i] = uses.get(i, 0) + 1
        for vi in g.output:
            uses[vi.name] = uses.get(vi.name, 0) + 1
    return uses


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _prune(model: onnx.ModelProto, candidates: set[str]) -> list[str]:
    """Remove nodes (and initializers) among ``candidates``' producers that nothing reads any more.

    One backwards sweep per graph with use counts, so a dead chain goes in one pass however long it is
    (a rescan per removed node would be quadratic on big models); repeated only when a removal in a
    subgraph frees a value of an enclosing graph.
    """
    removed: list[str] = []
    uses = _use_counts(model)
    changed = True
    while changed:
        changed = False
        for g in iter_graphs(model.graph):
            drop: set[int] = set()
            for k in range(len(g.node) - 1, -1, -1):
                n = g.node[k]
                outs = [o for o in n.output if o]
                if not outs or _has_subgraph(n) or not any(o in candidates for o in outs) or any(uses.get(o, 0) for o in outs):
                    continue
                drop.add(k)
                for i in n.input:
                    if i:
                        uses[i] -= 1
                        candidates.add(i)
            if drop:
                removed.extend(_node_label(g.node[k]) for k in sorted(drop))  # in graph order, for the edit's text
                for k in sorted(drop, reverse=True):
                    del g.node[k]
                changed = True
    produced = {o for g in iter_graphs(model.graph) for n in g.node for o in n.output}
    for g in iter_graphs(model.graph):
        inputs = {vi.name for vi in g.input}
        for k in range(len(g.initializer) - 1, -1, -1):
            t = g.initializer[k]
            if t.name in candidates and not uses.get(t.name, 0) and t.name not in inputs:
                del g.initializer[k]
        if removed:
            for k in range(len(g.value_info) - 1, -1, -1):
                if g.value_info[k].name not in produced:
                    del g.value_info[k]
    return removed


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Types of every value shape inference can tell, across all graphs (empty when inference fails)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference is a help for naming dims, never required
        inferred = model
    out: dict[str, onnx.TypeProto] = {}
    for g in iter_graphs(inferred.graph):
        for vi in (*g.input, *g.value_info, *g.output):
            if vi.type.HasField("tensor_type"):
                out.setdefault(vi.name, vi.type)
    return out


def _dims(t: onnx.TypeProto | None) -> list[int | str | None] | None:
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]


# -- exposing state ----------------------------------------------------------------------------


@dataclass
class _Alternative:
    """One recurrence (or, later, a recognised cell) carrying the state in one graph."""

    graph: _GraphRef
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
    alternatives: list[_Alternative]
    default: np.ndarray | None
    layout: int = 0
    constant: bool = False  # the op started from a non-zero constant, kept as the default

    @property
    def what(self) -> str:
        """``GRU '/rnn/GRU'``, or ``LSTM 'then_lstm'/'else_lstm' in If 'if_sr'`` for grouped alternatives."""
        ops = "/".join(repr(_node_label(a.final_node)) for a in self.alternatives)
        return f"{self.op} {ops}" + (f" in If {self.label!r}" if len(self.alternatives) > 1 else "")


def _classify_initial(ref: _GraphRef, name: str) -> tuple[str, np.ndarray | None, str]:
    """What an initial-state operand is: ("zeros"|"constant"|"input"|"computed", value, description)."""
    if not name:
        return "zeros", None, "absent (zeros)"
    seen = 0
    cur = name
    while seen < 16:
        seen += 1
        node, where, kind = _producer(ref, cur)
        if kind == "input":
            return "input", None, f"graph input {cur!r}"
        if kind == "initializer":
            t = _initializer(ref, cur)
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
                return ("zeros" if not np.any(arr) else "constant"), arr, f"Constant {_node_label(node)!r}"
            return "computed", None, f"Constant {_node_label(node)!r}"
        if node.op_type == "ConstantOfShape":
            t = _attr(node, "value")
            value = numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else np.zeros(1, np.float32)
            if not np.any(value):
                return "zeros", None, f"zeros (ConstantOfShape {_node_label(node)!r})"
            return "computed", None, f"ConstantOfShape {_node_label(node)!r} of {value.ravel()[0]!r}"
        if node.op_type in ("Identity", "Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Slice", "Gather", "Transpose") and node.input:
            ref, cur = where, node.input[0]
            continue
        return "computed", None, f"{node.op_type} {_node_label(node)!r}"
    return "computed", None, repr(name)


def _stem(text: str) -> str:
    s = re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_")
    return s or "rec"


def _exposed_finals(program: Program) -> set[tuple[int, str]]:
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
                    taken.add((id(onnx_node), "Y_h" if r.port == "Y" else r.port))  # Y's steps are h's
    return taken


def _plan_states(model: onnx.ModelProto, program: Program, skipped: list[Edit], defaults: bool = False) -> list[StatePlan]:
    from .recurrence import kind_for_op

    refs = _graph_refs(model)
    types = _value_types(model)
    taken = _exposed_finals(program)
    fallback_batch = _fallback_batch(model)
    found: list[tuple[onnx.NodeProto, _GraphRef, list[StatePlan]]] = []
    for ref in refs:
        for node in ref.graph.node:
            spec = kind_for_op(node.op_type, node.domain)
            if spec is None:
                continue
            label = _node_label(node)
            if any(not b.startswith(("then_branch", "else_branch")) for _, b in ref.owners):
                skipped.append(_not_exposed(label, "it runs inside a Loop/Scan body, whose state rnnir does not thread out"))
                continue
            direction = str(_attr(node, "direction", "forward"))
            if direction != "forward":
                skipped.append(_not_exposed(label, f"a {direction} recurrence runs each chunk backwards: chunked calls can never equal one call"))
                continue
            hidden = int(_attr(node, "hidden_size", 0) or 0)
            layout = int(_attr(node, "layout", 0) or 0)
            x_dims = _dims(types.get(node.input[0])) if node.input else None
            batch = x_dims[1 if layout == 0 else 0] if x_dims and len(x_dims) == 3 else None
            if batch is None or (isinstance(batch, str) and batch.startswith("unk__")):
                batch = fallback_batch  # shape inference could not tell: an invented symbol helps nobody
            shape: list[int | str | None] = [1, batch, hidden] if layout == 0 else [batch, 1, hidden]
            x_type = types.get(node.input[0])
            dtype = x_type.tensor_type.elem_type if x_type is not None and x_type.tensor_type.elem_type else onnx.TensorProto.FLOAT
            plans: list[StatePlan] = []
            for port in spec.states:
                role, idx, out_idx = port.role, spec.input_index(port.entry), spec.output_index(port.exit)
                if idx is None or out_idx is None:
                    continue
                if (id(node), port.exit) in taken:
                    skipped.append(_not_exposed(f"{label}.{port.exit}", "this final state is already written back by a state pair"))
                    continue
                name = node.input[idx] if idx < len(node.input) else ""
                kind, value, before = _classify_initial(ref, name)
                if kind in ("input", "computed"):
                    skipped.append(_not_exposed(f"{label}.initial_{role}", f"its initial state is {before}, not a constant"))
                    continue
                default = _default(shape, value)
                if kind == "constant" and (not defaults or default is None):
                    why = "pass state_defaults=True (--state-defaults) to keep it as the new input's default" if default is not None else (
                        "its shape is not static, so it cannot be the new input's default"
                    )
                    skipped.append(
                        _not_exposed(f"{label}.initial_{role}", f"its initial state is a non-zero {before}: a required state input would start from zeros; {why}")
                    )
                    continue
                final = node.output[out_idx] if out_idx < len(node.output) else ""
                alt = _Alternative(ref, [(node, idx)], final, node, out_idx, before)
                plans.append(StatePlan(role, spec.name, label, dtype, list(shape), [alt], default, layout, constant=kind == "constant"))
            if plans:
                found.append((node, ref, plans))
    found.extend(_plan_cells(model, program, refs[0], types, fallback_batch, skipped))
    return _group_alternatives(found)


#: ops through which a recognised cell's zero start reaches the cell's own ops (its readers' outputs lead there)
_CELL_READER_HOPS = 8


def _plan_cells(
    model: onnx.ModelProto, program: Program, root: _GraphRef, types: dict[str, onnx.TypeProto], fallback_batch: int | str, skipped: list[Edit]
) -> list[tuple[onnx.NodeProto, _GraphRef, list[StatePlan]]]:
    """Plans for cells written as plain ops in the main graph that start from zeros (rnnir.lower.cells).

    The zeros the cell reads are replaced by the new state input at every reader, so the input has the zeros'
    own shape ([batch, hidden] as the cell reads it); zeros shared with something other than this cell's state
    (an LSTM's h and c made from one tensor, or any reader whose result does not flow into the cell's new state)
    are left alone and reported, since rewiring them would feed the state where no state was read.
    """
    from .lower.recognise import recognise
    from .lower.scope import ModelIndex

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
    out: list[tuple[onnx.NodeProto, _GraphRef, list[StatePlan]]] = []

    for site in recognised.sites:
        if site.x is not None or not site.cells:
            continue  # a Loop's recurrence: its carried state is already a Loop input
        first, last = site.cells[0], site.cells[-1]
        rec = rec_of.get(site.recognised_from)
        if site.scope is not index.root:
            if site.zero_starts and not (rec is not None and any(node == rec.id for node, _port in written)):
                skipped.append(_not_exposed(f"{site.kind} {site.anchor!r}", "a cell inside an If branch or a Loop body is not exposed yet (main graph only)"))
            continue
        roles = [("h", first.h_source, last.h_out, "Y_h")]
        if first.c_source is not None and last.c_out is not None:
            roles.append(("c", first.c_source, last.c_out, "Y_c"))
        plans: list[StatePlan] = []
        for role, source, final, exit_port in roles:
            label = f"{site.kind} {site.anchor!r}.initial_{role}"
            if f"initial_{role}" not in site.zero_starts:
                continue  # a cell that reads a state input (or a computed value) keeps its state already
            kind, value, before = _classify_initial(root, source)
            if kind != "zeros":
                skipped.append(_not_exposed(label, f"its initial state is {before}, not a constant"))
                continue
            if rec is not None and (rec.id, exit_port) in written:
                skipped.append(_not_exposed(label, "this final state is already written back by a state pair"))
                continue
            if first.h_source == first.c_source:
                skipped.append(_not_exposed(label, f"its zeros {source!r} start both h and c: one input cannot become two states"))
                continue
            readers = consumers.get(source, [])
            foreign = [n for n, _ in readers if not _reaches(n, {final}, consumers, _CELL_READER_HOPS)]
            if foreign or not readers:
                what = ", ".join(repr(_node_label(n)) for n in foreign) or "nothing"
                skipped.append(_not_exposed(label, f"its zeros {source!r} are also read by {what}, which is not this cell's state"))
                continue
            dims = _dims(types.get(source))
            if dims is None and value is not None:
                dims = list(value.shape)
            if dims and not isinstance(dims[-1], int):
                dims[-1] = site.hidden_size  # the cell's state is [..., hidden]: what recognition measured
            if dims is None or len(dims) < 2 or any(not isinstance(d, int) for d in dims[1:]):
                skipped.append(_not_exposed(label, f"the shape of its zeros {source!r} is unknown"))
                continue
            if dims[0] is None or (isinstance(dims[0], str) and dims[0].startswith("unk__")):
                # the cell's input holds its rows batch first: share its batch symbol, so a caller (and
                # check_multicall) sizing the input sizes the state alike
                x_dims = _dims(types.get(first.x[0])) if first.x else None
                x_batch = x_dims[0] if x_dims else None
                dims[0] = x_batch if x_batch is not None and not (isinstance(x_batch, str) and x_batch.startswith("unk__")) else fallback_batch
            t = types.get(final)
            dtype = t.tensor_type.elem_type if t is not None and t.tensor_type.elem_type else onnx.TensorProto.FLOAT
            final_node, final_index = producers[final]
            alt = _Alternative(root, list(readers), final, final_node, final_index, before)
            plans.append(StatePlan(role, site.kind, site.anchor, dtype, list(dims), [alt], _default(list(dims), value), layout=0))
        if plans:
            out.append((plans[0].alternatives[0].final_node, root, plans))
    return out


def _reaches(node: onnx.NodeProto, targets: set[str], consumers: dict[str, list[tuple[onnx.NodeProto, int]]], hops: int) -> bool:
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


def _fallback_batch(model: onnx.ModelProto) -> int | str:
    """The batch of a state whose op input shape inference cannot type: the leading dim of the first graph
    input when it is static (silero's audio is [1, 576]; its LSTM's input is computed), else ``"batch"``."""
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = _dims(vi.type)
        if dims and isinstance(dims[0], int) and dims[0] > 0 and len(dims) >= 2:
            return dims[0]
        break
    return "batch"


def _not_exposed(what: str, reason: str) -> Edit:
    return Edit(EXPOSE, what, "", "", True, f"state of {what} not exposed", applied=False, reason=reason, fixable=False)


def _default(shape: list[int | str | None], value: np.ndarray | None) -> np.ndarray | None:
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


def _group_alternatives(found: list[tuple[onnx.NodeProto, _GraphRef, list[StatePlan]]]) -> list[StatePlan]:
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
        if len(then) == len(other) and all(_same_shape(a, b) for a, b in zip(then, other)):
            for a, b in zip(then, other):
                for pa, pb in zip(a, b):
                    owner = pa.alternatives[0].graph.owners[-1][0]
                    pa.alternatives.extend(pb.alternatives)
                    pa.label = _node_label(owner)
                    out.append(pa)
        else:
            for plans in [*then, *other]:
                out.extend(plans)
    return out


def _same_shape(a: list[StatePlan], b: list[StatePlan]) -> bool:
    return len(a) == len(b) and all(x.op == y.op and x.role == y.role and x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))


def _expose(model: onnx.ModelProto, result: FixResult, *, packed: bool, defaults: bool, pairs: Mapping[str, str | None] | None, label: str) -> None:
    from .lower import Policy, lower

    program = lower(read_model(model, label=label), pairs, Policy())
    before_pairs = {p.input: p.output for p in program.state_pairs}
    plans = _plan_states(model, program, result.skipped, defaults)
    if not plans:
        return
    if not defaults:
        for plan in plans:
            plan.default = None
    names = _Names(model)
    front: list[onnx.NodeProto] = []
    back: list[onnx.NodeProto] = []
    old_inits: set[str] = set()
    new_pairs: dict[str, str] = {}
    finals: list[str] = []
    if packed:
        if any(p.layout != 0 or len(p.shape) != 3 for p in plans):
            raise FixError(f"{label}: --packed needs every exposed op in layout 0 (state [directions, batch, hidden], not a cell's [batch, hidden]); expose them separately")
        if len({(p.dtype, tuple(p.shape[1:])) for p in plans}) != 1:
            raise FixError(f"{label}: --packed needs every exposed state of one dtype and shape [1, batch, hidden]; expose them separately")
        state_in = "state" if names.free("state") and names.free("stateN") else names.fresh("rnn_state")
        state_out = state_in + "N"
        names.used.update({state_in, state_out})
        shape = [len(plans), *plans[0].shape[1:]]
        default = None
        if all(p.default is not None for p in plans):
            default = np.concatenate([p.default for p in plans if p.default is not None], axis=0)
        _add_state_input(model, state_in, plans[0].dtype, shape, default)
        for k, plan in enumerate(plans):
            inner = names.fresh(f"{state_in}_{k}_{plan.role}")
            starts, ends, axes = (names.fresh(f"{inner}_{s}") for s in ("start", "end", "axis"))
            for nm, v in ((starts, k), (ends, k + 1), (axes, 0)):
                model.graph.initializer.append(numpy_helper.from_array(np.array([v], np.int64), nm))
            front.append(helper.make_node("Slice", [state_in, starts, ends, axes], [inner], name=names.fresh(f"fix_expose_slice_{k}")))
            old_inits.update(_wire_initial(plan, inner))
            finals.append(_lift_final(model, plan, inner, names))
        back.append(helper.make_node("Concat", finals, [state_out], name=names.fresh("fix_expose_concat_state"), axis=0))
        model.graph.output.append(helper.make_tensor_value_info(state_out, plans[0].dtype, shape))
        new_pairs[state_in] = state_out
        result.edits.append(
            Edit(
                EXPOSE,
                f"graph input {state_in!r} / output {state_out!r}",
                "; ".join(f"{p.what} initial_{p.role}: {p.alternatives[0].before}" for p in plans) + "; final states not returned",
                ", ".join(f"{state_in}[{k}] = {p.role} of {p.what}" for k, p in enumerate(plans)),
                True,
                f"exposed packed state {_type_text(plans[0].dtype, shape)} {_default_text(default, shape)}",
            )
        )
    else:
        multi = len({p.label for p in plans}) > 1
        for plan in plans:
            stem = f"{_stem(plan.label)}_" if multi else ""
            want_in, want_out = f"{stem}{plan.role}0", f"{stem}{plan.role}n"
            returned = _returned_output(model, plan, set(before_pairs.values()))
            paired_in = _input_name_for(returned, names) if returned is not None else None
            reused = returned is not None and paired_in is not None
            if returned is not None and paired_in is not None:
                state_in, state_out = paired_in, returned  # the model already returns the final state: pair it
                names.used.add(state_in)
            elif names.free(want_in) and names.free(want_out):
                state_in, state_out = want_in, want_out
                names.used.update({state_in, state_out})
            else:
                state_in = names.fresh(f"{_stem(plan.label)}_{plan.role}0")
                state_out = names.fresh(state_in[:-1] + "n")
            _add_state_input(model, state_in, plan.dtype, plan.shape, plan.default)
            old_inits.update(_wire_initial(plan, state_in))
            if not reused:
                final = _lift_final(model, plan, state_in, names)
                back.append(helper.make_node("Identity", [final], [state_out], name=names.fresh(f"fix_expose_{state_out}")))
                model.graph.output.append(helper.make_tensor_value_info(state_out, plan.dtype, plan.shape))
            new_pairs[state_in] = state_out
            result.edits.append(
                Edit(
                    EXPOSE,
                    f"{plan.what} initial_{plan.role} / {'Y_h' if plan.role == 'h' else 'Y_c'}",
                    f"initial state {plan.alternatives[0].before}, final state " + (f"returned as {state_out!r} but not paired" if reused else "not returned"),
                    f"graph input {state_in!r} {_type_text(plan.dtype, plan.shape)} {_default_text(plan.default, plan.shape)}, "
                    + (f"paired with the returned {state_out!r}" if reused else f"graph output {state_out!r}"),
                    True,
                    f"exposed the {plan.role} state of {plan.what}",
                )
            )
    for k, node in enumerate(front):  # they read only graph inputs and initializers: first in the graph
        model.graph.node.insert(k, node)
    model.graph.node.extend(back)
    removed = _prune(model, old_inits)
    if removed:
        result.edits.append(Edit(EXPOSE, "former initial states", ", ".join(removed), "removed (nothing reads them)", True, "dropped the constant initial states"))
    _record_pairs(model, {**before_pairs, **new_pairs}, label)


def _returned_output(model: onnx.ModelProto, plan: StatePlan, paired: set[str | None]) -> str | None:
    """The main-graph output that already returns the plan's final state as it is (directly or through Identity)."""
    if len(plan.alternatives) != 1 or plan.alternatives[0].graph.owners or not plan.alternatives[0].final:
        return None
    final = plan.alternatives[0].final
    outs = {o.name for o in model.graph.output} - paired
    if final in outs:
        return final
    for n in model.graph.node:
        if n.op_type == "Identity" and list(n.input) == [final] and n.output[0] in outs:
            return str(n.output[0])
    return None


def _input_name_for(output: str, names: _Names) -> str | None:
    """A free input name that rnnir's naming convention pairs with ``output`` (hn -> h0, stateN -> state, ...)."""
    from .lower.pairing import _name_candidates

    cands: list[str] = []
    m = re.fullmatch(r"(.*)([hc])([._]?)(n|N|out)", output)
    if m:
        cands.append(f"{m.group(1)}{m.group(2)}{m.group(3)}0")
    for old, new in (("N", ""), ("_out", "_in"), ("_out", ""), ("_final", "")):
        if output.endswith(old) and len(output) > len(old):
            cands.append(output[: -len(old)] + new)
    for old, new in (("new_", ""), ("next_", ""), ("present_", "past_"), ("out_", "in_")):
        if output.startswith(old):
            cands.append(new + output[len(old) :])
    cands.append(f"{output}_prev")
    for c in cands:
        if names.free(c) and output in _name_candidates(c):
            return c
    return None


def _type_text(dtype: int, shape: Sequence[int | str | None]) -> str:
    try:
        dt = str(np.dtype(helper.tensor_dtype_to_np_dtype(dtype)))
    except (KeyError, TypeError, ValueError):
        dt = onnx.TensorProto.DataType.Name(dtype).lower()
    return f"{dt}[{','.join('?' if d is None else str(d) for d in shape)}]"


def _default_text(default: np.ndarray | None, shape: Sequence[int | str | None]) -> str:
    if default is None:
        return "(required: feed zeros on the first call; StatefulSession does)"
    return "(default: zeros)" if not np.any(default) else "(default: the op's former constant initial state)"


def _add_state_input(model: onnx.ModelProto, name: str, dtype: int, shape: Sequence[int | str | None], default: np.ndarray | None) -> None:
    model.graph.input.append(helper.make_tensor_value_info(name, dtype, list(shape)))
    if default is not None:
        np_type = helper.tensor_dtype_to_np_dtype(dtype)
        model.graph.initializer.append(numpy_helper.from_array(default.astype(np_type), name))
        if model.ir_version < 4:
            model.ir_version = 4  # an initializer is an overridable default only from IR version 4 on


def _wire_initial(plan: StatePlan, value: str) -> list[str]:
    """Point every alternative's initial-state port at ``value`` (a main-graph name, visible in every branch)."""
    old: list[str] = []
    for alt in plan.alternatives:
        for node, index in alt.sites:
            while len(node.input) <= index:
                node.input.append("")
            if node.input[index]:
                old.append(node.input[index])
            node.input[index] = value
    return old


def _final_name(alt: _Alternative, names: _Names) -> str:
    if alt.final:
        return alt.final
    node = alt.final_node
    while len(node.output) <= alt.final_index:
        node.output.append("")
    node.output[alt.final_index] = names.fresh(f"{_stem(_node_label(node))}_Y_{'h' if alt.final_index == 1 else 'c'}")
    alt.final = node.output[alt.final_index]
    return alt.final


def _lift_final(model: onnx.ModelProto, plan: StatePlan, passthrough: str, names: _Names) -> str:
    """The main-graph name of the state's final value.

    Each enclosing If gets one more output: the branch that computes the state yields its final value,
    the other branch yields the other alternative's final value (ops grouped across the two branches)
    or ``passthrough``, the incoming state, handed back unchanged.
    """
    finals = {id(alt.graph.graph): _final_name(alt, names) for alt in plan.alternatives}
    first = plan.alternatives[0]
    value = finals[id(first.graph.graph)]
    owners = first.graph.owners
    while owners:
        if_node, branch = owners[-1]
        out_name = names.fresh(f"{_stem(_node_label(if_node))}_{plan.role}_final")
        for a in if_node.attribute:
            if a.type != onnx.AttributeProto.GRAPH:
                continue
            yielded = value if a.name == branch else finals.get(id(a.g), passthrough)
            y = names.fresh(f"{out_name}_{a.name}")
            a.g.node.append(helper.make_node("Identity", [yielded], [y], name=names.fresh(f"fix_expose_{y}")))
            a.g.output.append(helper.make_tensor_value_info(y, plan.dtype, plan.shape))
        if_node.output.append(out_name)
        value = out_name
        owners = owners[:-1]
    return value


def _record_pairs(model: onnx.ModelProto, pairs: dict[str, str | None], label: str) -> None:
    """Write the complete pairing into ``rnnir.pairs`` / ``rnnir.slots`` / ``rnnir.fingerprint`` as rnnir.export does.

    A model that records its stores as IR text (``rnnir.ir``) keeps the text: lowering gives a slot the text
    does not know (the state exposed here) the default fan-out stores."""
    from .exporter import _slot_meta
    from .lower import Policy, lower

    _set_meta(model, META_PAIRS, json.dumps(pairs, sort_keys=True))
    program = lower(read_model(model, label=label), pairs, Policy())
    _set_meta(model, _META_SLOTS, json.dumps(_slot_meta(program, pairs), sort_keys=True))
    _set_meta(model, _META_FINGERPRINT, graph_fingerprint(model))  # refreshed by fix() after any later edit


# -- repairing findings ------------------------------------------------------------------------


@dataclass
class _Plan:
    """A planned repair: the edit it makes and the function that makes it on the working model."""

    edit: Edit
    apply: Callable[[], list[Edit] | None]  # returns the detailed edits it made, when there are several


def _lint(model: onnx.ModelProto, pairs: Mapping[str, str | None] | None, label: str, codes: Sequence[str]) -> tuple[Program, list[Diagnostic]]:
    from rnnir import passes

    from .lower import Policy, lower

    program = lower(read_model(model, label=label), pairs, Policy())
    # errors only (SD003's INFO/WARNING say rnnir cannot prove a computed write-back: nothing to fix), but SD010,
    # a warning by default, is exactly what exposing the state repairs
    return program, [d for d in passes.run(program) if d.code in codes and (d.severity.value == "error" or d.code == "SD010")]


def _finding_key(d: Diagnostic) -> tuple[str, str | None, str]:
    return (d.code, d.slot, d.message)


def _repair(model: onnx.ModelProto, result: FixResult, codes: Sequence[str], unsafe: bool, pairs: Mapping[str, str | None] | None, label: str) -> None:
    """Fix one finding at a time and lint again, so every plan is made on the model as it now is."""
    refused: dict[tuple[str, str | None, str], Edit] = {}
    for _ in range(_MAX_ROUNDS):
        program, diags = _lint(model, pairs, label, codes)
        progress = False
        for d in diags:
            key = _finding_key(d)
            if key in refused:
                continue
            plan = _plan_for(model, program, d, pairs, label)
            if isinstance(plan, Edit):
                refused[key] = plan
                continue
            if not plan.edit.safe and not unsafe:
                refused[key] = Edit(**{**plan.edit.__dict__, "applied": False, "reason": "not certain: pass unsafe=True (--unsafe-fixes) to apply it"})
                continue
            backup = onnx.ModelProto()
            backup.CopyFrom(model)
            detail = plan.apply() or []
            try:
                _, after = _lint(model, pairs, label, codes)
                cleared = not any(a.code == d.code and a.slot == d.slot for a in after)
            except RnnirError as exc:
                cleared, after = False, []
                plan.edit = Edit(**{**plan.edit.__dict__, "reason": f"the edited model cannot be analysed: {exc}"})
            if not cleared:
                model.CopyFrom(backup)
                refused[key] = Edit(**{**plan.edit.__dict__, "applied": False, "fixable": False, "reason": plan.edit.reason or "the edit did not clear the finding; rolled back"})
                continue
            result.edits.append(plan.edit)
            result.edits.extend(detail)
            progress = True
            break  # the program changed: plan the next fix on a fresh lowering
        if not progress:
            break
    result.skipped.extend(refused.values())


def _plan_for(model: onnx.ModelProto, program: Program, d: Diagnostic, pairs: Mapping[str, str | None] | None, label: str) -> _Plan | Edit:
    code = d.code
    try:
        if code == "SD010":
            return _plan_sd010(model, d, pairs, label)
        if code == "SD002":
            return _plan_sd002(program, d)
        if code in ("SD003", "SD008"):
            return _plan_final_state(model, program, d)
        if code in _STRUCTURE_FIXES:
            return _plan_store_structure(model, program, d, label)
        if code == "SD001":
            return _plan_sd001(model, program, d, label)
        if code == "SD007":
            return _plan_sd007(model, program, d)
    except (KeyError, IndexError, ValueError) as exc:
        return _no_fix(d, f"rnnir could not plan the edit ({type(exc).__name__}: {exc})")
    return _no_fix(d, "no automatic fix for this rule")


def _no_fix(d: Diagnostic, reason: str) -> Edit:
    code, slot = d.code, d.slot
    info = FIXES.get(code)
    what = f"slot {slot!r}" if slot is not None else d.message.split(":")[0]
    return Edit(code, what, "", "", info is not None and info.safe == "safe", f"{code} on {what}", applied=False, reason=reason, fixable=False)


# SD010: expose the state --------------------------------------------------------------------------


def _plan_sd010(model: onnx.ModelProto, d: Diagnostic, pairs: Mapping[str, str | None] | None, label: str) -> _Plan | Edit:
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    trial = FixResult(probe)
    _expose(probe, trial, packed=False, defaults=False, pairs=pairs, label=label)
    if not trial.edits:
        reasons = "; ".join(f"{e.target}: {e.reason}" for e in trial.skipped) or "no recurrence rnnir can expose"
        return _no_fix(d, reasons)

    def apply() -> list[Edit]:
        done = FixResult(model)
        _expose(model, done, packed=False, defaults=False, pairs=pairs, label=label)
        return done.edits

    edit = Edit(
        "SD010",
        "recurrences that start from zeros",
        "final state returned, initial state absent or constant",
        "state input/output pairs (see the EXPOSE edits)",
        False,
        d.message.split(":")[0],
    )
    return _Plan(edit, apply)


# SD001 (no output) / SD007: connect the slot and its op ----------------------------------------


def _graph_of(model: onnx.ModelProto, node: onnx.NodeProto) -> _GraphRef | None:
    for ref in _graph_refs(model):
        if any(n is node for n in ref.graph.node):
            return ref
    return None


def _plan_sd001(model: onnx.ModelProto, program: Program, d: Diagnostic, label: str) -> _Plan | Edit:
    """A state input read by forward ops whose final state no output returns: return it, paired by name."""
    from .lower.pairing import _name_candidates

    if d.slot is None:
        return _no_fix(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    if pair.output is not None:  # the state is handed straight back: return the reading op's final state instead
        return _plan_final_state(model, program, d)
    if len(pair.slices) != 1 or pair.slices[0].index != ():
        return _no_fix(d, "the slot is read in slices (packed state): rnnir does not assemble a new packed output")
    entries = [e for e in pair.slices[0].entry if e.note != "derived"]
    alternatives: list[_Alternative] = []
    roles: set[str] = set()
    op_kind = ""
    for e in entries:
        rec = program.node(e.node_id)
        if not isinstance(rec, Recurrent) or rec.onnx_node is None or rec.direction != "forward":
            return _no_fix(d, f"{e.label} is not a forward recurrent op rnnir can edit")
        exit_port = rec.spec.exit_of(e.port)
        out_index = rec.spec.output_index(exit_port) if exit_port else None
        ref = _graph_of(model, rec.onnx_node)
        if out_index is None or ref is None or any(not b.startswith(("then_branch", "else_branch")) for _, b in ref.owners):
            return _no_fix(d, f"the final state of {e.label} cannot be threaded out")
        node = rec.onnx_node
        final = node.output[out_index] if out_index < len(node.output) else ""
        alternatives.append(_Alternative(ref, [], final, node, out_index, f"slot {pair.input!r}"))
        roles.add(next(st.role for st in rec.spec.states if st.entry == e.port))
        op_kind = rec.kind
    if not alternatives or len(roles) != 1:
        return _no_fix(d, "the slot is not read as one state of recurrent ops")
    if len(alternatives) > 1:
        chains = [a.graph.owners for a in alternatives]
        last = {id(c[-1][0]) if c else None for c in chains}
        if len(alternatives) != 2 or None in last or len(last) != 1 or {c[-1][1] for c in chains} != {"then_branch", "else_branch"}:
            return _no_fix(d, "several ops read the slot in the same call: whose final state to return is not certain")
    names = _Names(model)
    out_name = next((c for c in _name_candidates(pair.input) if names.free(c)), None)
    if out_name is None:
        return _no_fix(d, f"no free output name pairs with {pair.input!r}")
    slot_vi = next((vi for vi in model.graph.input if vi.name == pair.input), None)
    if slot_vi is None:
        return _no_fix(d, f"{pair.input!r} is not a graph input")
    dtype = slot_vi.type.tensor_type.elem_type or onnx.TensorProto.FLOAT
    shape = _dims(slot_vi.type) or []
    plan = StatePlan(roles.pop(), op_kind, _node_label(alternatives[0].final_node), dtype, shape, alternatives, None)
    existing = {p.input: p.output for p in program.state_pairs}

    def apply() -> None:
        final = _lift_final(model, plan, pair.input, names)
        model.graph.node.append(helper.make_node("Identity", [final], [out_name], name=names.fresh(f"fix_{out_name}")))
        model.graph.output.append(helper.make_tensor_value_info(out_name, dtype, shape))
        _record_pairs(model, {**existing, pair.input: out_name}, label)

    edit = Edit(
        "SD001",
        f"state input {pair.input!r}",
        f"read by {plan.what}, final state not returned",
        f"graph output {out_name!r} = {'Y_h' if plan.role == 'h' else 'Y_c'}, paired with {pair.input!r}",
        True,
        f"slot {pair.input!r}: returned the final state of the op that reads it",
    )
    return _Plan(edit, apply)


def _plan_sd007(model: onnx.ModelProto, program: Program, d: Diagnostic) -> _Plan | Edit:
    """The op whose final state a slot gets starts from a constant: feed it the slot instead (unsafe: a reset?)."""
    if d.slot is None:
        return _no_fix(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    if len(pair.slices) != 1 or pair.slices[0].index != () or pair.slices[0].entry:
        return _no_fix(d, "the slot is read in slices, or read at all: which port it should feed is not certain")
    exits = {(r.node_id, r.port) for r in pair.slices[0].exit if r.note != "derived"}
    if len(exits) != 1:
        return _no_fix(d, "the value written back comes from several ports")
    node_id, port = next(iter(exits))
    rec = program.node(node_id)
    if not isinstance(rec, Recurrent) or rec.onnx_node is None or rec.num_directions != 1:
        return _no_fix(d, "the op is not a one-direction recurrent op rnnir can edit")
    entry = rec.spec.entry_of(port)
    index = rec.spec.input_index(entry) if entry else None
    if index is None:
        return _no_fix(d, f"{port} has no initial-state port")
    node = rec.onnx_node
    old = node.input[index] if index < len(node.input) else ""

    def apply() -> None:
        while len(node.input) <= index:
            node.input.append("")
        node.input[index] = pair.input
        if old:
            _prune(model, {old})

    edit = Edit(
        "SD007",
        f"{rec.kind} {_node_label(node)!r}.{entry}",
        repr(old) if old else "absent (zeros)",
        repr(pair.input),
        False,
        f"slot {pair.input!r}: fed the state input to the op whose final state it gets",
    )
    return _Plan(edit, apply)


# SD002: permute the operands of the Concat that assembles the state -----------------------------

_FINAL_OF = {"initial_h": "Y_h", "initial_c": "Y_c"}


def _port_key(program: Program, ref: PortRef) -> tuple[str, str, int]:
    node = program.node(ref.node_id)
    d = ref.direction
    if d is None and isinstance(node, Recurrent) and node.num_directions == 1:
        d = 0
    return (ref.node_id, ref.port, -1 if d is None else d)


def _expected_exits(program: Program, pair: TracedPair) -> dict[tuple[int, ...], set[tuple[str, str, int]]]:
    """Per slice index: the final-state ports that belong there (the finals of the ports that read it)."""
    out: dict[tuple[int, ...], set[tuple[str, str, int]]] = {}
    for sm in pair.slices:
        keys = set()
        for e in sm.entry:
            if e.note == "derived" or e.port not in _FINAL_OF:
                continue
            node_id, port, d = _port_key(program, e)
            keys.add((node_id, _FINAL_OF[port], d))
        out[sm.index] = keys
    return out


def _assembling_concats(value: Value) -> list[Compute]:
    """Concat(axis=0) nodes that build ``value`` through value-preserving ops and If branches."""
    found: list[Compute] = []
    stack: list[Value | None] = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        p = v.producer
        if not isinstance(p, Compute):
            continue
        if p.op == "Concat" and int(p.attributes.get("axis", 0)) == 0:
            found.append(p)
        elif p.op in ("Identity", "Cast"):
            stack.append(p.inputs[0])
        elif p.op == "If":
            k = p.outputs.index(v)
            stack.extend(p.branch_yields(r)[k] for r in ("then_branch", "else_branch"))
    return found


def _plan_sd002(program: Program, d: Diagnostic) -> _Plan | Edit:
    from .analysis.slices import _port_ref, slot_store_value
    from .analysis.tracer import Origin, OriginKind, Ref, Tracer

    if d.slot is None:
        return _no_fix(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    slot = pair.slot
    value = slot_store_value(program, slot, pair.output)
    if value is None:
        return _no_fix(d, "no value is written back into the slot")
    expected = _expected_exits(program, pair)
    tr = Tracer(program)
    plans: list[tuple[Compute, list[int]]] = []
    for concat in _assembling_concats(value):
        operands: list[tuple[int, list[tuple[str, str, int]]]] = []
        for k, v in enumerate(concat.inputs):
            a = tr.trace(v)
            elems = tr.to_elems(a)
            if elems is None:
                return _no_fix(d, f"operand {k} of Concat {concat.describe()!r} is not a layout-only slice of final states")
            keys = []
            for r in elems:
                if r.origin.kind is not OriginKind.PORT:
                    return _no_fix(d, f"operand {k} of Concat {concat.describe()!r} is not a final state")
                keys.append(_port_key(program, _port_ref(tr, tr.canon(r), ())))
            operands.append((k, keys))
        order: list[int] = []
        pos = 0
        left = list(operands)
        while left:
            fits = [
                (k, keys)
                for k, keys in left
                if all(keys[j] in expected.get(tr.canon(Ref(Origin.of_slot(slot.name), (pos + j,))).index, set()) for j in range(len(keys)))
            ]
            if len(fits) != 1:
                why = "no operand belongs" if not fits else "several operands could belong"
                return _no_fix(d, f"{why} at position {pos} of Concat {concat.describe()!r}")
            order.append(fits[0][0])
            pos += len(fits[0][1])
            left.remove(fits[0])
        if order != sorted(order):
            plans.append((concat, order))
    if not plans:
        return _no_fix(d, "the wrong slice is not assembled by a Concat whose operands can be reordered")
    rewrites: list[tuple[onnx.NodeProto, list[str], list[str]]] = []  # (Concat, inputs before, inputs after)
    for concat, order in plans:
        if concat.onnx_node is None:
            return _no_fix(d, f"Concat {concat.describe()!r} has no ONNX node to edit")
        names = list(concat.onnx_node.input)
        rewrites.append((concat.onnx_node, names, [names[k] for k in order]))

    def apply() -> None:
        for node, _, new in rewrites:
            del node.input[:]
            node.input.extend(new)

    first_node, first_before, first_after = rewrites[0]
    more = f" (and {len(rewrites) - 1} more Concat)" if len(rewrites) > 1 else ""
    edit = Edit(
        "SD002",
        f"Concat {_node_label(first_node)!r}{more}",
        f"inputs ({', '.join(map(printable, first_before))})",
        f"inputs ({', '.join(map(printable, first_after))})",
        True,
        f"slot {pair.input!r}: wrote each final state back into the slice its op reads",
    )
    return _Plan(edit, apply)


# SD003 / SD008: return the op's own final state ---------------------------------------------------


def _plan_final_state(model: onnx.ModelProto, program: Program, d: Diagnostic) -> _Plan | Edit:
    if d.slot is None:
        return _no_fix(d, "the finding names no slot")
    pair = slice_maps(program).pair(d.slot)
    if pair.output is None:
        return _no_fix(d, "the slot has no paired output to rewrite")
    kinds = {k for sm in pair.slices for k in sm.exit_kind.values()}
    branches = {bp for sm in pair.slices for bp in sm.exit_kind}
    if branches - {""}:
        return _no_fix(d, "the value written back differs by If branch; rnnir does not rewrite branches here")
    replaceable = {ExitKind.FINAL, ExitKind.SEQUENCE, ExitKind.CONSTANT, ExitKind.PASSTHROUGH}
    if kinds - replaceable:
        odd = ", ".join(sorted(k.value for k in kinds - replaceable))
        return _no_fix(d, f"the value written back is {odd}, not a step, final state or live-in value rnnir can replace")
    handed_back = kinds == {ExitKind.PASSTHROUGH} and all(
        sm.exit_slot_refs.get(bp) == (pair.slot.name, sm.index) for sm in pair.slices for bp in sm.exit_kind
    )
    expected = _expected_exits(program, pair)
    finals: list[tuple[Recurrent, str]] = []  # (op, final port) per slice, in slice order
    for sm in sorted(pair.slices, key=lambda s: s.index):
        keys = expected.get(sm.index, set())
        ops = {k[0] for k in keys}
        if len(keys) != 1 or len(ops) != 1:
            return _no_fix(d, f"slice {sm.label} is read by {len(keys)} ports: which final state belongs there is ambiguous")
        node_id, port, _ = next(iter(keys))
        rec = program.node(node_id)
        if not isinstance(rec, Recurrent) or rec.num_directions != 1 or rec.provenance.branch:
            return _no_fix(d, f"slice {sm.label} is read by an op inside an If branch or with two directions")
        finals.append((rec, port))
    if not finals:
        return _no_fix(d, "no recurrent op reads the slot")
    if len(finals) > 1 and any(len(sm.index) != 1 for sm in pair.slices):
        return _no_fix(d, "the slot's slices are not one per position of its first axis")
    written_by = {r.node_id for sm in pair.slices for r in sm.exit}
    own = handed_back or (written_by and written_by <= {rec.id for rec, _ in finals} and not kinds & {"constant", "passthrough"})
    out_name = pair.output
    graph = model.graph
    if not any(o.name == out_name for o in graph.output) or not any(out_name in n.output for n in graph.node):
        return _no_fix(d, f"output {out_name!r} is not computed by a node of the main graph")
    names = _Names(model)
    sources: list[tuple[onnx.NodeProto, int, str]] = []  # (op, output index, port) per slice
    for rec, port in finals:
        index = rec.spec.output_index(port)
        if rec.onnx_node is None or index is None:
            return _no_fix(d, f"{rec.describe()!r} is not one ONNX node with a {port} output")
        sources.append((rec.onnx_node, index, port))
    before = _producer_text(graph, out_name)
    after = ", ".join(f"{_node_label(n)}.{port}" for n, _, port in sources)

    def apply() -> None:
        srcs = []
        for node, i, port in sources:
            while len(node.output) <= i:
                node.output.append("")
            if not node.output[i]:
                node.output[i] = names.fresh(f"{_stem(_node_label(node))}_{port}")
            srcs.append(node.output[i])
        old = names.fresh(f"{out_name}_replaced")
        for g in iter_graphs(graph):
            for n in g.node:
                for k, nm in enumerate(n.output):
                    if nm == out_name:
                        n.output[k] = old
                for k, nm in enumerate(n.input):
                    if nm == out_name:
                        n.input[k] = old
        if len(srcs) == 1:
            graph.node.append(helper.make_node("Identity", srcs, [out_name], name=names.fresh(f"fix_{out_name}")))
        else:  # one forward op's final state per slice, each [1, batch, hidden]: they stack on axis 0
            graph.node.append(helper.make_node("Concat", srcs, [out_name], name=names.fresh(f"fix_{out_name}"), axis=0))
        _prune(model, {old})

    edit = Edit(
        d.code,
        f"output {out_name!r}",
        before,
        after,
        bool(own),
        f"slot {pair.input!r}: returned the final state of the op that reads it",
    )
    return _Plan(edit, apply)


def _producer_text(graph: onnx.GraphProto, name: str) -> str:
    for n in graph.node:
        if name in n.output:
            ins = ", ".join(i for i in n.input if i)
            return f"{n.op_type} {_node_label(n)!r}({ins})"
    return repr(name)


# AL001 / OR001 / OR002 / SD004 / AL002 / AL003: the store structure recorded as IR text (rnnir.ir) ----------

_STRUCTURE_MESSAGES = {
    "AL001": "the output store reads the final state (fan-out), not the slot store's result",
    "OR001": "the call's Return waits for the slot store",
    "OR002": "the slot is loaded as a copy",
    "SD004": "one store per call",
    "AL002": "the slot has its own storage",
    "AL003": "every state instance has its own storage",
}
_STRUCTURE_FIXES = tuple(_STRUCTURE_MESSAGES)


def _plan_store_structure(model: onnx.ModelProto, program: Program, d: Diagnostic, label: str) -> _Plan | Edit:
    """Edits of the stores an rnnir export records as IR text (onnxruntime ignores them: outputs never change).

    The edit is made on the program's :class:`~rnnir.structure.StoreStructure`; applying it lowers the graph
    with the edited stores and records the new program's IR text in place of the old."""
    from .structure import StoreFact, structure_of

    if META_IR not in metadata(model):
        return _no_fix(d, f"the store structure is not recorded in the model ({META_IR} metadata): it comes from a lowering policy")
    spec = structure_of(program)
    slot = d.slot
    facts = spec.slots.get(slot or "")
    mine = spec.stores_into(f"slot:{slot}")
    what, before, after = "", "", ""
    if d.code == "AL001":
        changes: list[tuple[StoreFact, str]] = []
        for st in spec.stores:
            inner = spec.store(st.reads) if st.dest.startswith("out:") and st.reads_store else None
            if inner is None or inner.dest != f"slot:{slot}":
                continue
            root, hops = inner, 0
            while root.reads_store and hops < len(spec.stores):
                root = spec.store(root.reads) or root
                hops += 1
            changes.append((st, root.reads))
        if not changes:
            return _no_fix(d, "no recorded output store reads the slot store's result")
        first, final = changes[0]
        what, before, after = f"store {first.id!r}", f"reads {first.source()!r}", f"reads {'value:' + final!r}"
        for st, final in changes:
            st.reads, st.reads_store = final, False
    elif d.code == "OR001":
        missing = [st.id for st in mine if st.id not in spec.waits]
        if not missing:
            return _no_fix(d, "the Return already waits for the slot's stores")
        what, before = "return waits", json.dumps(spec.waits)
        spec.waits = [*spec.waits, *missing]
        after = json.dumps(spec.waits)
    elif d.code == "OR002":
        if facts is None or not facts.view_load:
            return _no_fix(d, "the slot is not loaded as a view")
        what, before, after = f"slot {slot!r} load", '"view"', '"copy" (a private copy: the store cannot clobber a reader)'
        facts.view_load = False
    elif d.code == "SD004":
        if len({(st.reads, st.reads_store) for st in mine}) != 1:
            return _no_fix(d, "the stores write different values: which one is the state is not certain")
        extra = {st.id for st in mine[1:]}
        what, before, after = f"stores into slot {slot!r}", ", ".join(st.id for st in mine), mine[0].id
        spec.stores = [st for st in spec.stores if st.id not in extra]
        spec.waits = [w for w in spec.waits if w not in extra]
        spec.order = [pair for pair in spec.order if not extra & set(pair)]
    elif d.code == "AL002":
        alias = facts.alias_of if facts is not None else None
        out_store = next((st for st in spec.stores if st.dest == alias), None)
        if facts is None or alias is None or not alias.startswith("out:") or out_store is None:
            return _no_fix(d, "the slot is not an alias of a stored output")
        sid = f"fix_st_{slot}"
        what, before, after = f"slot {slot!r}", f"alias_of {alias!r}", f"own storage, store {sid!r} reads {out_store.source()!r}"
        facts.alias_of = None
        spec.stores.append(StoreFact(sid, f"slot:{slot}", out_store.reads, out_store.reads_store))
        spec.waits.append(sid)
    elif d.code == "AL003":
        group = [n for n in d.data.get("slots", [slot]) if isinstance(n, str)]
        shared = [spec.slots[n] for n in group if n in spec.slots and (spec.slots[n].address or str(spec.slots[n].alias_of).startswith("slot:"))]
        if not shared:
            return _no_fix(d, "the shared storage is not recorded")
        what, before, after = f"slots {', '.join(map(repr, group))}", "one storage", "one storage each"
        for f in shared:
            f.address = None
            if str(f.alias_of).startswith("slot:"):
                f.alias_of = None

    def apply() -> None:
        from .irtext import print_program
        from .lower import Policy, lower

        fixed = lower(read_model(model, label=label), None, Policy(), structure=spec)
        _set_meta(model, META_IR, print_program(fixed))

    edit = Edit(d.code, f"{META_IR} {what}", before, after, True, f"slot {slot!r}: {_STRUCTURE_MESSAGES[d.code]}")
    return _Plan(edit, apply)


# -- showing a fix as a diff ---------------------------------------------------------------------


def _model_lines(model: onnx.ModelProto) -> list[str]:
    """A weight-free text of the model for diffs: graph inputs/outputs, nodes per graph, rnnir metadata."""
    lines: list[str] = []

    def walk(g: onnx.GraphProto, indent: str, title: str) -> None:
        lines.append(f"{indent}graph {title}")
        inits = {t.name for t in g.initializer}
        for vi in g.input:
            dflt = " (default)" if vi.name in inits else ""
            lines.append(f"{indent}  input {vi.name}: {_type_text(vi.type.tensor_type.elem_type, _dims(vi.type) or [])}{dflt}")
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
