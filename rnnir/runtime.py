"""Run a model call after call on onnxruntime, with its state kept inside the session.

    from rnnir.runtime import StatefulSession
    s = StatefulSession("model.onnx")        # finds the state pairs like rnnir.load
    out = s.run({"x": chunk})                # the outputs get_outputs() lists, by name; the state stays inside
    y, = s.run(None, {"x": chunk})           # onnxruntime's signature: a list, the same outputs
    out = s.run_dict({"x": chunk})           # every output, state outputs included (copied out)
    s.get_inputs(); s.get_outputs()          # onnxruntime's NodeArgs, state inputs/outputs hidden
    s.state; s.state = {"h0": h}             # read or set the state explicitly
    s.reset()                                # back to the initial state
    t = s.fork()                             # independent instance: own slots, same ORT session
    s.save_state("vad.state"); s.load_state("vad.state")   # bound to the model's fingerprint and state version
    v = StatefulSession("silero_vad.onnx", context={"input": 64})   # keeps input the model does not (context.py)

How state is kept
-----------------
Every state pair gets a *slot*: two onnxruntime ``OrtValue`` buffers bound with
``IOBinding``.  Call k binds buffer A as the state input and buffer B as the
state output; call k+1 the reverse.  The state never passes through numpy
between calls: ``stats.python_state_bytes`` counts the bytes of state that
entered the slots from Python during the last call (initial values, explicit
overrides, ``load_state``, ``fork``), and is 0 in steady state.  In steady
state (same feed names, dtypes and shapes, same requested outputs) a plan built
once answers the call: two bindings pre-bound with the buffers swapped, small
feeds copied into buffers bound once, plain outputs written into buffers the
call copies out (see ``_Steady``).

A state output whose dtype differs from its input's (SD005) is refused unless
``cast_state=True``, which converts it through numpy every call.

Initial values: a slot whose input has a constant (an initializer with the
input's name) starts from it; otherwise from zeros of the input's declared
shape.  Symbolic dims are resolved at the first call, in this order: the
``state_shapes=`` argument; a dim symbol shared with a fed input (``B`` in
``x[T,B,8]`` and ``h0[1,B,16]``); the batch axis of a graph input that feeds a
recurrent op's ``X`` directly (through Identity/Cast/Transpose); the leading
axis of the first fed input whose leading dim is dynamic.  When none applies,
:class:`~rnnir.StateError` asks for ``state_shapes=``.

Dynamic state shapes
--------------------
The first call (and any call whose input shapes differ from the previous
call's) lets onnxruntime allocate the state outputs.  A state output whose
shape and dtype equal its input's turns the slot into a double buffer (the
allocated output becomes one of the two buffers; no copy).  A state whose size
changes from call to call (a growing cache) is *handed off* instead: each call
onnxruntime allocates the new state and the next call binds that very value as
its input.  No state bytes go through Python in either case; the hand-off costs
one allocation per call (``stats.slot_allocations``).

Outputs handed to the caller
----------------------------
``run(feeds)`` and ``run(None, feeds)`` return the outputs :meth:`StatefulSession.get_outputs`
lists: the state outputs are the session's and are neither returned nor copied
(read the state with ``session.state``).  ``run_dict(feeds)`` returns every
graph output; naming outputs (``run(["hn"], feeds)``, ``run(feeds, outputs=[...])``)
returns those.  Every returned array is the caller's own: onnxruntime never
writes into it again.  A state output handed over is a copy of the slot
(``stats.output_copy_bytes``) unless ``alias_outputs=True``: then it is a
read-only-by-convention view of the slot buffer the call wrote, which the call
after next overwrites.

Threads
-------
One instance is one stream: two threads using it at once is a bug (the order
of its chunks would depend on scheduling), so it is **refused**, not
serialised: ``run``, ``reset`` and ``load_state`` raise
:class:`SessionBusyError` when another thread is inside one of them.  ``state``,
``save_state`` and ``fork`` wait for a running call to finish.  Independent
instances (``fork``) share the ``onnxruntime.InferenceSession`` (whose ``run``
is thread-safe) and nothing else, so one instance per thread is safe.

Only the CPU execution provider's memory is supported for slots (outputs are
read with ``OrtValue.numpy``).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import onnx
import onnxruntime as ort

from .context import ContextKeeper, ContextSpec, InputContext, parse_context
from .errors import ModelError, RnnirError, StateError
from .ir import Program, SlotInit
from .pairs import StatePair
from .versioning import StateMigrations, StateOrigin, VersionOutcome, VersionPolicy, model_state_version, reconcile

if TYPE_CHECKING:
    from .lower import ModelSource

__all__ = [
    "FeedError",
    "IOSpec",
    "RecurrentInput",
    "SessionBusyError",
    "SessionStats",
    "SlotSpec",
    "StatefulSession",
]

_STATE_FORMAT = "rnnir.state/1"
_DEVICE = ("cpu", 0)
# A slot larger than this is refused (StatefulSession(max_slot_bytes=...), `rnnir run --max-slot-mb`):
# a 200-byte model can declare a state of terabytes, and allocating it would take the machine down.
DEFAULT_MAX_SLOT_BYTES = 256 * 2**20
_STATE_META_BYTES = 2**20  # room for a state file's metadata entry and zip headers
# On the pre-bound path a feed up to this size is copied into a buffer bound once, instead of bound every
# call: binding an array costs onnxruntime a name lookup and a new tensor, about 1.1 us of CPU whatever the
# size, where copying 256 B - 8 KiB takes 0.2-0.4 us (and 16 KiB already 6 us; measured on the shared EPYC)
_COPY_FEED_BYTES = 8 * 2**10
# A plain output up to this size is written into a buffer bound once and copied out; a larger one is bound to
# a new allocation every call and handed over as it is (rebinding and reading it back costs about 2 us)
_COPY_OUTPUT_BYTES = 8 * 2**10
_NDARRAY = np.ndarray


class SessionBusyError(StateError):
    """Another thread is using this StatefulSession right now (one instance is one stream; use fork())."""


class FeedError(RnnirError, ValueError):
    """A feed names an input the model does not have, or a required input is missing."""


@dataclass(frozen=True)
class IOSpec:
    """A graph input or output: numpy dtype and declared shape (ints, symbols, None for unknown)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int | str | None, ...] | None


@dataclass(frozen=True)
class SlotSpec:
    """One state pair as the runtime keeps it."""

    input: str
    output: str | None
    dtype: np.dtype
    shape: tuple[int | str | None, ...] | None
    init: SlotInit
    pair: StatePair = field(compare=False, repr=False)
    output_dtype: np.dtype | None = None  # as the graph output declares it


@dataclass
class SessionStats:
    """What the last call (and the instance so far) moved through Python.

    ``python_state_bytes``: bytes of state copied between numpy and the slots
    since the previous call ended, up to the end of the last call (initial
    values, explicit state overrides, ``load_state``/``fork``); 0 in steady
    state.  ``output_copy_bytes``: bytes of state outputs copied to hand them to
    the caller in the last call (0 with ``alias_outputs=True`` or when state
    outputs are not requested).  ``slot_allocations``: slot buffers onnxruntime
    allocated so far (probe calls, hand-off slots).
    """

    calls: int = 0
    python_state_bytes: int = 0
    total_python_state_bytes: int = 0
    output_copy_bytes: int = 0
    slot_allocations: int = 0
    probe_calls: int = 0


# -- the shared part: one ORT session, the pairs, the model's interface -----------------------


def _np_dtype(elem_type: int) -> np.dtype | None:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def _io_spec(vi: onnx.ValueInfoProto) -> IOSpec:
    tt = vi.type.tensor_type
    dtype = _np_dtype(tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return IOSpec(vi.name, dtype, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return IOSpec(vi.name, dtype, dims)


@dataclass(frozen=True)
class RecurrentInput:
    """A graph input that reaches a recurrent op's ``X`` through layout-only ops: where its time and batch axes are."""

    input: str
    time_axis: int
    batch_axis: int
    node: str


def _producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: node for node in model.graph.node for o in node.output}


def _recurrent_inputs(model: onnx.ModelProto, program: Program) -> list[RecurrentInput]:
    """Graph inputs feeding a recurrent ``X`` through Identity/Cast/Transpose, with the axes they map to."""
    producers = _producers(model)
    graph_inputs = {vi.name for vi in model.graph.input}
    found: list[RecurrentInput] = []
    for rec in program.recurrents:
        node = rec.onnx_node
        if node is None or not node.input:
            continue
        name = node.input[0]
        time_axis, batch_axis = (1, 0) if rec.layout else (0, 1)
        while name not in graph_inputs:
            prod = producers.get(name)
            if prod is None or prod.op_type not in ("Identity", "Cast", "Transpose"):
                break
            if prod.op_type == "Transpose":
                perm = next((list(a.ints) for a in prod.attribute if a.name == "perm"), None)
                if perm is None or max(time_axis, batch_axis) >= len(perm):
                    break
                time_axis, batch_axis = perm[time_axis], perm[batch_axis]
            name = prod.input[0]
        if name in graph_inputs and all(r.input != name for r in found):
            found.append(RecurrentInput(name, time_axis, batch_axis, rec.describe()))
    return found


def _length_inputs(model: onnx.ModelProto, program: Program) -> list[str]:
    """Graph inputs that are a recurrent op's ``sequence_lens`` (through Identity/Cast)."""
    producers = _producers(model)
    graph_inputs = {vi.name for vi in model.graph.input}
    found: list[str] = []
    for rec in program.recurrents:
        node = rec.onnx_node
        at = rec.spec.input_index(rec.spec.sequence_lens)
        if node is None or at is None or len(node.input) <= at or not node.input[at]:
            continue
        name = node.input[at]
        while name not in graph_inputs and name in producers and producers[name].op_type in ("Identity", "Cast"):
            name = producers[name].input[0]
        if name in graph_inputs and name not in found:
            found.append(name)
    return found


class _Model:
    """What every instance of one model shares: the ORT session, the pairs, the interface."""

    max_slot_bytes: int = DEFAULT_MAX_SLOT_BYTES

    def __init__(
        self,
        model: Any,
        pairs: Mapping[str, str | None] | None,
        session_options: ort.SessionOptions | None,
        providers: Sequence[Any] | None,
        ort_kwargs: dict[str, Any],
    ) -> None:
        from .lower import Policy, lower, read_model

        src: ModelSource | None
        if isinstance(model, Program):
            program = model
            src = program.source
            if src is None:
                try:
                    from .export import export as _export

                    proto = _export(program)
                except ImportError as exc:
                    raise StateError(
                        f"program {program.name!r} was not lowered from ONNX and rnnir.export is unavailable ({exc}); "
                        "pass the .onnx model instead"
                    ) from None
                src = read_model(proto, label=program.name)
                program = lower(src, pairs)
            elif pairs is not None:
                program = lower(src, pairs, Policy())
        else:
            src = read_model(model)
            program = lower(src, pairs, Policy())
        self.program = program
        self.source = src
        self.label = src.label
        self.fingerprint = src.fingerprint
        self.state_version = model_state_version(src.model)  # rnnir.state_version metadata (versioning.py)

        graph = src.model.graph
        inits = {t.name for t in graph.initializer}
        self.inputs: dict[str, IOSpec] = {vi.name: _io_spec(vi) for vi in graph.input}
        self.optional_inputs = {n for n in self.inputs if n in inits}
        self.output_specs: dict[str, IOSpec] = {vi.name: _io_spec(vi) for vi in graph.output}
        self.output_names = list(self.output_specs)

        slots: list[SlotSpec] = []
        for p in program.state_pairs:
            spec = self.inputs.get(p.input)
            if spec is None:
                raise StateError(
                    f"{self.label}: state input {p.input!r} is not a graph input (lowered with entry='constant'?); "
                    "export the program so the slot becomes an input/output pair"
                )
            if p.output is not None and p.output not in self.output_specs:
                raise StateError(f"{self.label}: state output {p.output!r} paired with {p.input!r} is not a graph output")
            init = p.slot.init if p.slot is not None else SlotInit("zeros")
            dtype = spec.dtype or np.dtype(np.float32)
            out_dtype = self.output_specs[p.output].dtype if p.output is not None else None
            slots.append(SlotSpec(p.input, p.output, dtype, spec.shape, init, p, out_dtype))
        self.slots = slots
        self.slot_by_input = {s.input: s for s in slots}
        self.state_outputs = {s.output for s in slots if s.output is not None}
        self.state_output_order = tuple(s.output for s in slots if s.output is not None)
        self.plain_inputs = [n for n in self.inputs if n not in self.slot_by_input]
        self.required_inputs = [n for n in self.plain_inputs if n not in self.optional_inputs]
        self.plain_outputs = [n for n in self.output_names if n not in self.state_outputs]
        self.recurrent_inputs = _recurrent_inputs(src.model, program)
        self.length_inputs = _length_inputs(src.model, program)

        opts = session_options
        if opts is None:
            opts = ort.SessionOptions()
            opts.log_severity_level = 3  # "Removing initializer ..." warnings are noise here
        if src.path is not None:
            what: Any = str(src.path)  # ORT finds external data beside the file
        else:
            what = src.with_external_data().SerializeToString()
        try:
            self.ort = ort.InferenceSession(what, sess_options=opts, providers=list(providers or ["CPUExecutionProvider"]), **ort_kwargs)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise ModelError(f"onnxruntime cannot load the model: {exc}", model=self.label) from None


# -- IOBinding, with as little Python per call as onnxruntime allows ----------------------------


class _PublicBinding:
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
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, *_DEVICE)

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
        self._b.bind_output(name, *_DEVICE)

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


class _NativeBinding(_PublicBinding):
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
        self._dev = ort.OrtDevice.make(*_DEVICE)._get_c_device()
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


def _binding(sess: ort.InferenceSession, native: bool = True) -> _PublicBinding:
    if native:
        try:
            return _NativeBinding(sess)
        except (ImportError, AttributeError, TypeError):
            pass
    return _PublicBinding(sess)


# -- one instance's slot ------------------------------------------------------------------------


class _Slot:
    """A slot's buffers: ``current`` holds the state the next call reads, ``spare`` receives the next state."""

    __slots__ = ("spec", "current", "spare", "mode")

    def __init__(self, spec: SlotSpec) -> None:
        self.spec = spec
        self.current: Any = None  # an onnxruntime value (pybind or public wrapper, per the binding)
        self.spare: Any = None
        self.mode = "probe"  # "probe" (next call lets ORT allocate), "double", "handoff" or "cast"

    def shape(self) -> tuple[int, ...] | None:
        return None if self.current is None else tuple(self.current.shape())


class StatefulSession:
    """One stream of calls of one model, with the model's state kept in onnxruntime values between calls.

    ``model`` is a path, the model's bytes, an ``onnx.ModelProto`` or a
    :class:`~rnnir.Program` (lowered from ONNX, or exported with
    ``rnnir.export``).  ``pairs`` declares the state pairs (``{"h0": "hn"}``)
    exactly as for :func:`rnnir.load`.  ``state_shapes`` gives the shape of
    slots whose dims cannot be resolved from the first call's feeds.
    A state output whose dtype differs from its input's is refused with
    :class:`~rnnir.StateError` (SD005), unless ``cast_state=True``: then it is
    converted through numpy every call (counted in ``python_state_bytes``).
    ``context={"input": 64}`` keeps the tail of an input and prepends it to the
    next call (:mod:`rnnir.context`).  ``session_options``, ``providers`` and
    ``**ort_kwargs`` go to ``onnxruntime.InferenceSession``.  A slot whose initial
    or loaded value would exceed ``max_slot_bytes`` (default 256 MiB) is refused
    with :class:`~rnnir.StateError` before anything is allocated.  See the module
    docstring for buffering, dynamic shapes, aliasing and threads.
    """

    def __init__(
        self,
        model: Any,
        pairs: Mapping[str, str | None] | None = None,
        session_options: ort.SessionOptions | None = None,
        providers: Sequence[Any] | None = None,
        alias_outputs: bool = False,
        *,
        state_shapes: Mapping[str, Sequence[int]] | None = None,
        cast_state: bool = False,
        native_binding: bool = True,
        context: ContextSpec | None = None,
        max_slot_bytes: int = DEFAULT_MAX_SLOT_BYTES,
        **ort_kwargs: Any,
    ) -> None:
        shared = _Model(model, pairs, session_options, providers, ort_kwargs)
        shared.max_slot_bytes = int(max_slot_bytes)
        time_axes = {ri.input: ri.time_axis for ri in shared.recurrent_inputs}
        specs = parse_context(context, shared.inputs, time_axes, set(shared.slot_by_input), shared.label)
        self._setup(shared, alias_outputs, state_shapes, native_binding, cast_state, specs)

    def _setup(
        self,
        shared: _Model,
        alias_outputs: bool,
        state_shapes: Mapping[str, Sequence[int]] | None,
        native: bool,
        cast_state: bool,
        context: tuple[InputContext, ...] = (),
    ) -> None:
        self._model = shared
        # input context kept outside the model (context.py); None on the hot path when none is declared
        self._context = ContextKeeper(context, {c.input: shared.inputs[c.input].dtype for c in context}) if context else None
        self._ort = shared.ort
        self.alias_outputs = bool(alias_outputs)
        self.cast_state = bool(cast_state)
        self._state_shapes = {k: tuple(int(d) for d in v) for k, v in (state_shapes or {}).items()}
        unknown = set(self._state_shapes) - set(shared.slot_by_input)
        if unknown:
            raise StateError(f"{shared.label}: state_shapes names {sorted(unknown)}, which are not state inputs {sorted(shared.slot_by_input)}")
        self._slots = [_Slot(s) for s in shared.slots]
        self._writers = [s for s in self._slots if s.spec.output is not None]
        self._binding = _binding(self._ort, native)
        self._fed: dict[str, np.ndarray] = {}  # arrays bound as inputs, alive until the next call
        self._bound_outputs: tuple[str, ...] | None = None
        self._bound_inputs: tuple[str, ...] | None = None
        self._last_shapes: tuple[Any, ...] | None = None
        self._guessed: dict[str, str] = {}
        self._pending_bytes = 0
        self._lock = threading.Lock()
        self._steady: _Steady | None = None
        self._pair: list[_PublicBinding] | None = None  # the two pre-bound bindings of the steady state
        self.stats = SessionStats()

    # -- what the model is -------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self._model.label

    @property
    def fingerprint(self) -> str:
        """sha256 of the model's graph: what saved state is bound to."""
        return self._model.fingerprint

    @property
    def program(self) -> Program:
        return self._model.program

    @property
    def pairs(self) -> list[StatePair]:
        return list(self._model.program.state_pairs)

    @property
    def slots(self) -> list[SlotSpec]:
        return list(self._model.slots)

    @property
    def inputs(self) -> dict[str, IOSpec]:
        """The inputs the caller feeds every call (state inputs excluded; less the declared context, when static)."""
        specs = {n: self._model.inputs[n] for n in self._model.plain_inputs}
        if self._context is not None:
            specs = {n: IOSpec(n, s.dtype, self._context.caller_shape(n, s.shape)) for n, s in specs.items()}
        return specs

    @property
    def context(self) -> tuple[InputContext, ...]:
        """The declared input context (``context=``), axes resolved."""
        return () if self._context is None else self._context.specs

    @property
    def context_state(self) -> dict[str, np.ndarray]:
        """The kept input context (input name -> the tail prepended to the next call); empty before the first call."""
        return {} if self._context is None else {k: v.copy() for k, v in self._context.tails.items()}

    @property
    def state_version(self) -> str | None:
        """The state version the model declares (metadata ``rnnir.state_version``), or None."""
        return self._model.state_version

    @property
    def state_bytes(self) -> int:
        """Bytes one stream keeps between calls: every slot (as last resolved) and the kept input context."""
        total = 0
        for slot in self._slots:
            if slot.current is not None:
                total += int(np.prod(slot.shape() or (), dtype=np.int64)) * slot.spec.dtype.itemsize
        return total + (0 if self._context is None else self._context.nbytes())

    @property
    def optional_inputs(self) -> set[str]:
        """Inputs with a default (an initializer of the same name): the caller may omit them."""
        return set(self._model.optional_inputs)

    @property
    def recurrent_inputs(self) -> list[RecurrentInput]:
        """Inputs that reach a recurrent op's ``X`` through layout-only ops, with their time and batch axes."""
        return list(self._model.recurrent_inputs)

    @property
    def length_inputs(self) -> list[str]:
        """Inputs that are a recurrent op's ``sequence_lens``: a streaming caller feeds each call's length."""
        return list(self._model.length_inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self._model.output_names)

    @property
    def inference_session(self) -> ort.InferenceSession:
        """The onnxruntime session every fork of this instance shares."""
        return self._ort

    # -- onnxruntime's interface: a drop-in InferenceSession whose state inputs/outputs are its own ----
    @overload
    def run(
        self,
        output_names: Mapping[str, Any],
        input_feed: Iterable[str] | None = None,
        run_options: ort.RunOptions | None = None,
        *,
        outputs: Iterable[str] | None = None,
    ) -> dict[str, np.ndarray]: ...

    @overload
    def run(
        self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any], run_options: ort.RunOptions | None = None
    ) -> list[np.ndarray]: ...

    def run(
        self,
        output_names: Any = None,
        input_feed: Any = None,
        run_options: ort.RunOptions | None = None,
        *,
        outputs: Iterable[str] | None = None,
    ) -> dict[str, np.ndarray] | list[np.ndarray]:
        """One call, either way it is written:

        * ``run(output_names, input_feed, run_options=None)``, onnxruntime's signature: returns a **list**
          in ``output_names`` order;
        * ``run(feeds, outputs=None)``: returns a **dict** by name.

        Either way, by default (``output_names=None``, ``outputs=None``) the outputs are those
        :meth:`get_outputs` lists: the state outputs are the session's, as in OpenVINO's stateful models,
        and are neither returned nor copied (read them with :attr:`state`, or name one to get it).
        :meth:`run_dict` returns every graph output, state included.
        """
        steady = self._steady
        if steady is not None and run_options is None and steady.direct:
            # the steady state's call (_Steady): the same feeds and outputs as the last call, nothing rebuilt
            if input_feed is None and outputs is None:
                feeds, hit = output_names, steady.named is None and not steady.as_list
            else:
                feeds = input_feed
                hit = steady.as_list and outputs is None and (
                    steady.named is None
                    if output_names is None
                    else type(output_names) is not str and steady.named == tuple(output_names)  # a str is refused below
                )
            if hit and type(feeds) is dict:
                if not self._lock.acquire(False):
                    raise SessionBusyError(self._busy_message("run"))
                try:
                    # read before taking the lock: a reset() or state assignment from another thread may have
                    # dropped this plan since, and its bindings still hold the old slot buffers
                    result = steady.call(self, feeds) if self._steady is steady else None
                finally:
                    self._lock.release()
                if result is not None:
                    return result
        if isinstance(output_names, Mapping):  # run(feeds[, outputs]): the dict-returning call
            named = input_feed if input_feed is not None else outputs
            return self._call(output_names, None if named is None else tuple(named), False, run_options)
        if not isinstance(input_feed, Mapping):
            raise FeedError(
                f"{self.label}: run(output_names, input_feed) takes a dict of input name -> array as input_feed, "
                f"got {type(input_feed).__name__}; or call run_dict(feeds)"
            )
        if isinstance(output_names, str):
            raise FeedError(f"{self.label}: output_names is a list of names, not the string {output_names!r}")
        return self._call(input_feed, None if output_names is None else tuple(output_names), True, run_options)

    def get_inputs(self) -> list[Any]:
        """onnxruntime's ``NodeArg`` (``.name``, ``.shape``, ``.type``) of every input the caller feeds: state inputs hidden."""
        return [a for a in self._ort.get_inputs() if a.name not in self._model.slot_by_input]

    def get_outputs(self) -> list[Any]:
        """onnxruntime's ``NodeArg`` of every output the caller gets by default: state outputs hidden."""
        return [a for a in self._ort.get_outputs() if a.name not in self._model.state_outputs]

    def get_modelmeta(self) -> Any:
        return self._ort.get_modelmeta()

    def get_providers(self) -> list[str]:
        return list(self._ort.get_providers())

    # -- calls -------------------------------------------------------------------------------
    def run_dict(
        self, feeds: Mapping[str, Any], outputs: Iterable[str] | None = None, *, run_options: ort.RunOptions | None = None
    ) -> dict[str, np.ndarray]:
        """One call.  State inputs may be omitted (taken from the slots); one given explicitly replaces
        that slot's value for this call only, and the call's state output becomes the slot's new value.
        Returns the requested outputs (all graph outputs by default, state outputs included) by name.
        ``run_options`` (an ``onnxruntime.RunOptions``) goes to onnxruntime for this call."""
        named = tuple(self._model.output_names) if outputs is None else tuple(outputs)
        return self._call(feeds, named, False, run_options)  # type: ignore[return-value]

    def _call(
        self, feeds: Mapping[str, Any], named: tuple[str, ...] | None, as_list: bool, run_options: ort.RunOptions | None
    ) -> dict[str, np.ndarray] | list[np.ndarray]:
        """One call of any form: ``named`` outputs (None: the plain outputs), as a list or a dict."""
        if not self._lock.acquire(blocking=False):
            raise SessionBusyError(self._busy_message("run"))
        try:
            pending = None
            context = self._context
            if context is not None:
                feeds, pending = context.extend(feeds, self.label)
            steady = self._steady
            result: dict[str, np.ndarray] | list[np.ndarray] | None = None
            if run_options is not None:  # the pre-bound fast path runs without options
                self._steady = None
            elif steady is not None and steady.named == named and steady.as_list == as_list and type(feeds) is dict:
                result = steady.call(self, feeds)
            if result is None:
                self._steady = None
                wanted = self._model.plain_outputs if named is None else named
                by_name = self._run(feeds, wanted, run_options)
                if run_options is None:
                    self._steady = _Steady.enter(self, feeds, named, as_list, by_name)
                result = [by_name[n] for n in wanted] if as_list else by_name
            if context is not None and pending is not None:
                context.commit(pending)  # only once the call succeeded
            return result
        finally:
            self._lock.release()

    def _busy_message(self, what: str) -> str:
        return (
            f"{self.label}: {what}() while another thread is using this StatefulSession; one instance is one "
            "stream and is refused, not serialised, when shared - give each thread its own instance with fork()"
        )

    def _run(self, feeds: Mapping[str, Any], outputs: Iterable[str] | None, run_options: ort.RunOptions | None = None) -> dict[str, np.ndarray]:
        m = self._model
        stats = self.stats
        plain: dict[str, np.ndarray] = {}
        overrides: dict[str, np.ndarray] = {}
        for name, value in feeds.items():
            spec = m.inputs.get(name)
            if spec is None:
                raise FeedError(f"{m.label}: the model has no input {name!r}; inputs are {list(m.inputs)}")
            arr = np.asarray(value)
            if spec.dtype is not None and arr.dtype != spec.dtype:
                arr = arr.astype(spec.dtype)
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)  # (only when needed: it turns a 0-d array into shape (1,))
            (overrides if name in m.slot_by_input else plain)[name] = arr
        missing = [n for n in m.required_inputs if n not in plain]
        if missing:
            raise FeedError(f"{m.label}: missing input(s) {missing} (state inputs {sorted(m.slot_by_input)} may be omitted)")
        if outputs is None:
            wanted, plain_out = m.output_names, m.plain_outputs
        else:
            wanted = list(outputs)
            unknown = [n for n in wanted if n not in m.output_specs]
            if unknown:
                raise FeedError(f"{m.label}: the model has no output(s) {unknown}; outputs are {m.output_names}")
            plain_out = [n for n in wanted if n not in m.state_outputs]

        b = self._binding
        moved = self._pending_bytes
        self._pending_bytes = 0
        fed = tuple(plain)
        if fed != self._bound_inputs:
            b.clear_inputs()  # an input fed last call and omitted now must not keep its old array
            self._bound_inputs = fed
        for name, arr in plain.items():
            b.bind_array(name, arr)
        self._fed = dict(plain)
        shapes = tuple(arr.shape for arr in plain.values())
        shapes_changed = shapes != self._last_shapes

        # get_outputs() returns values in binding order: state outputs (slot order), then the plain outputs
        writers = self._writers
        order = m.state_output_order + tuple(plain_out)
        if order != self._bound_outputs:
            b.clear_outputs()
            self._bound_outputs = order
        into_spare: list[bool] = []
        in_shapes: list[tuple[int, ...]] = []
        for slot in self._slots:
            override = overrides.get(slot.spec.input)
            if override is not None:
                b.bind_array(slot.spec.input, override)
                self._fed[slot.spec.input] = override
                moved += override.nbytes
                in_shape = override.shape
            else:
                if slot.current is None:
                    moved += self._materialise(slot, plain)
                b.bind_value(slot.spec.input, slot.current)
                in_shape = tuple(slot.current.shape())  # materialised above
            if slot.spec.output is None:
                continue
            in_shapes.append(in_shape)
            double = slot.mode == "double" and not shapes_changed and in_shape == slot.shape()
            if double:
                if slot.spare is None:
                    slot.spare = b.empty(in_shape, slot.spec.dtype)
                    stats.slot_allocations += 1
                b.bind_output_into(slot.spec.output, slot.spare)
            else:
                b.bind_output(slot.spec.output)  # onnxruntime allocates: a probe, or a hand-off slot
            into_spare.append(double)
        for name in plain_out:
            b.bind_output(name)  # renewed every call: never a buffer a caller still holds

        try:
            b.run(run_options)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            self._after_failure(exc)
            raise
        self._guessed = {}
        values = b.outputs()

        casts = [not double and value.numpy().dtype != slot.spec.dtype for slot, value, double in zip(writers, values, into_spare)]
        if any(casts) and not self.cast_state:
            detail = "; ".join(
                f"state output {s.spec.output!r} is {v.numpy().dtype} but state input {s.spec.input!r} takes {s.spec.dtype}"
                for s, v, c in zip(writers, values, casts)
                if c
            )
            raise StateError(
                f"{self.label}: {detail}: feeding it back needs a conversion the model does not make (SD005); "
                "pass cast_state=True to convert it through numpy every call"
            )
        result: dict[str, np.ndarray] = {}
        copied = 0
        probed = False
        for slot, value, double, in_shape, cast in zip(writers, values, into_spare, in_shapes, casts):
            if double:
                slot.current, slot.spare = slot.spare, slot.current
            elif cast:
                probed = True
                converted = value.numpy().astype(slot.spec.dtype)
                slot.current, slot.spare, slot.mode = self._binding.upload(converted), None, "cast"
                moved += converted.nbytes
            else:
                probed = True
                self._adopt(slot, value, in_shape)
            out = slot.spec.output
            if out in wanted:
                view = (value if cast else slot.current).numpy()  # the caller sees what the model returned
                if self.alias_outputs:
                    result[out] = view
                else:
                    result[out] = view.copy()
                    copied += view.nbytes
        for name, value in zip(plain_out, values[len(writers) :]):
            result[name] = value.numpy()
        self._last_shapes = shapes
        stats.calls += 1
        stats.python_state_bytes = moved
        stats.total_python_state_bytes += moved
        stats.output_copy_bytes = copied
        stats.probe_calls += probed
        return {n: result[n] for n in wanted}

    def _after_failure(self, exc: Exception) -> None:
        """A failed call leaves every slot as it was; guessed initial shapes are dropped with a clear error."""
        if not self._guessed:
            return
        guesses = "; ".join(f"{k}: {v}" for k, v in self._guessed.items())
        for slot in self._slots:
            if slot.spec.input in self._guessed:
                slot.current = slot.spare = None
                slot.mode = "probe"
        self._guessed = {}
        raise StateError(
            f"{self.label}: the first call failed with state shapes rnnir had to guess ({guesses}); "
            f"pass state_shapes={{...}} to StatefulSession.  onnxruntime said: {exc}"
        ) from exc

    def _adopt(self, slot: _Slot, value: Any, in_shape: tuple[int, ...]) -> None:
        """onnxruntime allocated the slot's new state: keep it, and choose double buffering or hand-off.

        A state whose shape equals the call's state input becomes a double buffer (the old value's buffer
        is the spare); a state whose size changed is handed off from call to call for good.
        """
        self.stats.slot_allocations += 1
        old = slot.current
        slot.current = value
        if slot.mode not in ("handoff", "cast") and tuple(value.shape()) == tuple(in_shape):
            slot.mode = "double"
            reusable = old is not None and tuple(old.shape()) == tuple(in_shape)
            slot.spare = old if reusable else None
        else:
            slot.mode = "handoff"
            slot.spare = None

    # -- initial values ----------------------------------------------------------------------
    def _materialise(self, slot: _Slot, plain: Mapping[str, np.ndarray]) -> int:
        """Give ``slot`` its initial value (shapes resolved from this call's feeds); returns the bytes uploaded."""
        value, guess = self._initial_value(slot.spec, plain)
        if guess:
            self._guessed[slot.spec.input] = guess
        slot.current = self._binding.upload(value)
        slot.spare = None
        slot.mode = "probe"
        return int(value.nbytes)

    def initial_state(self, feeds: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """What every slot starts from (after construction or :meth:`reset`), with symbolic dims resolved
        from ``feeds`` as the first call would resolve them."""
        plain = {k: np.asarray(v) for k, v in (feeds or {}).items() if k in self._model.inputs and k not in self._model.slot_by_input}
        return {s.input: self._initial_value(s, plain)[0] for s in self._model.slots}

    def _initial_value(self, spec: SlotSpec, plain: Mapping[str, np.ndarray]) -> tuple[np.ndarray, str]:
        if spec.init.kind == "caller":
            raise StateError(f"{self.label}: state input {spec.input!r} has no initial value; pass it in the first call's feeds")
        shape, guess = self._resolve_shape(spec, plain)
        self._check_slot_size(spec, shape)
        if spec.init.kind == "constant" and spec.init.value is not None:
            value = np.array(np.broadcast_to(np.asarray(spec.init.value, dtype=spec.dtype), shape))
        else:
            value = np.zeros(shape, dtype=spec.dtype)
        return value, guess

    def _state_file_limit(self, exact: bool = True) -> int:
        """The most a state file of this model may expand to: each slot's exact size when its shape is fixed
        (``exact``: the file must come from this state layout), else the per-slot bound; plus the input
        context, if any, and room for the metadata."""
        total = _STATE_META_BYTES
        for spec in self._model.slots:
            dims = spec.shape
            if exact and dims is not None and all(isinstance(d, int) and d > 0 for d in dims):
                size = spec.dtype.itemsize
                for d in dims:
                    size *= int(d)  # type: ignore[arg-type]  # all ints: checked just above
                total += min(size, self._model.max_slot_bytes)
            else:
                total += self._model.max_slot_bytes * (1 if exact else 2)  # a migration may read an older, larger layout
        if self._context is not None:
            total += self._model.max_slot_bytes
        return total

    def _check_slot_size(self, spec: SlotSpec, shape: Sequence[int], what: str = "") -> None:
        """Refuse a slot over ``max_slot_bytes`` before allocating it (Python ints: no overflow)."""
        size = spec.dtype.itemsize
        for d in shape:
            size *= int(d)
        limit = self._model.max_slot_bytes
        if size > limit:
            raise StateError(
                f"{what or self.label}: state input {spec.input!r} of shape {_shape_text(tuple(shape))} would take {size:,} bytes, "
                f"over the {limit:,}-byte limit per slot; raise it with StatefulSession(max_slot_bytes=...) "
                "or `rnnir run --max-slot-mb` if the model really keeps that much state"
            )

    def _resolve_shape(self, spec: SlotSpec, plain: Mapping[str, np.ndarray]) -> tuple[tuple[int, ...], str]:
        """The slot's shape and, when a dim had to be guessed from the batch, how."""
        if spec.input in self._state_shapes:
            return self._state_shapes[spec.input], ""
        if spec.init.kind == "constant" and spec.init.value is not None and spec.shape is None:
            return tuple(np.shape(spec.init.value)), ""
        if spec.shape is None:
            raise StateError(
                f"{self.label}: state input {spec.input!r} declares no shape; pass state_shapes={{{spec.input!r}: (...)}}"
            )
        m = self._model
        symbols: dict[str, int] = {}
        for name, arr in plain.items():
            declared = m.inputs[name].shape
            if declared is None or len(declared) != arr.ndim:
                continue
            for d, size in zip(declared, arr.shape):
                if isinstance(d, str):
                    symbols.setdefault(d, int(size))
        dims: list[int] = []
        guessed: list[str] = []
        batch: tuple[int, str] | None = None
        for axis, d in enumerate(spec.shape):
            if isinstance(d, int) and d > 0:
                dims.append(d)
                continue
            if isinstance(d, str) and d in symbols:
                dims.append(symbols[d])
                continue
            if batch is None:
                batch = self._batch_size(plain)
            if batch is None:
                raise StateError(
                    f"{self.label}: cannot tell dim {axis} ({d or '?'}) of state input {spec.input!r} "
                    f"(declared {_shape_text(spec.shape)}) from the feeds; pass state_shapes={{{spec.input!r}: (...)}}"
                )
            dims.append(batch[0])
            guessed.append(f"dim {axis} = {batch[0]} ({batch[1]})")
        return tuple(dims), ", ".join(guessed)

    def _batch_size(self, plain: Mapping[str, np.ndarray]) -> tuple[int, str] | None:
        m = self._model
        for ri in m.recurrent_inputs:
            arr = plain.get(ri.input)
            if arr is not None and arr.ndim > ri.batch_axis:
                return int(arr.shape[ri.batch_axis]), f"batch axis of {ri.input!r}, which feeds {ri.node!r}"
        for name in m.plain_inputs:
            arr = plain.get(name)
            declared = m.inputs[name].shape
            if arr is None or arr.ndim == 0 or not declared or isinstance(declared[0], int) and declared[0] > 0:
                continue
            return int(arr.shape[0]), f"leading dim of {name!r}"
        return None

    # -- state management --------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the initial state (uploaded again at the next call; symbolic dims resolved again)."""
        if not self._lock.acquire(blocking=False):
            raise SessionBusyError(self._busy_message("reset"))
        try:
            self._steady = None
            for slot in self._slots:
                slot.current = slot.spare = None
                slot.mode = "probe"
            if self._context is not None:
                self._context.clear()
        finally:
            self._lock.release()

    @property
    def state(self) -> dict[str, np.ndarray]:
        """A read-only snapshot of every slot (state input name -> array), copied out of the slots.

        Assigning sets the state explicitly: ``s.state = {"state": arr}`` replaces the named slots (the
        others keep theirs) from the next call on; ``s.state = s2.state`` copies another instance's state.
        """
        with self._lock:
            return self._snapshot()

    @state.setter
    def state(self, values: Mapping[str, Any]) -> None:
        m = self._model
        if not isinstance(values, Mapping):
            raise StateError(f"{self.label}: state is set from a dict of state input name -> array, not {type(values).__name__}")
        unknown = [n for n in values if n not in m.slot_by_input]
        if unknown:
            raise StateError(f"{self.label}: {unknown} are not state inputs; the state inputs are {sorted(m.slot_by_input)}")
        arrays: dict[str, np.ndarray] = {}
        for name, value in values.items():
            spec = m.slot_by_input[name]
            arr = np.asarray(value)
            if arr.dtype != spec.dtype:
                if not np.can_cast(arr.dtype, spec.dtype, casting="same_kind"):
                    raise StateError(f"{self.label}: state {name!r} takes {spec.dtype}, got {arr.dtype}")
                arr = arr.astype(spec.dtype)
            declared = spec.shape
            if declared is not None and (
                len(declared) != arr.ndim or any(isinstance(d, int) and d > 0 and d != n for d, n in zip(declared, arr.shape))
            ):
                raise StateError(f"{self.label}: state {name!r} is declared {_shape_text(declared)}, got shape {list(arr.shape)}")
            arrays[name] = arr
        if not self._lock.acquire(blocking=False):
            raise SessionBusyError(self._busy_message("setting state of"))
        try:
            self._steady = None
            for slot in self._slots:
                given = arrays.get(slot.spec.input)
                if given is None:
                    continue
                slot.current = self._binding.upload(given)
                slot.spare = None
                slot.mode = "probe"
                self._pending_bytes += int(given.nbytes)
        finally:
            self._lock.release()

    def _snapshot(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for slot in self._slots:
            if slot.current is None:
                self._pending_bytes += self._materialise(slot, {})
            arr = slot.current.numpy().copy()
            arr.flags.writeable = False
            out[slot.spec.input] = arr
        return out

    def fork(self, reset: bool = False, *, alias_outputs: bool | None = None) -> StatefulSession:
        """An independent instance: its own slots (a copy of this one's state, or the initial state with
        ``reset=True``), the same onnxruntime session and weights, no shared storage.  ``alias_outputs``
        defaults to this instance's setting."""
        alias = self.alias_outputs if alias_outputs is None else alias_outputs
        with self._lock:
            twin = object.__new__(StatefulSession)
            twin._setup(self._model, alias, self._state_shapes, self._binding.kind == "native", self.cast_state, self.context)
            if not reset:
                if self._context is not None and twin._context is not None:
                    twin._context = self._context.copy()
                for mine, theirs in zip(self._slots, twin._slots):
                    if mine.current is None:
                        continue
                    arr = mine.current.numpy()
                    theirs.current = twin._binding.upload(arr)
                    twin._pending_bytes += int(arr.nbytes)
            return twin

    def save_state(self, path: str | os.PathLike[str]) -> Path:
        """Write every slot to ``path`` (an .npz file, whatever its name), bound to the model's fingerprint.

        The write is atomic: a temporary file in the same folder, flushed to disk, then renamed over
        ``path``; if anything fails (a full disk) the previous file at ``path`` is left as it was and
        :class:`~rnnir.StateError` says why.
        """
        with self._lock:
            snap = self._snapshot()
            context = self.context_state
        meta = {
            "format": _STATE_FORMAT,
            "fingerprint": self.fingerprint,
            "state_version": self.state_version,
            "model": self.label,
            "slots": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in snap.items()},
        }
        target = Path(path)
        # Any: numpy's stub types **kwds like allow_pickle
        entries: dict[str, Any] = {f"slot:{k}": v for k, v in snap.items()} | {f"context:{k}": v for k, v in context.items()}
        _write_atomically(target, lambda f: np.savez(f, __rnnir_state__=np.array(json.dumps(meta)), **entries))
        return target

    def load_state(
        self,
        path: str | os.PathLike[str],
        *,
        on_version_mismatch: VersionPolicy | str = VersionPolicy.REFUSE,
        migrations: StateMigrations | None = None,
    ) -> VersionOutcome:
        """Replace every slot with the state saved by :meth:`save_state` from the same model, or from a model
        declaring the same state version; otherwise ``on_version_mismatch`` decides (refuse, reset, or migrate
        with ``migrations``; see :mod:`rnnir.versioning`).  Returns how the state was accepted."""
        target = Path(path)
        policy = VersionPolicy(on_version_mismatch)
        meta, entries = _read_state_file(target, self._state_file_limit(exact=policy is VersionPolicy.REFUSE and migrations is None))
        arrays = {k[len("slot:") :]: v for k, v in entries.items() if k.startswith("slot:")}
        contexts = {k[len("context:") :]: v for k, v in entries.items() if k.startswith("context:")}
        if meta.get("format") != _STATE_FORMAT:
            raise StateError(f"{target}: unknown state format {meta.get('format')!r} (expected {_STATE_FORMAT})")
        saved = StateOrigin(str(meta.get("fingerprint")), meta.get("state_version"), str(meta.get("model")))
        mine = StateOrigin(self.fingerprint, self.state_version, self.label)
        outcome, migrated = reconcile(saved, mine, arrays, policy, migrations, where=str(target))
        if migrated is None:  # VersionPolicy.RESET
            self.reset()
            return outcome
        arrays = migrated
        expected = set(self._model.slot_by_input)
        if set(arrays) != expected:
            raise StateError(f"{target}: saved slots {sorted(arrays)} do not match the model's state inputs {sorted(expected)}")
        for name, arr in arrays.items():
            spec = self._model.slot_by_input[name]
            if arr.dtype != spec.dtype:
                raise StateError(f"{target}: slot {name!r} was saved as {arr.dtype}, the model's state input is {spec.dtype}")
            _check_saved_shape(target, spec, arr.shape)
            self._check_slot_size(spec, arr.shape, str(target))
        if not self._lock.acquire(blocking=False):
            raise SessionBusyError(self._busy_message("load_state"))
        try:
            self._steady = None
            for slot in self._slots:
                arr = arrays[slot.spec.input]
                slot.current = self._binding.upload(arr)
                slot.spare = None
                slot.mode = "probe"
                self._pending_bytes += int(arr.nbytes)
            if self._context is not None:
                self._context.clear()
                self._context.commit({k: v for k, v in contexts.items() if any(c.input == k for c in self._context.specs)})
        finally:
            self._lock.release()
        return outcome

    def __repr__(self) -> str:
        pairs = ", ".join(f"{s.input}->{s.output}" for s in self._model.slots) or "no state"
        return f"<StatefulSession {self.label!r}: {pairs}; {self.stats.calls} calls>"


class _Steady:
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
    sources: tuple[tuple[_Slot | None, np.ndarray | None, int], ...]
    plain_only: bool
    single: tuple[str, np.ndarray] | None  # the one plain output, buffered, when that is all the call returns
    plain_values: tuple[Any, ...]  # the onnxruntime values over the plain outputs' buffers
    fresh: tuple[str, ...]  # the large plain outputs, bound to a new allocation every call
    bindings: list[_PublicBinding]
    binders: list[Callable[[str, np.ndarray], object]]
    output_binders: list[Callable[[str], object]]
    getters: list[Callable[[], Any]]
    runs: list[Callable[[], object]]
    k: int

    @classmethod
    def enter(
        cls, s: StatefulSession, feeds: Mapping[str, Any], named: tuple[str, ...] | None, as_list: bool, last: Mapping[str, Any]
    ) -> _Steady | None:
        m = s._model
        if type(feeds) is not dict or s._pending_bytes or any(n in m.slot_by_input for n in feeds):
            return None
        if any(slot.mode != "double" or slot.spare is None for slot in s._writers):
            return None
        if s._pair is None:
            s._pair = [_binding(s._ort, s._binding.kind == "native") for _ in range(2)]
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
        sources: list[tuple[_Slot | None, np.ndarray | None, int]] = []
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


def _write_atomically(target: Path, write: Any) -> None:
    """``write(file)`` into a temporary file beside ``target``, fsync it, rename it over ``target``."""
    folder = target.parent
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise StateError(f"{target}: cannot write state: {exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:  # a file object: np.savez would otherwise append ".npz"
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StateError(f"{target}: cannot write state ({exc.strerror or exc}); the previous file, if any, is unchanged") from None
        raise
    try:  # make the rename itself durable; not every platform can open a folder
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _read_state_file(target: Path, limit: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The metadata and the entries (``slot:NAME``, ``context:NAME``) of a state file; every way the file can be
    bad is a StateError.

    Only a regular file is opened (a FIFO would block); the archive's declared sizes are summed
    before anything is decompressed, so a small file that expands to gigabytes is refused.
    """
    try:
        st = os.stat(target)
    except OSError as exc:
        raise StateError(f"{target}: cannot read saved state: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StateError(f"{target}: not a regular file; a saved state is a file written by save_state")
    if st.st_size == 0:
        raise StateError(f"{target}: the file is empty, not a saved state")
    try:
        with open(target, "rb") as fh, zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            if "__rnnir_state__.npy" not in names:
                raise StateError(f"{target}: not an rnnir state file (no __rnnir_state__ entry)")
            expanded = sum(i.file_size for i in infos)
            if expanded > limit:
                raise StateError(f"{target}: the archive expands to {expanded:,} bytes, more than this model's slots may hold ({limit:,})")
            entries: dict[str, np.ndarray] = {}
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise StateError(f"{target}: unexpected entry {info.filename!r}; not a file written by save_state")
                with zf.open(info) as member:
                    entries[info.filename[: -len(".npy")]] = np.lib.format.read_array(member, allow_pickle=False)
    except StateError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError) as exc:
        raise StateError(f"{target}: cannot read saved state (truncated, or not a state file): {exc}") from None
    raw = entries.pop("__rnnir_state__")
    try:
        meta = json.loads(str(raw[()])) if raw.shape == () else None
    except (ValueError, TypeError):
        meta = None
    if not isinstance(meta, dict):
        raise StateError(f"{target}: the state file's metadata is not what save_state writes")
    return meta, entries


def _check_saved_shape(target: Path, spec: SlotSpec, shape: tuple[int, ...]) -> None:
    """A saved slot has the declared rank and every fixed dim; symbolic dims may take any size."""
    declared = spec.shape
    if declared is None:
        return
    fixed_ok = all(not (isinstance(d, int) and d > 0) or d == n for d, n in zip(declared, shape))
    if len(declared) != len(shape) or not fixed_ok:
        raise StateError(f"{target}: slot {spec.input!r} was saved with shape {_shape_text(shape)}, the model declares {_shape_text(declared)}")


def _shape_text(shape: Sequence[int | str | None] | None) -> str:
    if shape is None:
        return "[*]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
