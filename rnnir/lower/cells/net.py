"""The model as the cell recogniser sees it: values by scope-exact key, their producers and consumers, constants
folded on demand, and concrete (batch 1) shapes, declared or inferred."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rnnir.lower.cells.ops import MAX_RUN_NODES, PARAM_OPS, Key, scan_inputs
from rnnir.lower.scope import Definition, ModelIndex, Scope
from rnnir.onnxio.proto import ATTR, EXTERNAL, surely_converts, tensor_to_array
from rnnir.semantics.evaluate import EVALUABLE_OPS, EvalError, run_op

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np

#: ops whose output shape follows from their inputs' shapes and constant parameters (never from run-time values)
_SHAPE_OPS = frozenset(
    {"Add", "Sub", "Mul", "Neg", "Identity", "Cast", "Sigmoid", "HardSigmoid", "Tanh", "Relu", "Gemm", "MatMul", "Gather", "Slice", "Split"}
    | {"Squeeze", "Unsqueeze", "Reshape", "Transpose", "Flatten", "Concat", "Expand"}
)
#: how many producers back an undeclared shape is computed before shape inference is asked instead
_SHAPE_DEPTH = 16


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


class Net:
    """Producers, consumers, constants and concrete (batch 1) shapes of one model, by value key."""

    def __init__(self, index: ModelIndex) -> None:
        self.index = index
        self.defs: dict[Key, Definition] = {}
        self._keys: dict[tuple[int, str], Key] = {}  # (id of the reading scope, name) -> key
        self._consts: dict[Key, np.ndarray | None] = {}
        self._foldable: dict[Key, bool] = {}
        self._shapes: dict[Key, tuple[int, ...] | None] = {}
        self._zero_shapes: dict[Key, tuple[int, ...] | None] = {}  # undeclared shapes, by running producers on zeros
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
        hit = self._keys.get((id(scope), name))
        if hit is not None:
            return hit  # resolved before: a name read in a scope always means the same definition
        d = scope.resolve(name)
        k = (id(d.scope), d.name)
        self.defs.setdefault(k, d)
        self._keys[(id(scope), name)] = k
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
            if constant_surely_converts(d.node):
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
        elif owner.op_type == "Scan" and 0 <= pos < len(body_in) - scan_inputs(owner):
            node_pos, out_pos = pos, pos
        else:
            return None
        if node_pos >= len(owner.input) or not owner.input[node_pos] or out_pos >= len(body_out):
            return None
        name = body_out[out_pos]
        for _ in range(MAX_RUN_NODES):
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
            val = to_array(d.tensor)
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
        shape = self._declared_shape(k)
        if shape is None:
            shape = self._shape_by_zeros(k, 0)
        if shape is None:
            d = self.defs[k]
            shape = _symbolic_to_one(self._inferred_info(d.scope, d.name))
        self._shapes[k] = shape
        return shape

    def _declared_shape(self, k: Key) -> tuple[int, ...] | None:
        """The shape of ``k`` as the model states it: an initializer's or a ``Constant``'s dims, a folded constant's,
        or its value info (named dims as 1)."""
        d = self.defs[k]
        if d.kind == "initializer" and d.tensor is not None:
            return tuple(int(x) for x in d.tensor.dims)
        if d.kind == "node" and d.node is not None and d.node.op_type == "Constant" and constant_surely_converts(d.node):
            return constant_shape(d.node)  # what evaluating it gives, whether or not is_const spared that
        c = self._consts.get(k)
        if c is not None:
            return tuple(c.shape)
        return _symbolic_to_one(d.info or d.scope.info(d.name))

    def _shape_by_zeros(self, k: Key, depth: int) -> tuple[int, ...] | None:
        """The shape of ``k``, which the model does not declare, from running its producers on zeros of their inputs'
        declared shapes: exact for ops whose output shape follows from input shapes and constant parameters alone, and
        far cheaper than shape inference over the whole model (which serialises it and costs as much as the cell
        check). None when that cannot tell: then inference decides, as it always did."""
        if k in self._zero_shapes:
            return self._zero_shapes[k]
        self._zero_shapes[k] = None  # provisional: breaks cycles
        d = self.defs[k]
        node = d.node
        if d.kind != "node" or node is None or node.domain not in ("", "ai.onnx") or node.op_type not in _SHAPE_OPS or depth >= _SHAPE_DEPTH:
            return None
        ins: list[np.ndarray | None] = []
        for pos, name in enumerate(node.input):
            if not name:
                ins.append(None)
                continue
            ik = self.key(d.scope, name)
            if pos > 0 and node.op_type in PARAM_OPS:
                c = self.const(ik)  # a parameter (axes, target shape, bounds): its value decides the shape
                if c is None and node.op_type == "Gather" and pos == 1:
                    # ... except Gather's indices, whose shape alone does (a Loop body reads step t of a sequence)
                    index_shape = self._declared_shape(ik)
                    c = None if index_shape is None else np.zeros(index_shape, dtype=np.int64)
                if c is None:
                    return None
                ins.append(c)
                continue
            shape = self._shapes[ik] if ik in self._shapes else self._declared_shape(ik)
            if shape is None:
                c = self.const(ik) if self._may_fold(ik) else None
                shape = tuple(c.shape) if c is not None else self._shape_by_zeros(ik, depth + 1)
            if shape is None and pos == 0 and node.op_type == "Gather":
                shape = self._reshaped_but_axis(ik, _int_attr(node, "axis", 0))
            if shape is None:
                return None
            ins.append(np.zeros(shape))
        try:
            with np.errstate(all="ignore"):
                outs = run_op(node, ins)
        except (EvalError, ValueError, IndexError, TypeError, ArithmeticError):
            return None
        for out_key, arr in zip(self.outputs_of(node, d.scope), outs):
            if out_key is not None:
                # a zero-sized result may come from a named dim run at 1 (a slice past it): inference decides those
                self._zero_shapes[out_key] = tuple(int(x) for x in arr.shape) if arr.size else None
        return self._zero_shapes.get(k)

    def _reshaped_but_axis(self, k: Key, axis: int) -> tuple[int, ...] | None:
        """A shape of ``k`` exact on every axis but ``axis`` (given as 1), when ``k`` is a ``Reshape`` to a constant
        target whose one computed (-1) dim is ``axis``: all a ``Gather`` on that axis needs to know, since its output
        drops the axis.  A tf2onnx Loop reads step t of a sequence so, from a Reshape of an earlier Loop's scan output
        whose length nothing declares; without this, shape inference over the whole model is the only way to tell."""
        d = self.defs[k]
        node = d.node
        if d.kind != "node" or node is None or node.domain not in ("", "ai.onnx") or node.op_type != "Reshape" or len(node.input) < 2 or not node.input[1]:
            return None
        target = self.const(self.key(d.scope, node.input[1]))
        if target is None or target.ndim != 1:
            return None
        dims = [int(x) for x in target]
        if axis < 0:
            axis += len(dims)
        if not 0 <= axis < len(dims) or dims[axis] != -1 or any(x <= 0 for i, x in enumerate(dims) if i != axis):
            return None  # a 0 copies an input dim, a second -1 is invalid: only the input's shape tells
        return tuple(1 if i == axis else x for i, x in enumerate(dims))

    def _inferred_info(self, scope: Scope, name: str) -> onnx.ValueInfoProto | None:
        """Shape inference over the whole model, run once and only when a needed shape is not declared."""
        if self._inferred is None:
            self._inferred = {}
            try:
                from rnnir.onnxio.proto import infer_shapes  # rare: a needed shape the model does not declare

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


def _int_attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name and a.type == ATTR.INT:
            return int(a.i)
    return default


def constant_surely_converts(node: onnx.NodeProto) -> bool:
    """rnnir.semantics.evaluate runs this ``Constant`` node without fail (its first value attribute decides)."""
    for a in node.attribute:
        if a.name == "value":
            return bool(a.type == ATTR.TENSOR and surely_converts(a.t))
        if a.name in ("value_float", "value_int", "value_floats", "value_ints"):
            return True
    return False


def constant_shape(node: onnx.NodeProto) -> tuple[int, ...]:
    """The shape of the array a ``Constant`` for which :func:`constant_surely_converts` holds evaluates to."""
    for a in node.attribute:
        if a.name == "value":
            return tuple(int(x) for x in a.t.dims)
        if a.name in ("value_float", "value_int"):
            return ()
        if a.name in ("value_floats", "value_ints"):
            return (len(a.floats) if a.name == "value_floats" else len(a.ints),)
    raise AssertionError("not a Constant that converts")


def to_array(t: onnx.TensorProto) -> np.ndarray | None:
    if t.data_location == EXTERNAL and not t.raw_data:
        return None
    try:
        a = tensor_to_array(t)
    except Exception:  # noqa: BLE001 - an unreadable tensor is not a usable constant
        return None
    return a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a
