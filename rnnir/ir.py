"""The rnnir IR: one inference call of one model, with its persistent state made explicit.

A :class:`Program` is a DAG of nodes held in a directed graph with networkx's interface
(:mod:`rnnir.digraph`; ``program.graph.to_networkx()`` gives a real ``networkx.DiGraph``).  Values are
SSA: each has one producer (or none, for values that come from outside the
analysed region) and knows its uses, so "does this store read the final state
directly?" is one lookup.

Node kinds (see docs/design.md):

- :class:`LoadSlot`  reads a :class:`Slot` at the start of the call (view or copy);
- :class:`Compute`   any other op, kept with its ONNX node; ``If`` keeps its branches as regions;
- :class:`Recurrent` an ONNX RNN/GRU/LSTM with every attribute;
- :class:`Store`     writes a value into a :class:`Slot` or an :class:`Output`, with an explicit result kind;
- :class:`Return`    the end of the call and the effects it waits for.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from . import digraph
from .errors import IRError
from .recurrence import KINDS, Recognition, RecurrenceKind

if TYPE_CHECKING:
    import numpy as np

    from .lower.source import ModelSource
    from .pairs import StatePair
else:
    from .lazymod import numpy as np

N = TypeVar("N", bound="Node")

__all__ = [
    "FrozenProgramError",
    "IRTuple",
    "ImmutableIRError",
    "TensorType",
    "QuantParams",
    "Provenance",
    "LoadKind",
    "StoreResult",
    "OrderingLayer",
    "SlotInit",
    "Slot",
    "Output",
    "Value",
    "Node",
    "LoadSlot",
    "Compute",
    "Region",
    "Recurrent",
    "Store",
    "Return",
    "Program",
]


@dataclass(frozen=True)
class QuantParams:
    """Quantization of a stored tensor (scale/zero point per tensor or per axis)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None


@dataclass(frozen=True)
class TensorType:
    """dtype (a numpy dtype name), shape (ints, symbolic names, or None for unknown dims)."""

    dtype: str | None = None
    shape: tuple[int | str | None, ...] | None = None
    layout: str | None = None
    quant: QuantParams | None = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def dim(self, axis: int) -> int | str | None:
        if self.shape is None or not -len(self.shape) <= axis < len(self.shape):
            return None
        return self.shape[axis]

    def __str__(self) -> str:
        dt = self.dtype or "?"
        if self.shape is None:
            return f"{dt}[*]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        q = f" q(scale={self.quant.scale})" if self.quant else ""
        lay = f" layout={self.layout}" if self.layout else ""
        return f"{dt}[{dims}]{lay}{q}"


@dataclass(frozen=True)
class Provenance:
    """Where an IR element came from: the ONNX node and value, and the path through If branches."""

    node: str | None = None
    value: str | None = None
    branch: tuple[str, ...] = ()

    @property
    def branch_path(self) -> str:
        return "/".join(self.branch)

    def __str__(self) -> str:
        parts = []
        if self.node:
            parts.append(f"node {self.node!r}")
        if self.value:
            parts.append(f"value {self.value!r}")
        if self.branch:
            parts.append(f"in {self.branch_path}")
        return ", ".join(parts)


class LoadKind(enum.Enum):
    """How a call reads a slot: in place (``VIEW``) or into a private copy (``COPY``)."""

    VIEW = "view"
    COPY = "copy"


class StoreResult(enum.Enum):
    """What a Store returns: an effect token, a view of the destination, or a true copy of the value."""

    TOKEN = "token"
    ALIAS = "alias"
    VALUE = "value"


class OrderingLayer(enum.Enum):
    """Who guarantees that a call's effects finish before the next call starts."""

    RUNTIME = "runtime"  # the runtime runs calls serially and completes every store first
    DEVICE = "device"  # a device event / stream sync issued by the compiled code
    CALLER = "caller"  # the caller must synchronise before starting the next call
    NONE = "none"  # nobody: the program does not order its effects

    def describe(self) -> str:
        return {
            OrderingLayer.RUNTIME: "the runtime's serial call sequencing",
            OrderingLayer.DEVICE: "a device event at the end of the call",
            OrderingLayer.CALLER: "the caller, who must synchronise before the next call",
            OrderingLayer.NONE: "nobody",
        }[self]


@dataclass(frozen=True)
class SlotInit:
    """A slot's value before the first call: ``zeros``, a ``constant`` or ``caller`` supplied."""

    kind: str = "zeros"
    value: np.ndarray | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("zeros", "constant", "caller"):
            raise IRError(f"slot init kind must be zeros, constant or caller, not {self.kind!r}")
        if self.kind == "constant" and self.value is None:
            raise IRError("a constant slot init needs a value")

    def __str__(self) -> str:
        if self.kind == "constant" and self.value is not None:
            flat = np.asarray(self.value).ravel()
            shown = ", ".join(f"{v:g}" for v in flat[:4]) + (", …" if flat.size > 4 else "")
            return f"constant[{shown}]"
        return self.kind


class FrozenProgramError(IRError):
    """Something tried to change a program while an analysis had it frozen (analyses never mutate the IR)."""


_EDIT_THROUGH = (
    "rnnir IR containers are immutable tuples, so that no edit escapes the program's version (which keys every "
    "cached analysis): edit through the Program (set_input, set_output, replace_all_uses_with, add, ...)"
)


class ImmutableIRError(IRError, TypeError):
    """An in-place write to an IR container (a TypeError, as for any tuple, that says what to call instead)."""


class IRTuple(tuple):  # type: ignore[type-arg]  # holds Values, use pairs, slots...: typed by the fields that hold it
    """The immutable container of the IR (operands, results, use lists, slots, outputs, state pairs).

    A plain tuple would refuse ``node.inputs[0] = v`` too; this one says why and what to call instead.
    """

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise ImmutableIRError(_EDIT_THROUGH)

    __setitem__ = __delitem__ = __iadd__ = _refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse


class _Owned:
    """Slots, outputs, nodes and values know the program they were added to: while that program is frozen (an
    analysis pass is running) writing one of their attributes raises :class:`FrozenProgramError`, and any other
    write bumps the program's version, so cached analyses never outlive an edit made behind the Program's back.
    Their containers are :class:`IRTuple` s: an in-place write raises instead of going unseen."""

    def __setattr__(self, name: str, value: Any) -> None:
        program: Program | None = self.__dict__.get("_program")
        if program is not None:
            if program.is_frozen:
                raise FrozenProgramError(f"{self!r}.{name} written while program {program.name!r} is frozen for analysis")
            program._changed()
        object.__setattr__(self, name, value)

    def _adopt(self, program: Program) -> None:
        object.__setattr__(self, "_program", program)


@dataclass(eq=False)
class Slot(_Owned):
    """Persistent storage that outlives a call.

    ``address`` is the storage identity: two slots never share storage unless
    ``alias_of`` says so (or an :class:`Output` is named there, which is a bug
    that AL002 reports).
    """

    name: str
    type: TensorType = field(default_factory=TensorType)
    init: SlotInit = field(default_factory=SlotInit)
    address: str = ""
    alias_of: Slot | Output | None = None
    provenance: Provenance = field(default_factory=Provenance)

    def __post_init__(self) -> None:
        if not self.address:
            self.address = f"slot:{self.name}"

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


@dataclass(eq=False)
class Output(_Owned):
    """A buffer handed to the caller at the end of the call."""

    name: str
    type: TensorType = field(default_factory=TensorType)

    def __repr__(self) -> str:
        return f"Output({self.name!r})"


@dataclass(eq=False)
class Value(_Owned):
    """An SSA value: produced by at most one node, used by any number.

    ``producer`` is None for a value defined outside the analysed region (a
    graph input that is not state, a weight, anything not on a state path);
    such values may carry a ``const`` array when they are constants.
    ``producer``, ``index`` and ``uses`` are kept by the program (:meth:`Program.add`,
    :meth:`Program.set_input`): once the value belongs to one they cannot be written.
    """

    name: str
    type: TensorType = field(default_factory=TensorType)
    producer: Node | None = None
    index: int = 0
    const: np.ndarray | None = field(default=None, repr=False)
    uses: Sequence[tuple[Node, int]] = field(default=(), repr=False)
    kind: str = "tensor"  # "tensor", or "token"/"alias"/"value" for store results

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _USE_DEF:
            if self.__dict__.get("_program") is not None:
                raise IRError(f"{self!r}.{name} is kept by program {self.__dict__['_program'].name!r}: {_EDIT_THROUGH}")
            if name == "uses":
                value = IRTuple(value)
        super().__setattr__(name, value)

    @property
    def users(self) -> list[Node]:
        seen: list[Node] = []
        for node, _ in self.uses:
            if node not in seen:
                seen.append(node)
        return seen

    @property
    def has_const(self) -> bool:
        """``const is not None``, without turning a pending constant into an array (see :class:`PendingConst`)."""
        return self.__dict__.get("_const") is not None

    def const_ints(self) -> tuple[tuple[int, ...], list[int]] | None:
        """The constant's shape and its values as a flat list of ints (None: no constant), without numpy where it can."""
        c = self.__dict__.get("_const")
        if c is None:
            return None
        if isinstance(c, PendingConst):
            ints = c.ints()
            if ints is not None:
                return c.dims, ints
        arr = np.asarray(self.const)
        return tuple(int(d) for d in arr.shape), [int(x) for x in arr.ravel()]

    def __repr__(self) -> str:
        return f"%{self.name}"


class PendingConst:
    """A constant's array, made on first read of :attr:`Value.const`.

    Lowering meets constants (indices, shapes, weights) on every state path, and most lints only ask whether
    a value is constant, or want a few integers: numpy, which the array needs, costs more to import than
    such a lint.  ``make`` must not fail (lowering checks the tensor first); ``ints`` gives the values of an
    integer constant without numpy (None when it cannot).
    """

    __slots__ = ("_ints", "_make", "dims")

    def __init__(self, dims: tuple[int, ...], make: Callable[[], np.ndarray], ints: Callable[[], list[int] | None]) -> None:
        self.dims = dims
        self._make = make
        self._ints = ints

    def array(self) -> np.ndarray:
        return self._make()

    def ints(self) -> list[int] | None:
        return self._ints()


def _get_const(self: Value) -> np.ndarray | None:
    c = self.__dict__.get("_const")
    if isinstance(c, PendingConst):
        c = c.array()
        self.__dict__["_const"] = c
    return cast("np.ndarray | None", c)


def _set_const(self: Value, value: np.ndarray | PendingConst | None) -> None:
    self.__dict__["_const"] = value


_USE_DEF = frozenset(("producer", "index", "uses"))
_OPERANDS = frozenset(("inputs", "outputs"))


def _keep(obj: object, name: str, value: object) -> None:
    """The program's own write of a use-def field (counted by the caller's ``_changed``)."""
    object.__setattr__(obj, name, value)


# ``const`` stays a dataclass field (``Value(const=...)``); its storage goes through this property, so a
# PendingConst becomes an array only when someone reads it.
Value.const = property(_get_const, _set_const)  # type: ignore[assignment]


@dataclass(eq=False)
class Node(_Owned):
    """Base of every IR node: a stable id, provenance, operands and results."""

    id: str = ""
    inputs: Sequence[Value | None] = ()
    outputs: Sequence[Value | None] = ()
    provenance: Provenance = field(default_factory=Provenance)

    opname = "node"

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OPERANDS:
            program = self.__dict__.get("_program")
            if program is not None:
                raise IRError(f"{self!r}.{name} is kept by program {program.name!r}: {_EDIT_THROUGH}")
            value = IRTuple(value)
        elif name == "id" and self.__dict__.get("_program") is not None:
            raise IRError(f"{self!r} is keyed by its id in program {self.__dict__['_program'].name!r}: its id cannot change")
        super().__setattr__(name, value)

    def operands(self) -> Iterator[Value]:
        return (v for v in self.inputs if v is not None)

    def results(self) -> Iterator[Value]:
        return (v for v in self.outputs if v is not None)

    def describe(self) -> str:
        """A short name for messages: the ONNX node name when there is one."""
        return self.provenance.node or self.id

    def _attrs_text(self) -> str:
        return ""

    def __str__(self) -> str:
        outs = ", ".join("_" if v is None else f"%{v.name}" for v in self.outputs)
        ins = ", ".join("_" if v is None else f"%{v.name}" for v in self.inputs)
        lhs = f"{outs} = " if outs else ""
        attrs = self._attrs_text()
        where = f"  # {self.provenance.branch_path}" if self.provenance.branch else ""
        return f"{lhs}{self.opname}{attrs}({ins}){where}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"


@dataclass(eq=False, repr=False)
class LoadSlot(Node):
    """The initial state of a call: reads ``slot`` in place (VIEW) or into a copy (COPY)."""

    slot: Slot | None = None
    kind: LoadKind = LoadKind.COPY
    opname = "load_slot"

    def _attrs_text(self) -> str:
        return f"<@{self.slot.name if self.slot else '?'}, {self.kind.value}>"


@dataclass(eq=False, frozen=True)
class Region:
    """A nested region of a Compute node (an If branch): its own nodes and the values it yields."""

    name: str
    path: tuple[str, ...]
    nodes: Sequence[Node] = ()
    yields: Sequence[Value | None] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", IRTuple(self.nodes))
        object.__setattr__(self, "yields", IRTuple(self.yields))


@dataclass(eq=False, repr=False)
class Compute(Node):
    """Any op that is not recurrent, kept with its ONNX node so it can be exported again.

    For ``If``, ``inputs`` are ``[cond, *then_yields, *else_yields]`` and
    ``regions`` holds both branches: output i is then_yields[i] or else_yields[i].
    """

    op: str = ""
    domain: str = ""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    regions: Mapping[str, Region] = field(default_factory=dict)
    onnx_node: Any = field(default=None, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("attributes", "regions"):
            value = MappingProxyType(dict(value))  # read-only: replacing the whole mapping is an owned write
        super().__setattr__(name, value)

    @property
    def opname(self) -> str:  # type: ignore[override]  # a class-level name on other nodes, computed from the op here
        return self.op if not self.domain else f"{self.domain}.{self.op}"

    def _attrs_text(self) -> str:
        shown = {k: v for k, v in self.attributes.items() if not isinstance(v, (bytes, np.ndarray))}
        if not shown:
            return ""
        return "<" + ", ".join(f"{k}={v!r}" for k, v in sorted(shown.items())) + ">"

    def branch_yields(self, region: str) -> Sequence[Value | None]:
        """The values branch ``region`` yields (If only)."""
        if self.op != "If":
            raise IRError(f"{self.id} is a {self.op}, not an If")
        n = len(self.outputs)
        start = 1 if region == "then_branch" else 1 + n
        return self.inputs[start : start + n]


@dataclass(eq=False, repr=False)
class Recurrent(Node):
    """A recurrence, first class, with every attribute: an ONNX RNN/GRU/LSTM, a registered contrib op, or a
    recurrence recognised in plain ops (a cell, an unrolled loop, a Loop body).

    ``kind`` names a :data:`rnnir.recurrence.KINDS` entry; ``inputs``/``outputs`` follow that kind's ports in
    ONNX order (X, W, R, B, sequence_lens, initial_h, initial_c, P, ...) with None for absent ones.
    ``recognition`` says how lowering found it and ``recognised_from`` the ONNX nodes it stands for.
    """

    kind: str = "LSTM"
    direction: str = "forward"
    hidden_size: int | None = None
    layout: int = 0
    activations: tuple[str, ...] | None = None
    activation_alpha: tuple[float, ...] | None = None
    activation_beta: tuple[float, ...] | None = None
    clip: float | None = None
    linear_before_reset: int = 0
    input_forget: int = 0
    onnx_node: Any = field(default=None, repr=False)
    recognition: Recognition = Recognition.OP
    recognised_from: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise IRError(f"unknown recurrence kind {self.kind!r}; known: {', '.join(KINDS)}")

    @property
    def spec(self) -> RecurrenceKind:
        """The kind's registry entry: ports, states, op type and domain."""
        return KINDS[self.kind]

    @property
    def semantics(self) -> str:
        """The ONNX operator whose equations this computes (LSTM for DynamicQuantizeLSTM)."""
        return self.spec.semantics

    @property
    def opname(self) -> str:  # type: ignore[override]  # a class-level name on other nodes, computed from the kind here
        return f"recurrent.{self.kind}"

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def port(self, name: str) -> Value | None:
        """The value at port ``name`` (an input or an output name of this kind)."""
        spec = self.spec
        i = spec.input_index(name)
        if i is not None:
            return self.inputs[i] if i < len(self.inputs) else None
        i = spec.output_index(name)
        if i is not None:
            return self.outputs[i] if i < len(self.outputs) else None
        raise IRError(f"{self.kind} has no port {name!r}")

    def port_of(self, value: Value) -> str | None:
        spec = self.spec
        for i, v in enumerate(self.inputs):
            if v is value and i < len(spec.inputs):
                return spec.inputs[i]
        for i, v in enumerate(self.outputs):
            if v is value and i < len(spec.outputs):
                return spec.outputs[i]
        return None

    @property
    def state_ports(self) -> tuple[str, ...]:
        """The input ports a state enters through (initial_h, and initial_c for LSTMs)."""
        return self.spec.entries

    def attributes(self) -> dict[str, Any]:
        """The ONNX attributes this node stands for (only those that are set)."""
        attrs: dict[str, Any] = {"hidden_size": self.hidden_size, "direction": self.direction}
        if self.layout:
            attrs["layout"] = self.layout
        if self.activations is not None:
            attrs["activations"] = list(self.activations)
        if self.activation_alpha is not None:
            attrs["activation_alpha"] = list(self.activation_alpha)
        if self.activation_beta is not None:
            attrs["activation_beta"] = list(self.activation_beta)
        if self.clip is not None:
            attrs["clip"] = self.clip
        if self.semantics == "GRU" and self.linear_before_reset:
            attrs["linear_before_reset"] = self.linear_before_reset
        if self.semantics == "LSTM" and self.input_forget:
            attrs["input_forget"] = self.input_forget
        return attrs

    def _attrs_text(self) -> str:
        a = [f"{self.direction}", f"hidden={self.hidden_size}"]
        if self.layout:
            a.append("layout=1")
        if self.activations is not None:
            a.append("act=" + "/".join(self.activations))
        if self.clip is not None:
            a.append(f"clip={self.clip:g}")
        if self.linear_before_reset:
            a.append("linear_before_reset")
        if self.input_forget:
            a.append("input_forget")
        return "<" + ", ".join(a) + ">"


@dataclass(eq=False, repr=False)
class Store(Node):
    """Writes ``inputs[0]`` into ``dest`` (a Slot or an Output); the result kind is explicit."""

    dest: Slot | Output | None = None
    result: StoreResult = StoreResult.TOKEN
    opname = "store"

    @property
    def value(self) -> Value | None:
        return self.inputs[0] if self.inputs else None

    @property
    def to_slot(self) -> bool:
        return isinstance(self.dest, Slot)

    def _attrs_text(self) -> str:
        if isinstance(self.dest, Slot):
            d = f"@{self.dest.name}"
        elif isinstance(self.dest, Output):
            d = f"out:{self.dest.name}"
        else:
            d = "?"
        return f"<{d}, {self.result.value}>"


@dataclass(eq=False, repr=False)
class Return(Node):
    """The end of the call: the store effects (``inputs``) that complete before the next call may start."""

    layer: OrderingLayer = OrderingLayer.RUNTIME
    opname = "return"

    @property
    def waits(self) -> list[Value]:
        return list(self.operands())

    def _attrs_text(self) -> str:
        return f"<by {self.layer.value}>"


class Program:
    """One inference call of one model.

    Nodes live in ``graph`` (a :class:`rnnir.digraph.DiGraph`, networkx's interface, keyed by node id, with the
    node object under attribute ``node``); data edges carry ``kind="data"``,
    explicit ordering edges ``kind="order"``.
    """

    def __init__(self, name: str = "program") -> None:
        self.name = name
        self.graph: digraph.DiGraph = digraph.DiGraph()
        self._slots: IRTuple = IRTuple()
        self._outputs: IRTuple = IRTuple()
        self._externals: dict[str, Value] = {}
        self._state_pairs: IRTuple = IRTuple()
        self._suggested_pairs: IRTuple = IRTuple()  # suggestions IR text writes down (rnnir.analysis.suggest derives a lowered program's)
        self._recurrence_candidates: IRTuple = IRTuple()  # rnnir.lower.cells.CellCandidate: looked like a recurrence, not confirmed
        # the ONNX model this program is one call of (None when built or parsed from IR text): export writes it back
        # with the pairing, StatefulSession and the simulator run it
        self.source: ModelSource | None = None
        self._ids: dict[str, int] = {}
        self._order: list[Node] | None = None  # topological order, dropped whenever the graph changes
        self._kinds: dict[tuple[type, ...], list[Node]] = {}
        self._slot_names: dict[str, Slot] = {}
        self._output_names: dict[str, Output] = {}
        self._by_dest: dict[int, list[Node]] | None = None  # stores and loads by their slot/output, per graph change
        # bumped by every change: through this class's methods, or a write to an owned slot, output, node or value;
        # the containers are IRTuples and the state pairs frozen, so there is no other way to change the program
        self._version = 0
        self._frozen = 0  # > 0 while analyses run: owned objects refuse writes
        # what layers above the IR derive from this program (rnnir.analysis.facts keeps its AnalysisManager here),
        # as onnx-ir's Model.meta: never printed, compared or versioned, and no part of the program's meaning
        self.meta: dict[str, object] = {}

    # -- containers (immutable: replaced whole, which bumps the version) ---------------------
    @property
    def slots(self) -> Sequence[Slot]:
        return cast("Sequence[Slot]", self._slots)

    @property
    def outputs(self) -> Sequence[Output]:
        return cast("Sequence[Output]", self._outputs)

    @property
    def externals(self) -> Mapping[str, Value]:
        """Values defined outside the analysed region, by name (read-only: add one with :meth:`external`)."""
        return MappingProxyType(self._externals)

    @property
    def state_pairs(self) -> Sequence[StatePair]:
        """The state pairs; assign a new sequence to change them (the version moves)."""
        return cast("Sequence[StatePair]", self._state_pairs)

    @state_pairs.setter
    def state_pairs(self, pairs: Iterable[StatePair]) -> None:
        self._changed()
        self._state_pairs = IRTuple(pairs)

    @property
    def suggested_pairs(self) -> Sequence[StatePair]:
        return cast("Sequence[StatePair]", self._suggested_pairs)

    @suggested_pairs.setter
    def suggested_pairs(self, pairs: Iterable[StatePair]) -> None:
        self._changed()
        self._suggested_pairs = IRTuple(pairs)

    @property
    def recurrence_candidates(self) -> Sequence[Any]:
        return cast("Sequence[Any]", self._recurrence_candidates)

    @recurrence_candidates.setter
    def recurrence_candidates(self, candidates: Iterable[Any]) -> None:
        self._changed()
        self._recurrence_candidates = IRTuple(candidates)

    # -- construction -------------------------------------------------------------------
    def fresh_id(self, stem: str) -> str:
        n = self._ids.get(stem, 0)
        self._ids[stem] = n + 1
        return f"{stem}{n}"

    def add_slot(self, slot: Slot) -> Slot:
        if slot.name in self._slot_names:
            raise IRError(f"program {self.name!r} already has a slot named {slot.name!r}")
        self._changed()
        slot._adopt(self)
        self._slots = IRTuple((*self._slots, slot))
        self._slot_names[slot.name] = slot
        return slot

    def add_output(self, output: Output) -> Output:
        if output.name in self._output_names:
            raise IRError(f"program {self.name!r} already has an output named {output.name!r}")
        self._changed()
        output._adopt(self)
        self._outputs = IRTuple((*self._outputs, output))
        self._output_names[output.name] = output
        return output

    def external(self, name: str, type: TensorType | None = None, const: np.ndarray | PendingConst | None = None) -> Value:
        """A value defined outside the analysed region (graph input, weight, off-path value)."""
        v = self._externals.get(name)
        if v is None:
            v = Value(name=name, type=type or TensorType(), const=const)  # type: ignore[arg-type]  # a PendingConst is stored as such (see Value.const)
            self._changed()
            v._adopt(self)
            self._externals[name] = v
        return v

    def add(self, node: Node) -> Node:
        """Insert ``node``: its id must be unique, its operands must already belong to the program."""
        if node.__dict__.get("_program") is not None:
            raise IRError(f"{node!r} already belongs to program {node.__dict__['_program'].name!r}")
        if not node.id:
            node.id = self.fresh_id(node.opname.split(".")[-1].lower() if isinstance(node, Compute) else type(node).__name__.lower())
        if node.id in self.graph:
            raise IRError(f"duplicate node id {node.id!r}")
        for v in node.operands():
            self._check_operand(node, v)
        for v in node.results():
            if v.producer is not None and v.producer is not node:
                raise IRError(f"%{v.name} already has producer {v.producer.id}")
        self.graph.add_node(node.id, node=node)
        self._changed()
        node._adopt(self)
        for i, operand in enumerate(node.inputs):
            if operand is None:
                continue
            if operand.producer is not None:
                self.graph.add_edge(operand.producer.id, node.id, kind="data")
            _keep(operand, "uses", IRTuple((*operand.uses, (node, i))))
        for i, result in enumerate(node.outputs):
            if result is None:
                continue
            _keep(result, "producer", node)
            _keep(result, "index", i)
            result._adopt(self)
        return node

    def _check_operand(self, node: Node, v: Value) -> None:
        if v.producer is not None:
            if v.producer.id not in self.graph or self.graph.nodes[v.producer.id]["node"] is not v.producer:
                raise IRError(f"{node.id} reads %{v.name}, produced by a node outside this program")
        elif self._externals.get(v.name) is not v:
            raise IRError(f"{node.id} reads %{v.name}, which is neither produced here nor an external value")

    def _owns(self, node: Node) -> None:
        if node.__dict__.get("_program") is not self:
            raise IRError(f"{node!r} is not a node of program {self.name!r}")

    def set_input(self, node: Node, index: int, value: Value | None) -> None:
        """Make ``node`` read ``value`` at operand ``index`` (MLIR's ``setOperand``): use lists and data edges follow,
        and the version moves, so every cached analysis is recomputed.  Refused when it would close a cycle."""
        self._owns(node)
        if not 0 <= index < len(node.inputs):
            raise IRError(f"{node.id} has no operand {index} (it has {len(node.inputs)})")
        old = node.inputs[index]
        if value is old:
            return
        if value is not None:
            self._check_operand(node, value)
            p = value.producer
            if p is not None and (p is node or digraph.has_path(self.graph, node.id, p.id)):
                raise IRError(f"{node.id} cannot read %{value.name}: its producer {p.id} runs after it (a cycle)")
        self._changed()
        inputs = list(node.inputs)
        inputs[index] = value
        _keep(node, "inputs", IRTuple(inputs))
        if old is not None:
            _keep(old, "uses", IRTuple(u for u in old.uses if not (u[0] is node and u[1] == index)))
            p = old.producer
            if p is not None and not any(v is not None and v.producer is p for v in node.inputs):
                if self.graph.edges[p.id, node.id].get("kind") == "data":
                    self.graph.remove_edge(p.id, node.id)
        if value is not None:
            _keep(value, "uses", IRTuple((*value.uses, (node, index))))
            if value.producer is not None and not self.graph.has_edge(value.producer.id, node.id):
                self.graph.add_edge(value.producer.id, node.id, kind="data")

    def replace_all_uses_with(self, old: Value, new: Value | None) -> None:
        """Every operand that reads ``old`` reads ``new`` instead (onnx-ir's and MLIR's ``replace_all_uses_with``)."""
        for node, index in list(old.uses):
            self.set_input(node, index, new)

    def set_output(self, node: Node, index: int, value: Value | None) -> None:
        """Make ``node`` produce ``value`` (or nothing) at result ``index``; the value it replaces must be unused."""
        self._owns(node)
        if not 0 <= index < len(node.outputs):
            raise IRError(f"{node.id} has no result {index} (it has {len(node.outputs)})")
        old = node.outputs[index]
        if value is old:
            return
        if old is not None and old.uses:
            raise IRError(f"%{old.name} is still read by {', '.join(sorted({n.id for n, _ in old.uses}))}: replace its uses first")
        if value is not None and (value.producer is not None or value.__dict__.get("_program") is not None):
            raise IRError(f"%{value.name} already belongs to the program; a result must be a new value")
        self._changed()
        outputs = list(node.outputs)
        outputs[index] = value
        _keep(node, "outputs", IRTuple(outputs))
        if old is not None:
            _keep(old, "producer", None)
        if value is not None:
            _keep(value, "producer", node)
            _keep(value, "index", index)
            value._adopt(self)

    def add_order(self, before: Node, after: Node) -> None:
        """An explicit ordering edge: ``before`` completes before ``after`` starts."""
        if self.graph.has_edge(before.id, after.id):
            return
        self.graph.add_edge(before.id, after.id, kind="order")
        self._changed()

    @property
    def version(self) -> int:
        """Moves with every change of the program (the key of every cached analysis)."""
        return self._version + self.graph.changes

    def _changed(self) -> None:
        if self._frozen:
            raise FrozenProgramError(f"program {self.name!r} changed while frozen for analysis")
        self._version += 1
        self._order = None

    @property
    def is_frozen(self) -> bool:
        return self._frozen > 0

    @contextmanager
    def frozen(self) -> Iterator[Program]:
        """While inside, nothing owned by the program may change (onnx-ir's FunctionalPass promise, enforced)."""
        self._frozen += 1
        try:
            yield self
        finally:
            self._frozen -= 1

    # -- queries --------------------------------------------------------------------------
    def node(self, node_id: str) -> Node:
        node: Node = self.graph.nodes[node_id]["node"]
        return node

    @property
    def nodes(self) -> list[Node]:
        """Every node in a topological order (computed once per change of the graph)."""
        if self._order is None or len(self._order) != self.graph.number_of_nodes():
            self._order = [self.graph.nodes[n]["node"] for n in digraph.topological_sort(self.graph)]
            self._kinds = {}
            self._by_dest = None
        return list(self._order)

    def nodes_of(self, *types: type[N]) -> list[N]:
        """Nodes of the given types, in topological order (one scan per type and graph change)."""
        order = self._order
        if order is None or len(order) != self.graph.number_of_nodes():
            order = self.nodes  # refreshes the order and drops the per-type lists
        key = types
        hit = self._kinds.get(key)
        if hit is None:
            hit = [n for n in order if isinstance(n, types)]
            self._kinds[key] = hit
        return cast("list[N]", list(hit))  # every node in the list is an instance of one of ``types``

    @property
    def loads(self) -> list[LoadSlot]:
        return self.nodes_of(LoadSlot)

    @property
    def stores(self) -> list[Store]:
        return self.nodes_of(Store)

    @property
    def recurrents(self) -> list[Recurrent]:
        return self.nodes_of(Recurrent)

    @property
    def returns(self) -> list[Return]:
        return self.nodes_of(Return)

    def slot(self, name: str) -> Slot:
        hit = self._slot_names.get(name)
        if hit is None:
            raise KeyError(name)
        return hit

    def output(self, name: str) -> Output:
        hit = self._output_names.get(name)
        if hit is None:
            raise KeyError(name)
        return hit

    def _touching(self, target: Slot | Output) -> list[Node]:
        if self._by_dest is None or self._order is None or len(self._order) != self.graph.number_of_nodes():
            index: dict[int, list[Node]] = {}
            for n in self.nodes_of(LoadSlot, Store):
                key = n.slot if isinstance(n, LoadSlot) else n.dest if isinstance(n, Store) else None
                index.setdefault(id(key), []).append(n)
            self._by_dest = index
        return self._by_dest.get(id(target), [])

    def loads_of(self, slot: Slot) -> list[LoadSlot]:
        return [n for n in self._touching(slot) if isinstance(n, LoadSlot)]

    def stores_to(self, dest: Slot | Output) -> list[Store]:
        return [n for n in self._touching(dest) if isinstance(n, Store)]

    def pair(self, input_name: str) -> StatePair:
        for p in self.state_pairs:
            if p.input == input_name:
                return p
        raise KeyError(input_name)

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    # -- printing ------------------------------------------------------------------------
    def __str__(self) -> str:
        from .printer import print_program

        return print_program(self)

    def __repr__(self) -> str:
        return f"<Program {self.name!r}: {len(self)} nodes, {len(self.slots)} slots>"


def check_acyclic(program: Program) -> None:
    """Raise IRError naming one cycle when the program's graph is not a DAG."""
    try:
        cycle = digraph.find_cycle(program.graph)
    except digraph.NoCycle:
        return
    raise IRError("program graph has a cycle: " + " -> ".join(str(u) for u, _ in cycle))
