"""Values lowering can prove are exactly zero, read off the ONNX graph that computes them.

Exporters keep an input alive by adding a zero term to the state (silero-vad op15 writes
``stateN = Concat(h, c) + Cast(sr * 0)``).  ``0 * y`` is exactly zero only when ``y`` is finite: an
integer ``y`` always is, a float ``y`` only when it is a constant with no inf or NaN.  Such a value becomes a
constant external (zeros of its proven shape), so the slice tracer sees ``x + 0`` and keeps ``x`` exact
(:mod:`rnnir.slices`).  Anything not proven stays an unknown external: no identity is guessed.  Integer
constants are read without numpy (a lint that never needs numpy does not import it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rnnir.ir.nodes import PendingConst
from rnnir.lower.scope import Definition
from rnnir.lower.tensors import constant_tensor, small_array, tensor_type, tensor_type_of
from rnnir.onnxio.proto import element_count, tensor_ints

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["ProvenZero", "proven_zero"]

_MAX_CONST = 16  # elements of a constant factor read to prove a product zero
_MAX_DEPTH = 8  # ops walked back: a zero term is a few ops (Cast(Mul(sr, 0)))
_MAX_ZERO = 4096  # elements of a zero term made into a constant
_INTEGER = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"})


@dataclass(frozen=True)
class ProvenZero:
    """Zeros of ``dtype`` and ``shape``, as the constant an external value carries."""

    dtype: str
    shape: tuple[int, ...]

    def const(self) -> PendingConst:
        n = math.prod(self.shape)
        return PendingConst(self.shape, lambda: np.zeros(self.shape, dtype=np.dtype(self.dtype)), lambda: [0] * n)


@dataclass(frozen=True)
class _Known:
    values: list[float] | None  # the constant's values, flattened (None: not a small constant)
    shape: tuple[int, ...] | None  # static shape (None: unknown)
    dtype: str | None


def _tensor(t: onnx.TensorProto) -> _Known:
    tt = tensor_type_of(t)
    n = element_count(t)
    values: list[float] | None = None
    if n is not None and n <= _MAX_CONST:
        ints = tensor_ints(t)
        if ints is not None:
            values = [float(v) for v in ints]
        else:  # a float constant: numpy reads it (rare: a small float factor beside the state path)
            arr = small_array(t)
            values = [float(v) for v in arr.ravel().tolist()] if arr is not None and arr.dtype.kind in "fiub" else None
    return _Known(values, _static(tt.shape), tt.dtype)


def _known(d: Definition, depth: int) -> _Known:
    if d.kind in ("initializer", "input") and d.tensor is not None:
        return _tensor(d.tensor)
    if d.kind == "node" and d.node is not None and d.node.op_type == "Constant":
        ct = constant_tensor(d.node)
        if ct is not None:
            return _tensor(ct)
    zero = proven_zero(d, depth + 1) if d.kind == "node" else None
    if zero is not None:
        return _Known([0.0] * math.prod(zero.shape), zero.shape, zero.dtype)
    t = tensor_type(d.info)
    return _Known(None, _static(t.shape), t.dtype)


def _static(shape: tuple[int | str | None, ...] | None) -> tuple[int, ...] | None:
    if shape is None or not all(isinstance(s, int) and s >= 0 for s in shape):
        return None
    return tuple(int(s) for s in shape)  # type: ignore[arg-type]


def _finite(k: _Known) -> bool:
    return k.dtype in _INTEGER or (k.values is not None and all(math.isfinite(v) for v in k.values))


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    out = []
    for x, y in zip((1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)


def proven_zero(d: Definition, depth: int = 0) -> ProvenZero | None:
    """Zeros equal to the value ``d`` defines on every input, or None when that is not proven."""
    node = d.node
    if d.kind != "node" or node is None or depth > _MAX_DEPTH or d.index != 0:
        return None
    ins = [d.scope.resolve(n) if n else None for n in node.input]
    if node.op_type == "Cast" and ins and ins[0] is not None:
        inner = _known(ins[0], depth)
        to = tensor_type(d.info).dtype or _cast_dtype(node)
        if inner.values is None or inner.shape is None or any(v != 0 for v in inner.values) or to is None:
            return None
        return ProvenZero(to, inner.shape)
    if node.op_type == "Mul" and len(ins) == 2 and ins[0] is not None and ins[1] is not None:
        a, b = _known(ins[0], depth), _known(ins[1], depth)
        for zero, other in ((a, b), (b, a)):
            if zero.values and all(v == 0 for v in zero.values) and zero.shape is not None and other.shape is not None and _finite(other):
                shape = _broadcast(zero.shape, other.shape)
                if shape is None or math.prod(shape) > _MAX_ZERO or zero.dtype is None:
                    return None
                return ProvenZero(zero.dtype, shape)
    return None


def _cast_dtype(node: onnx.NodeProto) -> str | None:
    from rnnir.onnxio.proto import dtype_name

    for a in node.attribute:
        if a.name == "to":
            try:
                return str(dtype_name(a.i))
            except (KeyError, TypeError, ValueError):
                return None
    return None
