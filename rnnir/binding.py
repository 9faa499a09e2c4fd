"""The IOBinding layer a :class:`~rnnir.runtime.StatefulSession` runs through, and its prepared steady call.

Two layers bind the same way: onnxruntime's documented ``IOBinding`` (:class:`PublicBinding`) and, where
the installed onnxruntime exposes it, the pybind object underneath (:class:`NativeBinding`), which skips
a Python wrapper per bound value.  :class:`SteadyCall` is the plan a session builds once it is in steady
state, so a call does only what cannot be done ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime as ort

if TYPE_CHECKING:
    from .runtime import StatefulSession
    from .sessionspec import SlotSpec

__all__ = ["NativeBinding", "PublicBinding", "SlotBuffers", "SteadyCall", "make_binding"]

DEVICE = ("cpu", 0)
# On the pre-bound path a feed up to this size is copied into a buffer bound once, instead of bound every
# call: binding an array costs onnxruntime a name lookup and a new tensor, about 1.1 us of CPU whatever the
# size, where copying 256 B - 8 KiB takes 0.2-0.4 us (and 16 KiB already 6 us; measured on the shared EPYC)
_COPY_FEED_BYTES = 8 * 2**10
# A plain output up to this size is written into a buffer bound once and copied out; a larger one is bound to
# a new allocation every call and handed over as it is (rebinding and reading it back costs about 2 us)
_COPY_OUTPUT_BYTES = 8 * 2**10
_NDARRAY = np.ndarray


class SlotBuffers:
    """A slot's buffers: ``current`` holds the state the next call reads, ``spare`` receives the next state."""

    __slots__ = ("spec", "current", "spare", "mode")

    def __init__(self, spec: SlotSpec) -> None:
        self.spec = spec
        self.current: Any = None  # an onnxruntime value (pybind or public wrapper, per the binding)
        self.spare: Any = None
        self.mode = "probe"  # "probe" (next call lets ORT allocate), "double", "handoff" or "cast"

    def shape(self) -> tuple[int, ...] | None:
        return None if self.current is None else tuple(self.current.shape())


class PublicBinding:
    """IOBinding through onnxruntime's documented Python API (the fallback)."""

    kind = "public"

    def __init__(self, sess: ort.InferenceSession) -> None:
        self._sess = sess
        self._b = sess.io_binding()
        # a graph input with a same-name initializer (a default, as `rnnir fix --state-defaults` writes) is not in
        # get_inputs(), and binding a numpy array to it fails ("Failed to find NodeArg"): bind an OrtValue instead
        self._overridable = frozenset(a.name for a in sess.get_overridable_initializers())

    def upload(self, array: np.ndarray) -> Any:
        """A value owning a private copy of ``array`` (ORT would otherwise wrap numpy memory)."""
        return ort.OrtValue.ortvalue_from_numpy(np.array(array, order="C", copy=True))

    def empty(self, shape: Sequence[int], dtype: np.dtype) -> Any:
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, *DEVICE)

    def bind_array(self, name: str, array: np.ndarray) -> None:
        if name in self._overridable:
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
        """A value over ``array``'s own memory (CPU): bound as an output, onnxruntime writes into the array."""
        return ort.OrtValue.ortvalue_from_numpy(array)

    def raw_binder(self) -> Callable[[str, np.ndarray], object]:
        """The cheapest call that binds a numpy array as an input (not for overridable initializers)."""
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
    """The same calls on onnxruntime's pybind objects.

    The public wrappers spend about as long in Python bookkeeping (WebGPU
    capture checks, device lookups, wrapper objects) as a tiny model spends
    computing; calling the pybind layer directly keeps the per-call overhead
    of a StatefulSession near that of a bare ``InferenceSession.run``.  Used
    when the installed onnxruntime has that layer; otherwise the public API.
    Arrays bound as inputs are not referenced by the pybind binding, so the
    caller keeps them alive until the next call (``StatefulSession._fed``).
    """

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
        if name in self._overridable:
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
    if native:
        try:
            return NativeBinding(sess)
        except (ImportError, AttributeError, TypeError):
            pass
    return PublicBinding(sess)


class SteadyCall:
    """The steady state of one instance: every written slot double-buffered, the same feed names, dtypes
    and shapes, and the same requested outputs as the last call.

    Built once when a call succeeds in that state, so the next calls do only what cannot be done ahead:
    two bindings are pre-bound with the slot buffers swapped (binding k reads buffer k and writes buffer
    1-k), with a buffer per small feed and per small plain output; a call checks its feeds (names, type,
    dtype, shape), copies or binds them, runs, flips k and copies the small plain outputs out (a large one
    is a fresh onnxruntime allocation every call, handed over without a copy).  State outputs are handed
    over only when asked for.  Anything else (new names, shapes or dtypes, an explicit state, a probe, run
    options, a failing run) returns None and takes the general path, which rebuilds this plan.
    """

    __slots__ = (
        "named", "as_list", "direct", "count", "feed_specs", "feed_values", "wanted", "sources", "plain_only",
        "single", "plain_values", "fresh", "bindings", "binders", "output_binders", "getters", "runs", "k",
    )
    named: tuple[str, ...] | None  # the request this plan answers: None for run()'s default
    as_list: bool
    direct: bool  # run() may call it without going through _call (no input context to extend)
    count: int
    feed_specs: tuple[tuple[str, np.dtype[Any], tuple[int, ...], np.ndarray | None], ...]  # the buffer a small feed is copied into
    feed_values: tuple[Any, ...]  # the onnxruntime values over those buffers (kept alive with the bindings)
    wanted: tuple[str, ...]
    # per wanted output: its slot (a state output), or its buffer (a small plain output), or its position
    # among the binding's outputs (a large plain output, allocated by onnxruntime every call)
    sources: tuple[tuple[SlotBuffers | None, np.ndarray | None, int], ...]
    plain_only: bool
    single: tuple[str, np.ndarray] | None  # the one plain output, buffered, when that is all the call returns
    plain_values: tuple[Any, ...]  # the onnxruntime values over the plain outputs' buffers
    fresh: tuple[str, ...]  # the large plain outputs, bound to a new allocation every call
    bindings: list[PublicBinding]
    binders: list[Callable[[str, np.ndarray], object]]
    output_binders: list[Callable[[str], object]]
    getters: list[Callable[[], Any]]
    runs: list[Callable[[], object]]
    k: int

    @classmethod
    def enter(
        cls, s: StatefulSession, feeds: Mapping[str, Any], named: tuple[str, ...] | None, as_list: bool, last: Mapping[str, Any]
    ) -> SteadyCall | None:
        m = s._model
        if type(feeds) is not dict or s._pending_bytes or any(n in m.slot_by_input for n in feeds):
            return None
        if any(slot.mode != "double" or slot.spare is None for slot in s._writers):
            return None
        if s._pair is None:
            s._pair = [make_binding(s._ort, s._binding.kind == "native") for _ in range(2)]
        first = s._pair[0]
        specs: list[tuple[str, np.dtype[Any], tuple[int, ...], np.ndarray | None]] = []
        fed: list[tuple[str, Any]] = []  # feeds bound once, over a buffer each call copies into
        for name, a in feeds.items():
            declared = m.inputs[name].dtype
            if type(a) is not np.ndarray or (declared is not None and a.dtype != declared):
                return None  # converted by the general path every call: no plan
            small = a.dtype.kind in "biuf" and a.nbytes <= _COPY_FEED_BYTES and name not in first._overridable
            buf = np.empty(a.shape, a.dtype) if small else None
            if buf is not None:
                fed.append((name, first.wrap(buf)))
            specs.append((name, a.dtype, a.shape, buf))
        wanted = tuple(m.plain_outputs if named is None else named)
        if len(set(wanted)) != len(wanted):
            return None  # an output named twice: one binding cannot write it twice
        slot_of = {slot.spec.output: slot for slot in s._writers}
        # a small plain output gets one buffer, shaped like the last call's, and the caller a copy (cheaper
        # than binding a fresh allocation every call); a call whose output shape differs fails to write into
        # it and takes the general path.  The bindings' outputs are the state outputs, then the plain ones.
        sources: list[tuple[SlotBuffers | None, np.ndarray | None, int]] = []
        plain: list[tuple[str, np.ndarray | None, Any]] = []
        for name in wanted:
            slot = slot_of.get(name)
            if slot is not None:
                sources.append((slot, None, -1))
                continue
            arr = last.get(name)
            if type(arr) is not np.ndarray:
                return None
            if arr.nbytes <= _COPY_OUTPUT_BYTES:
                buf = np.empty_like(arr, order="C")
                plain.append((name, buf, first.wrap(buf)))
                sources.append((None, buf, -1))
            else:
                plain.append((name, None, None))
                sources.append((None, None, len(s._writers) + len(plain) - 1))
        self = cls()
        self.named, self.as_list, self.direct = named, as_list, s._context is None
        self.count = len(specs)
        self.feed_specs = tuple(specs)
        self.feed_values = tuple(value for _, value in fed)
        self.wanted = wanted
        self.sources = tuple(sources)
        self.plain_only = all(slot is None for slot, _, _ in sources)
        only = plain[0][1] if self.plain_only and len(plain) == 1 else None
        self.single = None if only is None else (plain[0][0], only)
        self.plain_values = tuple(value for _, _, value in plain if value is not None)
        self.fresh = tuple(name for name, buf, _ in plain if buf is None)
        for k, b in enumerate(s._pair):
            b.clear_inputs()
            b.clear_outputs()
            for slot in s._slots:  # binding k reads buffer k: current for k = 0
                b.bind_value(slot.spec.input, slot.current if k == 0 or slot.spec.output is None else slot.spare)
            for slot in s._writers:
                assert slot.spec.output is not None  # a writer is a slot with an output
                b.bind_output_into(slot.spec.output, slot.spare if k == 0 else slot.current)
            for name, _, value in plain:
                if value is None:
                    b.bind_output(name)  # its place among the outputs; bound again before every run
                else:
                    b.bind_output_into(name, value)
            for name, value in fed:
                b.bind_value(name, value)
        self.bindings = s._pair
        overridable = any(name in first._overridable for name in feeds)
        self.binders = [b.bind_array if overridable else b.raw_binder() for b in s._pair]
        self.output_binders = [b.bind_output for b in s._pair]
        self.getters = [b.output_values for b in s._pair]
        self.runs = [b.runner() for b in s._pair]
        self.k = 0
        return self

    def call(self, s: StatefulSession, feeds: dict[str, Any]) -> dict[str, np.ndarray] | list[np.ndarray] | None:
        """The call on the fast path (the caller holds the instance's lock), or None, the slots untouched,
        when it does not apply."""
        if len(feeds) != self.count:
            return None
        k = self.k
        bind = self.binders[k]
        for name, dtype, shape, buf in self.feed_specs:
            a = feeds.get(name)
            # not checked: C order (a copy takes any layout; onnxruntime binds a contiguous copy of one itself)
            if type(a) is not _NDARRAY or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                return None
            if buf is not None:
                buf[...] = a
            else:
                # the pybind binding does not own the array: it is read during the run below, while the
                # caller's dict holds it, and bound again before any later run
                bind(name, a)
        for name in self.fresh:  # a new allocation: the array handed over last time is never written again
            self.output_binders[k](name)
        try:
            self.runs[k]()
        except Exception:  # noqa: BLE001 - the general path reruns the call and reports the failure properly
            return None  # the state outputs went to the spare buffers: the slots still hold the last state
        self.k = k ^ 1
        for slot in s._writers:
            slot.current, slot.spare = slot.spare, slot.current
        stats = s.stats
        stats.calls += 1
        stats.python_state_bytes = 0
        single = self.single
        if single is not None:  # the default call of a model with one (small) plain output
            stats.output_copy_bytes = 0
            value = single[1].copy()  # the buffer is written again by the next call
            return [value] if self.as_list else {single[0]: value}
        produced: Any = self.getters[k]() if self.fresh else ()
        values = []
        copied = 0
        alias = s.alias_outputs
        for source, buf, at in self.sources:
            if buf is not None:
                values.append(buf.copy())  # a small plain output: its buffer is written again by the next call
            elif source is None:
                values.append(produced[at].numpy())  # a large plain output: this call's own allocation
            else:
                view = source.current.numpy()
                if alias:
                    values.append(view)
                else:
                    values.append(view.copy())
                    copied += view.nbytes
        stats.output_copy_bytes = copied
        return values if self.as_list else dict(zip(self.wanted, values))
