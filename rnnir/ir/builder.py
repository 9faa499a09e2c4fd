"""Build a Program directly, without ONNX — what a compiler does with the IR it lowers to.

    b = Builder("cell")
    h = b.slot("h", "float32", (1, 1, 4))
    x = b.input("x", "float32", (3, 1, 2))
    h0 = b.load(h)
    y, hn = b.recurrent("RNN", x, b.const("W", w), b.const("R", r), initial_h=h0, hidden_size=4)
    b.store(hn, h)
    b.store(hn, b.output("hn"))
    prog = b.build()          # Return waits for every store, ordered by the runtime
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rnnir.errors import IRError
from rnnir.ir.attributes import LoadKind, OrderingLayer, Provenance, SlotInit, StoreResult, TensorType
from rnnir.ir.core import Program, check_acyclic
from rnnir.ir.nodes import Compute, LoadSlot, Output, Recurrent, Region, Return, Slot, Store, Value
from rnnir.ir.pairs import PairSource, StatePair
from rnnir.ir.recurrence import KINDS, STATE_C

__all__ = ["Builder"]


def _ttype(dtype: str | None, shape: Sequence[int | str | None] | None) -> TensorType:
    return TensorType(dtype=None if dtype is None else str(np.dtype(dtype)), shape=None if shape is None else tuple(shape))


class Builder:
    """Incremental construction of a :class:`Program` with checked def-use links."""

    def __init__(self, name: str = "program") -> None:
        self.program = Program(name)
        self._return: Return | None = None
        self._names: set[str] = set()

    # -- names -------------------------------------------------------------------------
    def _value(self, name: str | None, stem: str, type: TensorType | None = None) -> Value:
        if name is None:
            i = 0
            while f"{stem}{i}" in self._names:
                i += 1
            name = f"{stem}{i}"
        if name in self._names:
            raise IRError(f"value name {name!r} is already used in program {self.program.name!r}")
        self._names.add(name)
        return Value(name=name, type=type or TensorType())

    # -- storage -----------------------------------------------------------------------
    def slot(
        self,
        name: str,
        dtype: str | None = "float32",
        shape: Sequence[int | str | None] | None = None,
        init: str | np.ndarray = "zeros",
        *,
        alias_of: Slot | Output | None = None,
        address: str = "",
    ) -> Slot:
        """A persistent slot; ``init`` is "zeros", "caller" or an array (a constant initial value)."""
        if isinstance(init, str):
            slot_init = SlotInit(init)
        else:
            slot_init = SlotInit("constant", np.asarray(init))
        slot = Slot(name=name, type=_ttype(dtype, shape), init=slot_init, alias_of=alias_of, address=address)
        return self.program.add_slot(slot)

    def output(self, name: str, dtype: str | None = "float32", shape: Sequence[int | str | None] | None = None) -> Output:
        return self.program.add_output(Output(name=name, type=_ttype(dtype, shape)))

    def input(self, name: str, dtype: str | None = "float32", shape: Sequence[int | str | None] | None = None) -> Value:
        """A graph input that is not state (the caller passes it every call)."""
        if name in self._names:
            raise IRError(f"value name {name!r} is already used")
        self._names.add(name)
        return self.program.external(name, _ttype(dtype, shape))

    def const(self, name: str, array: Any) -> Value:
        arr = np.asarray(array)
        if name in self._names:
            raise IRError(f"value name {name!r} is already used")
        self._names.add(name)
        return self.program.external(name, TensorType(str(arr.dtype), tuple(arr.shape)), const=arr)

    # -- nodes -------------------------------------------------------------------------
    def load(self, slot: Slot, kind: str | LoadKind = "copy", *, name: str | None = None) -> Value:
        """The slot's value at the start of the call."""
        v = self._value(name or slot.name, f"{slot.name}_", slot.type)
        node = LoadSlot(inputs=[], outputs=[v], slot=slot, kind=LoadKind(kind), provenance=Provenance(value=v.name))
        self.program.add(node)
        return v

    def compute(
        self,
        op: str,
        inputs: Sequence[Value | None],
        *,
        outputs: int | Sequence[str] = 1,
        attributes: dict[str, Any] | None = None,
        domain: str = "",
        name: str | None = None,
        types: Sequence[TensorType] | None = None,
    ) -> Any:
        """Any non-recurrent op; returns one Value, or a tuple when it has several outputs."""
        names = [None] * outputs if isinstance(outputs, int) else list(outputs)
        outs = [self._value(n, f"{op.lower()}_", types[i] if types else None) for i, n in enumerate(names)]
        node = Compute(op=op, domain=domain, attributes=dict(attributes or {}), inputs=list(inputs), outputs=list(outs))
        node.provenance = Provenance(node=name, value=outs[0].name if outs else None)
        self.program.add(node)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def if_(
        self,
        cond: Value,
        then_yields: Sequence[Value],
        else_yields: Sequence[Value],
        *,
        outputs: Sequence[str] | None = None,
        name: str | None = None,
    ) -> Any:
        """An If whose branches yield already-built values (build branch bodies first, then join them here)."""
        if len(then_yields) != len(else_yields):
            raise IRError("both If branches must yield the same number of values")
        names = list(outputs) if outputs else [None] * len(then_yields)
        outs = [self._value(n, "if_") for n in names]
        node = Compute(
            op="If",
            inputs=[cond, *then_yields, *else_yields],
            outputs=list(outs),
            regions={
                "then_branch": Region("then_branch", ("then_branch",), yields=list(then_yields)),
                "else_branch": Region("else_branch", ("else_branch",), yields=list(else_yields)),
            },
            provenance=Provenance(node=name),
        )
        self.program.add(node)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def recurrent(
        self,
        kind: str,
        X: Value,
        W: Value,
        R: Value,
        B: Value | None = None,
        sequence_lens: Value | None = None,
        initial_h: Value | None = None,
        initial_c: Value | None = None,
        P: Value | None = None,
        *,
        hidden_size: int,
        direction: str = "forward",
        layout: int = 0,
        activations: Sequence[str] | None = None,
        activation_alpha: Sequence[float] | None = None,
        activation_beta: Sequence[float] | None = None,
        clip: float | None = None,
        linear_before_reset: int = 0,
        input_forget: int = 0,
        name: str | None = None,
        outputs: Sequence[str] | None = None,
    ) -> tuple[Value, ...]:
        """An RNN/GRU/LSTM node; returns (Y, Y_h) or, for LSTM, (Y, Y_h, Y_c)."""
        spec = KINDS.get(kind) or KINDS.get(kind.upper())
        if spec is None or not spec.onnx:
            raise IRError(f"recurrent kind must be RNN, GRU or LSTM, not {kind!r}")
        kind = spec.name
        if direction not in ("forward", "reverse", "bidirectional"):
            raise IRError(f"direction must be forward, reverse or bidirectional, not {direction!r}")
        if spec.input_index(STATE_C.entry) is None and (initial_c is not None or P is not None):
            raise IRError(f"{kind} has no initial_c or P input")
        n_out = len(spec.outputs)
        names = list(outputs) if outputs else [None] * n_out
        stem = (name or kind.lower()) + "_"
        outs = [self._value(n, stem + spec.outputs[i] + "_") for i, n in enumerate(names)]
        ins = [X, W, R, B, sequence_lens, initial_h, initial_c, P][: len(spec.inputs)]
        node = Recurrent(
            kind=kind,
            direction=direction,
            hidden_size=hidden_size,
            layout=layout,
            activations=None if activations is None else tuple(activations),
            activation_alpha=None if activation_alpha is None else tuple(activation_alpha),
            activation_beta=None if activation_beta is None else tuple(activation_beta),
            clip=clip,
            linear_before_reset=linear_before_reset,
            input_forget=input_forget,
            inputs=list(ins),
            outputs=list(outs),
            provenance=Provenance(node=name),
        )
        self.program.add(node)
        return tuple(outs)

    def store(self, value: Value, dest: Slot | Output, result: str | StoreResult = "token", *, name: str | None = None) -> Value:
        """Write ``value`` to ``dest``; returns the store's result (token, alias of dest, or a copy)."""
        res = StoreResult(result)
        dname = dest.name
        out = self._value(name, f"store_{dname}_", dest.type if res is not StoreResult.TOKEN else TensorType())
        out.kind = res.value
        node = Store(inputs=[value], outputs=[out], dest=dest, result=res, provenance=Provenance(value=dname))
        self.program.add(node)
        return out

    def ret(self, *waits: Value, layer: str | OrderingLayer = "runtime") -> Return:
        """End the call; the Return waits for ``waits`` (by default, build() makes it wait for every store)."""
        if self._return is not None:
            raise IRError("a program has exactly one Return")
        node = Return(inputs=list(waits), layer=OrderingLayer(layer))
        self.program.add(node)
        self._return = node
        return node

    def order(self, before: Value | Any, after: Value | Any) -> None:
        """An explicit happens-before edge between the producers of two values (or two nodes)."""
        b = before.producer if isinstance(before, Value) else before
        a = after.producer if isinstance(after, Value) else after
        if b is None or a is None:
            raise IRError("order() needs values produced inside the program")
        self.program.add_order(b, a)

    def build(self) -> Program:
        """Finish: add a Return waiting for every store if none was made, record state pairs, check the DAG."""
        prog = self.program
        if self._return is None:
            stores = prog.stores
            self.ret(*[s.outputs[0] for s in stores if s.outputs and s.outputs[0] is not None])
        check_acyclic(prog)
        pairs: list[StatePair] = []
        for slot in prog.slots:
            outs = [s for s in prog.stores_to(slot)]
            out_name = None
            for st in outs:
                # the caller-visible name of the written-back state: an output fed by the same value
                for other in prog.stores:
                    if isinstance(other.dest, Output) and other.value is st.value:
                        out_name = other.dest.name
            pair = StatePair(
                input=slot.name,
                output=out_name,  # None: no graph output returns the written-back state (a name here would be an output that does not exist)
                source=PairSource.BUILDER,
                reason="slot built with rnnir.Builder",
                slot=slot,
            )
            pairs.append(pair)
        prog.state_pairs = pairs
        return prog
