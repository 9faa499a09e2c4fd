"""Slice analysis: each state pair's slot, slice by slice, traced to the recurrent ports it feeds and back.

:class:`SliceAnalysis` is the analysis the passes, ``rnnir show``, the JSON outputs, the exporter, the fixer and
the multi-call checker read (``analyses(program).get(SliceAnalysis)``, or :func:`slice_maps`).  For every
declared state pair it holds a :class:`TracedPair`: the declaration and its slice maps
(:class:`~rnnir.analysis.slicemaps.SliceMap`): which recurrent port reads each slice of the slot, and where the
value written back comes from.  A packed state whose leading-axis trace leaves a slice unresolved is traced
element by element (:mod:`rnnir.analysis.elements`).  Nothing is written into the program or its pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rnnir.analysis.elements import element_slices
from rnnir.analysis.facts import Analysis, AnalysisManager, analyses
from rnnir.analysis.slicemaps import ExitKind, PortRef, SliceMap
from rnnir.analysis.tracer import Abs, AbsKind, Origin, OriginKind, Ref, Tracer
from rnnir.ir import digraph
from rnnir.ir.core import Program
from rnnir.ir.nodes import Output, Recurrent, Slot, Value
from rnnir.ir.pairs import PairSource, StatePair
from rnnir.util.fastinit import fast_init

__all__ = ["SliceAnalysis", "TracedPair", "slice_maps", "slot_store_value"]


@fast_init
@dataclass(frozen=True)
class TracedPair:
    """A state pair and what slice analysis found for it: its slot's slices, and the node path of a recurrence
    written as plain ops (``plain_recurrence``, None when a recurrent op carries the state or none does)."""

    pair: StatePair
    slices: tuple[SliceMap, ...] = ()
    plain_recurrence: tuple[str, ...] | None = None

    # the declaration, read through: the passes judge a traced pair as the pair it is
    @property
    def input(self) -> str:
        return self.pair.input

    @property
    def output(self) -> str | None:
        return self.pair.output

    @property
    def source(self) -> PairSource:
        return self.pair.source

    @property
    def reason(self) -> str:
        return self.pair.reason

    @cached_property  # the passes ask it of every pair many times over: read once, then an attribute
    def slot(self) -> Slot:
        """The pair's slot: every pair the passes judge has one (a declared pair of no slot, which only a
        program edited by hand has, raises here; its ``pair.slot`` is None and it has no slices)."""
        if self.pair.slot is None:
            raise ValueError(f"state pair {self.pair} has no slot")
        return self.pair.slot

    def __str__(self) -> str:
        return str(self.pair)

    def slice(self, label: str) -> SliceMap:
        for s in self.slices:
            if s.label == label:
                return s
        raise KeyError(label)

    def to_json(self) -> dict[str, Any]:
        d = pair_json(self.pair, self.slices)
        if self.plain_recurrence is not None:
            d["plain_recurrence"] = list(self.plain_recurrence)
        return d


def pair_json(pair: StatePair, slices: Sequence[SliceMap] = ()) -> dict[str, Any]:
    """The JSON of a state pair as ``rnnir show``, ``rnnir lint`` and ``lint_many`` write it (a suggested pair has
    no slices)."""
    return {"input": pair.input, "output": pair.output, "source": pair.source.value, "reason": pair.reason, "slices": [s.to_json() for s in slices]}


class SliceAnalysis(Analysis):
    """The slice maps of a program's state pairs.

    ``declared`` follows ``program.state_pairs`` one for one (a pair of no slot has no slices).  ``pairs`` is
    what the passes judge: every declared pair that has a slot, then a pair for every slot nobody declared (named
    after the output it lives in, if any), so an undeclared slot still gets a verdict.
    """

    def __init__(self, program: Program, facts: AnalysisManager) -> None:
        super().__init__(program, facts)
        declared = list(program.state_pairs)
        paired = {id(p.slot) for p in declared if p.slot is not None}
        undeclared = _undeclared_pairs(program, [s for s in program.slots if id(s) not in paired])
        traced = _trace_pairs(program, facts.get(Tracer), [*declared, *undeclared])
        self.declared: tuple[TracedPair, ...] = tuple(traced[: len(declared)])
        self.pairs: tuple[TracedPair, ...] = tuple(t for t in traced if t.pair.slot is not None)

    def of(self, pair: StatePair) -> TracedPair:
        """The traced form of ``pair``, one of the program's declared pairs."""
        for t in self.declared:
            if t.pair is pair:
                return t
        raise KeyError(pair.input)

    def pair(self, input_name: str) -> TracedPair:
        """The declared pair of input ``input_name``, traced (as :meth:`rnnir.ir.Program.pair`)."""
        for t in self.declared:
            if t.input == input_name:
                return t
        raise KeyError(input_name)

    def to_json(self) -> list[dict[str, Any]]:
        """The declared pairs with their slice maps, as the JSON outputs list them."""
        return [t.to_json() for t in self.declared]


def slice_maps(program: Program) -> SliceAnalysis:
    """The program's slice analysis for its current version (traced on first use)."""
    return analyses(program).get(SliceAnalysis)


def _undeclared_pairs(program: Program, slots: Sequence[Slot]) -> list[StatePair]:
    """A pair for each slot nobody declared: fed back from the output its storage is, when it is one (the first
    store into the slot's storage, in program order, that writes an output)."""
    if not slots:
        return []
    order = {n.id: i for i, n in enumerate(program.nodes)}
    pairs = []
    for slot in slots:
        stores = list(program.stores_to(slot))
        if slot.alias_of is not None:
            stores += [st for st in program.stores_to(slot.alias_of) if st not in stores]
        stores.sort(key=lambda st: order[st.id])
        out = next((st.dest.name for st in stores if isinstance(st.dest, Output)), None)
        pairs.append(StatePair(slot.name, out, PairSource.BUILDER, "slot without a declared pair", slot=slot))
    return pairs


def _port_ref(tr: Tracer, ref: Ref, branch: tuple[str, ...], note: str = "") -> PortRef:
    node = tr.program.node(ref.origin.owner)
    port = ref.origin.port
    rec = node if isinstance(node, Recurrent) else None
    direction: int | None
    step = None
    idx = list(ref.index)
    if port == "Y":
        if idx:
            t = idx.pop(0)
            step = "last" if t == -1 else "first" if t == 0 else f"t={t}"
        else:
            step = "all"
    if idx:
        direction = idx[0]
    elif rec is not None and rec.num_directions == 1:
        direction = 0
    else:
        direction = None
    return PortRef(
        node_id=node.id,
        onnx_node=node.describe(),
        op=rec.kind if rec else getattr(node, "op", type(node).__name__),
        port=port,
        direction=direction,
        branch=branch or node.provenance.branch,
        step=step,
        note=note,
    )


def _slot_label(slot: Slot, index: tuple[int, ...]) -> str:
    return slot.name + "".join(f"[{i}]" for i in index)


def _slot_index(tr: Tracer, ref: Ref, first_dims: dict[str, int | None]) -> tuple[int, ...]:
    """``ref``'s index into its slot, canonical (:meth:`Tracer.canon`), also when the slot's declared first dim
    is unknown but a recurrent op reads it whole as its state: then that dim is the op's number of directions
    (``first_dims``), and a one-direction state's ``[0]`` is the whole slot, as with a declared first dim of 1."""
    idx = tr.canon(ref).index
    if idx == (0,) and first_dims.get(ref.origin.owner) == 1:  # the slices' indices are counted from 0
        return ()
    return idx


#: a recurrent op, one of its state ports that reads a value, and that value per If branch (:meth:`Abs.branches`)
StateRead = tuple[Recurrent, str, list[tuple[tuple[str, ...], Abs]]]


def _state_reads(tr: Tracer, program: Program) -> list[StateRead]:
    """Every state port of every recurrent op that reads a value, traced once for both uses: the slots' first dims
    and the slices' entries."""
    reads: list[StateRead] = []
    for rec in program.recurrents:
        for port in rec.state_ports:
            v = rec.port(port)
            if v is not None:
                reads.append((rec, port, tr.trace(v).branches()))
    return reads


def _state_first_dims(tr: Tracer, reads: Sequence[StateRead]) -> dict[str, int | None]:
    """The first dim of each slot whose declared first dim is unknown (symbolic or absent) and that a recurrent op
    (layout 0) reads whole as its initial state: by the ONNX ops' definition that dim is the op's number of
    directions.  Ops that disagree leave the slot's dim unknown (None)."""
    dims: dict[str, int | None] = {}
    for rec, _, branches in reads:
        if rec.layout != 0:
            continue
        for _, alt in branches:
            whole = alt.whole  # set on exact values only
            if whole is None or whole != Ref(Origin.of_slot(whole.origin.owner)) or tr.size0(whole) is not None:
                continue  # not the whole slot, or its first dim is declared
            owner = whole.origin.owner
            dims[owner] = rec.num_directions if dims.get(owner, rec.num_directions) == rec.num_directions else None
    return dims


def slot_store_value(program: Program, slot: Slot, output_name: str | None) -> Value | None:
    """The value written back into ``slot``: what its store reads, else what the paired output's store reads."""
    for st in program.stores_to(slot):
        if st.value is not None:
            return st.value
    if isinstance(slot.alias_of, object) and output_name is not None:
        for st in program.stores:
            if not st.to_slot and st.dest is not None and st.dest.name == output_name and st.value is not None:
                return st.value
    return None


def _trace_pairs(program: Program, tr: Tracer, pairs: Sequence[StatePair]) -> list[TracedPair]:
    """Every pair of ``pairs`` with its slice maps: the recurrent ports each slice of its slot feeds, and where
    the value written back into it comes from."""
    entries: dict[str, dict[tuple[int, ...], list[PortRef]]] = {}
    reads = _state_reads(tr, program)
    first_dims = _state_first_dims(tr, reads)
    for rec, port, branches in reads:
        for path, alt in branches:
            if alt.kind in (AbsKind.DERIVED, AbsKind.WINDOW):  # a recurrence reading a cache's window: derived
                for o in sorted(alt.all_origins()):  # a frozenset: its order changes with PYTHONHASHSEED
                    if o.kind is OriginKind.SLOT:
                        entries.setdefault(o.owner, {}).setdefault((), []).append(
                            PortRef(rec.id, rec.describe(), rec.kind, port, None, path or rec.provenance.branch, note="derived")
                        )
                continue
            # a layout=1 op reads [batch, directions, hidden]: axis 0 of its initial state is not the directions
            elems = tr.to_elems(alt, rec.num_directions) if rec.layout == 0 else None
            if elems is None:
                if alt.kind is AbsKind.EXACT and alt.whole is not None and alt.whole.origin.kind is OriginKind.SLOT:
                    r = tr.canon(alt.whole)
                    entries.setdefault(r.origin.owner, {}).setdefault(r.index, []).append(
                        PortRef(rec.id, rec.describe(), rec.kind, port, None, path or rec.provenance.branch)
                    )
                continue
            for d, ref in enumerate(elems):
                if ref.origin.kind is not OriginKind.SLOT:
                    continue
                idx = _slot_index(tr, ref, first_dims)
                entries.setdefault(ref.origin.owner, {}).setdefault(idx, []).append(
                    PortRef(
                        rec.id,
                        rec.describe(),
                        rec.kind,
                        port,
                        d if rec.num_directions > 1 or len(elems) > 1 else 0,
                        path or rec.provenance.branch,
                        note="partial" if alt.partial else "",
                    )
                )
    traced: list[TracedPair] = []
    for pair in pairs:
        slot: Slot | None = pair.slot
        if slot is None:
            traced.append(TracedPair(pair))
            continue
        slices: dict[tuple[int, ...], SliceMap] = {}

        def get(idx: tuple[int, ...], slices: dict[tuple[int, ...], SliceMap] = slices, slot: Slot = slot) -> SliceMap:
            if idx not in slices:
                slices[idx] = SliceMap(index=idx, label=_slot_label(slot, idx))
            return slices[idx]

        for idx, refs in entries.get(slot.name, {}).items():
            get(idx).entry.extend(refs)
        value = slot_store_value(program, slot, pair.output)
        whole_slot = Ref(Origin.of_slot(slot.name))
        if value is not None:
            a = tr.trace(value)
            for path, alt in a.branches():
                bp = "/".join(path)
                if alt.kind is AbsKind.WINDOW:
                    assert alt.window is not None
                    sm = get(())
                    sm.exit_kind[bp] = ExitKind.WINDOW if alt.window.cut is not None else ExitKind.APPEND
                    sm.windows[bp] = alt.window
                    continue
                if alt.kind in (AbsKind.DERIVED, AbsKind.CONST):
                    kind = ExitKind.CONSTANT if alt.kind is AbsKind.CONST else ExitKind.DERIVED
                    targets = list(slices) or [()]
                    for idx in targets:
                        sm = get(idx)
                        sm.exit_kind[bp] = kind
                    if alt.kind is AbsKind.DERIVED:
                        for o in sorted(alt.origins):
                            if o.kind is OriginKind.PORT:
                                for idx in targets:
                                    get(idx).exit.append(_port_ref(tr, Ref(o), path, note="derived"))
                    continue
                size = tr.size0(whole_slot)
                if size is None and (alt.whole is None or tr.size0(alt.whole) == first_dims.get(slot.name)):
                    size = first_dims.get(slot.name)  # split as the read is, unless the value's first axis is another
                elems = tr.to_elems(alt, size) if size is not None else None
                if elems is None or size is None or len(elems) != size:
                    assert alt.whole is not None or alt.elems is not None
                    sm = get(())
                    _record_exit(tr, sm, alt.whole, path, bp, slot, alt.changed)
                    continue
                for i, ref in enumerate(elems):
                    idx = _slot_index(tr, whole_slot.sub(i), first_dims)
                    _record_exit(tr, get(idx), ref, path, bp, slot, alt.changed)
        maps = [slices[k] for k in sorted(slices)]
        if value is not None and _unresolved(maps):
            exact = element_slices(program, slot, value)  # packed on inner axes, written row by row
            if exact is not None:
                maps = exact
        plain = _plain_path(program, tr, slot, value) if value is not None else None
        traced.append(TracedPair(pair, tuple(maps), None if plain is None else tuple(plain)))
    return traced


def _unresolved(slices: list[SliceMap]) -> bool:
    """Some exit is computed, or some entry reads only part of a slice: worth tracing element by element."""
    return any(k is ExitKind.DERIVED for sm in slices for k in sm.exit_kind.values()) or any(
        e.note == "partial" for sm in slices for e in sm.entry
    )


def _record_exit(tr: Tracer, sm: SliceMap, ref: Ref | None, path: tuple[str, ...], bp: str, slot: Slot, changed: bool = False) -> None:
    if ref is None:
        sm.exit_kind[bp] = ExitKind.UNKNOWN
        return
    if changed:  # the slice is traced to its source, but its values went through value-changing ops
        if ref.origin.kind is OriginKind.PORT:
            sm.exit.append(_port_ref(tr, ref, path, note="derived"))
        sm.exit_kind[bp] = ExitKind.DERIVED
        return
    if ref.origin.kind is OriginKind.SLOT:
        r = tr.canon(ref)
        sm.exit_kind[bp] = ExitKind.PASSTHROUGH
        sm.exit_slot_refs[bp] = (r.origin.owner, r.index)
        return
    pr = _port_ref(tr, ref, path)
    sm.exit.append(pr)
    node = tr.program.node(ref.origin.owner)
    spec = node.spec if isinstance(node, Recurrent) else None
    if spec is not None and pr.port in spec.exits:
        sm.exit_kind[bp] = ExitKind.FINAL
    elif spec is not None and pr.port == spec.sequence_output:
        sm.exit_kind[bp] = ExitKind.SEQUENCE
    else:
        sm.exit_kind[bp] = ExitKind.UNKNOWN


def _plain_path(program: Program, tr: Tracer, slot: Slot, value: Value) -> list[str] | None:
    """For a recurrence written as plain ops: the node path from the slot's load to the stored value."""
    a = tr.trace(value)
    origins = a.all_origins()
    if Origin.of_slot(slot.name) not in origins or any(o.kind is OriginKind.PORT for o in origins):
        return None
    if all((alt.kind is AbsKind.EXACT and not alt.changed) or alt.kind is AbsKind.WINDOW for _, alt in a.branches()):
        return None  # the state itself, or a cache of it: no recurrence written as plain ops
    loads = program.loads_of(slot)
    if not loads or value.producer is None:
        return None
    try:
        path = digraph.shortest_path(program.graph, loads[0].id, value.producer.id)
    except digraph.NoPath:
        return None
    return [program.node(str(n)).describe() for n in path]  # the graph's keys are node ids
