"""A tiny numpy evaluator for the handful of ONNX ops recurrent cells are written with.

Cell recognition (:mod:`rnnir.lower.cells`) runs a matched subgraph hundreds of times on
tiny inputs to read its weights off and to confirm that it computes a cell; onnxruntime is
not available there (``rnnir lint`` never imports it) and ``onnx.reference`` costs more to
import and run than the whole check. Floating-point data is computed in float64 so that a
comparison against :mod:`rnnir.semantics.reference` sees the model's arithmetic, not rounding.
The tests check every op here against ``onnx.reference``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rnnir.onnxio.proto import EXTERNAL, attribute_value, np_dtype, tensor_to_array

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["EVALUABLE_OPS", "EvalError", "attribute", "run_op"]


class EvalError(Exception):
    """The evaluator cannot run this node (unsupported op or attribute, bad shapes)."""


def attribute(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            v = attribute_value(a)
            if isinstance(v, bytes):
                return v.decode()
            return v
    return default


if TYPE_CHECKING:  # aliases for annotations only: evaluating np.ndarray here would import numpy
    _Arr = np.ndarray
    _OpFn = Callable[[onnx.NodeProto, list[Any]], list[_Arr]]


def _float(a: _Arr) -> _Arr:
    return a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a


def _sigmoid(x: _Arr) -> _Arr:
    e = np.exp(-np.abs(x))
    out: _Arr = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return out


def _matmul(a: _Arr, b: _Arr) -> _Arr:
    """a @ b. Rows of ``a`` with at most one nonzero (the unit-vector probes of cell recognition) are a scaled
    gather of ``b``'s rows: exact, and no BLAS call, whose threads otherwise spin for longer than the product takes."""
    if a.ndim == 2 and b.ndim == 2 and a.shape[0] > 4 and a.shape[1] == b.shape[0]:
        nz = a != 0
        if int(nz.sum(axis=1).max(initial=0)) <= 1:
            idx = nz.argmax(axis=1)
            vals = a[np.arange(a.shape[0]), idx]
            gathered: _Arr = vals[:, None] * b[idx]
            return gathered
    product: _Arr = np.matmul(a, b)
    return product


def _gemm(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    a, b = ins[0], ins[1]
    if attribute(node, "transA", 0):
        a = a.T
    if attribute(node, "transB", 0):
        b = b.T
    y = float(attribute(node, "alpha", 1.0)) * _matmul(a, b)
    if len(ins) > 2 and ins[2] is not None:
        y = y + float(attribute(node, "beta", 1.0)) * ins[2]
    return [y]


def _cast(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    x = ins[0]
    if node.op_type == "CastLike":
        target = np.asarray(ins[1]).dtype
    else:
        target = np.dtype(np_dtype(int(attribute(node, "to"))))
    if np.issubdtype(target, np.floating) and np.issubdtype(x.dtype, np.floating):
        return [x.astype(np.float64)]  # keep float64: the check compares arithmetic, not rounding
    return [_float(x.astype(target))]


def _axes(node: onnx.NodeProto, ins: list[Any], pos: int) -> list[int] | None:
    a = attribute(node, "axes")
    if a is not None:
        return [int(x) for x in a]
    if len(ins) > pos and ins[pos] is not None:
        return [int(x) for x in np.asarray(ins[pos]).ravel()]
    return None


def _squeeze(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    axes = _axes(node, ins, 1)
    x = ins[0]
    if axes is None:
        return [np.squeeze(x)]
    return [np.squeeze(x, axis=tuple(a % x.ndim for a in axes))]


def _unsqueeze(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    axes = _axes(node, ins, 1)
    if axes is None:
        raise EvalError("Unsqueeze without axes")
    x = ins[0]
    rank = x.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        x = np.expand_dims(x, a)
    return [x]


def _reshape(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    x = ins[0]
    shape = [int(s) for s in np.asarray(ins[1]).ravel()]
    if not attribute(node, "allowzero", 0):
        shape = [x.shape[i] if s == 0 and i < x.ndim else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


def _flatten(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    x = ins[0]
    axis = int(attribute(node, "axis", 1))
    axis = axis + x.ndim if axis < 0 else axis  # ONNX counts a negative axis from the rank: -1 of [2, 1, 3] is 2
    lead = int(np.prod(x.shape[:axis])) if axis else 1
    return [x.reshape(lead, -1)]


def _transpose(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    perm = attribute(node, "perm")
    return [np.transpose(ins[0], perm if perm is None else [int(p) for p in perm])]


def _gather(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    return [np.take(ins[0], np.asarray(ins[1]).astype(np.int64), axis=int(attribute(node, "axis", 0)))]


def _slice(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    x = ins[0]
    if len(ins) == 1:  # opset < 10: attributes
        starts = [int(v) for v in attribute(node, "starts")]
        ends = [int(v) for v in attribute(node, "ends")]
        axes = [int(v) for v in attribute(node, "axes", range(len(starts)))]
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in np.asarray(ins[1]).ravel()]
        ends = [int(v) for v in np.asarray(ins[2]).ravel()]
        axes = [int(v) for v in np.asarray(ins[3]).ravel()] if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = [int(v) for v in np.asarray(ins[4]).ravel()] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index: list[slice] = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a % x.ndim] = slice(s, e, st)
    return [x[tuple(index)]]


def _split(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    x = ins[0]
    axis = int(attribute(node, "axis", 0)) % x.ndim
    n_out = len(node.output)
    sizes = attribute(node, "split")
    if sizes is None and len(ins) > 1 and ins[1] is not None:
        sizes = [int(v) for v in np.asarray(ins[1]).ravel()]
    if sizes is None:
        n = int(attribute(node, "num_outputs", n_out))
        size = x.shape[axis]
        chunk = -(-size // n)  # opset 18: the last chunk may be smaller
        sizes = [min(chunk, size - k * chunk) for k in range(n)]
    cuts = np.cumsum([int(s) for s in sizes])[:-1]
    return list(np.split(x, cuts, axis=axis))


def _concat(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    return [np.concatenate([i for i in ins if i is not None], axis=int(attribute(node, "axis")))]


def _expand(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    shape = tuple(int(s) for s in np.asarray(ins[1]).ravel())
    return [ins[0] * np.ones(shape, dtype=ins[0].dtype)]


def _shape(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    dims = np.asarray(ins[0].shape, dtype=np.int64)
    start = attribute(node, "start", 0)
    end = attribute(node, "end")
    return [dims[start:end]]


def _constant(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    for a in node.attribute:
        if a.name == "value":
            if a.t.data_location == EXTERNAL:
                # never read a file a model names from inside the evaluator (its location may be hostile or missing)
                raise EvalError("Constant whose value is stored in an external file")
            try:
                return [_float(tensor_to_array(a.t))]
            except Exception as exc:  # noqa: BLE001 - an unreadable tensor is no constant (onnx raises several kinds)
                raise EvalError(f"unreadable Constant value: {exc}") from None
        if a.name in ("value_float", "value_int"):
            return [np.asarray(attribute_value(a), dtype=np.float64 if a.name == "value_float" else np.int64)]
        if a.name in ("value_floats", "value_ints"):
            return [np.asarray(list(attribute_value(a)), dtype=np.float64 if a.name == "value_floats" else np.int64)]
    raise EvalError("Constant without a supported value attribute")


def _constant_of_shape(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    value = np.zeros(1, dtype=np.float64)
    for a in node.attribute:
        if a.name == "value":
            value = _float(tensor_to_array(a.t))
    shape = tuple(int(s) for s in np.asarray(ins[0]).ravel())
    return [np.full(shape, value.ravel()[0], dtype=value.dtype)]


def _hard_sigmoid(node: onnx.NodeProto, ins: list[Any]) -> list[_Arr]:
    alpha = float(attribute(node, "alpha", 0.2))
    beta = float(attribute(node, "beta", 0.5))
    return [np.clip(alpha * ins[0] + beta, 0.0, 1.0)]


def _binary(fn: Callable[[_Arr, _Arr], _Arr]) -> _OpFn:
    return lambda node, ins: [fn(ins[0], ins[1])]


def _unary(fn: Callable[[_Arr], _Arr]) -> _OpFn:
    return lambda node, ins: [fn(ins[0])]


def _div(a: _Arr, b: _Arr) -> _Arr:
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        whole: _Arr = np.trunc(a / b).astype(a.dtype)
        return whole
    quotient: _Arr = a / b
    return quotient


# numpy's functions are looked up per call (lambdas): naming them here would import numpy with this module
_OPS: dict[str, _OpFn] = {
    "Identity": _unary(lambda x: x),
    "Cast": _cast,
    "CastLike": _cast,
    "Neg": _unary(lambda x: np.negative(x)),
    "Sigmoid": _unary(_sigmoid),
    "Tanh": _unary(lambda x: np.tanh(x)),
    "Relu": _unary(lambda x: np.maximum(x, 0)),
    "HardSigmoid": _hard_sigmoid,
    "Add": _binary(lambda a, b: np.add(a, b)),
    "Sub": _binary(lambda a, b: np.subtract(a, b)),
    "Mul": _binary(lambda a, b: np.multiply(a, b)),
    "Div": _binary(_div),
    "MatMul": _binary(_matmul),
    "Gemm": _gemm,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Transpose": _transpose,
    "Gather": _gather,
    "Slice": _slice,
    "Split": _split,
    "Concat": _concat,
    "Expand": _expand,
    "Shape": _shape,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
}

EVALUABLE_OPS = frozenset(_OPS)


def run_op(node: onnx.NodeProto, inputs: Sequence[Any]) -> list[_Arr]:
    """Run one standard-domain node on numpy inputs (None for an absent optional input)."""
    if node.domain not in ("", "ai.onnx"):
        raise EvalError(f"op {node.domain}.{node.op_type} is not evaluable here")
    fn = _OPS.get(node.op_type)
    if fn is None:
        raise EvalError(f"op {node.op_type} is not evaluable here")
    try:
        return fn(node, list(inputs))
    except EvalError:
        raise
    except (ValueError, IndexError, TypeError, KeyError, AttributeError) as exc:
        raise EvalError(f"{node.op_type}: {exc}") from None
