"""ONNX's protobuf messages without ``import onnx``.

``import onnx`` costs more than linting a typical model: it loads numpy, ml_dtypes
and the C++ checker.  Reading a model needs none of them, only the message classes
protoc generated (``onnx/onnx_ml_pb2.py``).  Importing that module the usual way
runs ``onnx/__init__`` first, so :func:`messages` executes the installed file
directly.  The classes are the very ones onnx uses: the file registers its
descriptor in protobuf's default pool, where ``import onnx`` later finds the same
descriptor (protobuf accepts an identical file twice) and hence the same classes,
so ``isinstance(model, onnx.ModelProto)`` holds either way.  When anything about
that goes wrong (an onnx laid out differently), onnx itself is imported.

The enum numbers below are the wire format of ``onnx.proto``; they never change.
"""

from __future__ import annotations

import array
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ATTR",
    "EXTERNAL",
    "PLAIN_DTYPES",
    "attribute_value",
    "dtype_name",
    "element_count",
    "infer_shapes",
    "messages",
    "np_dtype",
    "surely_converts",
    "tensor_ints",
    "tensor_to_array",
]

#: the module name the generated file is executed under (its classes keep onnx's own ``__module__``)
_PRIVATE_NAME = "rnnir._onnx_ml_pb2"


class ATTR:
    """``onnx.AttributeProto.AttributeType`` values."""

    UNDEFINED = 0
    FLOAT = 1
    INT = 2
    STRING = 3
    TENSOR = 4
    GRAPH = 5
    FLOATS = 6
    INTS = 7
    STRINGS = 8
    TENSORS = 9
    GRAPHS = 10
    SPARSE_TENSOR = 11
    SPARSE_TENSORS = 12
    TYPE_PROTO = 13
    TYPE_PROTOS = 14


#: ``onnx.TensorProto.EXTERNAL``: the tensor's bytes live in a separate file
EXTERNAL = 1

#: numpy's name of each element type whose mapping every onnx >= 1.15 agrees on (the newer 8-, 4- and 2-bit
#: types went through ml_dtypes and changed between releases: :func:`dtype_name` asks onnx about those)
PLAIN_DTYPES: dict[int, str] = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "object",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
}


def messages() -> ModuleType:
    """A module with onnx's message classes (``ModelProto``, ``TensorProto``, ...), loaded without onnx's package."""
    loaded = sys.modules.get("onnx")
    if loaded is not None and hasattr(loaded, "ModelProto"):
        return loaded
    cached = sys.modules.get(_PRIVATE_NAME)
    if cached is not None:
        return cached
    try:
        return _load_generated()
    except Exception:  # noqa: BLE001 - any surprise in onnx's layout: the ordinary import gives the same classes
        sys.modules.pop(_PRIVATE_NAME, None)
        import onnx

        return onnx


def _load_generated() -> ModuleType:
    spec = importlib.util.find_spec("onnx")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("onnx is not installed")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "onnx_ml_pb2.py"
        if path.is_file():
            break
    else:
        raise ImportError("onnx/onnx_ml_pb2.py not found")
    file_spec = importlib.util.spec_from_file_location(_PRIVATE_NAME, path)
    if file_spec is None or file_spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[_PRIVATE_NAME] = module  # the import system's own cache: one load per process
    file_spec.loader.exec_module(module)
    if not hasattr(module, "ModelProto"):
        raise ImportError(f"{path} defines no ModelProto")
    return module


#: onnx's compiled extension (checker, shape inference), importable without the package's ``__init__``
_EXTENSION = "onnx.onnx_cpp2py_export"


def infer_shapes(model: Any) -> Any:
    """``onnx.shape_inference.infer_shapes(model)`` (no type check, no strict mode, no data propagation).

    onnx's own function serialises the model, runs the C++ inference and parses the result; this does the
    same through onnx's compiled extension alone, so a lint that needs one undeclared shape does not pay for
    ``import onnx`` (numpy, ml_dtypes and every Python module of onnx: more than the rest of such a lint).
    """
    ext = _extension()
    if ext is None:
        import onnx.shape_inference

        return onnx.shape_inference.infer_shapes(model)
    out = messages().ModelProto()
    out.ParseFromString(ext.shape_inference.infer_shapes(model.SerializeToString(), False, False, False))
    return out


def _extension() -> ModuleType | None:
    """onnx's compiled extension, loaded under its own name (None: only ``import onnx`` can provide it).

    It is registered in ``sys.modules`` under the name onnx's ``__init__`` imports it by, so a later
    ``import onnx`` finds this very module: the extension registers its types once per process and refuses a
    second initialisation.  Found that way it is not set as the attribute ``onnx.onnx_cpp2py_export`` of the
    package; onnx's own modules (and the libraries installed beside it here) only ever import it, which works.
    """
    loaded = sys.modules.get(_EXTENSION)
    if loaded is not None:
        return loaded
    if "onnx" in sys.modules:
        return None  # onnx is being imported or failed to: leave its extension to it
    try:
        spec = importlib.util.find_spec("onnx")  # finds the package without running its __init__
        if spec is None or not spec.submodule_search_locations:
            return None
        for folder in spec.submodule_search_locations:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = Path(folder) / f"onnx_cpp2py_export{suffix}"
                if path.is_file():
                    break
            else:
                continue
            break
        else:
            return None
        ext_spec = importlib.util.spec_from_file_location(_EXTENSION, path)
        if ext_spec is None or ext_spec.loader is None:
            return None
        module = importlib.util.module_from_spec(ext_spec)
        sys.modules[_EXTENSION] = module
        ext_spec.loader.exec_module(module)
        if not hasattr(getattr(module, "shape_inference", None), "infer_shapes"):
            raise ImportError("onnx's extension has no shape_inference.infer_shapes")
        return module
    except Exception:  # noqa: BLE001 - any surprise in onnx's layout: the ordinary import does the same
        if sys.modules.get(_EXTENSION) is not None and not hasattr(sys.modules[_EXTENSION], "ONNX_ML"):
            sys.modules.pop(_EXTENSION, None)  # not initialised: let onnx load it itself
        return None


#: the AttributeProto field that holds a value of each type: one value, or a repeated field (read as a list)
_ATTR_FIELD = {
    ATTR.FLOAT: "f",
    ATTR.INT: "i",
    ATTR.STRING: "s",
    ATTR.TENSOR: "t",
    ATTR.SPARSE_TENSOR: "sparse_tensor",
    ATTR.GRAPH: "g",
    ATTR.TYPE_PROTO: "tp",
}
_ATTR_REPEATED_FIELD = {
    ATTR.FLOATS: "floats",
    ATTR.INTS: "ints",
    ATTR.STRINGS: "strings",
    ATTR.TENSORS: "tensors",
    ATTR.SPARSE_TENSORS: "sparse_tensors",
    ATTR.GRAPHS: "graphs",
    ATTR.TYPE_PROTOS: "type_protos",
}


def attribute_value(attr: Any) -> Any:
    """``onnx.helper.get_attribute_value``: the Python value of an ``AttributeProto`` (bytes for strings)."""
    if attr.ref_attr_name:
        raise ValueError(f"Cannot get value of reference attribute: {attr}")
    t = attr.type
    if t in _ATTR_FIELD:
        return getattr(attr, _ATTR_FIELD[t])
    if t in _ATTR_REPEATED_FIELD:
        return list(getattr(attr, _ATTR_REPEATED_FIELD[t]))
    if t == ATTR.UNDEFINED:
        return None
    raise ValueError(f"Unsupported ONNX attribute: {attr}")


def dtype_name(elem_type: int) -> str:
    """``str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)))``; raises KeyError/TypeError/ValueError like it."""
    plain = PLAIN_DTYPES.get(elem_type)
    if plain is not None:
        return plain
    import numpy as np
    import onnx.helper

    return str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)))


def np_dtype(elem_type: int) -> Any:
    """``onnx.helper.tensor_dtype_to_np_dtype(elem_type)`` (numpy's dtype object)."""
    import numpy as np

    plain = PLAIN_DTYPES.get(elem_type)
    if plain is not None:
        return np.dtype(plain)
    import onnx.helper

    return onnx.helper.tensor_dtype_to_np_dtype(elem_type)


#: element types whose typed storage field is read as is (``onnx.numpy_helper.to_array``'s generic branch)
_FIELD_OF = {1: "float_data", 6: "int32_data", 7: "int64_data", 11: "double_data", 12: "uint64_data", 13: "uint64_data"}
#: element types stored as the low 16 (or 8) bits of int32_data
_INT32_BITS16 = frozenset({4, 5, 10})
_INT32_BITS8 = frozenset({2, 3, 9})


def tensor_to_array(t: Any) -> np.ndarray:
    """``onnx.numpy_helper.to_array(t)`` for a tensor whose bytes are in the model, with numpy alone for the
    element types 1-13 (strings, complex numbers and the newer small floats go through onnx itself)."""
    import numpy as np  # noqa: F811 - the module itself, at run time

    dt = t.data_type
    if t.HasField("segment") or sys.byteorder != "little" or dt not in PLAIN_DTYPES or dt in (8, 14, 15) or t.data_location == EXTERNAL:
        from onnx import numpy_helper

        converted: np.ndarray = numpy_helper.to_array(t)
        return converted
    dtype = np.dtype(PLAIN_DTYPES[dt])
    dims = tuple(t.dims)
    if t.HasField("raw_data"):
        return np.frombuffer(t.raw_data, dtype=dtype).reshape(dims)
    if dt in _INT32_BITS16:
        return np.array(t.int32_data, dtype=np.int32).view(np.uint32).astype(np.uint16).reshape(dims).view(dtype)
    if dt in _INT32_BITS8:
        return np.array(t.int32_data, dtype=np.int32).view(np.uint32).astype(np.uint8).view(dtype).reshape(dims)
    storage = np.dtype(PLAIN_DTYPES[{12: 13}.get(dt, dt)])
    return np.asarray(getattr(t, _FIELD_OF[dt]), dtype=storage).astype(dtype).reshape(dims)


#: bytes per element of the element types :func:`tensor_to_array` reads with numpy alone
_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8}
#: typed field each of them is stored in when there is no raw_data
_STORAGE_FIELD = {1: "float_data", 2: "int32_data", 3: "int32_data", 4: "int32_data", 5: "int32_data", 6: "int32_data",
                  7: "int64_data", 9: "int32_data", 10: "int32_data", 11: "double_data", 12: "uint64_data", 13: "uint64_data"}
#: :mod:`array` codes of the integer types, for reading raw_data without numpy
_INT_CODES = {2: "B", 3: "b", 4: "H", 5: "h", 6: "i", 7: "q", 12: "I", 13: "Q"}
#: :mod:`array` codes of float32 and float64
_FLOAT_CODES = {1: "f", 11: "d"}


def element_count(t: Any) -> int | None:
    """The number of elements ``t.dims`` promise (None for a negative dim)."""
    n = 1
    for d in t.dims:
        if d < 0:
            return None
        n *= d
    return n


def surely_converts(t: Any) -> bool:
    """:func:`tensor_to_array` reads ``t`` with numpy alone and cannot fail: a plain element type, bytes inside
    the model, and exactly as many values as the dims promise.  Decided without numpy."""
    dt = t.data_type
    if dt not in _ITEMSIZE or t.data_location == EXTERNAL or sys.byteorder != "little" or t.HasField("segment"):
        return False
    n = element_count(t)
    if n is None:
        return False
    if t.HasField("raw_data"):
        return len(t.raw_data) == n * _ITEMSIZE[dt]
    return len(getattr(t, _STORAGE_FIELD[dt])) == n


def tensor_floats(t: Any) -> list[float] | None:
    """The values of a float32 or float64 tensor ``t`` flattened, read without numpy; None for any other tensor
    (:func:`surely_converts` must hold, as for :func:`tensor_ints`)."""
    code = _FLOAT_CODES.get(t.data_type)
    if code is None or not surely_converts(t):
        return None
    if t.HasField("raw_data"):
        return list(array.array(code, t.raw_data))
    return list(getattr(t, _STORAGE_FIELD[t.data_type]))


def tensor_ints(t: Any) -> list[int] | None:
    """The values of integer tensor ``t`` flattened, read without numpy; None when ``t`` is no such tensor
    (:func:`surely_converts` must hold for the values to be the ones numpy would give)."""
    code = _INT_CODES.get(t.data_type)
    if code is None or not surely_converts(t):
        return None
    if t.HasField("raw_data"):
        return list(array.array(code, t.raw_data))
    values = list(getattr(t, _STORAGE_FIELD[t.data_type]))
    if t.data_type in (2, 3, 4, 5):  # the low bits of int32_data, reinterpreted (as numpy's view/astype chain does)
        bits = 8 if t.data_type in (2, 3) else 16
        mask, sign = (1 << bits) - 1, 1 << (bits - 1)
        values = [v & mask for v in values]
        if t.data_type in (3, 5):
            values = [v - (1 << bits) if v & sign else v for v in values]
    return values
