"""What lowering reads off ONNX tensors, value infos and attributes: IR types, small constants, plain attributes.

A constant becomes an external value's data only when it is small (indices, shapes and small initial
states, which the slice analysis needs); larger ones and external data keep only their type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rnnir.ir.attributes import TensorType
from rnnir.ir.nodes import PendingConst
from rnnir.onnxio.proto import (
    ATTR,
    EXTERNAL,
    attribute_value,
    dtype_name,
    element_count,
    messages,
    surely_converts,
    tensor_floats,
    tensor_ints,
    tensor_to_array,
)

if TYPE_CHECKING:
    import numpy as np
    import onnx

SMALL_CONST = 4096  # elements: enough for indices, shapes and small initial states


def tensor_type(vi: onnx.ValueInfoProto | None) -> TensorType:
    """A value info's type as the IR's: an unknown element type keeps its ONNX name, unknown dims stay None."""
    if vi is None or not vi.type.HasField("tensor_type"):
        return TensorType()
    tt = vi.type.tensor_type
    dtype = None
    if tt.elem_type:
        try:
            dtype = dtype_name(tt.elem_type)
        except (KeyError, TypeError, ValueError):
            dtype = messages().TensorProto.DataType.Name(tt.elem_type).lower()
    if not tt.HasField("shape"):
        return TensorType(dtype=dtype)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return TensorType(dtype=dtype, shape=dims)


def tensor_type_of(t: onnx.TensorProto) -> TensorType:
    """A tensor's own type (its dims are all known)."""
    try:
        dtype = dtype_name(t.data_type)
    except (KeyError, TypeError, ValueError):
        dtype = None
    return TensorType(dtype=dtype, shape=tuple(t.dims))


def small_array(t: onnx.TensorProto) -> np.ndarray | None:
    """The tensor's data when it is small and stored in the model, else None."""
    if t.data_location == EXTERNAL:
        return None
    n = 1
    for d in t.dims:
        n *= d
    if n > SMALL_CONST:
        return None
    try:
        return tensor_to_array(t)
    except Exception:  # noqa: BLE001 - a malformed constant is simply not used as a constant
        return None


def small_const(t: onnx.TensorProto) -> np.ndarray | PendingConst | None:
    """:func:`small_array`, made when first read when it surely converts (most lints never read it: no numpy).

    The size is tested first: :func:`surely_converts` reads ``raw_data``, which protobuf copies (megabytes for a big
    weight that is no small constant anyway)."""
    if t.data_location != EXTERNAL and (element_count(t) or 0) <= SMALL_CONST and surely_converts(t):
        return PendingConst(tuple(t.dims), lambda: tensor_to_array(t), lambda: tensor_ints(t), lambda: tensor_floats(t))
    return small_array(t)


def plain_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (strings decoded, small tensors as arrays); subgraphs are left out."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (ATTR.GRAPH, ATTR.GRAPHS):
            continue
        if a.type == ATTR.TENSOR:
            arr = small_array(a.t)
            if arr is not None:
                out[a.name] = arr
            continue
        v = attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[a.name] = v
    return out


def constant_tensor(node: onnx.NodeProto | None) -> onnx.TensorProto | None:
    """A ``Constant`` node's ``value`` tensor (None for its other spellings, which lowering does not fold)."""
    if node is None:
        return None
    for a in node.attribute:
        if a.name == "value" and a.type == ATTR.TENSOR:
            tensor: onnx.TensorProto = a.t
            return tensor
    return None
