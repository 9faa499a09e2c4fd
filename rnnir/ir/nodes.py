"""The program's elements: slots and outputs (storage), SSA values, and the nodes that read and write them.

Node kinds (see docs/design.md):

- :class:`LoadSlot`  reads a :class:`Slot` at the start of the call (view or copy);
- :class:`Compute`   any other op, kept with its ONNX node; ``If`` keeps its branches as regions;
- :class:`Recurrent` an ONNX RNN/GRU/LSTM with every attribute;
- :class:`Store`     writes a value into a :class:`Slot` or an :class:`Output`, with an explicit result kind;
- :class:`Return`    the end of the call and the effects it waits for.

Each belongs to at most one program (:mod:`rnnir.ir.ownership`); the program keeps the use-def links.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rnnir.errors import IRError
from rnnir.ir.attributes import LoadKind, OrderingLayer, Provenance, SlotInit, StoreResult, TensorType
from rnnir.ir.ownership import EDIT_THROUGH_PROGRAM, IRTuple, Owned
from rnnir.ir.recurrence import KINDS, Recognition, RecurrenceKind
from rnnir.util.fastinit import fast_init

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["Compute", "LoadSlot", "Node", "Output", "PendingConst", "Recurrent", "Region", "Return", "Slot", "Store", "Value"]


@fast_init
@dataclass(eq=False)
class Slot(Owned):
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


@fast_init
@dataclass(eq=False)
class Output(Owned):
    """A buffer handed to the caller at the end of the call."""

    name: str
    type: TensorType = field(default_factory=TensorType)

    def __repr__(self) -> str:
        return f"Output({self.name!r})"


@dataclass(eq=False)
class Value(Owned):
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

    _INIT_CONVERT: ClassVar[dict[str, Callable[[Any], Any]]] = {"uses": IRTuple}  # as __setattr__ does (fast_init)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _USE_DEF:
            if self.__dict__.get("_program") is not None:
                raise IRError(f"{self!r}.{name} is kept by program {self.__dict__['_program'].name!r}: {EDIT_THROUGH_PROGRAM}")
            if name == "uses":
                value = IRTuple(value)
        if self.__dict__.get("_program") is None:  # being built: Owned's checks concern a program's elements only
            object.__setattr__(self, name, value)  # (lowering writes every field of every value: 100k on a large model)
        else:
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
    integer constant without numpy (None when it cannot), ``floats`` those of a float32/float64 one.
    """

    __slots__ = ("_floats", "_ints", "_make", "dims")

    def __init__(self, dims: tuple[int, ...], make: Callable[[], np.ndarray], ints: Callable[[], list[int] | None],
                 floats: Callable[[], list[float] | None] = lambda: None) -> None:
        self.dims = dims
        self._make = make
        self._ints = ints
        self._floats = floats

    def array(self) -> np.ndarray:
        return self._make()

    def ints(self) -> list[int] | None:
        return self._ints()

    def floats(self) -> list[float] | None:
        return self._floats()


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


# ``const`` stays a dataclass field (``Value(const=...)``); its storage goes through this property, so a
# PendingConst becomes an array only when someone reads it.
Value.const = property(_get_const, _set_const)  # type: ignore[assignment]
fast_init(Value)  # after the property: its __init__ sets const through it


@fast_init
@dataclass(eq=False)
class Node(Owned):
    """Base of every IR node: a stable id, provenance, operands and results."""

    id: str = ""
    inputs: Sequence[Value | None] = ()
    outputs: Sequence[Value | None] = ()
    provenance: Provenance = field(default_factory=Provenance)

    opname = "node"
    _INIT_CONVERT: ClassVar[dict[str, Callable[[Any], Any]]] = {"inputs": IRTuple, "outputs": IRTuple}  # as __setattr__ does (fast_init)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OPERANDS:
            program = self.__dict__.get("_program")
            if program is not None:
                raise IRError(f"{self!r}.{name} is kept by program {program.name!r}: {EDIT_THROUGH_PROGRAM}")
            value = IRTuple(value)
        elif name == "id" and self.__dict__.get("_program") is not None:
            raise IRError(f"{self!r} is keyed by its id in program {self.__dict__['_program'].name!r}: its id cannot change")
        if self.__dict__.get("_program") is None:  # being built, as for Value
            object.__setattr__(self, name, value)
        else:
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


@fast_init
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


def _read_only(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@fast_init
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

    _INIT_CONVERT: ClassVar[dict[str, Callable[[Any], Any]]] = {**Node._INIT_CONVERT, "attributes": _read_only, "regions": _read_only}  # as __setattr__ does (fast_init)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("attributes", "regions"):
            value = _read_only(value)  # replacing the whole mapping is an owned write
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


@fast_init
@dataclass(eq=False, repr=False)
class Recurrent(Node):
    """A recurrence, first class, with every attribute: an ONNX RNN/GRU/LSTM, a registered contrib op, or a
    recurrence recognised in plain ops (a cell, an unrolled loop, a Loop body).

    ``kind`` names a :data:`rnnir.ir.recurrence.KINDS` entry; ``inputs``/``outputs`` follow that kind's ports in
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


@fast_init
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


@fast_init
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
