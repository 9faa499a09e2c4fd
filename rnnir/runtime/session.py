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
    v = StatefulSession("silero_vad.onnx", context={"input": 64})   # keeps input the model does not (rnnir.runtime.context)

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
call copies out (see ``SteadyCall``).

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

Where the parts live
--------------------
This module is the session a caller holds.  What every instance of a model shares (its inputs, outputs,
slots and onnxruntime session) is :mod:`rnnir.runtime.spec`; the two IOBinding layers (the only code that
touches onnxruntime's private API) are :mod:`rnnir.runtime.ort`; a slot's buffers, the ping-pong of two
bindings and the prepared steady call are :mod:`rnnir.runtime.binding`; the state file format is
:mod:`rnnir.runtime.statefile`, kept input context :mod:`rnnir.runtime.context`, state versions
:mod:`rnnir.runtime.versioning`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import onnxruntime as ort

from rnnir.errors import RnnirError, StateError
from rnnir.ir.core import Program
from rnnir.ir.pairs import StatePair
from rnnir.runtime.binding import SessionStats, SlotBuffers, SteadyCall, SteadyInputs
from rnnir.runtime.context import ContextKeeper, ContextSpec, InputContext, parse_context
from rnnir.runtime.feeds import FeedError, feed_array
from rnnir.runtime.initial import StateShapeError, check_slot_size, initial_value, state_file_limit
from rnnir.runtime.ort import PublicBinding, make_binding
from rnnir.runtime.spec import DEFAULT_MAX_SLOT_BYTES, IOSpec, RecurrentInput, SessionModel, SlotSpec
from rnnir.runtime.statefile import STATE_FORMAT, check_saved_shape, read_state_file, shape_text, write_atomically
from rnnir.runtime.versioning import StateMigrations, StateOrigin, VersionOutcome, VersionPolicy, reconcile

__all__ = [
    "DEFAULT_MAX_SLOT_BYTES",
    "FeedError",
    "OnnxRuntimeError",
    "IOSpec",
    "RecurrentInput",
    "SessionBusyError",
    "SessionStats",
    "StateShapeError",
    "SlotSpec",
    "StatefulSession",
]

class SessionBusyError(StateError):
    """Another thread is using this StatefulSession right now (one instance is one stream; use fork())."""


class OnnxRuntimeError(RnnirError, RuntimeError):
    """onnxruntime refused or failed a call.  The message names the session and what was fed; ``__cause__`` is
    onnxruntime's own exception.  A RuntimeError too, as onnxruntime's IOBinding raises, so code written for an
    ``InferenceSession`` keeps catching it."""

    @classmethod
    def refusing(cls, label: str, fed: Mapping[str, np.ndarray], exc: BaseException) -> OnnxRuntimeError:
        """onnxruntime's refusal of a call of ``label``, in onnxruntime's words (on one line), after what was fed (the
        plain inputs: the state is the session's own)."""
        fed_text = ", ".join(f"{n} {a.dtype}{list(a.shape)}" for n, a in fed.items()) or "no inputs"
        said = " ".join(str(exc).split())
        return cls(f"{label}: onnxruntime refused the call ({fed_text}): {said}")


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
    A feed whose dtype is not its input's (a float64 array for a float input) is refused with
    :class:`FeedError`, as onnxruntime refuses it, unless ``cast_inputs=True``: then it is converted
    (:func:`feed_array`).  ``context={"input": 64}`` keeps the tail of an input and prepends it to the
    next call (:mod:`rnnir.runtime.context`).  ``session_options``, ``providers`` and
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
        cast_inputs: bool = False,
        **ort_kwargs: Any,
    ) -> None:
        shared = SessionModel(model, pairs, session_options, providers, ort_kwargs)
        shared.max_slot_bytes = int(max_slot_bytes)
        time_axes = {ri.input: ri.time_axis for ri in shared.recurrent_inputs}
        specs = parse_context(context, shared.inputs, time_axes, set(shared.slot_by_input), shared.label, shared.max_slot_bytes)
        self._setup(shared, alias_outputs, state_shapes, native_binding, cast_state, specs)
        self.cast_inputs = bool(cast_inputs)

    def _setup(
        self,
        shared: SessionModel,
        alias_outputs: bool,
        state_shapes: Mapping[str, Sequence[int]] | None,
        native: bool,
        cast_state: bool,
        context: tuple[InputContext, ...] = (),
    ) -> None:
        self._model = shared
        # input context kept outside the model (rnnir.runtime.context); None on the hot path when none is declared
        self._context = ContextKeeper(context, {c.input: shared.inputs[c.input].dtype for c in context}, shared.max_slot_bytes) if context else None
        self._ort = shared.ort
        self.alias_outputs = bool(alias_outputs)
        self.cast_state = bool(cast_state)
        self._state_shapes = {k: tuple(int(d) for d in v) for k, v in (state_shapes or {}).items()}
        unknown = set(self._state_shapes) - set(shared.slot_by_input)
        if unknown:
            raise StateError(f"{shared.label}: state_shapes names {sorted(unknown)}, which are not state inputs {sorted(shared.slot_by_input)}")
        self._slots = [SlotBuffers(s) for s in shared.slots]
        self._writers = [s for s in self._slots if s.spec.output is not None]
        self._binding = make_binding(self._ort, native)
        self._fed: dict[str, np.ndarray] = {}  # arrays bound as inputs, alive until the next call
        self._bound_outputs: tuple[str, ...] | None = None
        self._bound_inputs: tuple[str, ...] | None = None
        self._last_shapes: tuple[Any, ...] | None = None
        self._guessed: dict[str, str] = {}
        self._pending_bytes = 0
        self._lock = threading.Lock()
        self._steady: SteadyCall | None = None
        self._pair: list[PublicBinding] | None = None  # the two pre-bound bindings of the steady state
        self.stats = SessionStats()

    # -- what the model is -------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self._model.label

    @property
    def spec(self) -> SessionModel:
        """What every instance of this model shares (inputs, outputs, slots, the onnxruntime session)."""
        return self._model

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
            # the steady state's call (SteadyCall): the same feeds and outputs as the last call, nothing rebuilt
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
                    result = steady.call(feeds, self.alias_outputs) if self._steady is steady else None
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
                feeds, pending = context.extend(self._context_feeds(feeds), self.label)
            steady = self._steady
            result: dict[str, np.ndarray] | list[np.ndarray] | None = None
            if run_options is not None:  # the pre-bound fast path runs without options
                self._steady = None
            elif steady is not None and steady.named == named and steady.as_list == as_list and type(feeds) is dict:
                result = steady.call(feeds, self.alias_outputs)
            if result is None:
                self._steady = None
                wanted = self._model.plain_outputs if named is None else named
                by_name = self._run(feeds, wanted, run_options)
                if run_options is None and not self._pending_bytes:
                    self._steady = SteadyCall.enter(self._steady_inputs(), feeds, named, as_list, by_name)
                result = [by_name[n] for n in wanted] if as_list else by_name
            if context is not None and pending is not None:
                context.commit(pending)  # only once the call succeeded
            return result
        finally:
            self._lock.release()

    def _steady_inputs(self) -> SteadyInputs:
        """What a steady plan is made of; the plan's two bindings are made once and kept for the next plans."""
        if self._pair is None:
            self._pair = [make_binding(self._ort, self._binding.kind == "native") for _ in range(2)]
        return SteadyInputs(self._model, self._slots, self._writers, self._pair, self._context is None, self.stats)

    def _context_feeds(self, feeds: Mapping[str, Any]) -> Mapping[str, Any]:
        """The feeds of inputs with a kept context checked (or cast) before the context joins them, which would
        otherwise convert them on the way."""
        assert self._context is not None
        m = self._model
        names = [c.input for c in self._context.specs if c.input in feeds]
        return {**feeds, **{n: feed_array(m.label, m.inputs[n], feeds[n], self.cast_inputs) for n in names}}

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
            arr = feed_array(m.label, spec, value, self.cast_inputs)
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
            raise OnnxRuntimeError.refusing(self.label, plain, exc) from exc
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

    def _adopt(self, slot: SlotBuffers, value: Any, in_shape: tuple[int, ...]) -> None:
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
    def _materialise(self, slot: SlotBuffers, plain: Mapping[str, np.ndarray]) -> int:
        """Give ``slot`` its initial value (shapes resolved from this call's feeds); returns the bytes uploaded."""
        value, guess = self._initial_value(slot.spec, plain)
        if guess:
            self._guessed[slot.spec.input] = guess
        slot.current = self._binding.upload(value)
        slot.spare = None
        slot.mode = "probe"
        return int(value.nbytes)

    def initial_state(self, feeds: Mapping[str, Any] | None = None, *, batch: int | None = None) -> dict[str, np.ndarray]:
        """What every slot starts from (after construction or :meth:`reset`), with symbolic dims resolved
        from ``feeds`` as the first call would resolve them; ``batch`` is the batch size when the feeds do not
        tell it (a pool's stream is one row: ``batch=1``)."""
        plain = {k: np.asarray(v) for k, v in (feeds or {}).items() if k in self._model.inputs and k not in self._model.slot_by_input}
        return {s.input: self._initial_value(s, plain, batch)[0] for s in self._model.slots}

    def _initial_value(self, spec: SlotSpec, plain: Mapping[str, np.ndarray], batch: int | None = None) -> tuple[np.ndarray, str]:
        return initial_value(self._model, self._state_shapes, spec, plain, batch)

    def state_file_limit(self, exact: bool = True) -> int:
        """The most a state file of this model may expand to (:func:`rnnir.runtime.initial.state_file_limit`)."""
        return state_file_limit(self._model, exact, self._context is not None)

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
                raise StateError(f"{self.label}: state {name!r} is declared {shape_text(declared)}, got shape {list(arr.shape)}")
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
            twin.cast_inputs = self.cast_inputs
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
            "format": STATE_FORMAT,
            "fingerprint": self.fingerprint,
            "state_version": self.state_version,
            "model": self.label,
            "slots": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in snap.items()},
        }
        target = Path(path)
        # Any: numpy's stub types **kwds like allow_pickle
        entries: dict[str, Any] = {f"slot:{k}": v for k, v in snap.items()} | {f"context:{k}": v for k, v in context.items()}
        write_atomically(target, lambda f: np.savez(f, __rnnir_state__=np.array(json.dumps(meta)), **entries))
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
        with ``migrations``; see :mod:`rnnir.runtime.versioning`).  Returns how the state was accepted."""
        target = Path(path)
        policy = VersionPolicy(on_version_mismatch)
        meta, entries = read_state_file(target, self.state_file_limit(exact=policy is VersionPolicy.REFUSE and migrations is None))
        arrays = {k[len("slot:") :]: v for k, v in entries.items() if k.startswith("slot:")}
        contexts = {k[len("context:") :]: v for k, v in entries.items() if k.startswith("context:")}
        if meta.get("format") != STATE_FORMAT:
            raise StateError(f"{target}: unknown state format {meta.get('format')!r} (expected {STATE_FORMAT})")
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
            check_saved_shape(target, spec, arr.shape)
            check_slot_size(self._model, spec, arr.shape, str(target))
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

