"""What one call costs in state traffic: bytes written to slots and outputs, copies, slot lifetimes.

:func:`cost` is an analysis like the passes (it reads the program and never
changes it) but returns a report instead of diagnostics.  Sizes come from the
declared :class:`~rnnir.ir.TensorType`: a symbolic dim (``B``) counts as 1 and
is listed in ``symbolic_dims``; an unknown shape or dtype counts 0 bytes and is
listed in ``unknown``, so a reader never mistakes an estimate for a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rnnir.ir.attributes import StoreResult, TensorType
from rnnir.ir.core import Program
from rnnir.ir.nodes import Output, Slot, Store
from rnnir.passes.manager import ProgramFacts

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["CostReport", "SlotLifetime", "StoreCost", "cost", "tensor_bytes"]


@dataclass(frozen=True)
class StoreCost:
    """One store: where it writes, what it returns, and how many bytes it moves per call."""

    node: str
    dest: str  # "slot:NAME" or "out:NAME"
    result: str  # token / alias / value
    bytes: int
    symbolic_dims: tuple[str, ...] = ()
    exact: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "dest": self.dest,
            "result": self.result,
            "bytes": self.bytes,
            "exact": self.exact,
            "symbolic_dims": list(self.symbolic_dims),
        }


@dataclass(frozen=True)
class SlotLifetime:
    """A slot's live range in one call (topological positions) and whether its value survives the call."""

    slot: str
    bytes: int
    load: int | None  # position of the first load in topological order
    store: int | None  # position of the last store into the slot's storage
    span: int | None  # store - load: how long the live-in and live-out overlap the call
    across_calls: bool  # a store writes the slot's storage, so the next call sees this call's state
    storage: str  # the slot's address, or the output it lives in
    symbolic_dims: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "bytes": self.bytes,
            "load": self.load,
            "store": self.store,
            "span": self.span,
            "across_calls": self.across_calls,
            "storage": self.storage,
            "symbolic_dims": list(self.symbolic_dims),
        }


@dataclass(frozen=True)
class CostReport:
    """Per-call state traffic of one program."""

    program: str
    slot_bytes: int  # bytes written into slots per call
    output_bytes: int  # bytes written into graph outputs per call
    copies: int  # VALUE stores: true out-of-place copies
    stores: tuple[StoreCost, ...] = ()
    slots: tuple[SlotLifetime, ...] = ()
    symbolic_dims: tuple[str, ...] = ()  # every symbolic dim counted as 1
    unknown: tuple[str, ...] = field(default=())  # tensors whose size could not be known (counted 0)

    @property
    def exact(self) -> bool:
        return not self.symbolic_dims and not self.unknown

    def to_json(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "bytes_per_call": {"slots": self.slot_bytes, "outputs": self.output_bytes},
            "copies": self.copies,
            "exact": self.exact,
            "symbolic_dims": list(self.symbolic_dims),
            "unknown": list(self.unknown),
            "stores": [s.to_json() for s in self.stores],
            "slots": [s.to_json() for s in self.slots],
        }


def tensor_bytes(t: TensorType) -> tuple[int | None, tuple[str, ...]]:
    """(bytes, symbolic dims counted as 1); bytes is None when the dtype or the rank is unknown."""
    if t.dtype is None or t.shape is None:
        return None, ()
    try:
        item = np.dtype(t.dtype).itemsize
    except TypeError:
        return None, ()
    n = 1
    sym: list[str] = []
    for d in t.shape:
        if isinstance(d, int) and not isinstance(d, bool):
            n *= d
        else:
            sym.append("?" if d is None else str(d))
    return n * item, tuple(sym)


def _store_type(st: Store) -> TensorType:
    """The declared type of what a store writes: the destination's when known, else the value's."""
    dest_t = st.dest.type if st.dest is not None else TensorType()
    if dest_t.dtype is not None and dest_t.shape is not None:
        return dest_t
    return st.value.type if st.value is not None else dest_t


def cost(program: Program) -> CostReport:
    """Bytes written to slots and to outputs per call, copies, and each slot's lifetime."""
    facts = ProgramFacts(program)
    pos = facts.position
    store_costs: list[StoreCost] = []
    symbolic: list[str] = []
    unknown: list[str] = []
    slot_bytes = output_bytes = copies = 0
    for st in facts.stores:
        if st.dest is None:
            continue
        dest = f"{'slot' if isinstance(st.dest, Slot) else 'out'}:{st.dest.name}"
        n, sym = tensor_bytes(_store_type(st))
        if n is None:
            unknown.append(dest)
        symbolic.extend(s for s in sym if s not in symbolic)
        b = n or 0
        if isinstance(st.dest, Slot):
            slot_bytes += b
        elif isinstance(st.dest, Output):
            output_bytes += b
        if st.result is StoreResult.VALUE:
            copies += 1
        store_costs.append(StoreCost(st.id, dest, st.result.value, b, sym, exact=n is not None and not sym))
    if program.source is not None:
        # a lowered model writes every graph output each call, also those off the state path (not in the IR)
        stored = {st.dest.name for st in facts.stores if isinstance(st.dest, Output)}
        for out in program.outputs:
            if out.name in stored:
                continue
            dest = f"out:{out.name}"
            n, sym = tensor_bytes(out.type)
            if n is None:
                unknown.append(dest)
            symbolic.extend(s for s in sym if s not in symbolic)
            output_bytes += n or 0
            copies += 1
            store_costs.append(StoreCost("(off the state path)", dest, StoreResult.VALUE.value, n or 0, sym, exact=n is not None and not sym))
    lifetimes: list[SlotLifetime] = []
    for slot in program.slots:
        n, sym = tensor_bytes(slot.type)
        if n is None and f"slot:{slot.name}" not in unknown:  # its store was listed already: one tensor, one entry
            unknown.append(f"slot:{slot.name}")
        symbolic.extend(s for s in sym if s not in symbolic)
        loads = [pos[ld.id] for ld in facts.loads_of(slot)]
        stores = [pos[st.id] for st in facts.stores_to_storage(slot)]
        first = min(loads) if loads else None
        last = max(stores) if stores else None
        storage = f"out:{slot.alias_of.name}" if isinstance(slot.alias_of, Output) else (
            slot.alias_of.address if isinstance(slot.alias_of, Slot) else slot.address
        )
        lifetimes.append(
            SlotLifetime(
                slot=slot.name,
                bytes=n or 0,
                load=first,
                store=last,
                span=None if first is None or last is None else last - first,
                across_calls=bool(stores),
                storage=storage,
                symbolic_dims=sym,
            )
        )
    return CostReport(
        program=program.name,
        slot_bytes=slot_bytes,
        output_bytes=output_bytes,
        copies=copies,
        stores=tuple(store_costs),
        slots=tuple(lifetimes),
        symbolic_dims=tuple(symbolic),
        unknown=tuple(unknown),
    )
