"""Store destinations: is each slot written back, with the right final state, in the right slice?

One pass, :class:`StoreDestinations`, compares a state pair's contract with
what the graph does, slice by slice (:class:`rnnir.pairs.SliceMap`): which
recurrent port reads slice i at the start of the call (its *entry*, the
live-in state) and what is written back into slice i (its *exit*, the
live-out state), per If branch.  The rules it emits are defined here, each
with the docstring ``rnnir explain`` prints.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from rnnir.ir import Compute, LoadSlot, Output, Recurrent, Slot, Store, Value
from rnnir.optraits import OpTrait, ops_with
from rnnir.pairs import PairSource, PortRef, SliceMap, StatePair
from rnnir.recurrence import KINDS

from .diagnostics import Diagnostic, Location, Rule, Severity, rule
from .manager import AnalysisPass, ProgramFacts

__all__ = [
    "SLOT_NEVER_WRITTEN",
    "WRONG_SLOT",
    "NOT_FINAL_STATE",
    "SLOT_WRITTEN_TWICE",
    "STATE_TYPE_MISMATCH",
    "REVERSE_STATE_PERSISTED",
    "STATE_IGNORED",
    "SEQ_LENS_LAST_STEP",
    "StoreDestinations",
]


# -- the rules ---------------------------------------------------------------------------------


SLOT_NEVER_WRITTEN = rule("SD001", "slot-never-written", Severity.ERROR, "a slot is read but no call path writes it back: every call restarts", """
    What it finds
        A slot (a state input) that the call reads but that no call path writes
        back: no graph output returns it, no store writes the slot, or what is
        written back is the slot's own incoming value, the same slice, in every
        If branch (the state is handed straight back).

    Why it matters
        The recurrence never advances across calls: every call restarts from
        the initial state (or from whatever the caller keeps passing), so a
        streaming model behaves like a stateless one and only the first chunk
        is right.  Nothing fails; the output is just wrong from call 2 on.

    Not this rule
        An If branch that deliberately restarts from zeros (silero-vad's
        ``decoder/If_1`` else branch runs its LSTM from ConstantOfShape) while
        another branch writes the slot.  A slot that lives in a graph output
        buffer (``alias_of`` an output that is stored) is AL002's case.

    Bad (ONNX sketch)
        inputs: x, h0            outputs: y            # nothing returns the state
        Y, Y_h = GRU(x, W, R, initial_h=h0)

        or, the state returned unchanged:
        stateN = Identity(state)

    Fixed
        inputs: x, h0            outputs: y, hn
        Y, hn = GRU(x, W, R, initial_h=h0)             # the final state is returned

    Bad (IR)
        %h = load_slot<@h, copy>()
        %y, %hn = recurrent.RNN(%x, %W, %R, _, _, %h)
        return<by runtime>()                            # no store to @h

    Fixed (IR)
        %s = store<@h, token>(%hn)
        return<by runtime>(%s)
    """)


WRONG_SLOT = rule("SD002", "wrong-slot", Severity.ERROR, "a final state is written into the wrong slot or slice (h/c swap, other layer, other direction)", """
    What it finds
        A slice of a slot written back with a final state that belongs to
        another slice: the slice is read as one recurrent port (its live-in
        role, e.g. ``state[0]`` = ``initial_h``) but written with the final
        state of another role (``Y_c``), of another layer, of another
        direction, or with the incoming value of a different slice.

    Why it matters
        The next call starts each layer/direction/gate from somebody else's
        state.  The first call is right; from the second on, h and c (or the
        two layers) are mixed and the output drifts, often plausibly.

    Bad (ONNX sketch: packed state, h/c swapped)
        h0 = Unsqueeze(Gather(state, 0)); c0 = Unsqueeze(Gather(state, 1))
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=h0, initial_c=c0)
        stateN = Concat(Y_c, Y_h, axis=0)               # state[0] gets c

    Fixed
        stateN = Concat(Y_h, Y_c, axis=0)               # state[0] = Y_h, state[1] = Y_c

    Bad (two layers swapped)
        Y0, H0 = GRU(x,  ..., initial_h=Slice(h0, 0:1))
        Y1, H1 = GRU(Y0, ..., initial_h=Slice(h0, 1:2))
        hn = Concat(H1, H0, axis=0)

    Fixed
        hn = Concat(H0, H1, axis=0)
    """)


NOT_FINAL_STATE = rule("SD003", "not-final-state", Severity.ERROR, "the value written back is not the final state of the op that read the slot", """
    What it finds
        The live-out value of a slot is not the final state of the recurrent
        op that consumed the live-in value: ``Y`` at the first step of a
        forward op (or at an inner step), the whole ``Y`` sequence, the final
        state of an op that never read this slot, or a constant in every
        branch.  When the written value is computed from state through
        value-changing ops (not just layout ops), rnnir cannot prove the slices
        line up: it reports a WARNING when the value depends on anything but the
        right final states; when it depends on those only (silero_vad_16k_op15
        adds a zero term: ``stateN = Add(Concat(hn, cn), zero)``) the slice is
        unverified and SD009 says so.

    Why it matters
        The next call resumes from a point the sequence has already passed (or
        from another op's state), so chunked inference silently differs from
        running the whole sequence at once.

    Not this rule
        An op in an If alternative that does not read the slot and starts from
        a constant (a deliberate reset branch) while another branch writes the
        slot's real final state; a constant written back in some branches only.

    Bad (ONNX sketch)
        Y, Y_h = RNN(x, W, R, initial_h=h0)             # forward
        hn = Gather(Y, 0, axis=0)                       # the state after step 1

    Fixed
        hn = Y_h                                        # or Gather(Y, -1) for a forward op without sequence_lens
    """)


SLOT_WRITTEN_TWICE = rule("SD004", "slot-written-twice", Severity.ERROR, "a slot is written more than once in one call", """
    What it finds
        Two stores to the same slot on one call path (stores in the two
        alternatives of one If are fine).

    Why it matters
        Which value survives depends on store order, which the dataflow may
        not fix (a write-after-write race); even when ordered, one of the
        writes is dead and usually a sign that two state instances were
        merged into one slot.

    Bad (IR)
        %a = store<@h, token>(%hn)
        %b = store<@h, token>(%h_other)
        return<by runtime>(%a, %b)

    Fixed (IR)
        %a = store<@h, token>(%hn)
        return<by runtime>(%a)
    """)


STATE_TYPE_MISMATCH = rule("SD005", "state-type-mismatch", Severity.ERROR, "slot and final state disagree: dtype, directions, batch, hidden size, layout, quantization", """
    What it finds
        A slot whose declared type disagrees with the final state written into
        it: another dtype (a Cast on the exit path, or a paired output of
        another dtype), another number of directions, batch, hidden size (last
        dim), layout or quantization.  Only static dims are compared; a
        symbolic dim never counts as a mismatch.

    Why it matters
        The caller feeds the returned state back as the next input: a runtime
        either rejects it (shape/dtype error on call 2) or, worse, converts it
        (float16 round trips lose precision at every call and the error
        accumulates through the recurrence).

    Bad (ONNX sketch)
        inputs: state float32[2, B, 128]      outputs: stateN float16[2, B, 128]
        stateN = Cast(Concat(Y_h, Y_c), to=FLOAT16)

    Fixed
        outputs: stateN float32[2, B, 128]
        stateN = Concat(Y_h, Y_c)
    """)


REVERSE_STATE_PERSISTED = rule("SD006", "reverse-state-persisted", Severity.WARNING, "persisting the final state of a reverse or bidirectional op across calls", """
    What it finds
        A slot written with the final state of the reverse direction of an
        RNN/GRU/LSTM (``direction="reverse"``, or direction 1 of a
        bidirectional op).

    Why it matters
        A reverse recurrence runs from the end of the chunk to its start; its
        final state belongs to the *start* of this chunk.  Feeding it into the
        next chunk joins the sequence out of order, so chunked results never
        equal a single pass.  It is a warning, not an error: some streaming
        models do this on purpose and accept the approximation.

    Bad (ONNX sketch)
        Y, Y_h, Y_c = LSTM(x, ..., direction="bidirectional", initial_h=h0, initial_c=c0)
        hn = Y_h; cn = Y_c                              # [1] is the reverse direction

    Fixed
        persist only the forward direction (Y_h[0:1], Y_c[0:1]) and start the
        reverse direction from zeros at every chunk (or use a forward-only
        model for streaming)
    """)


STATE_IGNORED = rule("SD007", "state-ignored", Severity.ERROR, "a state input never reaches the op it is paired for: the caller's state is ignored", """
    What it finds
        A state pair whose input never reaches the recurrent op that produces
        the state written back: the op starts from zeros, a constant or some
        other value, while its final state is returned as this slot's state.
        Not reported for recurrences written as plain ops (no RNN/GRU/LSTM
        node carries them).

    Why it matters
        The caller dutifully feeds the state back and the model ignores it:
        every call restarts, exactly like a slot that is never written, but the
        graph's interface looks stateful.

    Bad (ONNX sketch)
        inputs: x, state
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=zeros, initial_c=zeros)
        stateN = Concat(Y_h, Y_c)

    Fixed
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=Unsqueeze(Gather(state, 0)),
                                    initial_c=Unsqueeze(Gather(state, 1)))
    """)


SEQ_LENS_LAST_STEP = rule("SD008", "seq-lens-last-step", Severity.ERROR, "the state written back is Y at the last step although sequence_lens can end the sequence earlier", """
    What it finds
        A slot written with ``Y`` at the last time step of an op that has a
        ``sequence_lens`` input.

    Why it matters
        For a batch entry shorter than the chunk, ONNX zeroes ``Y`` past its
        length, so ``Y[-1]`` is zeros for that entry while ``Y_h`` holds its
        real final state: padded entries restart from zero at the next call.

    Bad (ONNX sketch)
        Y, Y_h = GRU(x, W, R, B, seq_lens, initial_h=h0)
        hn = Squeeze(Slice(Y, -1:), axis=0)

    Fixed
        hn = Y_h
    """)


# -- small helpers -------------------------------------------------------------------------------

# every kind in the registry names its state ports alike: initial_h <-> Y_h, initial_c <-> Y_c; Y carries h
_FINAL_OF = {s.entry: s.exit for k in KINDS.values() for s in k.states}
_INIT_OF = {**{exit: entry for entry, exit in _FINAL_OF.items()}, "Y": "initial_h"}

# ONNX TensorProto data types (numbers fixed by the ONNX spec) -> numpy names, for Cast(to=...)
_ONNX_DTYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16",
}


def _branch_text(branch: str | tuple[str, ...]) -> str:
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


def _ref_loc(r: PortRef) -> Location:
    return Location(node=r.node_id, onnx_node=r.onnx_node, value=r.port, branch=r.branch)


def _store_loc(st: Store) -> Location:
    return Location(node=st.id, onnx_node=st.describe(), value=st.value.name if st.value else None, branch=st.provenance.branch)


def _refs_for(sm: SliceMap, bp: str) -> list[PortRef]:
    if len(sm.exit_kind) <= 1:
        return list(sm.exit)
    return [r for r in sm.exit if "/".join(r.branch) == bp]


def _exclusive(p: tuple[str, ...], q: tuple[str, ...]) -> bool:
    """Two If-branch paths that can never run in the same call (the two alternatives of one If)."""
    for a, b in zip(p, q):
        if a == b:
            continue
        # "<If node>.then_branch" vs "<If node>.else_branch" (a Builder's If has no name: "then_branch")
        if_a, _, side_a = a.rpartition(".")
        if_b, _, side_b = b.rpartition(".")
        return if_a == if_b and {side_a, side_b} == {"then_branch", "else_branch"}
    return False


def _forward_dir(rec: Recurrent, d: int | None) -> bool | None:
    """Is direction index ``d`` of ``rec`` a forward recurrence? None when it mixes both."""
    if rec.direction == "forward":
        return True
    if rec.direction == "reverse":
        return False
    if d is None:
        return None
    return d == 0


def _static(d: object) -> int | None:
    return d if isinstance(d, int) and not isinstance(d, bool) and d > 0 else None


@dataclass(frozen=True)
class _Owner:
    slot: str
    index: tuple[int, ...]
    direction: int | None
    ref: PortRef


class _Context:
    """Facts the SD rules share: who reads which slice, through which port."""

    def __init__(self, facts: ProgramFacts) -> None:
        self.facts = facts
        self.ops: dict[str, Recurrent] = {r.id: r for r in facts.recurrents}
        self.owners: dict[tuple[str, str], list[_Owner]] = {}
        self.slot_readers: dict[str, set[str]] = {}
        self.derived_readers: dict[str, set[str]] = {}
        self.labels: dict[tuple[str, tuple[int, ...]], str] = {}
        self.roles: dict[tuple[str, tuple[int, ...]], str] = {}
        for pair in facts.pairs:
            name = pair.slot.name
            for sm in pair.slices:
                self.labels[(name, sm.index)] = sm.label
                self.roles[(name, sm.index)] = _slice_role(sm, self.ops)
                for e in sm.entry:
                    if e.note == "derived":
                        self.derived_readers.setdefault(name, set()).add(e.node_id)
                        continue
                    self.slot_readers.setdefault(name, set()).add(e.node_id)
                    self.owners.setdefault((e.node_id, e.port), []).append(_Owner(name, sm.index, e.direction, e))

    def owners_of(self, r: PortRef) -> list[_Owner]:
        init = _INIT_OF.get(r.port)
        if init is None:
            return []
        return [o for o in self.owners.get((r.node_id, init), []) if r.direction is None or o.direction is None or o.direction == r.direction]

    def slice_text(self, slot: str, index: tuple[int, ...]) -> str:
        label = self.labels.get((slot, index), slot + "".join(f"[{i}]" for i in index))
        return f"{label} ({self.roles.get((slot, index), 'not read by any recurrent op')})"

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
        if v.has_const or a.kind == "const":
            return f"the constant {v.name!r}"
        return f"{v.name!r}, which depends on no state"


def _finding(rule_: Rule, slot: str, part: str, consequence: str, *, hint: str, locations: Iterable[Location], severity: Severity | None = None, **data: object) -> Diagnostic:
    """A slice-level finding: ``slot 'x': <part>: <consequence>``; findings of one rule on one slot merge later."""
    return rule_.diagnostic(
        f"slot {slot!r}: {part}: {consequence}",
        hint=hint,
        locations=locations,
        slot=slot,
        severity=severity,
        part=part,
        consequence=consequence,
        **data,
    )


def _merge_per_slot(diags: list[Diagnostic]) -> list[Diagnostic]:
    """One diagnostic per (rule, slot, severity): the slices of a swap are one finding, not two."""
    groups: dict[tuple[str, str | None, Severity], list[Diagnostic]] = {}
    for d in diags:
        groups.setdefault((d.code, d.slot, d.severity), []).append(d)
    out: list[Diagnostic] = []
    for (code, slot, severity), group in groups.items():
        if len(group) == 1 or not all("part" in d.data for d in group):
            out.extend(group)
            continue
        parts = list(dict.fromkeys(str(d.data["part"]) for d in group))
        consequence = "; ".join(dict.fromkeys(str(d.data["consequence"]) for d in group))
        hints = list(dict.fromkeys(d.hint for d in group))
        locs = list(dict.fromkeys(loc for d in group for loc in d.locations))
        out.append(
            Diagnostic(
                code=code,
                name=group[0].name,
                severity=severity,
                message=f"slot {slot!r}: " + "; ".join(parts) + f": {consequence}",
                locations=tuple(locs),
                hint=hints[0] if len(hints) == 1 else "; ".join(hints),
                slot=slot,
                data={"slices": [dict(d.data) for d in group]},
            )
        )
    return out


# -- the pass ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreDestinations(AnalysisPass):
    """SD001–SD008: compare each slot's live-in roles with its live-out values, slice by slice."""

    name: ClassVar[str] = "store-destinations"
    rules: ClassVar = (
        SLOT_NEVER_WRITTEN,
        WRONG_SLOT,
        NOT_FINAL_STATE,
        SLOT_WRITTEN_TWICE,
        STATE_TYPE_MISMATCH,
        REVERSE_STATE_PERSISTED,
        STATE_IGNORED,
        SEQ_LENS_LAST_STEP,
    )

    def analyse(self, facts: ProgramFacts) -> Iterable[Diagnostic]:
        ctx = _Context(facts)
        out: list[Diagnostic] = []
        for pair in facts.pairs:
            out.extend(_check_pair(ctx, pair))
        out.extend(_written_twice(facts))
        return _merge_per_slot(out)


def _check_pair(ctx: _Context, pair: StatePair) -> Iterator[Diagnostic]:
    facts = ctx.facts
    slot: Slot = pair.slot
    loads = facts.loads_of(slot)
    stores = facts.stores_to_storage(slot)
    if not stores:
        if loads:
            yield _never_written(ctx, pair, loads)
        return
    plain = pair.plain_recurrence is not None
    yield from _passthrough(ctx, pair, stores)
    ignored = yield from _ignored(ctx, pair, stores, plain)
    yield from _exits(ctx, pair, stores, ignored, plain)
    yield from _types(ctx, pair, stores)


# SD001 ------------------------------------------------------------------------------------------


def _never_written(ctx: _Context, pair: StatePair, loads: list[LoadSlot]) -> Diagnostic:
    slot = pair.slot
    readers = sorted({ctx.ops[n].describe() for n in ctx.reads(slot.name) if n in ctx.ops})
    feeds = f", which feeds {', '.join(repr(r) for r in readers)}," if readers else ""
    if pair.output is None and pair.source is not PairSource.BUILDER:
        why = f"state input {slot.name!r}{feeds} is live-in but no graph output returns its final state"
        hint = f"add a graph output with the final state of {slot.name!r} and pair it (e.g. {slot.name}_out)"
    elif isinstance(slot.alias_of, Output):
        why = f"slot {slot.name!r}{feeds} lives in output {slot.alias_of.name!r}, which nothing stores"
        hint = f"store the final state into {slot.name!r} (and into {slot.alias_of.name!r} separately)"
    else:
        paired = f" (paired output {pair.output!r} is not stored into the slot)" if pair.output else ""
        why = f"slot {slot.name!r}{feeds} is loaded but no store writes it back{paired}"
        hint = f"store the final state into slot {slot.name!r} on every call path"
    return SLOT_NEVER_WRITTEN.diagnostic(
        f"{why}: every call restarts from the initial state",
        hint=hint,
        slot=slot.name,
        locations=[Location(node=ld.id, value=slot.name) for ld in loads],
    )


def _passthrough(ctx: _Context, pair: StatePair, stores: list[Store]) -> Iterator[Diagnostic]:
    slot = pair.slot
    same: list[SliceMap] = []
    for sm in pair.slices:
        if not sm.exit_kind:
            continue
        if all(k == "passthrough" and sm.exit_slot_refs.get(bp) == (slot.name, sm.index) for bp, k in sm.exit_kind.items()):
            same.append(sm)
    if not same:
        return
    locs = [_store_loc(st) for st in stores]
    if len(same) == len(pair.slices):
        yield SLOT_NEVER_WRITTEN.diagnostic(
            f"slot {slot.name!r} is written back with its own live-in value on every call path "
            f"(the state is handed straight back): the recurrence never advances across calls",
            hint=f"write the recurrent op's final state into {slot.name!r}, not the loaded value",
            slot=slot.name,
            locations=locs,
        )
        return
    for sm in same:
        yield _finding(
            SLOT_NEVER_WRITTEN,
            slot.name,
            f"slice {ctx.slice_text(slot.name, sm.index)} is written back with its own live-in value on every call path",
            "that part of the state never advances across calls",
            hint=f"write the final state that belongs to {sm.label} into it",
            locations=locs,
            slice=sm.label,
        )


# SD007 ------------------------------------------------------------------------------------------


def _final_refs(sm: SliceMap) -> list[PortRef]:
    return [r for r in sm.exit if r.note != "derived" and r.port in ("Y_h", "Y_c", "Y")]


def _ignored(ctx: _Context, pair: StatePair, stores: list[Store], plain: bool) -> Generator[Diagnostic, None, set[tuple[int, ...]]]:
    """SD007; returns the slice indices it covered (so SD003 does not report them again)."""
    slot = pair.slot
    covered: set[tuple[int, ...]] = set()
    if plain:
        return covered
    any_entry = any(sm.entry for sm in pair.slices)
    targets = [sm for sm in pair.slices if not sm.entry] if any_entry else list(pair.slices[:1])
    for sm in targets:
        exits = _final_refs(sm) if any_entry else [r for s in pair.slices for r in s.exit]
        refs = list({(r.node_id, r.port, r.direction): r for r in exits if r.node_id in ctx.ops}.values())
        if not refs:
            continue
        starts: list[str] = []
        for r in refs:
            rec = ctx.ops[r.node_id]
            init = _INIT_OF.get(r.port)
            if init in rec.state_ports:
                t = f"{rec.kind} {rec.describe()!r}.{init} starts from {ctx.start_text(rec, init)}"
                if t not in starts:
                    starts.append(t)
        what = f"slice {ctx.slice_text(slot.name, sm.index)}" if any_entry else "the state input"
        finals = ", ".join(dict.fromkeys(r.label for r in refs))
        covered.add(sm.index)
        extra: dict[str, Any] = {"slice": sm.label} if any_entry else {}  # Any: mypy matches a **dict against every keyword
        yield _finding(
            STATE_IGNORED,
            slot.name,
            f"{what} never reaches the op whose final state is written back ({finals}); "
            + ("; ".join(starts) if starts else "the op does not read it"),
            "the caller's state is ignored and every call restarts",
            hint=f"feed {slot.name!r} (its slice) into the op's initial state instead of the constant/other value",
            locations=[_ref_loc(r) for r in refs],
            **extra,
        )
        if not any_entry:
            covered.update(s.index for s in pair.slices)
            break
    return covered


# SD002 / SD003 / SD006 / SD008 -----------------------------------------------------------------


def _live_elsewhere(ctx: _Context, slot: str, sm: SliceMap, bp: str) -> bool:
    reads = ctx.reads(slot)
    for other, kind in sm.exit_kind.items():
        if other == bp:
            continue
        if kind == "passthrough":
            return True
        if any(r.node_id in reads for r in _refs_for(sm, other)):
            return True
    return False


def _reset_op(ctx: _Context, slot: str, bp: str, r: PortRef) -> bool:
    """An op in an If alternative that does not read ``slot`` and starts from no state: a deliberate reset."""
    rec = ctx.ops.get(r.node_id)
    if rec is None or r.node_id in ctx.reads(slot):
        return False
    in_branch = bool(bp) or bool(r.branch) or bool(rec.provenance.branch)
    return in_branch and ctx.starts_fresh(rec)


def _is_reset(ctx: _Context, slot: str, sm: SliceMap, bp: str, r: PortRef) -> bool:
    """A reset op whose slice another branch does write with live state."""
    return _reset_op(ctx, slot, bp, r) and _live_elsewhere(ctx, slot, sm, bp)


def _exits(ctx: _Context, pair: StatePair, stores: list[Store], ignored: set[tuple[int, ...]], plain: bool) -> Iterator[Diagnostic]:
    slot = pair.slot
    name = slot.name
    locs = [_store_loc(st) for st in stores]
    reverse_seen: set[str] = set()
    derived_by_branch: dict[str, tuple[SliceMap, list[PortRef]]] = {}
    for sm in pair.slices:
        here = ctx.slice_text(name, sm.index)
        kinds = sm.exit_kind
        if kinds and all(k == "constant" for k in kinds.values()):
            yield _finding(
                NOT_FINAL_STATE,
                name,
                f"slice {here} is overwritten with a constant on every call path, not with a final state",
                "every call restarts",
                hint=f"write the final state of the op that reads {sm.label} into it",
                locations=locs,
                slice=sm.label,
            )
            continue
        for bp, kind in kinds.items():
            refs = _refs_for(sm, bp)
            if kind == "passthrough":
                other = sm.exit_slot_refs.get(bp)
                if other is not None and other != (name, sm.index):
                    yield _finding(
                        WRONG_SLOT,
                        name,
                        f"slice {here} is written with the live-in value of {ctx.slice_text(*other)}{_branch_text(bp)}",
                        "the next call starts each slice from another slice's state",
                        hint=f"write the final state of {_expected(ctx, sm, name)} into {sm.label}",
                        locations=locs,
                        slice=sm.label,
                        branch=bp,
                    )
                continue
            if kind in ("final", "sequence"):
                for r in refs:
                    yield from _check_final(ctx, pair, sm, bp, r, locs, ignored, reverse_seen)
                continue
            if kind == "derived" and not plain:
                derived_by_branch.setdefault(bp, (sm, []))[1].extend(r for r in refs if r not in derived_by_branch[bp][1])
    for bp, (sm, refs) in derived_by_branch.items():
        yield from _derived(ctx, pair, sm, bp, refs, locs, stores, reverse_seen)


def _check_final(
    ctx: _Context,
    pair: StatePair,
    sm: SliceMap,
    bp: str,
    r: PortRef,
    locs: list[Location],
    ignored: set[tuple[int, ...]],
    reverse_seen: set[str],
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    rec = ctx.ops.get(r.node_id)
    if rec is None:
        return
    here = ctx.slice_text(name, sm.index)
    where = _branch_text(bp or r.branch)
    loc = [*locs, _ref_loc(r)]
    op = f"{rec.kind} {rec.describe()!r}"
    if r.port == "Y":
        if rec.layout == 1:
            yield _finding(
                NOT_FINAL_STATE,
                name,
                f"slice {here} is written with {r.label} of a layout=1 op{where}",
                "rnnir cannot tell which time step that is",
                hint=f"write {op}.Y_h (the final state) instead of a step of Y",
                severity=Severity.WARNING,
                locations=loc,
                slice=sm.label,
            )
            return
        fwd = _forward_dir(rec, r.direction)
        final_step = (fwd is True and r.step == "last") or (fwd is False and r.step == "first")
        if not final_step:
            what = "the whole output sequence" if r.step == "all" else f"the state after step {r.step!r}"
            kind = "forward" if fwd else "reverse" if fwd is False else "bidirectional"
            yield _finding(
                NOT_FINAL_STATE,
                name,
                f"slice {here} is written with {r.label}, {what} of the {kind} {op}{where}, not its final state",
                "the next call resumes from the wrong point of the sequence",
                hint=f"write {op}.Y_h into {sm.label}",
                locations=loc,
                slice=sm.label,
            )
            return
        if fwd and rec.port("sequence_lens") is not None:
            yield _finding(
                SEQ_LENS_LAST_STEP,
                name,
                f"slice {here} is written with {r.label}, Y at the last time step of {op}{where}, which has a sequence_lens input",
                "a batch entry shorter than the chunk gets zeros there and restarts at the next call",
                hint=f"write {op}.Y_h (the final state per entry) into {sm.label}",
                locations=loc,
                slice=sm.label,
            )
    yield from _owner_check(ctx, pair, sm, bp, r, loc, ignored)
    fwd = _forward_dir(rec, r.direction)
    if fwd is not True and rec.id not in reverse_seen:
        reverse_seen.add(rec.id)
        which = "reverse" if rec.direction == "reverse" else f"bidirectional (direction {r.direction if r.direction is not None else '0 and 1'})"
        yield _finding(
            REVERSE_STATE_PERSISTED,
            name,
            f"slice {here} persists {r.label}, the final state of the reverse direction of {which} {op}{where}",
            "across chunks the reverse recurrence sees the chunks out of order",
            hint="persist only forward-direction state; restart the reverse direction from zeros at every chunk",
            locations=loc,
            slice=sm.label,
        )


def _owner_check(
    ctx: _Context, pair: StatePair, sm: SliceMap, bp: str, r: PortRef, loc: list[Location], ignored: set[tuple[int, ...]]
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    here = ctx.slice_text(name, sm.index)
    where = _branch_text(bp or r.branch)
    owners = ctx.owners_of(r)
    if any(o.slot == name and o.index == sm.index for o in owners):
        return
    hint = f"write the final state of {_expected(ctx, sm, name)} into {sm.label}"
    if owners:
        o = owners[0]
        whose = ctx.slice_text(o.slot, o.index)
        whose = whose if o.slot == name else f"slot {o.slot!r}, slice {whose}"
        yield _finding(
            WRONG_SLOT,
            name,
            f"slice {here} is written with {r.label}{where}, the final state that belongs to {whose}",
            "the next call starts each slice from another slice's state",
            hint=hint,
            locations=loc,
            slice=sm.label,
            got=r.label,
            belongs_to=ctx.labels.get((o.slot, o.index), o.slot),
        )
        return
    reads_slice = {e.node_id for e in sm.entry if e.note != "derived"}
    if r.node_id in reads_slice:
        yield _finding(
            WRONG_SLOT,
            name,
            f"slice {here} is written with {r.label}{where}, the final state of another port or direction of the same op",
            "the next call starts this slice from the wrong state",
            hint=hint,
            locations=loc,
            slice=sm.label,
            got=r.label,
        )
        return
    if r.node_id in ctx.derived_readers.get(name, set()) or sm.index in ignored:
        return
    if _is_reset(ctx, name, sm, bp, r):
        return
    rec = ctx.ops[r.node_id]
    never = "never read this slice" if r.node_id in ctx.reads(name) else "never read this slot"
    yield _finding(
        NOT_FINAL_STATE,
        name,
        f"slice {here} is written with {r.label}{where}, the final state of an op that {never} "
        f"(it starts from {ctx.start_text(rec, _INIT_OF.get(r.port, 'initial_h'))})",
        "the live-out value is not the live-in's final state",
        hint=hint,
        locations=loc,
        slice=sm.label,
    )


def _expected(ctx: _Context, sm: SliceMap, slot: str) -> str:
    cands = []
    for e in sm.entry:
        if e.note == "derived" or e.port not in _FINAL_OF:
            continue
        rec = ctx.ops.get(e.node_id)
        d = f"[{e.direction}]" if rec is not None and rec.num_directions > 1 and e.direction is not None else ""
        t = f"{e.op} {e.onnx_node!r}.{_FINAL_OF[e.port]}{d}"
        if t not in cands:
            cands.append(t)
    return " / ".join(cands) if cands else "the op that reads it"


def _derived(
    ctx: _Context,
    pair: StatePair,
    sm: SliceMap,
    bp: str,
    refs: list[PortRef],
    locs: list[Location],
    stores: list[Store],
    reverse_seen: set[str],
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    reads = ctx.reads(name)
    ports = [r for r in refs if r.node_id in ctx.ops]
    good = [r for r in ports if r.port in ("Y_h", "Y_c") and (r.node_id in reads or _reset_op(ctx, name, bp, r))]
    others = [r.label for r in refs if r not in good]
    others += [f"the live-in value of slot {s!r}" for s in _slot_origins(ctx, stores, bp)]
    through = _value_ops(stores)
    via = f" through {', '.join(through)}" if through else ""
    where = _branch_text(bp)
    finals = ", ".join(dict.fromkeys(r.label for r in ports)) or "no recurrent op"
    if not ports and not others:
        yield NOT_FINAL_STATE.diagnostic(
            f"slot {name!r} is written back with %{_stored_name(stores)}{where}, a value that depends on no state "
            f"(a constant or a graph input computed{via or ' directly'}): every call restarts from it",
            hint="write the final state (Y_h/Y_c) of the op that reads the slot",
            slot=name,
            locations=locs,
        )
    elif good and not others and (any(r.node_id in reads for r in good) or _live_elsewhere(ctx, name, sm, bp)):
        pass  # computed from the right final states but not provably slice by slice: unverified (SD009), not violated
    else:
        bad = ", ".join(dict.fromkeys(others)) or "values that are not final states"
        yield NOT_FINAL_STATE.diagnostic(
            f"slot {name!r} is written back with a value computed{via} from {finals}{where}, which depends on {bad}: "
            f"the live-out value may not be the live-in's final state",
            hint="write the final state (Y_h/Y_c) of the op that reads the slot, through layout ops only",
            severity=Severity.WARNING,
            slot=name,
            locations=locs,
        )
    for r in ports:
        rec = ctx.ops[r.node_id]
        if r.port in ("Y_h", "Y_c") and _forward_dir(rec, r.direction) is not True and rec.id not in reverse_seen:
            reverse_seen.add(rec.id)
            yield REVERSE_STATE_PERSISTED.diagnostic(
                f"slot {name!r} is written back with a value computed from {r.label}, the final state of the reverse "
                f"direction of {rec.direction} {rec.kind} {rec.describe()!r}: across chunks the reverse recurrence "
                f"sees the chunks out of order",
                hint="persist only forward-direction state; restart the reverse direction from zeros at every chunk",
                slot=name,
                locations=[*locs, _ref_loc(r)],
            )


def _stored_name(stores: list[Store]) -> str:
    return next((st.value.name for st in stores if st.value is not None), "?")


def _slot_origins(ctx: _Context, stores: list[Store], bp: str) -> list[str]:
    """Slots whose live-in value the written-back value (on branch path ``bp``) depends on."""
    value = next((st.value for st in stores if st.value is not None), None)
    if value is None:
        return []
    alts = ctx.facts.tracer.trace(value).branches()
    found: list[str] = []
    for path, alt in alts:
        if len(alts) == 1 or "/".join(path) == bp:
            found.extend(o[1] for o in alt.all_origins() if o[0] == "slot" and o[1] not in found)
    return sorted(found)


_LAYOUT = ops_with(OpTrait.LAYOUT) | {"If"}  # an If only chooses between its branches' values


def _value_ops(stores: list[Store], limit: int = 3) -> list[str]:
    """The value-changing ops between the final states and the stored value (nearest first)."""
    found: list[str] = []
    seen: set[int] = set()
    stack: list[Value] = [st.value for st in stores if st.value is not None][:1]
    while stack and len(found) < limit:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        p = v.producer
        if not isinstance(p, Compute):
            continue
        if p.op not in _LAYOUT:
            t = f"{p.op} {p.describe()!r}"
            if t not in found:
                found.append(t)
        operands = p.inputs[1:] if p.op == "If" else p.inputs  # an If's condition is not on the value's path
        stack.extend(u for u in reversed(operands) if u is not None and u.producer is not None)
    return found


# SD004 ------------------------------------------------------------------------------------------


def _written_twice(facts: ProgramFacts) -> Iterator[Diagnostic]:
    by_slot: dict[int, list[Store]] = {}
    for st in facts.stores:
        by_slot.setdefault(id(st.dest), []).append(st)
    for slot in facts.program.slots:
        stores = by_slot.get(id(slot), [])
        if len(stores) < 2:
            continue
        clash: list[Store] = []
        for i, a in enumerate(stores):
            for b in stores[i + 1 :]:
                if not _exclusive(a.provenance.branch, b.provenance.branch):
                    for s in (a, b):
                        if s not in clash:
                            clash.append(s)
        if not clash:
            continue
        vals = ", ".join(f"%{s.value.name}" if s.value else "?" for s in clash)
        paths = {s.provenance.branch_path for s in clash if s.provenance.branch}
        where = f" on branch path {sorted(paths)[0]}" if len(paths) == 1 else ""
        yield SLOT_WRITTEN_TWICE.diagnostic(
            f"slot {slot.name!r} is written {len(clash)} times in one call{where} ({vals}): a write-after-write on "
            f"persistent state; which value the next call sees depends on store order",
            hint=f"keep exactly one store of the final state into {slot.name!r} per call path",
            slot=slot.name,
            locations=[_store_loc(s) for s in clash],
        )


# SD005 ------------------------------------------------------------------------------------------


def _types(ctx: _Context, pair: StatePair, stores: list[Store]) -> Iterator[Diagnostic]:
    slot = pair.slot
    name = slot.name
    st_type = slot.type
    value = next((st.value for st in stores if st.value is not None), None)
    if value is None:
        return
    locs = [_store_loc(st) for st in stores]
    findings: dict[str, list[str]] = {}

    def add(aspect: str, text: str) -> None:
        lst = findings.setdefault(aspect, [])
        if text not in lst:
            lst.append(text)

    # dtype: the written value, the paired output, casts on the exit path
    sd = st_type.dtype
    if sd:
        if value.type.dtype and value.type.dtype != sd:
            add("dtype", f"the value written back (%{value.name}) is {value.type.dtype}")
        out = _paired_output(ctx, pair)
        if out is not None and out.type.dtype and out.type.dtype != sd:
            add("dtype", f"paired output {out.name!r} is {out.type.dtype}")
        for path, alt in ctx.facts.tracer.trace(value).branches():
            to = _cast_target(alt.cast)
            if to is not None and to != sd:
                add("dtype", f"a Cast to {to} sits on the exit path{_branch_text(path)}")
    # declared shapes of the written value vs the slot
    vshape = value.type.shape
    sshape = st_type.shape
    if vshape is not None and sshape is not None and len(vshape) == len(sshape):
        for axis, (a, b) in enumerate(zip(sshape, vshape)):
            a, b = _static(a), _static(b)
            if a is not None and b is not None and a != b:
                add(_aspect(axis, len(sshape)), f"dim {axis} is {b} in the value written back (%{value.name}), {a} in the slot")
    # per-slice: the op that produced the final state
    for sm in pair.slices:
        sub = None if sshape is None else sshape[len(sm.index) :]
        for r in sm.exit:
            rec = ctx.ops.get(r.node_id)
            if rec is None or r.port not in ("Y_h", "Y_c") or r.note == "derived" or sub is None:
                continue
            label = f"{sm.label} <- {r.label}"
            if sub and _static(sub[-1]) is not None and rec.hidden_size and sub[-1] != rec.hidden_size:
                add("hidden size", f"{label}: the op's hidden_size is {rec.hidden_size}, the slot's last dim is {sub[-1]}")
            ytype = port.type if (port := rec.port(r.port)) is not None else None
            batch = _static(ytype.dim(0 if rec.layout == 1 else 1)) if ytype is not None and ytype.rank == 3 else None
            if len(sub) == 3:
                dirs_axis, batch_axis = (1, 0) if rec.layout == 1 else (0, 1)
                n = rec.num_directions if r.direction is None else 1
                if _static(sub[dirs_axis]) is not None and sub[dirs_axis] != n:
                    add("directions", f"{label}: the op writes {n} direction(s), the slot holds {sub[dirs_axis]}")
                if batch is not None and _static(sub[batch_axis]) is not None and sub[batch_axis] != batch:
                    add("batch", f"{label}: the op's batch is {batch}, the slot's is {sub[batch_axis]}")
            elif len(sub) == 2 and batch is not None and _static(sub[0]) is not None and sub[0] != batch:
                add("batch", f"{label}: the op's batch is {batch}, the slot's is {sub[0]}")
            lay = _layout_of(st_type.layout)
            if lay is not None and lay != rec.layout:
                add("layout", f"{label}: the slot is declared layout {st_type.layout!r}, the op runs layout={rec.layout}")
    # quantization
    q_slot, q_val = st_type.quant, value.type.quant
    known = value.type.dtype is not None or isinstance(value.producer, Recurrent)  # a recurrent op's result is never quantized
    if q_slot != q_val and (q_slot is not None and q_val is not None or (known and (q_slot or q_val))):
        add("quantization", f"the slot is {'quantized ' + str(q_slot) if q_slot else 'not quantized'}, "
            f"the value written back is {'quantized ' + str(q_val) if q_val else 'not quantized'}")
    if findings:
        aspects = list(findings)
        detail = "; ".join(f"{aspect}: " + ", ".join(texts) for aspect, texts in findings.items())
        yield STATE_TYPE_MISMATCH.diagnostic(
            f"slot {name!r} ({st_type}) and the final state written into it disagree on {' and '.join(aspects)} "
            f"({detail}): the state fed back at the next call is not what the slot declares",
            hint=f"make the returned state match the state input exactly ({st_type}); convert outside the recurrence if needed",
            slot=name,
            locations=locs,
            aspects=aspects,
        )


def _paired_output(ctx: _Context, pair: StatePair) -> Output | None:
    if pair.output is None:
        return None
    try:
        return ctx.facts.program.output(pair.output)
    except KeyError:
        return None


def _cast_target(cast: str | None) -> str | None:
    if cast is None or cast == "like":
        return None
    try:
        return _ONNX_DTYPES.get(int(cast))
    except ValueError:
        return cast


def _aspect(axis: int, rank: int) -> str:
    if axis == rank - 1:
        return "hidden size"
    if axis == rank - 2:
        return "batch"
    return "directions/layers" if rank == 3 and axis == 0 else f"dim {axis}"


def _layout_of(layout: str | None) -> int | None:
    if layout is None:
        return None
    text = layout.strip().lower().replace("layout=", "")
    if text in ("0", "seq_first", "time_first", "tbh"):
        return 0
    if text in ("1", "batch_first", "bth"):
        return 1
    return None
