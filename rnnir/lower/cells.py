"""Recognise recurrent cells written as plain ONNX ops, and confirm each one by running it.

Exporters write LSTM, GRU and RNN cells as ``Gemm``/``MatMul``, ``Split``/``Slice``,
``Sigmoid``/``Tanh``, ``Mul``, ``Add`` and ``Sub`` (PyTorch's ``nn.LSTMCell`` with the dynamo
exporter, silero-vad's ``silero_vad_op18_ifless.onnx``, hand-written time loops). This module
finds them and says exactly which values are the cell's state entries and exits.

How, in three steps, all restricted to the *state cone* (values that depend on a state source; besides the state
inputs, the zeros a cell starts from, looked for near the graph outputs only: see ``_constant_states``):

1. **Structure.** Anchors are the nonlinear skeleton, found by role, never by name or gate
   order: an LSTM is ``c' = f*c + i*g`` with ``h' = o*act(c')`` (``f`` the sigmoid that
   multiplies a state input, ``i`` the one that multiplies the candidate ``g``, ``o`` the one
   that multiplies ``act(c')``); a GRU is a ``tanh`` ``n`` whose input holds a sigmoid-gated
   product (the reset gate ``r``), blended with a state input ``h`` by a second sigmoid ``z``
   through ``Add``/``Sub``/``Mul``/``Neg`` in any algebraic arrangement; an RNN is
   ``act(affine(x, h))`` with a matmul on ``h``.
2. **Cut.** From each gate's pre-activation the recogniser walks back through affine and
   layout-only ops (``Gemm``, ``MatMul``, ``Add``, ``Sub``, ``Concat``, ``Split``, ``Slice``,
   ``Gather``, ``Reshape``, ...). The walk stops at constants, at *state views* (values a
   layout-only chain derives from a state source: ``Squeeze(Gather(state, 0))``), and at values
   that do not depend on state (the cell input ``x``; a constant-weight projection of ``x`` is
   walked through so that ``W`` is the model's input weight). State views of one source that
   hold the same elements (decided by running their layout chains on random data) are one
   state input, so a GRU that reads ``h`` through two different rearrangements has one ``h``.
3. **Execution.** The pre-activations are affine in (x, h): probing them with zeros and unit
   vectors reads ``W``, ``R`` and ``b`` per gate off the model. Those weights, put in ONNX gate
   order, build :mod:`rnnir.reference`'s cell (LSTM/GRU/RNN, one step); the matched subgraph
   run alone on fresh random inputs must give the same new state. GRU roles that structure
   cannot fix (reset before or after the matmul, ``z`` as keep or write ratio) are tried and
   the one that reproduces the model is kept.

A structure that looks like a cell but does not compute one is returned as a
:class:`CellCandidate` with a reason, never as a match. Execution uses
:mod:`rnnir.lower.evaluate` (numpy): ``rnnir lint`` never imports onnxruntime.

Details that matter on real exports: gates may be ``Sigmoid`` or ``HardSigmoid`` (one kind for all gates, as
the ONNX ops require); a fixed batch (dynamo's static batch 2) is probed through its first row and checked on
every row, the hidden size being a gate's width; a confirmed cell's outputs are state sources at once, so the
steps of an unrolled loop and the layers of a stack are found in one pass. What keeps it cheap and honest:
only the state cone is scanned, each anchor is executed at most once, an RNN cell must read an input that is
not state (``act(W h)`` alone is an MLP layer on the state), a cell reads at most four state inputs, and a
gate's affine part spans at most a few hundred values.
"""

from __future__ import annotations

import array
import contextlib
import struct
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING

from ..onnxproto import ATTR, EXTERNAL, surely_converts, tensor_ints, tensor_to_array
from ..optraits import OpTrait, ops_with
from ..recurrence import kind_for_op
from .evaluate import EVALUABLE_OPS, EvalError, run_op
from .scope import Definition, ModelIndex, Scope

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from ..lazymod import numpy as np

__all__ = ["CellCandidate", "CellMatch", "CellScan", "CellWeights", "find_cells"]

Key = tuple[int, str]  # (id of the defining scope, value name): one ONNX value, scope-exact

#: layout-only ops a state view may pass through: one data input (not Concat) whose elements it keeps or
#: selects without repeating them (not Expand), with constant parameters
VIEW_OPS = ops_with(OpTrait.LAYOUT) - {"Concat", "Expand"}
#: ops whose parameters (inputs after the first) must be constants for the op to be a view/affine
_PARAM_OPS = frozenset({"Gather", "Slice", "Split", "Squeeze", "Unsqueeze", "Reshape", "Expand"})
_LINEAR_OPS = frozenset({"Add", "Sub", "Neg", "Identity", "Cast", "CastLike", "Concat", "Transpose", "Flatten"})
_BLEND_OPS = frozenset({"Add", "Sub", "Mul", "Neg"})
_GATE_ACTS = ("Sigmoid", "HardSigmoid")  # a gate squashes to [0, 1]; HardSigmoid is legacy Keras' recurrent_activation
_CANDIDATE_ACTS = ("Tanh", "Relu")
_ANY_ACTS = ("Sigmoid", "HardSigmoid", "Tanh", "Relu")
_MAX_PROBES = 8192  # unit-vector runs per cell: input + hidden size
_MAX_RUN_NODES = 4096  # nodes one execution may evaluate before it is considered runaway
_MAX_STATE_INPUTS = 4  # h, c, and a stacked layer's input or two
_MAX_AFFINE = 512  # values a gate's affine part may span: a cell's is tens; a residual stack's would be the whole model
_TOL = 1e-4
#: a constant initial state is looked for only this close to the graph's outputs (node hops back, values visited)
_OUTPUT_DEPTH = 24
_OUTPUT_VALUES = 1024
#: ops through which a zero initial state reaches the cell that reads it, and where it meets run-time data
_STATE_READS = frozenset({"Mul", "MatMul", "Gemm", "Concat"})
#: the ops each check anchors on (its first test): any other node is no such cell
_ANCHOR_OPS: dict[str, frozenset[str]] = {"LSTM": frozenset({"Add"}), "GRU": frozenset(_CANDIDATE_ACTS), "RNN": frozenset(_CANDIDATE_ACTS)}
#: how exporters write a zero initial state (torch.zeros, zeros_like): besides an initializer, the only producers of one
_ZERO_MAKERS = frozenset({"ConstantOfShape", "Constant", "Expand", "Tile"})


@dataclass(frozen=True)
class CellWeights:
    """A recognised cell's parameters as the ONNX op takes them (one direction, ONNX gate order)."""

    W: np.ndarray = field(repr=False)  # [1, G*H, input]
    R: np.ndarray = field(repr=False)  # [1, G*H, H]
    B: np.ndarray = field(repr=False)  # [1, 2*G*H]
    activations: tuple[str, ...]
    linear_before_reset: int = 0
    activation_alpha: tuple[float, ...] | None = None  # for HardSigmoid gates, in ONNX's order (activations that take one)
    activation_beta: tuple[float, ...] | None = None



@dataclass(frozen=True)
class CellMatch:
    """A cell confirmed by execution: its state enters at ``h_in``/``c_in`` and leaves at ``h_out``/``c_out``.

    ``h_views``/``c_views`` are every value through which the cell reads that state (one slice,
    possibly rearranged differently); ``h_in``/``c_in`` is the first of them. ``x`` are the values
    the cell reads as input, in the column order of ``weights.W``. ``h_source``/``c_source`` name the
    state source each view is a layout-only rearrangement of.
    """

    kind: str  # "LSTM" | "GRU" | "RNN"
    scope_path: tuple[str, ...]
    nodes: tuple[str, ...]
    x: tuple[str, ...]
    h_in: str
    c_in: str | None
    h_out: str
    c_out: str | None
    hidden_size: int
    weights: CellWeights
    h_views: tuple[str, ...] = ()
    c_views: tuple[str, ...] = ()
    h_source: str = ""
    c_source: str | None = None
    max_error: float = 0.0
    x_shapes: tuple[tuple[int, ...], ...] = ()  # of the x values, batch 1
    scope: Scope | None = field(default=None, compare=False, repr=False)

    @property
    def anchor(self) -> str:
        return self.nodes[0] if self.nodes else self.h_out


@dataclass(frozen=True)
class CellCandidate:
    """Looked like a cell, was not confirmed: ``reason`` says why (for an *unverified* verdict)."""

    kind: str
    anchor: str
    reason: str
    scope_path: tuple[str, ...] = ()


@dataclass
class CellScan:
    """What :func:`find_cells` found: confirmed cells, unconfirmed look-alikes, and the Loop bodies state enters.

    ``loop_carried`` maps a Loop body input that carries state (as (body scope, name)) to the Loop node, the
    Loop's scope and the carried slot; ``view_source`` answers which state source a value is a layout-only
    rearrangement of (state inputs and confirmed cells' outputs).
    """

    matches: list[CellMatch] = field(default_factory=list)
    candidates: list[CellCandidate] = field(default_factory=list)
    loop_carried: dict[tuple[Scope, str], tuple[onnx.NodeProto, Scope, int]] = field(default_factory=dict)
    _rec: _Recogniser | None = field(default=None, repr=False)

    def const(self, scope: Scope, name: str) -> np.ndarray | None:
        """The value of ``name`` when it is a constant (initializer, Constant or ops over them)."""
        if self._rec is None or not name:
            return None
        return self._rec.net.const(self._rec.net.key(scope, name))

    def is_step_number(self, body: Scope, name: str) -> bool:
        """``name`` counts a Loop body's iterations from 0 (see ``_Recogniser.step_number``)."""
        return self._rec is not None and bool(body.graph.input) and self._rec.step_number(body, name)

    def is_zero_start(self, scope: Scope, source: str) -> bool:
        """``source`` (a cell's ``h_source``/``c_source``) is zeros the model makes, not a state input or a cell's output."""
        if self._rec is None or not source:
            return False
        return self._rec.sources.get(self._rec.net.key(scope, source)) == "constant"

    def view_source(self, scope: Scope, name: str) -> tuple[Scope, str] | None:
        if self._rec is None:
            return None
        k = self._rec.net.key(scope, name)
        src = self._rec.view_source(k)
        if src is None:
            return None
        d = self._rec.net.d(src)
        return d.scope, d.name


class _ProbeData:
    """Deterministic standard-normal probe data: splitmix64 over a counter, then Box-Muller.

    Any generic values serve (a cell is confirmed by agreeing with the reference cell on them); numpy.random,
    which made them before, costs a tenth of a lint of a small cell model just to import.
    """

    def __init__(self) -> None:
        self._counter = 0

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        n = 1
        for d in shape:
            n *= int(d)
        half = (n + 1) // 2
        idx = np.arange(self._counter, self._counter + 2 * half, dtype=np.uint64)
        self._counter += 2 * half
        z = idx * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x9E3779B97F4A7C15)  # wraps modulo 2**64, as splitmix64 does
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)  # in (0, 1)
        radius = np.sqrt(-2.0 * np.log(u[:half]))
        angle = 2.0 * np.pi * u[half:]
        out = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:n]
        return out.reshape(shape)


class _NotACell(Exception):
    """Raised inside a check: the structure is not this kind of cell (reason for a candidate)."""


# -----------------------------------------------------------------------------------------
# the model seen by value keys
# -----------------------------------------------------------------------------------------


def _symbolic_to_one(vi: onnx.ValueInfoProto | None) -> tuple[int, ...] | None:
    if vi is None or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return None
    dims: list[int] = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.dim_param:
            dims.append(1)  # a named dim is the batch (or a length): run with 1
        else:
            return None
    return tuple(dims)


class _Net:
    """Producers, consumers, constants and concrete (batch 1) shapes of one model, by value key."""

    def __init__(self, index: ModelIndex) -> None:
        self.index = index
        self.defs: dict[Key, Definition] = {}
        self._consts: dict[Key, np.ndarray | None] = {}
        self._foldable: dict[Key, bool] = {}
        self._shapes: dict[Key, tuple[int, ...] | None] = {}
        self._inferred: dict[int, dict[str, onnx.ValueInfoProto]] | None = None
        self._node_scope: dict[int, Scope] = {}
        self._free: frozenset[Key] = frozenset()

    def set_free(self, keys: Iterable[Key]) -> None:
        """Treat ``keys`` as run-time values although they are constants: a cell's constant initial state is one
        input of the cell's check like any state (its shape is kept; values computed from it are no longer folded)."""
        free = frozenset(keys)
        if not free and not self._free:
            return  # nothing changes: the constants folded so far stay valid
        for k in free:
            c = self.const(k)
            if c is not None:
                self._shapes[k] = tuple(c.shape)
        self._free = free
        self._consts.clear()
        self._foldable.clear()

    def key(self, scope: Scope, name: str) -> Key:
        d = scope.resolve(name)
        k = (id(d.scope), d.name)
        self.defs.setdefault(k, d)
        return k

    def d(self, k: Key) -> Definition:
        return self.defs[k]

    def name(self, k: Key) -> str:
        return k[1]

    def node(self, k: Key) -> onnx.NodeProto | None:
        d = self.defs[k]
        return d.node if d.kind == "node" else None

    def inputs(self, k: Key) -> list[Key | None]:
        """Keys of the inputs of the node producing ``k``."""
        d = self.defs[k]
        assert d.node is not None
        return [self.key(d.scope, n) if n else None for n in d.node.input]

    def outputs_of(self, node: onnx.NodeProto, scope: Scope) -> list[Key | None]:
        return [self.key(scope, o) if o else None for o in node.output]

    def node_name(self, node: onnx.NodeProto) -> str:
        return self.index.node_name(node)

    def scope_of(self, node: onnx.NodeProto, start: Scope) -> Scope | None:
        """The scope ``node`` lives in: ``start`` or one of its subgraphs (a reader of a name is never outside)."""
        hit = self._node_scope.get(id(node))
        if hit is not None:
            return hit
        out = next((o for o in node.output if o), None)
        if out is None:
            return None
        stack = [start]
        while stack:
            sc = stack.pop()
            p = sc.producers.get(out)
            if p is not None and p[0] is node:
                self._node_scope[id(node)] = sc
                return sc
            stack.extend(sc.children.values())
        return None

    def consumers(self, k: Key) -> list[tuple[onnx.NodeProto, Scope]]:
        d = self.defs[k]
        out: list[tuple[onnx.NodeProto, Scope]] = []
        for node in self.index.consumers.get(d.name, ()):
            sc = self.scope_of(node, d.scope)
            if sc is not None and self.key(sc, d.name) == k:
                out.append((node, sc))
        return out

    def owner_outputs(self, k: Key) -> list[Key]:
        """Outputs of an If/Loop/Scan whose subgraph yields ``k``."""
        d = self.defs[k]
        out: list[Key] = []
        for owner, pos in self.index.subgraph_outputs.get(d.name, ()):
            stack = [d.scope]
            while stack:
                sc = stack.pop()
                if sc.owner is owner and self.key(sc, d.name) == k and sc.parent is not None:
                    if owner.op_type == "If":
                        if pos < len(owner.output) and owner.output[pos]:
                            out.append(self.key(sc.parent, owner.output[pos]))
                    else:
                        out.extend(self.key(sc.parent, o) for o in owner.output if o)
                    break
                stack.extend(sc.children.values())
        return out

    # -- constants ----------------------------------------------------------------------
    def is_const(self, k: Key) -> bool:
        """``const(k) is not None``, answered from the protobuf for an initializer or a ``Constant`` that surely
        converts (no numpy, no evaluation: most structural tests only ask this of weights and indices)."""
        if k in self._consts:
            return self._consts[k] is not None
        if k in self._free:
            return False
        d = self.defs[k]
        if d.kind == "initializer" and d.tensor is not None:
            if surely_converts(d.tensor):
                return True
        elif d.kind == "node" and d.node is not None and d.node.op_type == "Constant" and d.node.domain in ("", "ai.onnx"):
            if _constant_surely_converts(d.node):
                return True
        return self.const(k) is not None

    def invariant_initial(self, k: Key) -> Key | None:
        """The outer value a Loop's or Scan's carried body input ``k`` always equals, when the body hands it back
        unchanged (itself, or through ``Identity``): tf2onnx passes a Keras layer's weights into its ``while`` loop
        this way, so inside the body they are the initializers outside it, one every iteration."""
        d = self.defs[k]
        owner, scope = d.scope.owner, d.scope
        if d.kind != "input" or owner is None or scope.parent is None or owner.domain not in ("", "ai.onnx"):
            return None
        body_in = [i.name for i in scope.graph.input]
        body_out = [o.name for o in scope.graph.output]
        pos = body_in.index(d.name) if d.name in body_in else -1
        if owner.op_type == "Loop" and pos >= 2:
            node_pos, out_pos = pos, pos - 1
        elif owner.op_type == "Scan" and 0 <= pos < len(body_in) - _scan_inputs(owner):
            node_pos, out_pos = pos, pos
        else:
            return None
        if node_pos >= len(owner.input) or not owner.input[node_pos] or out_pos >= len(body_out):
            return None
        name = body_out[out_pos]
        for _ in range(_MAX_RUN_NODES):
            if name == d.name:
                return self.key(scope.parent, owner.input[node_pos])
            hit = scope.producers.get(name)
            if hit is None or hit[0].op_type != "Identity" or hit[0].domain not in ("", "ai.onnx"):
                return None
            name = hit[0].input[0]
        return None

    def const(self, k: Key, _depth: int = 0) -> np.ndarray | None:
        """The value of ``k`` when it is a constant (initializer, Constant, or ops over constants and static shapes)."""
        if k in self._consts:
            return self._consts[k]
        if k in self._free:
            return None
        self._consts[k] = None  # provisional: breaks cycles
        d = self.defs[k]
        val: np.ndarray | None = None
        if d.kind == "initializer" and d.tensor is not None:
            val = _to_array(d.tensor)
        elif d.kind == "input" and _depth < 64:
            initial = self.invariant_initial(k)
            if initial is not None:
                val = self.const(initial, _depth + 1)
        elif d.kind == "node" and d.node is not None and _depth < 64:
            node = d.node
            if node.op_type in ("Shape", "Size") and node.domain in ("", "ai.onnx"):
                shape = self.shape(self.key(d.scope, node.input[0])) if node.input else None
                if shape is not None:
                    val = run_op(node, [np.zeros(shape)])[0] if node.op_type == "Shape" else np.asarray(int(np.prod(shape)), dtype=np.int64)
            elif node.op_type in EVALUABLE_OPS and node.domain in ("", "ai.onnx"):
                ins: list[np.ndarray | None] = []
                ok = self._may_fold(k)  # False: surely no constant, so no input is converted (nor numpy imported)
                for name in node.input if ok else ():
                    if not name:
                        ins.append(None)
                        continue
                    v = self.const(self.key(d.scope, name), _depth + 1)
                    if v is None:
                        ok = False
                        break
                    ins.append(v)
                if ok:
                    try:
                        val = run_op(node, ins)[d.index]
                    except EvalError:
                        val = None
        self._consts[k] = val
        return val

    def _may_fold(self, k: Key, _depth: int = 0) -> bool:
        """False when ``const(k)`` is surely None, decided from the graph alone: some value ``k`` is computed from
        is a run-time value.  Asking whether ``bias + x @ W`` is a constant then never converts ``bias`` (and
        imports numpy) only to find ``x`` is an input."""
        hit = self._foldable.get(k)
        if hit is not None:
            return hit
        if k in self._free:
            return False
        if _depth >= 64:
            return True  # too deep to tell: const() decides
        self._foldable[k] = True  # provisional (a graph has no cycles; True only defers to const())
        d = self.defs[k]
        foldable = False
        if d.kind == "initializer":
            foldable = d.tensor is not None
        elif d.kind == "input":
            initial = self.invariant_initial(k)
            foldable = initial is not None and self._may_fold(initial, _depth + 1)
        elif d.kind == "node" and d.node is not None and d.node.domain in ("", "ai.onnx"):
            node = d.node
            if node.op_type in ("Shape", "Size"):
                foldable = True
            elif node.op_type in EVALUABLE_OPS:
                foldable = all(self._may_fold(self.key(d.scope, name), _depth + 1) for name in node.input if name)
        self._foldable[k] = foldable
        return foldable

    # -- shapes (batch 1) ---------------------------------------------------------------
    def shape(self, k: Key) -> tuple[int, ...] | None:
        if k in self._shapes:
            return self._shapes[k]
        self._shapes[k] = None
        d = self.defs[k]
        shape: tuple[int, ...] | None = None
        if d.kind == "initializer" and d.tensor is not None:
            shape = tuple(int(x) for x in d.tensor.dims)
        elif d.kind == "node" and d.node is not None and d.node.op_type == "Constant" and _constant_surely_converts(d.node):
            shape = _constant_shape(d.node)  # what evaluating it gives, whether or not is_const spared that
        else:
            c = self._consts.get(k)
            if c is not None:
                shape = tuple(c.shape)
            else:
                shape = _symbolic_to_one(d.info or d.scope.info(d.name))
                if shape is None:
                    shape = _symbolic_to_one(self._inferred_info(d.scope, d.name))
        self._shapes[k] = shape
        return shape

    def _inferred_info(self, scope: Scope, name: str) -> onnx.ValueInfoProto | None:
        """Shape inference over the whole model, run once and only when a needed shape is not declared."""
        if self._inferred is None:
            self._inferred = {}
            try:
                from ..onnxproto import infer_shapes  # rare: a needed shape the model does not declare

                inferred = infer_shapes(self.index.model)
            except Exception:  # noqa: BLE001 - inference is a best effort: no shape, no probing
                return None
            self._pair_graphs(self.index.model.graph, inferred.graph)
        infos = self._inferred.get(id(scope.graph), {})
        return infos.get(name)

    def _pair_graphs(self, orig: onnx.GraphProto, inf: onnx.GraphProto) -> None:
        assert self._inferred is not None
        self._inferred[id(orig)] = {vi.name: vi for vi in (*inf.input, *inf.value_info, *inf.output)}
        for n_orig, n_inf in zip(orig.node, inf.node):
            for a_orig, a_inf in zip(n_orig.attribute, n_inf.attribute):
                if a_orig.type == ATTR.GRAPH:
                    self._pair_graphs(a_orig.g, a_inf.g)


#: float element types the standard library can read (array / struct codes), for :func:`_surely_not_zero_state`
_STDLIB_FLOATS = {1: ("f", "float_data"), 11: ("d", "double_data"), 10: ("e", "")}


def _reference() -> ModuleType:
    """rnnir.reference, imported when a cell is checked against it (numpy-heavy; most models have no such cell)."""
    from .. import reference

    return reference


@contextlib.contextmanager
def _quiet_float_errors() -> Iterator[None]:
    """``numpy.errstate(all="ignore")`` without importing numpy for checks that never compute.

    Before numpy is imported its error state is the default, where floating-point errors are RuntimeWarnings:
    ignoring those warnings is the same as ignoring the errors, for a check that imports numpy on its way.
    """
    if "numpy" in sys.modules:
        with np.errstate(all="ignore"):
            yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _scan_inputs(node: onnx.NodeProto) -> int:
    """How many of a Scan body's inputs are scanned (the rest, first, are its carried state)."""
    for a in node.attribute:
        if a.name == "num_scan_inputs":
            return int(a.i)
    return 0


def _constant_surely_converts(node: onnx.NodeProto) -> bool:
    """rnnir.lower.evaluate runs this ``Constant`` node without fail (its first value attribute decides)."""
    for a in node.attribute:
        if a.name == "value":
            return bool(a.type == ATTR.TENSOR and surely_converts(a.t))
        if a.name in ("value_float", "value_int", "value_floats", "value_ints"):
            return True
    return False


def _constant_shape(node: onnx.NodeProto) -> tuple[int, ...]:
    """The shape of the array a ``Constant`` for which :func:`_constant_surely_converts` holds evaluates to."""
    for a in node.attribute:
        if a.name == "value":
            return tuple(int(x) for x in a.t.dims)
        if a.name in ("value_float", "value_int"):
            return ()
        if a.name in ("value_floats", "value_ints"):
            return (len(a.floats) if a.name == "value_floats" else len(a.ints),)
    raise AssertionError("not a Constant that converts")


def _constant_of_shape_not_zero_state(d: Definition) -> bool:
    """:func:`_surely_not_zero_state` for a ``ConstantOfShape``: its fill value is no float (an int64 0 pads a
    signal), or its shape input, a constant, has rank below 2 or no elements."""
    node = d.node
    assert node is not None
    value = next((a for a in node.attribute if a.name == "value"), None)
    if value is not None:
        if value.type != ATTR.TENSOR or not surely_converts(value.t):
            return False
        if value.t.data_type not in _FLOAT_TYPES:
            return True  # evaluate.py keeps an integer fill's dtype: never a float zero state
    if not node.input or not node.input[0]:
        return False
    shape = d.scope.resolve(node.input[0])
    t = shape.tensor if shape.kind == "initializer" else _attr_tensor_of_constant(shape)
    dims = tensor_ints(t) if t is not None else None
    if dims is None:
        return False
    return len(dims) < 2 or any(x == 0 for x in dims)


#: float element types (float32, float16, float64) numpy reports as floating
_FLOAT_TYPES = frozenset({1, 10, 11})


def _attr_tensor_of_constant(d: Definition) -> onnx.TensorProto | None:
    if d.kind != "node" or d.node is None or d.node.op_type != "Constant" or d.node.domain not in ("", "ai.onnx"):
        return None
    attrs = list(d.node.attribute)
    if len(attrs) == 1 and attrs[0].name == "value" and attrs[0].type == ATTR.TENSOR:
        tensor: onnx.TensorProto = attrs[0].t
        return tensor
    return None


def _surely_not_zero_state(d: Definition) -> bool:
    """The tensor of initializer or ``Constant`` ``d`` is certainly no float zeros of rank >= 2, decided from the
    protobuf alone (numpy costs more to import than linting most models; weights are the usual suspects here).

    False means "evaluate it": rank, size and values are checked exactly as numpy would (``-0.0`` is zero too).
    """
    t = d.tensor if d.kind == "initializer" else None
    if d.kind == "node" and d.node is not None and d.node.op_type == "ConstantOfShape":
        return _constant_of_shape_not_zero_state(d)
    if d.kind == "node" and d.node is not None and d.node.op_type == "Constant":
        attrs = list(d.node.attribute)
        if len(attrs) != 1:
            return False
        if attrs[0].name in ("value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings"):
            return True  # a scalar or a vector: rank below 2
        if attrs[0].name != "value" or attrs[0].type != ATTR.TENSOR:
            return False
        t = attrs[0].t
    if t is None or t.data_location == EXTERNAL or t.HasField("segment") or sys.byteorder != "little":
        return False
    if len(t.dims) < 2:
        return True
    kind = _STDLIB_FLOATS.get(t.data_type)
    if kind is None:
        return False
    code, field_name = kind
    if t.HasField("raw_data"):
        raw = t.raw_data
        width = struct.calcsize(code)
        if len(raw) % width:
            return False
        return any(x[0] for x in struct.iter_unpack("<" + code, raw)) if code == "e" else any(array.array(code, raw))
    return bool(field_name) and any(getattr(t, field_name))


def _to_array(t: onnx.TensorProto) -> np.ndarray | None:
    if t.data_location == EXTERNAL and not t.raw_data:
        return None
    try:
        a = tensor_to_array(t)
    except Exception:  # noqa: BLE001 - an unreadable tensor is not a usable constant
        return None
    return a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a


# -----------------------------------------------------------------------------------------
# walks
# -----------------------------------------------------------------------------------------


@dataclass
class _Walk:
    """The affine part of a cell: nodes walked, leaves reached, and whether state meets a matmul."""

    nodes: list[onnx.NodeProto] = field(default_factory=list)
    x_leaves: list[Key] = field(default_factory=list)
    state_leaves: list[Key] = field(default_factory=list)
    matmul_on_state: bool = False


@dataclass
class _StateClass:
    """State views of one source holding the same elements: one state input of a cell."""

    source: Key
    leaves: list[Key]
    shapes: dict[Key, tuple[int, ...]]
    size: int


class _Runner:
    """Evaluates values of the cell's subgraph from leaf feeds (memo per run; constants shared)."""

    def __init__(self, net: _Net) -> None:
        self.net = net

    def run(self, feeds: dict[Key, np.ndarray], wanted: Sequence[Key]) -> list[np.ndarray]:
        net = self.net
        memo: dict[Key, np.ndarray] = dict(feeds)
        budget = _MAX_RUN_NODES
        for target in wanted:
            stack: list[tuple[Key, bool]] = [(target, False)]
            while stack:
                k, ready = stack.pop()
                if k in memo:
                    continue
                c = net.const(k)
                if c is not None:
                    memo[k] = c
                    continue
                d = net.d(k)
                if d.kind != "node" or d.node is None:
                    raise EvalError(f"value {d.name!r} is not an input of the cell")
                ins = net.inputs(k)
                if not ready:
                    stack.append((k, True))
                    stack.extend((i, False) for i in ins if i is not None and i not in memo)
                    continue
                budget -= 1
                if budget < 0:
                    raise EvalError("the cell's subgraph is larger than expected")
                res = run_op(d.node, [memo[i] if i is not None else None for i in ins])
                for ok, r in zip(net.outputs_of(d.node, d.scope), res):
                    if ok is not None:
                        memo[ok] = r
        return [memo[k] for k in wanted]


def _flat(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).ravel()


# -----------------------------------------------------------------------------------------
# the recogniser
# -----------------------------------------------------------------------------------------


class _Recogniser:
    def __init__(self, index: ModelIndex, sources: Iterable[tuple[Scope, str]]) -> None:
        self.net = _Net(index)
        self.sources: dict[Key, str] = {}  # source key -> "input" | cell output role ("h"/"c")
        self.cell_of_source: dict[Key, CellMatch] = {}
        self.loop_carried: dict[Key, tuple[onnx.NodeProto, Scope, int]] = {}  # body input -> (Loop, its scope, carried slot)
        for scope, name in sources:
            self.sources[self.net.key(scope, name)] = "input"
        # constant initial states (zeros) near the outputs are state sources too, so a cell that starts from one is
        # found and confirmed like any other; their cone stays inside the region walked back from the outputs
        region = self._output_region()
        constant_states = self._constant_states(region)
        self.net.set_free(constant_states)
        self.cone = self._forward_cone(list(self.sources))
        if constant_states:
            for k in constant_states:
                self.sources.setdefault(k, "constant")
            self.cone |= self._forward_cone([k for k in constant_states if k not in self.cone], within=region)
        self._views: dict[Key, Key | None] = {}
        self.claimed: set[int] = set()  # ids of activation nodes that belong to an LSTM/GRU structure (never an RNN)
        self.lstm_claimed: set[int] = set()  # ... to an LSTM structure (never a GRU)
        self.done: set[int] = set()  # anchors checked by execution (confirmed or not): never checked again

    @cached_property
    def rng(self) -> _ProbeData:
        """Probe data for checks by execution, made on first use."""
        return _ProbeData()

    # -- constant initial states ---------------------------------------------------------
    def _output_region(self) -> set[Key]:
        """Values at most ``_OUTPUT_DEPTH`` ops back from the main graph's outputs (at most ``_OUTPUT_VALUES``).

        A cell whose new state is returned (SD010) or written back (SD007) lies a few ops before an output; looking
        only here keeps the search for constant initial states bounded, whatever the model's size.
        """
        net = self.net
        root = net.index.root
        frontier = [net.key(root, o.name) for o in root.graph.output if o.name]
        seen = set(frontier)
        for _ in range(_OUTPUT_DEPTH):
            nxt: list[Key] = []
            for k in frontier:
                d = net.d(k)
                if d.kind != "node" or d.node is None:
                    continue
                ins = net.inputs(k)
                if d.node.op_type == "If":  # what the branches yield in this output's place (silero's cells are in one)
                    for attr in ("then_branch", "else_branch"):
                        branch = d.scope.children.get((id(d.node), attr))
                        if branch is not None and d.index < len(branch.graph.output):
                            ins.append(net.key(branch, branch.graph.output[d.index].name))
                for i in ins:
                    if i is None or i in seen:
                        continue
                    if len(seen) >= _OUTPUT_VALUES:
                        return seen
                    seen.add(i)
                    nxt.append(i)
            frontier = nxt
        return seen

    def _constant_states(self, region: set[Key]) -> list[Key]:
        """Float constants of zeros, at least [batch, hidden], that reach a product or a concatenation through
        layout-only ops: the initial state a cell is given when the model keeps no state (or ignores the caller's).

        Only zeros: a constant that is not zero is a weight or a bias, never a state the model forgot. The topmost
        values made by ``ConstantOfShape``/``Constant``/``Expand``/``Tile`` or held in an initializer count: a zero
        computed from them (``R @ 0``, ``Unsqueeze(0)``) is a view or a part of the cell, not another state.
        """
        net = self.net
        found: list[Key] = []
        for k in sorted(region):
            if k in self.sources:
                continue
            d = net.d(k)
            if d.kind == "node":
                if d.node is None or d.node.op_type not in _ZERO_MAKERS or d.node.domain not in ("", "ai.onnx"):
                    continue  # computed from zeros (R @ 0 is zeros too): the zeros it is computed from are the state
            elif d.kind != "initializer":
                continue
            # the cheap structural test first: a weight read by a matmul is never read as state, and is never copied
            if not self._read_as_state(k):
                continue
            if _surely_not_zero_state(d):
                continue
            c = net.const(k)
            if c is not None and np.issubdtype(c.dtype, np.floating) and c.ndim >= 2 and c.size and not np.any(c):
                found.append(k)
        return found

    def _read_as_state(self, k: Key) -> bool:
        """``k`` meets run-time data in a product, a matmul's data operand or a concatenation, maybe through views."""
        net = self.net
        frontier = [k]
        for _ in range(4):
            nxt: list[Key] = []
            for v in frontier:
                name = net.name(v)
                d = net.d(v)
                node_op = net.index.node_op
                for node in net.index.consumers.get(name, ()):
                    # the op first (from the index, no protobuf read): a weight shared by 50,000 nodes is read by
                    # few that matter here, and finding a reader's scope is the expensive part
                    op, dom = node_op[id(node)]
                    if dom not in ("", "ai.onnx"):
                        continue
                    reads = op in _STATE_READS
                    views = op in VIEW_OPS
                    if not (reads or views):
                        continue
                    first = node.input[0] if node.input else ""
                    if op in ("MatMul", "Gemm") and first != name:
                        continue  # v is the weight operand, not the data
                    if not reads and first != name:
                        continue
                    sc = net.scope_of(node, d.scope)
                    if sc is None or net.key(sc, name) != v:
                        continue  # a reader of another value of the same name (a subgraph's own)
                    if reads:
                        return True
                    nxt.extend(o for o in net.outputs_of(node, sc) if o is not None)
            frontier = nxt
        return False

    # -- cone and views -----------------------------------------------------------------
    def _forward_cone(self, seeds: list[Key], within: set[Key] | None = None) -> set[Key]:
        net = self.net
        seen = set(seeds)
        stack = list(seeds)
        while stack:
            k = stack.pop()
            for node, sc in net.consumers(k):
                if kind_for_op(node.op_type, node.domain) is not None:
                    continue  # its own state ports are handled by lowering; its results are not this cone
                layout = carry_layout(node)
                if layout is not None and within is None:  # a constant carried into a Loop is not looked for
                    # a state value carried into a Loop/Scan enters its body as a body input: a state source there
                    body = sc.children.get((id(node), "body"))
                    n_carried, in_off, body_in_off, _bo, _oo = layout
                    for j in range(n_carried):
                        pos = in_off + j
                        if pos < len(node.input) and node.input[pos] == k[1] and body is not None and body_in_off + j < len(body.graph.input):
                            carried = net.key(body, body.graph.input[body_in_off + j].name)
                            self.loop_carried[carried] = (node, sc, j)
                            self.sources.setdefault(carried, "input")
                            if carried not in seen:
                                seen.add(carried)
                                stack.append(carried)
                for ok in net.outputs_of(node, sc):
                    if ok is not None and ok not in seen and (within is None or ok in within):
                        seen.add(ok)
                        stack.append(ok)
            for ok in net.owner_outputs(k):
                if ok not in seen and (within is None or ok in within):
                    seen.add(ok)
                    stack.append(ok)
        return seen

    def view_source(self, k: Key) -> Key | None:
        """The state source ``k`` is a layout-only rearrangement of, or None."""
        if k in self._views:
            return self._views[k]
        chain: list[Key] = []
        cur: Key | None = k
        found: Key | None = None
        while cur is not None:
            if cur in self._views:
                found = self._views[cur]
                break
            if cur in self.sources:
                found = cur
                break
            chain.append(cur)
            if cur not in self.cone:
                break
            node = self.net.node(cur)
            if node is None or node.op_type not in VIEW_OPS or not node.input:
                break
            ins = self.net.inputs(cur)
            if any(i is not None and not self.net.is_const(i) for i in ins[1:]):
                break
            cur = ins[0]
        for c in chain:
            self._views[c] = found
        return found

    # -- anchors ------------------------------------------------------------------------
    def _cone_nodes(self) -> list[tuple[onnx.NodeProto, Scope, Key]]:
        """Each node producing a cone value, once, in a stable order (scope path, position)."""
        seen: set[int] = set()
        out: list[tuple[onnx.NodeProto, Scope, Key]] = []
        for k in self.cone:
            d = self.net.d(k)
            if d.kind != "node" or d.node is None or id(d.node) in seen:
                continue
            seen.add(id(d.node))
            out.append((d.node, d.scope, self.net.key(d.scope, next(o for o in d.node.output if o))))
        out.sort(key=lambda t: (t[1].path, t[1].positions.get(t[2][1], 0)))
        return out

    def scan(self) -> CellScan:
        """Every cone node once per kind; then, while new cells appear, only the anchors that waited for one.

        A confirmed cell's outputs become state sources at once, so the steps of an unrolled loop (in graph
        order) are all found in the first pass: the cost stays linear in the number of steps.
        """
        result = CellScan()
        failures: dict[int, CellCandidate] = {}
        nodes = self._cone_nodes()
        todo = {kind: nodes for kind in ("LSTM", "GRU", "RNN")}
        while True:
            retry: dict[str, list[tuple[onnx.NodeProto, Scope, Key]]] = {kind: [] for kind in todo}
            new = self._pass(result, failures, todo, retry)
            if not new or not any(retry.values()):
                break
            todo = retry
        confirmed = {m.anchor for m in result.matches}
        result.candidates = [c for c in failures.values() if c.anchor not in confirmed]
        return result

    def _add_sources(self, m: CellMatch) -> None:
        """A confirmed cell's outputs are state sources for the next step of an unrolled loop."""
        assert m.scope is not None
        self.sources[self.net.key(m.scope, m.h_out)] = "h"
        self.cell_of_source[self.net.key(m.scope, m.h_out)] = m
        if m.c_out is not None:
            self.sources[self.net.key(m.scope, m.c_out)] = "c"
            self.cell_of_source[self.net.key(m.scope, m.c_out)] = m
        self._views = {}

    def _pass(
        self,
        result: CellScan,
        failures: dict[int, CellCandidate],
        todo: dict[str, list[tuple[onnx.NodeProto, Scope, Key]]],
        retry: dict[str, list[tuple[onnx.NodeProto, Scope, Key]]],
    ) -> list[CellMatch]:
        new: list[CellMatch] = []
        for kind, check in (("LSTM", self._lstm), ("GRU", self._gru), ("RNN", self._rnn)):
            anchors = _ANCHOR_OPS[kind]
            for node, scope, k in todo[kind]:
                if id(node) in self.done or node.op_type not in anchors:
                    continue  # (the check would return None at once: no numpy.errstate, so no numpy import, for it)
                try:
                    with _quiet_float_errors():  # random probes may overflow a model's exp: never a warning on stderr
                        m = check(node, scope, k)
                except (ValueError, IndexError, TypeError, KeyError, ArithmeticError) as exc:
                    # a shape or value the checks did not foresee: this anchor stays unconfirmed, the lint goes on
                    self.done.add(id(node))
                    failures[id(node)] = CellCandidate(kind, self.net.node_name(node), f"{kind}-like structure at node {self.net.node_name(node)!r} could not be checked: {exc}", scope.path)
                    continue
                except _NotACell as exc:
                    failures[id(node)] = CellCandidate(kind, self.net.node_name(node), str(exc), scope.path)
                    continue
                except _SilentRetry:
                    retry[kind].append((node, scope, k))
                    continue
                except _Retry as exc:
                    self.done.discard(id(node))  # checked again once a new cell's outputs are state sources
                    failures[id(node)] = CellCandidate(kind, self.net.node_name(node), str(exc), scope.path)
                    retry[kind].append((node, scope, k))
                    continue
                if m is not None:
                    failures.pop(id(node), None)
                    self.done.add(id(node))
                    result.matches.append(m)
                    new.append(m)
                    self._add_sources(m)
        return new

    # -- role helpers -------------------------------------------------------------------
    def _producer_op(self, k: Key | None) -> str | None:
        if k is None:
            return None
        n = self.net.node(k)
        return n.op_type if n is not None and n.domain in ("", "ai.onnx") else None

    def _describe(self, k: Key) -> str:
        n = self.net.node(k)
        if n is None:
            return f"{self.net.d(k).kind} {k[1]!r}"
        return f"{n.op_type} {self.net.node_name(n)!r}"

    # -- LSTM ---------------------------------------------------------------------------
    def _lstm(self, node: onnx.NodeProto, scope: Scope, k: Key) -> CellMatch | None:
        if node.op_type != "Add" or len(node.input) != 2 or node.domain not in ("", "ai.onnx"):
            return None
        net = self.net
        terms = [t for t in net.inputs(k) if t is not None]
        if len(terms) != 2 or any(self._producer_op(t) != "Mul" for t in terms):
            return None
        roles = None
        def is_act(v: Key) -> bool:
            return self._producer_op(v) in _ANY_ACTS

        def is_sig(v: Key) -> bool:
            return self._producer_op(v) in _GATE_ACTS

        def is_cand(v: Key) -> bool:
            return self._producer_op(v) in _CANDIDATE_ACTS

        for forget, inp in ((terms[0], terms[1]), (terms[1], terms[0])):
            fa, fb = net.inputs(forget)[:2]
            ia, ib = net.inputs(inp)[:2]
            f_gate, c_term = _pick(fa, fb, is_act, lambda v: not is_act(v))
            i_gate, g_val = _pick(ia, ib, is_sig, is_cand)
            if i_gate is None:
                i_gate, g_val = _pick(ia, ib, is_act, is_cand)
            if f_gate is not None and i_gate is not None and c_term is not None and g_val is not None and f_gate != i_gate:
                roles = (forget, inp, f_gate, c_term, i_gate, g_val)
                break
        if roles is None:
            return None
        forget, inp, f_gate, c_term, i_gate, g_val = roles
        anchor = net.node_name(node)
        for g in (f_gate, i_gate, g_val):
            gn = net.node(g)
            if gn is not None:
                self.claimed.add(id(gn))
                self.lstm_claimed.add(id(gn))
        for role, gate in (("forget", f_gate), ("input", i_gate)):
            if not is_sig(gate):
                self.done.add(id(node))
                raise _NotACell(f"LSTM-like structure at node {anchor!r}: its {role} gate {self._describe(gate)} is not a sigmoid")
        # h' = o * act(c'): the first such product whose gate reads the state, as the cell's own gates do (a
        # product gated by x alone, a head on the new cell state, is an LSTM too, with R_o = 0: it only serves
        # when nothing better is there)
        found: list[tuple[Key, Key, onnx.NodeProto]] = []
        for cons, sc in net.consumers(k):
            if cons.op_type in _CANDIDATE_ACTS:
                act_key = net.outputs_of(cons, sc)[0]
                assert act_key is not None
                for cons2, sc2 in net.consumers(act_key):
                    if cons2.op_type != "Mul":
                        continue
                    out2 = net.outputs_of(cons2, sc2)[0]
                    assert out2 is not None
                    op_a, op_b = net.inputs(out2)[:2]
                    activated: Key = act_key

                    def is_activated(v: Key, act: Key = activated) -> bool:
                        return v == act

                    o, _ = _pick(op_a, op_b, is_sig, is_activated)
                    if o is not None:
                        found.append((out2, o, cons))
        h_out, o_gate, h_act = next((f for f in found if f[1] in self.cone), found[0] if found else (None, None, None))
        if h_out is None or o_gate is None or h_act is None:
            self.done.add(id(node))
            raise _NotACell(self._lstm_no_h(k, anchor, c_term, f_gate, i_gate, g_val))
        self.claimed.add(id(h_act))
        self.lstm_claimed.add(id(h_act))
        on = net.node(o_gate)
        if on is not None:
            self.claimed.add(id(on))
            self.lstm_claimed.add(id(on))
        c_src = self.view_source(c_term)
        if c_src is None:
            raise _Retry(f"LSTM-like structure at node {anchor!r}: the cell-state operand of the forget product is {self._describe(c_term)}, not a state input")
        pres = {"i": self._pre(i_gate), "o": self._pre(o_gate), "f": self._pre(f_gate), "g": self._pre(g_val)}
        walk = self._affine_walk(list(pres.values()), frozenset(), anchor)
        classes = self._classes([*walk.state_leaves, c_term], anchor)
        c_class = next(c for c in classes if c_term in c.leaves)
        if any(leaf in c_class.leaves for leaf in walk.state_leaves):
            self.done.add(id(node))
            raise _NotACell(f"LSTM-like structure at node {anchor!r}: its gates read the cell state {c_term[1]!r} (peepholes or a swapped state)")
        h_choices = self._h_order([c for c in classes if c is not c_class], c_class)
        if not h_choices:
            raise _Retry(f"LSTM-like structure at node {anchor!r}: its gates read no state input besides the cell state")
        self.done.add(id(node))
        gate_act = self._gate_activation([f_gate, i_gate, o_gate], anchor, "LSTM")
        acts = (gate_act[0], self._producer_op(g_val) or "Tanh", h_act.op_type)
        nodes = self._provenance([node, net.node(forget), net.node(inp), h_act, net.node(h_out)], walk)
        last = ""
        for h_class in h_choices:
            x_leaves = walk.x_leaves + [leaf for c in classes if c is not h_class and c is not c_class for leaf in c.leaves[:1]]
            try:
                H = self._gate_width(x_leaves, [h_class, c_class], pres["f"], anchor)
                feeds = self._feeder(x_leaves, h_class, c_class, anchor, H)
                lin = self._probe(feeds, [pres[g] for g in "iofg"])
                W = np.concatenate([lin[j][0] for j in range(4)])
                R = np.concatenate([lin[j][1] for j in range(4)])
                b = np.concatenate([lin[j][2] for j in range(4)])
                if W.shape[0] != 4 * H or R.shape != (4 * H, H):
                    raise _NotACell(f"LSTM-like structure at node {anchor!r}: gate sizes {[len(lin[j][2]) for j in range(4)]} do not match the state size {H}")
                weights = CellWeights(W[None], R[None], np.concatenate([b, np.zeros_like(b)])[None], acts, 0, *gate_act[1:])
                err = self._verify_lstm(feeds, weights, h_out, k, H)
            except EvalError as exc:
                raise _NotACell(f"LSTM-like structure at node {anchor!r} could not be run: {exc}") from None
            if err <= _TOL:
                if not self._threads(h_class, "LSTM", weights):
                    last = f"LSTM-like structure at node {anchor!r} reads the output of another cell as its state"
                    continue
                return self._match("LSTM", scope, nodes, x_leaves, h_class, c_class, h_out, k, H, weights, err)
            last = f"LSTM-like structure at node {anchor!r} does not compute an LSTM cell: the new state differs from o*tanh(c'), c' = f*c + i*g with the extracted weights by {err:.3g}"
        raise _NotACell(last)

    def _gate_activation(self, gates: list[Key], anchor: str, kind: str) -> tuple[str, tuple[float, ...] | None, tuple[float, ...] | None]:
        """The one activation ONNX applies to every gate: the gates must agree (op and HardSigmoid's alpha/beta)."""
        seen: set[tuple[str, float | None, float | None]] = set()
        for g in gates:
            n = self.net.node(g)
            assert n is not None
            if n.op_type == "HardSigmoid":
                alpha = float(next((a.f for a in n.attribute if a.name == "alpha"), 0.2))
                beta = float(next((a.f for a in n.attribute if a.name == "beta"), 0.5))
                seen.add(("HardSigmoid", alpha, beta))
            else:
                seen.add((n.op_type, None, None))
        if len(seen) != 1:
            raise _NotACell(f"{kind}-like structure at node {anchor!r}: its gates use different activations ({', '.join(sorted(str(x[0]) for x in seen))})")
        op, a, b = seen.pop()
        return (op, None, None) if a is None or b is None else (op, (a,), (b,))

    def _lstm_no_h(self, c_new: Key, anchor: str, c_term: Key, f_gate: Key, i_gate: Key, g_val: Key) -> str:
        """Why an LSTM update c' = f*c + i*g has no h' = o*act(c'): name what the output product reads instead."""
        net = self.net
        scope = net.d(c_new).scope
        for k in sorted(self.cone):
            d = net.d(k)
            if d.scope is not scope or d.node is None or d.node.op_type != "Mul":
                continue
            a, b = net.inputs(k)[:2]
            o, t = _pick(a, b, lambda v: self._producer_op(v) in _GATE_ACTS, lambda v: self._producer_op(v) in _CANDIDATE_ACTS)
            if o is None or t is None or o in (f_gate, i_gate) or t == g_val:
                continue
            t_in = net.inputs(t)[0]
            if t_in is None:
                continue
            diff = ""
            try:
                leaves = self._affine_walk([self._pre(o), self._pre(f_gate), self._pre(i_gate), self._pre(g_val)], frozenset(), anchor)
                classes = self._classes([*leaves.state_leaves, c_term, t_in] if self.view_source(t_in) else [*leaves.state_leaves, c_term], anchor)
                hc = self._two_classes(classes, c_term)
                H = self._gate_width(leaves.x_leaves, list(hc), self._pre(f_gate), anchor)
                feeds = self._feeder(leaves.x_leaves, *hc, anchor, H)
                x, h, c = self._random_inputs(feeds)
                got, og, cn = self.runner.run(feeds.make(x, h, c), [k, o, c_new])
                want = og * np.tanh(cn)
                diff = f" by {float(np.max(np.abs(_flat(got) - _flat(want)))):.3g}"
            except (EvalError, _NotACell, _Retry, ValueError):
                pass
            return f"LSTM-like structure at node {anchor!r} does not compute an LSTM cell: h' at node {net.node_name(d.node)!r} is o*tanh({t_in[1]!r}), not o*tanh(c'); it differs from o*tanh(c'){diff}"
        return f"LSTM-like structure at node {anchor!r} (c' = f*c + i*g) has no output h' = o*tanh(c')"

    def _two_classes(self, classes: list[_StateClass], c_term: Key) -> tuple[_StateClass, _StateClass]:
        c_class = next(c for c in classes if c_term in c.leaves)
        others = [c for c in classes if c is not c_class]
        if not others:
            raise _NotACell("no h")
        return others[0], c_class

    def _verify_lstm(self, feeds: _Feeder, w: CellWeights, h_out: Key, c_out: Key, H: int) -> float:
        x, h, c = self._random_inputs(feeds)
        assert c is not None
        got_h, got_c = self.runner.run(feeds.make(x, h, c), [h_out, c_out])
        _, y_h, y_c = _reference().lstm(x[None], w.W, w.R, w.B, initial_h=h[None], initial_c=c[None], hidden_size=H, activations=list(w.activations), activation_alpha=w.activation_alpha, activation_beta=w.activation_beta)
        return _err([got_h, got_c], [y_h, y_c])

    # -- GRU ----------------------------------------------------------------------------
    def _gru(self, node: onnx.NodeProto, scope: Scope, k: Key) -> CellMatch | None:
        if node.op_type not in _CANDIDATE_ACTS or id(node) in self.lstm_claimed:
            return None
        net = self.net
        pre_n = net.inputs(k)[0]
        if pre_n is None:
            return None
        blends = self._blends(k, None)
        if not blends:
            # worth waiting for a state input only when the candidate has its reset-gated product already
            if self._reset_gates(pre_n) and any(self.view_source(v) is None for v in self._blend_state_terms(k)):
                raise _Retry(f"GRU-like structure at node {net.node_name(node)!r}: its output blend reads no state input")
            return None
        anchor = net.node_name(node)
        resets = self._reset_gates(pre_n)
        self.claimed.add(id(node))
        if len(resets) != 1:
            self.done.add(id(node))
            what = "no reset gate" if not resets else f"{len(resets)} gated products, not one reset gate"
            raise _NotACell(f"GRU-like structure at node {anchor!r}: its candidate n = {node.op_type}(...) has {what}")
        r_gate = resets[0]
        rn = net.node(r_gate)
        if rn is not None:
            self.claimed.add(id(rn))
        blends = [b for b in blends if b[1] != r_gate]
        self.done.add(id(node))
        last = f"GRU-like structure at node {anchor!r} does not compute a GRU cell"
        for h_out, z_gate, h_terms in blends[:3]:
            zn = net.node(z_gate)
            if zn is not None:
                self.claimed.add(id(zn))
            pres = {"z": self._pre(z_gate), "r": self._pre(r_gate), "n": pre_n}
            gate_act = self._gate_activation([z_gate, r_gate], anchor, "GRU")
            walk = self._affine_walk(list(pres.values()), frozenset({r_gate}), anchor)
            classes = self._classes([*walk.state_leaves, *h_terms], anchor)
            h_class = next(c for c in classes if h_terms[0] in c.leaves)
            if any(t not in h_class.leaves for t in h_terms):
                raise _NotACell(f"GRU-like structure at node {anchor!r}: its output blend reads two different state slices")
            if not any(leaf in h_class.leaves for leaf in walk.state_leaves) and walk.state_leaves:
                other = walk.state_leaves[0][1]
                raise _NotACell(
                    f"GRU-like structure at node {anchor!r}: its output blend keeps {h_terms[0][1]!r} but its gates read {other!r}, a different state slice"
                )
            x_leaves = walk.x_leaves + [c.leaves[0] for c in classes if c is not h_class]
            try:
                H = self._gate_width(x_leaves, [h_class], pres["z"], anchor)
                feeds = self._feeder(x_leaves, h_class, None, anchor, H)
                (r_shape,) = [a.shape for a in self.runner.run(feeds.make(*self._zeros(feeds)), [pres["r"]])]
                ones = {r_gate: np.ones(r_shape)}
                lin = self._probe(feeds, [pres["z"], pres["r"], pres["n"]], extra=ones)
                x0, h0, _ = self._zeros(feeds)
                (bn_r0,) = self.runner.run({**feeds.make(x0, h0, None), r_gate: np.zeros(r_shape)}, [pres["n"]])
                bn_r0 = _flat(bn_r0).reshape(feeds.batch, -1)[0]
                (Wz, Rz, bz), (Wr, Rr, br), (Wn, Rn, bn) = lin
                if Wz.shape[0] != H or Rn.shape != (H, H):
                    raise _NotACell(f"GRU-like structure at node {anchor!r}: gate sizes do not match the state size {H}")
                best: tuple[float, CellWeights] | None = None
                for lbr in (1, 0):
                    for pol in (1.0, -1.0):
                        W = np.concatenate([pol * Wz, Wr, Wn])[None]
                        R = np.concatenate([pol * Rz, Rr, Rn])[None]
                        zero = np.zeros(H)
                        if lbr:
                            B = np.concatenate([pol * bz, br, bn_r0, zero, zero, bn - bn_r0])[None]
                        else:
                            B = np.concatenate([pol * bz, br, bn, zero, zero, zero])[None]
                        w = CellWeights(W, R, B, (gate_act[0], node.op_type), lbr, *gate_act[1:])
                        err = self._verify_gru(feeds, w, h_out, H)
                        if best is None or err < best[0]:
                            best = (err, w)
                        if err <= _TOL:
                            break
                    if best is not None and best[0] <= _TOL:
                        break
            except EvalError as exc:
                raise _NotACell(f"GRU-like structure at node {anchor!r} could not be run: {exc}") from None
            assert best is not None
            err, w = best
            if err <= _TOL:
                if not self._threads(h_class, "GRU", w):
                    last = f"GRU-like structure at node {anchor!r} reads the output of another cell as its state"
                    continue
                nodes = self._provenance([node, net.node(h_out), net.node(z_gate), net.node(r_gate)], walk)
                return self._match("GRU", scope, nodes, x_leaves, h_class, None, h_out, None, H, w, err)
            last = f"GRU-like structure at node {anchor!r} does not compute a GRU cell: the new state at {h_out[1]!r} differs from (1-z)*n + z*h with the extracted weights by {err:.3g}"
        raise _NotACell(last)

    def _verify_gru(self, feeds: _Feeder, w: CellWeights, h_out: Key, H: int) -> float:
        x, h, _ = self._random_inputs(feeds)
        (got,) = self.runner.run(feeds.make(x, h, None), [h_out])
        _, y_h = _reference().gru(x[None], w.W, w.R, w.B, initial_h=h[None], hidden_size=H, linear_before_reset=w.linear_before_reset, activations=list(w.activations), activation_alpha=w.activation_alpha, activation_beta=w.activation_beta)
        return _err([got], [y_h])

    def _reset_gates(self, pre_n: Key) -> list[Key]:
        """Sigmoid outputs that gate a product inside the candidate's pre-activation (the reset gate)."""
        net = self.net
        found: list[Key] = []
        stack = [pre_n]
        seen: set[Key] = set()
        while stack and len(seen) < 64:
            k = stack.pop()
            if k in seen or k not in self.cone or self.view_source(k) is not None or net.is_const(k):
                continue
            seen.add(k)
            node = net.node(k)
            if node is None:
                continue
            ins = [i for i in net.inputs(k) if i is not None]
            if node.op_type == "Mul" and len(ins) == 2:
                g, other = _pick(ins[0], ins[1], lambda v: self._producer_op(v) in _GATE_ACTS, lambda v: True)
                if g is not None and other is not None and not net.is_const(other):
                    if g not in found:
                        found.append(g)
                    stack.append(other)
                    continue
            if node.op_type in ("Gemm", "MatMul"):
                # reset before the matmul (R (r*h)) is a gated product right at a matmul's data operand; further
                # back lies the cell's input, which may be another cell (a stacked layer): never search there
                for d in net.inputs(k)[:2]:
                    if d is None or net.is_const(d) or self._producer_op(d) != "Mul":
                        continue
                    a, b = net.inputs(d)[:2]
                    g, other = _pick(a, b, lambda v: self._producer_op(v) in _GATE_ACTS, lambda v: True)
                    if g is not None and other is not None and not net.is_const(other) and g not in found:
                        found.append(g)
                continue
            if node.op_type in _LINEAR_OPS or node.op_type in _PARAM_OPS or node.op_type in ("Mul", "Div", "Split"):
                stack.extend(ins[:1] if node.op_type in _PARAM_OPS else ins)
        return found

    def _blend_cone(self, k: Key, n_key: Key) -> tuple[set[Key], list[Key], list[Key]] | None:
        """Leaves of the Add/Sub/Mul/Neg expression at ``k``: sigmoids, state views (and the candidate ``n``)."""
        net = self.net
        sigmoids: set[Key] = set()
        states: list[Key] = []
        has_n = False
        stack = [k]
        seen: set[Key] = set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if len(seen) > 32:
                return None
            if v == n_key:
                has_n = True
                continue
            if net.is_const(v):
                continue
            if self._producer_op(v) in _GATE_ACTS:
                sigmoids.add(v)
                continue
            if self.view_source(v) is not None:
                states.append(v)
                continue
            op = self._producer_op(v)
            if op not in _BLEND_OPS:
                return None
            stack.extend(i for i in net.inputs(v) if i is not None)
        if not has_n:
            return None
        return sigmoids, states, []

    def _blends(self, n_key: Key, r_gate: Key | None) -> list[tuple[Key, Key, list[Key]]]:
        """Candidate new states: values reached from ``n`` through blend ops that read n, one z and a state view."""
        net = self.net
        out: list[tuple[Key, Key, list[Key]]] = []
        frontier = [n_key]
        seen = {n_key}
        for _depth in range(4):
            nxt: list[Key] = []
            for v in frontier:
                for cons, sc in net.consumers(v):
                    if cons.op_type not in _BLEND_OPS:
                        continue
                    ok = net.outputs_of(cons, sc)[0]
                    if ok is None or ok in seen:
                        continue
                    seen.add(ok)
                    nxt.append(ok)
                    cone = self._blend_cone(ok, n_key)
                    if cone is None:
                        continue
                    sig, states, _ = cone
                    if r_gate is not None:
                        sig.discard(r_gate)
                    if len(sig) == 1 and states:
                        out.append((ok, next(iter(sig)), states))
            frontier = nxt
        return out

    def _blend_state_terms(self, n_key: Key) -> list[Key]:
        """Non-gate, non-constant values the blends of ``n`` read (to tell 'no state yet' from 'not a GRU')."""
        net = self.net
        out: list[Key] = []
        for cons, sc in net.consumers(n_key):
            if cons.op_type in _BLEND_OPS:
                ok = net.outputs_of(cons, sc)[0]
                if ok is None:
                    continue
                for cons2, sc2 in net.consumers(ok):
                    if cons2.op_type in _BLEND_OPS:
                        for i in net.inputs(net.outputs_of(cons2, sc2)[0] or ok):
                            if i is not None and i != ok and not net.is_const(i) and self._producer_op(i) not in (*_GATE_ACTS, "Sub"):
                                out.append(i)
        return out

    # -- RNN ----------------------------------------------------------------------------
    def _rnn(self, node: onnx.NodeProto, scope: Scope, k: Key) -> CellMatch | None:
        if node.op_type not in _CANDIDATE_ACTS or id(node) in self.claimed:
            return None
        net = self.net
        pre = net.inputs(k)[0]
        if pre is None:
            return None
        anchor = net.node_name(node)
        for cons, sc in net.consumers(k):
            if cons.op_type == "Mul":
                other = [i for i in (net.key(sc, nm) for nm in cons.input if nm) if i != k]
                if any(not net.is_const(i) for i in other):
                    return None  # gated by another run-time value: part of a larger cell, not an RNN's new state
        try:
            walk = self._affine_walk([pre], frozenset(), anchor)
        except _Retry as exc:
            raise _SilentRetry(str(exc)) from None
        except _NotACell:
            return None  # act(something not affine in the state): not an RNN cell, and nothing that looks like one
        if not walk.matmul_on_state or not walk.state_leaves:
            return None
        classes = self._classes(walk.state_leaves, anchor)
        if not walk.x_leaves and not (len(classes) > 1 and any(c.source in self.cell_of_source for c in classes)):
            # an RNN cell reads an input besides its state: act(W h) alone is an MLP layer on the state; a stacked
            # layer's input is the new state of a cell found already (the layer below), read as state too
            return None
        pre_shape = None
        self.done.add(id(node))
        last = ""
        for h_class in self._h_order(classes, None):
            x_leaves = walk.x_leaves + [c.leaves[0] for c in classes if c is not h_class]
            try:
                H = self._gate_width(x_leaves, [h_class], pre, anchor)
                feeds = self._feeder(x_leaves, h_class, None, anchor, H)
                ((W, R, b),) = self._probe(feeds, [pre])
                pre_shape = len(b)
                if pre_shape != H:
                    last = f"RNN-like structure at node {anchor!r}: its output has {pre_shape} elements, the state {H}"
                    continue
                w = CellWeights(W[None], R[None], np.concatenate([b, np.zeros(H)])[None], (node.op_type,))
                x, h, _ = self._random_inputs(feeds)
                (got,) = self.runner.run(feeds.make(x, h, None), [k])
                _, y_h = _reference().rnn(x[None], w.W, w.R, w.B, initial_h=h[None], hidden_size=H, activations=[node.op_type])
                err = _err([got], [y_h])
            except EvalError as exc:
                raise _NotACell(f"RNN-like structure at node {anchor!r} could not be run: {exc}") from None
            if err <= _TOL and self._threads(h_class, "RNN", w):
                return self._match("RNN", scope, self._provenance([node], walk), x_leaves, h_class, None, k, None, H, w, err)
            if err > _TOL:
                last = f"RNN-like structure at node {anchor!r} does not compute an RNN cell: differs from {node.op_type}(Wx + Rh + b) by {err:.3g}"
        if last:
            raise _NotACell(last)
        return None

    # -- shared machinery ---------------------------------------------------------------
    @property
    def runner(self) -> _Runner:
        return _Runner(self.net)

    def _pre(self, act_out: Key) -> Key:
        pre = self.net.inputs(act_out)[0]
        if pre is None:
            raise _NotACell(f"activation {act_out[1]!r} has no input")
        return pre

    def _outer_step(self, k: Key) -> bool:
        """``k`` is ``Gather(seq, t)`` in a Loop body: step ``t`` (the iteration number) of a sequence computed outside
        the Loop. That is the cell's input for this step, whatever ``seq`` depends on (Keras layers that tf2onnx
        writes as one ``while`` Loop each read the layer below's whole output this way)."""
        d = self.net.d(k)
        node, body = d.node, d.scope
        if node is None or node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            return False
        if body.owner is None or body.owner.op_type != "Loop" or not body.graph.input:
            return False
        if any(a.name == "axis" and a.i != 0 for a in node.attribute) or not self.step_number(body, node.input[1]):
            return False
        return body.resolve(node.input[0]).scope is not body

    def step_number(self, body: Scope, name: str) -> bool:
        """``name`` is the Loop's iteration number in its body: the body's first input, or a carried counter that
        starts at 0 and is yielded as itself + 1 (TensorFlow's ``while`` keeps its own ``time`` this way)."""
        names = [vi.name for vi in body.graph.input]
        if name == names[0]:
            return True
        owner = body.owner
        pos = names.index(name) if name in names else -1
        if owner is None or pos < 2 or pos >= len(owner.input) or not owner.input[pos] or pos - 1 >= len(body.graph.output):
            return False
        start = self.net.const(self.net.key(body.parent, owner.input[pos])) if body.parent is not None else None
        if start is None or start.size != 1 or start.reshape(-1)[0] != 0:
            return False
        d = body.resolve(body.graph.output[pos - 1].name)
        while d.node is not None and d.node.op_type == "Identity" and d.node.domain in ("", "ai.onnx"):
            d = body.resolve(d.node.input[0])
        if d.node is None or d.node.op_type != "Add" or d.node.domain not in ("", "ai.onnx") or d.scope is not body:
            return False
        ins = list(d.node.input)
        if name not in ins or len(ins) != 2:
            return False
        one = self.net.const(self.net.key(body, ins[1 - ins.index(name)]))
        return one is not None and one.size == 1 and one.reshape(-1)[0] == 1

    def _affine_walk(self, starts: list[Key], overrides: frozenset[Key], anchor: str) -> _Walk:
        net = self.net
        walk = _Walk()
        stack: list[tuple[Key, bool]] = [(s, False) for s in starts]
        seen: set[Key] = set()
        while stack:
            k, via_matmul = stack.pop()
            if k in seen:
                if via_matmul and self.view_source(k) is not None:
                    walk.matmul_on_state = True
                continue
            seen.add(k)
            if len(seen) > _MAX_AFFINE:
                raise _NotACell(f"cell-like structure at node {anchor!r}: its gates are affine over more than {_MAX_AFFINE} values, not a cell's matmuls")
            if k in overrides:
                continue
            if self.view_source(k) is not None:
                walk.state_leaves.append(k)
                walk.matmul_on_state |= via_matmul
                continue
            if net.is_const(k):
                continue
            node = net.node(k)
            if k not in self.cone or self._outer_step(k):
                if node is not None and self._extends(k):
                    walk.nodes.append(node)
                    stack.extend((i, False) for i in net.inputs(k) if i is not None and not net.is_const(i))
                else:
                    walk.x_leaves.append(k)
                continue
            if node is None:
                raise _NotACell(f"cell-like structure at node {anchor!r} reads {k[1]!r}, which is not a state input")
            op = node.op_type
            ins = net.inputs(k)
            where = f"{op} {net.node_name(node)!r}"
            if op in ("Gemm", "MatMul"):
                data = [i for i in ins[:2] if i is not None and not net.is_const(i)]
                if len(data) == 2:
                    raise _NotACell(f"cell-like structure at node {anchor!r}: the weights of {where} are not constants ({data[1][1]!r} is a run-time value)")
                stack.extend((i, True) for i in data)
                if len(ins) > 2 and ins[2] is not None:
                    stack.append((ins[2], False))
            elif op in ("Mul", "Div"):
                live = [i for i in ins if i is not None and not net.is_const(i) and i not in overrides]
                if len(live) != 1 or (op == "Div" and ins[1] in live):
                    raise _NotACell(f"cell-like structure at node {anchor!r}: the state reaches {where}, which multiplies two values that change at run time")
                stack.append((live[0], via_matmul))
            elif op in _LINEAR_OPS or op == "Sum":
                stack.extend((i, via_matmul) for i in ins if i is not None)
            elif op in _PARAM_OPS:
                if any(i is not None and not net.is_const(i) for i in ins[1:]):
                    raise _NotACell(f"cell-like structure at node {anchor!r}: {where} has a parameter computed at run time")
                if ins[0] is not None:
                    stack.append((ins[0], via_matmul))
            else:
                # retryable: in an unrolled or stacked model this may be a cell confirmed in a later pass
                raise _Retry(f"cell-like structure at node {anchor!r}: the state reaches {where}, which is not affine")
            walk.nodes.append(node)
        return walk

    def _extends(self, k: Key) -> bool:
        """A state-free value that is a constant-weight projection: walk through it so W is the model's input weight."""
        net = self.net
        node = net.node(k)
        if node is None or node.domain not in ("", "ai.onnx"):
            return False
        ins = net.inputs(k)
        if node.op_type in ("Gemm", "MatMul"):
            return len(ins) >= 2 and ins[1] is not None and net.is_const(ins[1]) and (len(ins) < 3 or ins[2] is None or net.is_const(ins[2]))
        if node.op_type in ("Add", "Sub") and len(ins) == 2:
            live = [i for i in ins if i is not None and not net.is_const(i)]
            return len(live) == 1 and self._extends(live[0])
        if node.op_type in ("Split", "Slice", "Gather") and ins and ins[0] is not None:
            # the gates of a stacked input projection: walk back to the projection when it is one
            return all(i is None or net.is_const(i) for i in ins[1:]) and self._extends(ins[0])
        return False

    def _classes(self, leaves: list[Key], anchor: str) -> list[_StateClass]:
        """Group state views into state inputs: same source and same elements (run on random data)."""
        net = self.net
        by_source: dict[Key, list[Key]] = {}
        for leaf in leaves:
            src = self.view_source(leaf)
            if src is None:
                raise _Retry(f"cell-like structure at node {anchor!r}: {leaf[1]!r} is not a state input")
            lst = by_source.setdefault(src, [])
            if leaf not in lst:
                lst.append(leaf)
        out: list[_StateClass] = []
        for src, group in by_source.items():
            src_shape = net.shape(src)
            arrays: dict[Key, np.ndarray] = {}
            if src_shape is not None:
                data = self.rng.standard_normal(src_shape)
                try:
                    arrays = dict(zip(group, self.runner.run({src: data}, group)))
                except EvalError:
                    arrays = {}
            classes: list[_StateClass] = []
            for leaf in group:
                shape = tuple(arrays[leaf].shape) if leaf in arrays else net.shape(leaf)
                if shape is None:
                    raise _NotACell(f"cell-like structure at node {anchor!r}: the shape of state view {leaf[1]!r} is unknown")
                hit = None
                for c in classes:
                    first = c.leaves[0]
                    if leaf in arrays and first in arrays and arrays[leaf].size == arrays[first].size and np.array_equal(_flat(arrays[leaf]), _flat(arrays[first])):
                        hit = c
                        break
                if hit is None:
                    classes.append(_StateClass(src, [leaf], {leaf: shape}, int(np.prod(shape))))
                else:
                    hit.leaves.append(leaf)
                    hit.shapes[leaf] = shape
            out.extend(classes)
        if len(out) > _MAX_STATE_INPUTS:
            raise _NotACell(f"cell-like structure at node {anchor!r} reads {len(out)} different state inputs, more than a cell's h and c (and an input)")
        return out

    def _h_order(self, classes: list[_StateClass], c_class: _StateClass | None) -> list[_StateClass]:
        """Which state input to try as h first: a graph/loop state input, then the cell that produced c, then other cells."""
        c_cell = self.cell_of_source.get(c_class.source) if c_class is not None else None

        def rank(c: _StateClass) -> int:
            if self.sources.get(c.source) in ("input", "constant"):
                return 0
            cell = self.cell_of_source.get(c.source)
            if c_cell is not None and cell is c_cell:
                return 1
            return 2

        return sorted(classes, key=rank)

    def _threads(self, h_class: _StateClass, kind: str, w: CellWeights) -> bool:
        """A cell output read as state must come from the same cell one step earlier (same kind and weights)."""
        cell = self.cell_of_source.get(h_class.source)
        if cell is None:
            return True
        a, b = cell.weights, w
        return cell.kind == kind and a.W.shape == b.W.shape and a.R.shape == b.R.shape and bool(np.allclose(a.W, b.W, atol=1e-6) and np.allclose(a.R, b.R, atol=1e-6) and np.allclose(a.B, b.B, atol=1e-6))

    def _x_shapes(self, x_leaves: list[Key], anchor: str) -> list[tuple[int, ...]]:
        shapes: list[tuple[int, ...]] = []
        for leaf in x_leaves:
            s = self.net.shape(leaf)
            if s is None:
                raise _NotACell(f"cell-like structure at node {anchor!r}: the shape of its input {leaf[1]!r} is unknown")
            shapes.append(s)
        return shapes

    def _gate_width(self, x_leaves: list[Key], classes: list[_StateClass], pre: Key, anchor: str, extra: dict[Key, np.ndarray] | None = None) -> int:
        """The hidden size: the last axis of a gate's pre-activation, run once on zeros."""
        feeds = {leaf: np.zeros(shape) for leaf, shape in zip(x_leaves, self._x_shapes(x_leaves, anchor))}
        for c in classes:
            feeds.update({leaf: np.zeros(c.shapes[leaf]) for leaf in c.leaves})
        (a,) = self.runner.run({**feeds, **(extra or {})}, [pre])
        if a.ndim == 0 or a.shape[-1] == 0:
            raise _NotACell(f"cell-like structure at node {anchor!r}: its gate {pre[1]!r} is a scalar")
        return int(a.shape[-1])

    def _feeder(self, x_leaves: list[Key], h: _StateClass, c: _StateClass | None, anchor: str, H: int) -> _Feeder:
        shapes = self._x_shapes(x_leaves, anchor)
        if H <= 0 or h.size % H or (c is not None and c.size != h.size):
            raise _NotACell(f"cell-like structure at node {anchor!r}: its state ({h.size} elements) is not a batch of gates {H} wide")
        B = h.size // H
        if any(int(np.prod(s)) % B for s in shapes):
            raise _NotACell(f"cell-like structure at node {anchor!r}: its inputs are not a batch of {B} rows like its state")
        return _Feeder(x_leaves, shapes, h, c, B)

    def _zeros(self, feeds: _Feeder) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        B, H = feeds.batch, feeds.hidden
        return np.zeros((B, feeds.x_size)), np.zeros((B, H)), None if feeds.c is None else np.zeros((B, H))

    def _random_inputs(self, feeds: _Feeder) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        r = self.rng
        B, H = feeds.batch, feeds.hidden
        return r.standard_normal((B, feeds.x_size)), r.standard_normal((B, H)), None if feeds.c is None else r.standard_normal((B, H))

    def _probe(self, feeds: _Feeder, pres: list[Key], extra: dict[Key, np.ndarray] | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """W, R, b of each pre-activation, read off with zeros and unit vectors (they are affine in x and h).

        All probes run at once, stacked on axis 0 (the batch of a batch-1 cell); a graph that does not
        take that (a fixed reshape, a squeeze of axis 0) is probed one vector at a time. Either way the
        weights are only trusted after the single-batch run agrees with the reference cell. A fixed batch of
        B rows is probed through its first row (the others zero) and checked on all B rows.
        """
        n_x, H, B = feeds.x_size, feeds.hidden, feeds.batch
        if n_x + H > _MAX_PROBES:
            raise EvalError(f"input {n_x} + hidden {H} is too large to probe")
        extra = extra or {}
        x0, h0, c0 = self._zeros(feeds)

        def row0(a: np.ndarray) -> np.ndarray:
            f = _flat(a)
            if f.size % B:
                raise EvalError(f"a gate of {f.size} elements is not a batch of {B} rows")
            row: np.ndarray = f.reshape(B, -1)[0]
            return row

        base = [row0(a) for a in self.runner.run({**feeds.make(x0, h0, c0), **extra}, pres)]
        P = 1 + n_x + H
        xs = np.zeros((P, n_x))
        xs[1 : 1 + n_x] = np.eye(n_x)
        hs = np.zeros((P, H))
        hs[1 + n_x :] = np.eye(H)
        rows = self._probe_stacked(feeds, pres, xs, hs, extra, base) if B == 1 else None
        if rows is None:
            rows = []
            for p in range(len(pres)):
                rows.append(np.zeros((P, len(base[p]))))
            for j in range(1, P):
                x, h = x0.copy(), h0.copy()
                x[0], h[0] = xs[j], hs[j]
                for p, v in enumerate(self.runner.run({**feeds.make(x, h, c0), **extra}, pres)):
                    rows[p][j] = row0(v)
            for p in range(len(pres)):
                rows[p][0] = base[p]
        out = []
        for p in range(len(pres)):
            delta = rows[p] - base[p][None, :]
            out.append((delta[1 : 1 + n_x].T.copy(), delta[1 + n_x :].T.copy(), base[p]))
        return out

    def _probe_stacked(
        self, feeds: _Feeder, pres: list[Key], xs: np.ndarray, hs: np.ndarray, extra: dict[Key, np.ndarray], base: list[np.ndarray]
    ) -> list[np.ndarray] | None:
        P = xs.shape[0]
        stacked: dict[Key, np.ndarray] = {}
        c0 = None if feeds.c is None else np.zeros((P, feeds.hidden))
        for k, v in feeds.make_rows(xs, hs, c0).items():
            if v is None:
                return None
            stacked[k] = v
        for k, v in extra.items():
            if v.ndim == 0 or v.shape[0] != 1:
                return None
            stacked[k] = np.broadcast_to(v, (P, *v.shape[1:])).copy()
        try:
            outs = self.runner.run(stacked, pres)
        except EvalError:
            return None
        rows = []
        for p, o in enumerate(outs):
            if o.ndim == 0 or o.shape[0] != P or o.size != P * len(base[p]):
                return None
            r = o.reshape(P, -1).astype(np.float64)
            if not np.allclose(r[0], base[p], atol=1e-9):
                return None
            rows.append(r)
        return rows

    def _provenance(self, core: list[onnx.NodeProto | None], walk: _Walk) -> tuple[str, ...]:
        names: list[str] = []
        for n in [*core, *walk.nodes]:
            if n is not None:
                nm = self.net.node_name(n)
                if nm not in names:
                    names.append(nm)
        return tuple(names)

    def _match(
        self,
        kind: str,
        scope: Scope,
        nodes: tuple[str, ...],
        x_leaves: list[Key],
        h: _StateClass,
        c: _StateClass | None,
        h_out: Key,
        c_out: Key | None,
        H: int,
        w: CellWeights,
        err: float,
    ) -> CellMatch:
        return CellMatch(
            kind=kind,
            scope_path=scope.path,
            nodes=nodes,
            x=tuple(k[1] for k in x_leaves),
            h_in=h.leaves[0][1],
            c_in=None if c is None else c.leaves[0][1],
            h_out=h_out[1],
            c_out=None if c_out is None else c_out[1],
            hidden_size=H,
            weights=w,
            h_views=tuple(k[1] for k in h.leaves),
            c_views=() if c is None else tuple(k[1] for k in c.leaves),
            h_source=h.source[1],
            c_source=None if c is None else c.source[1],
            max_error=err,
            x_shapes=tuple(self.net.shape(k) or () for k in x_leaves),
            scope=scope,
        )


class _Retry(Exception):
    """The structure needs a state input that is not known yet (an unrolled loop's previous step): try again later."""


class _SilentRetry(_Retry):
    """As _Retry, for a structure too common to report when it never becomes a cell (act(affine) for RNNs)."""


@dataclass
class _Feeder:
    """Turns (x, h, c) batches, [batch, size] each, into feeds for every leaf of the cell's subgraph.

    Leaves hold their batch rows first (row-major), which is how exporters lay out [batch, features];
    a model that does otherwise fails the reference check, it is never mis-confirmed.
    """

    x_leaves: list[Key]
    x_shapes: list[tuple[int, ...]]
    h: _StateClass
    c: _StateClass | None
    batch: int = 1

    @property
    def x_size(self) -> int:
        """Input features per batch row (all x leaves side by side)."""
        return int(sum(int(np.prod(s)) for s in self.x_shapes)) // self.batch

    @property
    def hidden(self) -> int:
        return self.h.size // self.batch

    def make(self, x: np.ndarray, h: np.ndarray, c: np.ndarray | None) -> dict[Key, np.ndarray]:
        B = self.batch
        x = x.reshape(B, -1)
        feeds: dict[Key, np.ndarray] = {}
        pos = 0
        for leaf, shape in zip(self.x_leaves, self.x_shapes):
            n = int(np.prod(shape)) // B
            feeds[leaf] = x[:, pos : pos + n].reshape(shape)
            pos += n
        for leaf in self.h.leaves:
            feeds[leaf] = h.reshape(self.h.shapes[leaf])
        if self.c is not None and c is not None:
            for leaf in self.c.leaves:
                feeds[leaf] = c.reshape(self.c.shapes[leaf])
        return feeds

    def make_rows(self, xs: np.ndarray, hs: np.ndarray, cs: np.ndarray | None) -> dict[Key, np.ndarray | None]:
        """Feeds for P probes at once, stacked on axis 0 of each leaf (None where axis 0 is not a batch of 1)."""
        P = xs.shape[0]

        def stack(rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
            if not shape or shape[0] != 1:
                return None
            return rows.reshape((P, *shape[1:]))

        feeds: dict[Key, np.ndarray | None] = {}
        pos = 0
        for leaf, shape in zip(self.x_leaves, self.x_shapes):
            n = int(np.prod(shape))
            feeds[leaf] = stack(xs[:, pos : pos + n], shape)
            pos += n
        for leaf in self.h.leaves:
            feeds[leaf] = stack(hs, self.h.shapes[leaf])
        if self.c is not None and cs is not None:
            for leaf in self.c.leaves:
                feeds[leaf] = stack(cs, self.c.shapes[leaf])
        return feeds


def carry_layout(node: onnx.NodeProto) -> tuple[int, int, int, int, int] | None:
    """How a Loop or Scan carries values: (number carried, first carried node input, first carried body input,
    first carried body output, first carried node output). None for any other node."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Loop":  # inputs (M, cond, v...), body (iter, cond, v...) -> (cond, v..., scans...)
        return max(0, len(node.input) - 2), 2, 2, 1, 0
    if node.op_type == "Scan":  # inputs (states..., scanned...), body (states..., elements...) -> (states..., scans...)
        n_scan = next((int(a.i) for a in node.attribute if a.name == "num_scan_inputs"), 0)
        return max(0, len(node.input) - n_scan), 0, 0, 0, 0
    return None


def _pick(a: Key | None, b: Key | None, first: Callable[[Key], bool], second: Callable[[Key], bool]) -> tuple[Key | None, Key | None]:
    """(a, b) or (b, a), whichever satisfies (first, second); (None, None) otherwise."""
    if a is not None and b is not None:
        if first(a) and second(b):
            return a, b
        if first(b) and second(a):
            return b, a
    return None, None


def _err(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        g, w = _flat(g), _flat(w)
        if g.size != w.size:
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        worst = max(worst, float(np.max(np.abs(g - w))) / scale if g.size else 0.0)
    return worst


def find_cells(index: ModelIndex, sources: Iterable[tuple[Scope, str]]) -> CellScan:
    """Cells in the cone of ``sources`` (state inputs, as (scope, name)): confirmed matches and unconfirmed candidates."""
    rec = _Recogniser(index, sources)
    if len(rec.cone) <= len(rec.sources):
        return CellScan(_rec=rec)
    scan = rec.scan()
    scan._rec = rec
    for k, where in rec.loop_carried.items():
        d = rec.net.d(k)
        scan.loop_carried[(d.scope, d.name)] = where
    return scan
