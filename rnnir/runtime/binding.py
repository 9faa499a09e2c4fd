"""What a :class:`~rnnir.runtime.StatefulSession` keeps in onnxruntime values, and the prepared steady call.

A slot's two buffers (:class:`SlotBuffers`), the two bindings pre-bound with those buffers swapped
(:class:`PingPong`, which the session pool's whole-tick call uses too), and :class:`SteadyCall`, the plan a
session builds once it is in steady state, so a call does only what cannot be done ahead.  The bindings
themselves, over onnxruntime's documented or pybind layer, are :mod:`rnnir.runtime.ort`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rnnir.runtime.ort import PublicBinding

if TYPE_CHECKING:
    from rnnir.runtime.spec import SessionModel, SlotSpec

__all__ = ["COPY_FEED_BYTES", "PingPong", "SessionStats", "SlotBuffers", "SteadyCall", "SteadyInputs"]

# On the pre-bound path a feed up to this size is copied into a buffer bound once, instead of bound every
# call: binding an array costs onnxruntime a name lookup and a new tensor, about 1.1 us of CPU whatever the
# size, where copying 256 B - 8 KiB takes 0.2-0.4 us (and 16 KiB already 6 us; measured on the shared EPYC)
COPY_FEED_BYTES = 8 * 2**10
# A plain output up to this size is written into a buffer bound once and copied out; a larger one is bound to
# a new allocation every call and handed over as it is (rebinding and reading it back costs about 2 us)
_COPY_OUTPUT_BYTES = 8 * 2**10
_NDARRAY = np.ndarray


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


class PingPong:
    """Two bindings of one onnxruntime session pre-bound as a double buffer: binding k reads each state's
    buffer k and writes its buffer 1-k, so a run writes the new state into the buffer the previous run read,
    and no state passes through Python.  The session's steady call (:class:`SteadyCall`, one stream's slots)
    and the pool's whole tick (every stream's rows in one buffer per state) are both made of one.

    ``states``: (input, output or None for a state that is only read, value binding 0 reads, value binding 1
    reads); ``inputs``: values bound once (feeds copied into a buffer before every run); ``outputs``: values
    the outputs are written into, or None for an output onnxruntime allocates (bind it again with
    ``output_binders[k]`` before every run, since a caller may hold the last one).  The bindings' outputs, in
    binding order, are the written states' then ``outputs``.  ``raw``: feeds are bound with the cheapest
    binder (no overridable initializer among them).
    """

    __slots__ = ("bindings", "binders", "output_binders", "getters", "runs", "k")
    bindings: list[PublicBinding]
    binders: list[Callable[[str, np.ndarray], object]]
    output_binders: list[Callable[[str], object]]
    getters: list[Callable[[], Any]]
    runs: list[Callable[[], object]]
    k: int

    def __init__(
        self,
        bindings: Sequence[PublicBinding],
        states: Sequence[tuple[str, str | None, Any, Any]],
        inputs: Sequence[tuple[str, Any]] = (),
        outputs: Sequence[tuple[str, Any | None]] = (),
        raw: bool = True,
    ) -> None:
        assert len(bindings) == 2
        for k, b in enumerate(bindings):
            b.clear_inputs()
            b.clear_outputs()
            for state_in, _, first, second in states:
                b.bind_value(state_in, first if k == 0 else second)
            for _, state_out, first, second in states:
                if state_out is not None:
                    b.bind_output_into(state_out, second if k == 0 else first)
            for name, value in outputs:
                if value is None:
                    b.bind_output(name)  # its place among the outputs; bound again before every run
                else:
                    b.bind_output_into(name, value)
            for name, value in inputs:
                b.bind_value(name, value)
        self.bindings = list(bindings)
        self.binders = [b.raw_binder() if raw else b.bind_array for b in bindings]
        self.output_binders = [b.bind_output for b in bindings]
        self.getters = [b.output_values for b in bindings]
        self.runs = [b.runner() for b in bindings]
        self.k = 0

    def run(self) -> int:
        """Run binding k, then make the other one next; returns the k that ran.  A failing run raises what
        onnxruntime raised and leaves k: the new state went to the buffers the next run writes anyway."""
        k = self.k
        self.runs[k]()
        self.k = k ^ 1
        return k


@dataclass(frozen=True)
class SteadyInputs:
    """What a session hands :meth:`SteadyCall.enter`: its model, its slots (the written ones apart), the two
    bindings the plan pre-binds (the session keeps them for its next plans), whether a call may skip the
    session's general path (no input context to extend) and the stats the plan updates."""

    model: SessionModel
    slots: Sequence[SlotBuffers]
    writers: Sequence[SlotBuffers]
    pair: Sequence[PublicBinding]
    direct: bool
    stats: SessionStats



class SteadyCall:
    """The steady state of one instance: every written slot double-buffered, the same feed names, dtypes
    and shapes, and the same requested outputs as the last call.

    Built once when a call succeeds in that state, so the next calls do only what cannot be done ahead:
    a :class:`PingPong` over the slot buffers, with a buffer per small feed and per small plain output; a
    call checks its feeds (names, type, dtype, shape), copies or binds them, runs, swaps each slot's buffers
    and copies the small plain outputs out (a large one is a fresh onnxruntime allocation every call, handed
    over without a copy).  State outputs are handed over only when asked for.  Anything else (new names,
    shapes or dtypes, an explicit state, a probe, run options, a failing run) returns None and takes the
    general path, which rebuilds this plan.
    """

    __slots__ = (
        "named", "as_list", "direct", "count", "feed_specs", "feed_values", "wanted", "sources", "plain_only",
        "single", "plain_values", "fresh", "pingpong", "writers", "stats",
    )
    named: tuple[str, ...] | None  # the request this plan answers: None for run()'s default
    as_list: bool
    direct: bool  # run() may call it without going through the session's general path (no input context to extend)
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
    pingpong: PingPong
    writers: tuple[SlotBuffers, ...]
    stats: SessionStats

    @classmethod
    def enter(
        cls, s: SteadyInputs, feeds: Mapping[str, Any], named: tuple[str, ...] | None, as_list: bool, last: Mapping[str, Any]
    ) -> SteadyCall | None:
        """The plan for calls like the one that just returned ``last``, or None when that call was not in
        steady state (the caller has already refused a call with state bytes pending)."""
        m = s.model
        if type(feeds) is not dict or any(n in m.slot_by_input for n in feeds):
            return None
        if any(slot.mode != "double" or slot.spare is None for slot in s.writers):
            return None
        first = s.pair[0]
        specs: list[tuple[str, np.dtype[Any], tuple[int, ...], np.ndarray | None]] = []
        fed: list[tuple[str, Any]] = []  # feeds bound once, over a buffer each call copies into
        for name, a in feeds.items():
            declared = m.inputs[name].dtype
            if type(a) is not np.ndarray or (declared is not None and a.dtype != declared):
                return None  # converted by the general path every call: no plan
            small = a.dtype.kind in "biuf" and a.nbytes <= COPY_FEED_BYTES and name not in first.overridable
            buf = np.empty(a.shape, a.dtype) if small else None
            if buf is not None:
                fed.append((name, first.wrap(buf)))
            specs.append((name, a.dtype, a.shape, buf))
        wanted = tuple(m.plain_outputs if named is None else named)
        if len(set(wanted)) != len(wanted):
            return None  # an output named twice: one binding cannot write it twice
        slot_of = {slot.spec.output: slot for slot in s.writers}
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
                sources.append((None, None, len(s.writers) + len(plain) - 1))
        self = cls()
        self.named, self.as_list, self.direct = named, as_list, s.direct
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
        # binding k reads buffer k: the slot's current value for k = 0 (a slot only read: always current)
        states = [(slot.spec.input, slot.spec.output, slot.current, slot.current if slot.spec.output is None else slot.spare) for slot in s.slots]
        overridable = any(name in first.overridable for name in feeds)
        self.pingpong = PingPong(s.pair, states, fed, [(name, value) for name, _, value in plain], raw=not overridable)
        self.writers = tuple(s.writers)
        self.stats = s.stats
        return self

    def call(self, feeds: dict[str, Any], alias: bool) -> dict[str, np.ndarray] | list[np.ndarray] | None:
        """The call on the fast path (the caller holds the instance's lock), or None, the slots untouched,
        when it does not apply.  ``alias``: state outputs handed over as views of the slot (``alias_outputs``)."""
        if len(feeds) != self.count:
            return None
        pp = self.pingpong
        k = pp.k
        bind = pp.binders[k]
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
            pp.output_binders[k](name)
        try:
            pp.run()
        except Exception:  # noqa: BLE001 - the general path reruns the call and reports the failure properly
            return None  # the state outputs went to the spare buffers: the slots still hold the last state
        for slot in self.writers:
            slot.current, slot.spare = slot.spare, slot.current
        stats = self.stats
        stats.calls += 1
        stats.python_state_bytes = 0
        single = self.single
        if single is not None:  # the default call of a model with one (small) plain output
            stats.output_copy_bytes = 0
            value = single[1].copy()  # the buffer is written again by the next call
            return [value] if self.as_list else {single[0]: value}
        produced: Any = pp.getters[k]() if self.fresh else ()
        values = []
        copied = 0
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
