"""Values lowering can prove are exactly zero, read off the ONNX graph that computes them.

Exporters keep an input alive by adding a zero term to the state (silero-vad op15 writes
``stateN = Concat(h, c) + Cast(sr * 0)``).  ``0 * y`` is exactly zero only when ``y`` is finite: an
integer ``y`` always is, a float ``y`` only when it is a constant with no inf or NaN.  Such a value becomes a
constant external (a zero array of its proven shape), so the slice tracer sees ``x + 0`` and keeps ``x``
exact (:mod:`rnnir.slices`).  Anything not proven stays an unknown external: no identity is guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..onnxproto import element_count
from .scope import Definition
from .tensors import constant_tensor, small_array, tensor_type, tensor_type_of

if TYPE_CHECKING:
    import numpy as np

    from .scope import Scope
else:
    from ..lazymod import numpy as np

__all__ = ["proven_zero"]

_MAX_CONST = 16  # elements of a constant factor read to prove a product zero
_MAX_DEPTH = 8  # ops walked back: a zero term is a few ops (Cast(Mul(sr, 0)))
_INTEGER = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"})


def _known(d: Definition, depth: int) -> tuple[np.ndarray | None, tuple[int, ...] | None, str | None]:
    """``(constant or None, static shape or None, dtype or None)`` of a definition."""
    if d.kind in ("initializer", "input") and d.tensor is not None:
        t = tensor_type_of(d.tensor)
        return _small(d.tensor), _static(t.shape), t.dtype
    if d.kind == "node" and d.node is not None and d.node.op_type == "Constant":
        ct = constant_tensor(d.node)
        if ct is not None:
            t = tensor_type_of(ct)
            return _small(ct), _static(t.shape), t.dtype
    t = tensor_type(d.info)
    zero = proven_zero(d, depth + 1) if d.kind == "node" else None
    if zero is not None:
        return zero, tuple(zero.shape), str(zero.dtype)
    return None, _static(t.shape), t.dtype


def _small(t: object) -> np.ndarray | None:
    # a zero term's constant is a scalar or a few numbers; a weight is never read (numpy stays unimported)
    n = element_count(t)
    return small_array(t) if n is not None and n <= _MAX_CONST else None  # type: ignore[arg-type]


def _static(shape: tuple[int | str | None, ...] | None) -> tuple[int, ...] | None:
    if shape is None or not all(isinstance(s, int) and s >= 0 for s in shape):
        return None
    return tuple(int(s) for s in shape)  # type: ignore[arg-type]


def _finite(arr: np.ndarray | None, dtype: str | None) -> bool:
    if dtype in _INTEGER:
        return True
    return arr is not None and arr.dtype.kind in "fc" and bool(np.isfinite(arr).all())


def proven_zero(d: Definition, depth: int = 0) -> np.ndarray | None:
    """An array of zeros equal to the value ``d`` defines on every input, or None when that is not proven."""
    node = d.node
    if d.kind != "node" or node is None or depth > _MAX_DEPTH or d.index != 0:
        return None
    scope: Scope = d.scope
    ins = [scope.resolve(n) if n else None for n in node.input]
    if node.op_type == "Cast" and ins and ins[0] is not None:
        inner, _, _ = _known(ins[0], depth)
        if inner is None or inner.size > 4096 or np.any(inner != 0):
            return None
        to = tensor_type(d.info).dtype or _cast_dtype(node)
        try:
            return np.zeros(inner.shape, dtype=np.dtype(to)) if to else None
        except TypeError:
            return None
    if node.op_type == "Mul" and len(ins) == 2 and all(i is not None for i in ins):
        a, b = (_known(i, depth) for i in ins if i is not None)
        for (za, _sa, _ta), (zb, sb, tb) in ((a, b), (b, a)):
            if za is not None and za.size and not np.any(za != 0) and sb is not None and (_finite(zb, tb)):
                try:
                    shape = np.broadcast_shapes(tuple(za.shape), sb)
                except ValueError:
                    return None
                if int(np.prod(shape)) > 4096:
                    return None
                return np.zeros(shape, dtype=za.dtype)
    return None


def _cast_dtype(node: object) -> str | None:
    from ..onnxproto import dtype_name

    for a in getattr(node, "attribute", ()):
        if a.name == "to":
            try:
                return str(dtype_name(a.i))
            except (KeyError, TypeError, ValueError):
                return None
    return None
