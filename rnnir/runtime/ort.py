"""onnxruntime's IOBinding, in the two layers rnnir binds through: the only module that touches onnxruntime's
private API.

:class:`PublicBinding` is onnxruntime's documented ``IOBinding``.  :class:`NativeBinding` makes the same calls
on the pybind objects underneath (``onnxruntime.capi._pybind_state``, ``InferenceSession._sess``,
``IOBinding._iobinding``), which skips a Python wrapper per bound value: the public wrappers spend about as long in
Python bookkeeping (WebGPU capture checks, device lookups, wrapper objects) as a tiny model spends computing.
:func:`make_binding` gives the native layer when the installed onnxruntime has it, else the public one; the
session (:mod:`rnnir.runtime.session`) and the pool (:mod:`rnnir.serving.pool`) bind only through these classes.

:data:`PRIVATE_API` names every private attribute used here and :func:`missing_private_api` says which of them
the installed onnxruntime lacks: a test runs it on the onnxruntime versions rnnir is tested with, so an upgrade
that removes one fails loudly there instead of silently falling back to the slower layer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import onnxruntime as ort

__all__ = ["PRIVATE_API", "NativeBinding", "PublicBinding", "make_binding", "missing_private_api"]

DEVICE = ("cpu", 0)

#: the private names :class:`NativeBinding` uses: (object, attribute)
PRIVATE_API: tuple[tuple[str, str], ...] = (
    ("onnxruntime.capi._pybind_state", "OrtValue.ortvalue_from_shape_and_type"),
    ("onnxruntime.capi._pybind_state", "OrtValue.ortvalue_from_numpy"),
    ("InferenceSession", "_sess.run_with_iobinding"),
    ("IOBinding", "_iobinding"),
    ("OrtDevice", "_get_c_device"),
)


class PublicBinding:
    """IOBinding through onnxruntime's documented Python API (the fallback)."""

    kind = "public"

    def __init__(self, sess: ort.InferenceSession) -> None:
        self._sess = sess
        self._b = sess.io_binding()
        # a graph input with a same-name initializer (a default, as `rnnir fix --state-defaults` writes) is not in
        # get_inputs(), and binding a numpy array to it fails ("Failed to find NodeArg"): bind an OrtValue instead
        self.overridable = frozenset(a.name for a in sess.get_overridable_initializers())

    def upload(self, array: np.ndarray) -> Any:
        """A value owning a private copy of ``array`` (ORT would otherwise wrap numpy memory)."""
        return ort.OrtValue.ortvalue_from_numpy(np.array(array, order="C", copy=True))

    def empty(self, shape: Sequence[int], dtype: np.dtype) -> Any:
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, *DEVICE)

    def bind_array(self, name: str, array: np.ndarray) -> None:
        if name in self.overridable:
            self._b.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array)))
        else:
            self._b.bind_cpu_input(name, array)

    def bind_value(self, name: str, value: Any) -> None:
        self._b.bind_ortvalue_input(name, value)

    def bind_output_into(self, name: str, value: Any) -> None:
        self._b.bind_ortvalue_output(name, value)

    def bind_output(self, name: str) -> None:
        self._b.bind_output(name, *DEVICE)

    def clear_inputs(self) -> None:
        self._b.clear_binding_inputs()

    def clear_outputs(self) -> None:
        self._b.clear_binding_outputs()

    def run(self, run_options: ort.RunOptions | None = None) -> None:
        self._sess.run_with_iobinding(self._b, run_options)  # None by default: constructing RunOptions costs ~50us per call

    def wrap(self, array: np.ndarray) -> Any:
        """A value over ``array``'s own memory (CPU): bound as an output, onnxruntime writes into the array.
        The value does not keep the array alive: the caller does, as long as a binding holds the value."""
        return ort.OrtValue.ortvalue_from_numpy(array)

    def raw_binder(self) -> Callable[[str, np.ndarray], object]:
        """The cheapest call that binds a numpy array as an input (not for overridable initializers).  The
        native layer does not reference the array: the caller keeps it alive until the run is over."""
        bind: Callable[[str, np.ndarray], object] = self._b.bind_cpu_input
        return bind

    def runner(self) -> Callable[[], object]:
        """A call that runs this binding without run options."""
        return partial(self._sess.run_with_iobinding, self._b)

    def outputs(self) -> list[Any]:
        outs: list[Any] = self._b.get_outputs()  # in binding order, not graph order
        return outs

    def output_values(self) -> Any:
        """The last run's outputs in binding order, indexable (each with ``.numpy()``)."""
        return self._b.get_outputs()


class NativeBinding(PublicBinding):
    """The same calls on onnxruntime's pybind objects (see the module docstring).  Arrays bound as inputs are
    not referenced by the pybind binding: the caller keeps them alive until the next call."""

    kind = "native"

    def __init__(self, sess: ort.InferenceSession) -> None:
        from onnxruntime.capi import _pybind_state as C

        super().__init__(sess)
        self._c = self._b._iobinding
        self._c_run = sess._sess.run_with_iobinding
        self._dev = ort.OrtDevice.make(*DEVICE)._get_c_device()
        self._new = C.OrtValue.ortvalue_from_shape_and_type
        self._from_numpy = C.OrtValue.ortvalue_from_numpy

    def upload(self, array: np.ndarray) -> Any:
        value = self._new(list(array.shape), array.dtype, self._dev)  # ORT-owned memory ...
        value.update_inplace(array if array.flags.c_contiguous else np.ascontiguousarray(array))  # ... holding a copy
        return value

    def empty(self, shape: Sequence[int], dtype: np.dtype) -> Any:
        return self._new(list(shape), dtype, self._dev)

    def bind_array(self, name: str, array: np.ndarray) -> None:
        if name in self.overridable:
            self._c.bind_ortvalue_input(name, self.upload(array))
        else:
            self._c.bind_input(name, array)

    def bind_value(self, name: str, value: Any) -> None:
        self._c.bind_ortvalue_input(name, value)

    def bind_output_into(self, name: str, value: Any) -> None:
        self._c.bind_ortvalue_output(name, value)

    def bind_output(self, name: str) -> None:
        self._c.bind_output(name, self._dev)

    def clear_inputs(self) -> None:
        self._c.clear_binding_inputs()

    def clear_outputs(self) -> None:
        self._c.clear_binding_outputs()

    def run(self, run_options: ort.RunOptions | None = None) -> None:
        self._c_run(self._c, run_options)

    def wrap(self, array: np.ndarray) -> Any:
        return self._from_numpy(array, self._dev)  # the caller keeps the array alive

    def raw_binder(self) -> Callable[[str, np.ndarray], object]:
        bind: Callable[[str, np.ndarray], object] = self._c.bind_input
        return bind

    def runner(self) -> Callable[[], object]:
        return partial(self._c_run, self._c, None)

    def outputs(self) -> list[Any]:
        values = self._c.get_outputs()
        return [values[i] for i in range(len(values))]  # indexing: iterating the vector is ~30x slower

    def output_values(self) -> Any:
        return self._c.get_outputs()  # onnxruntime's vector: index it (iterating it is ~30x slower)


def make_binding(sess: ort.InferenceSession, native: bool = True) -> PublicBinding:
    """A binding of ``sess``: the native layer when asked for and available, else the documented API."""
    if native:
        try:
            return NativeBinding(sess)
        except (ImportError, AttributeError, TypeError):
            pass
    return PublicBinding(sess)


def missing_private_api(sess: ort.InferenceSession) -> list[str]:
    """The names of :data:`PRIVATE_API` the installed onnxruntime lacks (empty: :class:`NativeBinding` works)."""
    missing: list[str] = []
    try:
        from onnxruntime.capi import _pybind_state as C
    except ImportError:
        return [f"{owner}.{attr}" for owner, attr in PRIVATE_API]
    roots = {
        "onnxruntime.capi._pybind_state": C,
        "InferenceSession": sess,
        "IOBinding": sess.io_binding(),
        "OrtDevice": ort.OrtDevice.make(*DEVICE),
    }
    for owner, attr in PRIVATE_API:
        obj: Any = roots[owner]
        for part in attr.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                missing.append(f"{owner}.{attr}")
                break
    return missing
