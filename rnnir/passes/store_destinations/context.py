"""What the store-destination rules share: who reads which slice through which port, and how to name it.

:class:`Context` is built once per program from the pass facts; the rule families
(:mod:`.write_back`, :mod:`.ignored`, :mod:`.destinations`, :mod:`.derived`,
:mod:`.state_types`) only query it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnir.analysis.slicemaps import ExitKind, PortRef, SliceMap
from rnnir.analysis.tracer import AbsKind
from rnnir.ir.nodes import Recurrent, Store
from rnnir.ir.recurrence import ENTRY_OF, FINAL_OF
from rnnir.passes.diagnostics import Location
from rnnir.passes.manager import ProgramFacts
from rnnir.util.fastinit import fast_init

__all__ = [
    "FINAL_OF",
    "Context",
    "Owner",
    "branch_text",
    "expected_final",
    "forward_dir",
    "is_reset",
    "live_elsewhere",
    "ref_loc",
    "refs_for",
    "reset_op",
    "static_dim",
    "store_loc",
]



def branch_text(branch: str | tuple[str, ...]) -> str:
    path = branch if isinstance(branch, str) else "/".join(branch)
    return f" in branch {path}" if path else ""


def _slice_role(sm: SliceMap, ops: dict[str, Recurrent]) -> str:
    roles: list[str] = []
    for e in sm.entry:
        if e.note == "derived":
            continue
        rec = ops.get(e.node_id)
        d = f"[{e.direction}]" if rec is not None and rec.num_directions > 1 and e.direction is not None else ""
        text = f"{e.port}{d} of {e.op} {e.onnx_node!r}"
        if text not in roles:
            roles.append(text)
    return " and ".join(roles) if roles else "not read by any recurrent op"


def ref_loc(r: PortRef) -> Location:
    return Location(node=r.node_id, onnx_node=r.onnx_node, value=r.port, branch=r.branch)


def store_loc(st: Store) -> Location:
    return Location.at(st, st.value.name if st.value else None)


def refs_for(sm: SliceMap, bp: str) -> list[PortRef]:
    if len(sm.exit_kind) <= 1:
        return list(sm.exit)
    return [r for r in sm.exit if "/".join(r.branch) == bp]


def forward_dir(rec: Recurrent, d: int | None) -> bool | None:
    """Is direction index ``d`` of ``rec`` a forward recurrence? None when it mixes both."""
    if rec.direction == "forward":
        return True
    if rec.direction == "reverse":
        return False
    if d is None:
        return None
    return d == 0


def static_dim(d: object) -> int | None:
    return d if isinstance(d, int) and not isinstance(d, bool) and d > 0 else None


@fast_init
@dataclass(frozen=True)
class Owner:
    slot: str
    index: tuple[int, ...]
    direction: int | None
    ref: PortRef


class Context:
    """Facts the SD rules share: who reads which slice, through which port."""

    def __init__(self, facts: ProgramFacts) -> None:
        self.facts = facts
        self.ops: dict[str, Recurrent] = {r.id: r for r in facts.recurrents}
        self.owners: dict[tuple[str, str], list[Owner]] = {}
        self.slot_readers: dict[str, set[str]] = {}
        self.derived_readers: dict[str, set[str]] = {}
        self.labels: dict[tuple[str, tuple[int, ...]], str] = {}
        self._slices: dict[tuple[str, tuple[int, ...]], SliceMap] = {}  # whose role a message names, worded on demand
        self._roles: dict[tuple[str, tuple[int, ...]], str] = {}
        self._store_locs: dict[int, Location] = {}  # by id of the store (the program's, alive while the pass runs)
        for pair in facts.pairs:
            name = pair.slot.name
            for sm in pair.slices:
                self.labels[(name, sm.index)] = sm.label
                self._slices[(name, sm.index)] = sm
                for e in sm.entry:
                    if e.note == "derived":
                        self.derived_readers.setdefault(name, set()).add(e.node_id)
                        continue
                    self.slot_readers.setdefault(name, set()).add(e.node_id)
                    self.owners.setdefault((e.node_id, e.port), []).append(Owner(name, sm.index, e.direction, e))

    def store_locs(self, stores: list[Store]) -> list[Location]:
        """Where each of ``stores`` is (:func:`store_loc`), made once per store: every family of checks asks for the
        same stores of each pair, thousands of pairs on a large model."""
        made = self._store_locs
        out = []
        for st in stores:
            loc = made.get(id(st))
            if loc is None:
                loc = made[id(st)] = store_loc(st)
            out.append(loc)
        return out

    def owners_of(self, r: PortRef) -> list[Owner]:
        init = ENTRY_OF.get(r.port)
        if init is None:
            return []
        return [o for o in self.owners.get((r.node_id, init), []) if r.direction is None or o.direction is None or o.direction == r.direction]

    def slice_text(self, slot: str, index: tuple[int, ...]) -> str:
        """How a message names a slice: its label and who reads it (worded only for the slices a finding names)."""
        key = (slot, index)
        label = self.labels.get(key, slot + "".join(f"[{i}]" for i in index))
        role = self._roles.get(key)
        if role is None:
            sm = self._slices.get(key)
            role = self._roles[key] = _slice_role(sm, self.ops) if sm is not None else "not read by any recurrent op"
        return f"{label} ({role})"

    def reads(self, slot: str) -> set[str]:
        return self.slot_readers.get(slot, set()) | self.derived_readers.get(slot, set())

    def starts_fresh(self, rec: Recurrent) -> bool:
        """The op's initial states are absent, constants or values that depend on no state at all."""
        for port in rec.state_ports:
            v = rec.port(port)
            if v is None:
                continue
            if self.facts.tracer.trace(v).all_origins():
                return False
        return True

    def start_text(self, rec: Recurrent, port: str) -> str:
        v = rec.port(port)
        if v is None:
            return f"zeros (no {port} input)"
        a = self.facts.tracer.trace(v)
        origins = a.all_origins()
        slots = sorted({o[1] for o in origins if o[0] == "slot"})
        if slots:
            return "slot " + ", ".join(repr(s) for s in slots)
        ports = sorted({o[1] for o in origins if o[0] == "port"})
        if ports:
            return "the results of " + ", ".join(self.facts.program.node(p).describe() for p in ports)
        if v.has_const or a.kind is AbsKind.CONST:
            return f"the constant {v.name!r}"
        return f"{v.name!r}, which depends on no state"


def live_elsewhere(ctx: Context, slot: str, sm: SliceMap, bp: str) -> bool:
    reads = ctx.reads(slot)
    for other, kind in sm.exit_kind.items():
        if other == bp:
            continue
        if kind is ExitKind.PASSTHROUGH:
            return True
        if any(r.node_id in reads for r in refs_for(sm, other)):
            return True
    return False


def reset_op(ctx: Context, slot: str, bp: str, r: PortRef) -> bool:
    """An op in an If alternative that does not read ``slot`` and starts from no state: a deliberate reset."""
    rec = ctx.ops.get(r.node_id)
    if rec is None or r.node_id in ctx.reads(slot):
        return False
    in_branch = bool(bp) or bool(r.branch) or bool(rec.provenance.branch)
    return in_branch and ctx.starts_fresh(rec)


def is_reset(ctx: Context, slot: str, sm: SliceMap, bp: str, r: PortRef) -> bool:
    """A reset op whose slice another branch does write with live state."""
    return reset_op(ctx, slot, bp, r) and live_elsewhere(ctx, slot, sm, bp)


def expected_final(ctx: Context, sm: SliceMap) -> str:
    """The final state(s) that belong in slice ``sm``: the exit port of every op that reads it."""
    cands = []
    for e in sm.entry:
        if e.note == "derived" or e.port not in FINAL_OF:
            continue
        rec = ctx.ops.get(e.node_id)
        d = f"[{e.direction}]" if rec is not None and rec.num_directions > 1 and e.direction is not None else ""
        t = f"{e.op} {e.onnx_node!r}.{FINAL_OF[e.port]}{d}"
        if t not in cands:
            cands.append(t)
    return " / ".join(cands) if cands else "the op that reads it"
