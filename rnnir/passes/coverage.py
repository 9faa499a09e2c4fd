"""Never a silent pass: a verdict for every state slice and every recurrence.

A slice of a state pair is **verified** when every call path writes back the final state of the recurrence
that reads the slice, through the matching port (``initial_h`` <-> ``Y_h``, same direction);
**violated** when a rule reports a warning or an error on it; **unverified** otherwise — the trace
reached something rnnir does not understand, and the verdict says what and where.  The
:class:`StateCoverage` pass reports each unverified slice (SD009) and each recurrence whose state
the model does not expose although it returns it (SD010); :func:`slice_verdicts` and
:func:`recurrence_verdicts` give the same answers as data for compilers and renderers.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rnnir.analysis.slicemaps import ExitKind, SliceMap
from rnnir.analysis.slices import TracedPair
from rnnir.analysis.statekinds import judge
from rnnir.analysis.tracer import Abs, AbsKind, OriginKind, Ref
from rnnir.ir.nodes import Compute, LoadSlot, Node, Output, Recurrent, Store, Value
from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.ir.recurrence import STATE_H, Recognition
from rnnir.passes.diagnostics import Diagnostic, Location, Severity, onnx_node_of
from rnnir.passes.manager import AnalysisPass, ProgramFacts, RunFacts
from rnnir.passes.rules import Family, rules_of
from rnnir.passes.rules.sd009_unverified_state import RULE as UNVERIFIED_STATE
from rnnir.passes.rules.sd010_state_not_exposed import RULE as NOT_EXPOSED
from rnnir.util.fastinit import fast_init

LAYOUT_OPS = ops_with(OpTrait.LAYOUT)

__all__ = [
    "NOT_EXPOSED",
    "STRICT_CODES",
    "UNVERIFIED_STATE",
    "RecurrenceState",
    "RecurrenceVerdict",
    "SliceVerdict",
    "StateCoverage",
    "Verdict",
    "recurrence_verdicts",
    "slice_verdicts",
]


#: codes ``--strict`` raises to errors: what rnnir could not verify fails CI
STRICT_CODES = (UNVERIFIED_STATE.code, NOT_EXPOSED.code)


class Verdict(enum.Enum):
    VERIFIED = "verified"
    VIOLATED = "violated"
    UNVERIFIED = "unverified"


class RecurrenceState(enum.Enum):
    STATEFUL = "stateful"  # its state is paired: read from a slot and/or written back into one
    STATELESS = "stateless"  # stateless by design: bidirectional, or its final state is not returned
    NOT_EXPOSED = "not-exposed"  # starts from zeros every call while its final state is returned


@fast_init
@dataclass(frozen=True)
class SliceVerdict:
    """The verdict of one slice of one state pair; ``reason``/``where`` say why when not verified."""

    input: str
    output: str | None
    slice: str
    verdict: Verdict
    reason: str = ""
    where: str | None = None  # the ONNX node where understanding stopped, or the finding's first node
    codes: tuple[str, ...] = ()  # the rules that report on it (violated)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"input": self.input, "output": self.output, "slice": self.slice, "verdict": self.verdict.value}
        if self.reason:
            d["reason"] = self.reason
        if self.where:
            d["where"] = self.where
        if self.codes:
            d["codes"] = list(self.codes)
        return d


@fast_init
@dataclass(frozen=True)
class RecurrenceVerdict:
    """How one recurrence keeps its state across calls."""

    node: str  # ONNX node name (or the IR id)
    ir_node: str
    kind: str
    recognition: Recognition
    state: RecurrenceState
    reason: str
    recognised_from: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"node": self.node, "kind": self.kind, "recognition": self.recognition.value, "state": self.state.value, "reason": self.reason}
        if self.recognised_from:
            d["recognised_from"] = list(self.recognised_from)
        return d


# -- why a slice is not verified ----------------------------------------------------------------


@dataclass(frozen=True)
class _Unresolved:
    reason: str
    node: Node | None = None


def _op_text(node: Node) -> str:
    op = node.op if isinstance(node, Compute) else node.kind if isinstance(node, Recurrent) else type(node).__name__
    return f"{op} {node.describe()!r}"


def _first_value_change_back(value: Value | None, branch: str) -> Node | None:
    """Nearest node on the way back from ``value`` that is not layout-only (the op that changed the state)."""
    found: list[Node] = []
    seen: set[int] = set()
    queue: list[Value | None] = [value] if value is not None else []
    while queue:
        v = queue.pop(0)
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        p = v.producer
        if p is None or isinstance(p, (LoadSlot, Recurrent)):
            continue
        if isinstance(p, Store):
            queue.extend(p.inputs[:1])
            continue
        if isinstance(p, Compute) and (p.op in LAYOUT_OPS or p.op == "If"):
            queue.extend(p.inputs[1:] if p.op == "If" else p.inputs)
            continue
        found.append(p)
    in_branch = [n for n in found if "/".join(n.provenance.branch) == branch]
    return next(iter(in_branch or found), None)


def _first_consumer(loads: Sequence[LoadSlot]) -> Node | None:
    """Nearest op downstream of a slot's load that is not layout-only and not a recurrence."""
    seen: set[int] = set()
    queue: list[Value] = [v for ld in loads for v in ld.results()]
    while queue:
        v = queue.pop(0)
        if id(v) in seen:
            continue
        seen.add(id(v))
        for user in v.users:
            if isinstance(user, (Recurrent, Store)):
                continue
            if isinstance(user, Compute) and (user.op in LAYOUT_OPS or user.op == "If"):
                queue.extend(user.results())
                continue
            return user
    return None


def _look_alikes(facts: ProgramFacts, node: Node) -> str:
    """Why the recurrence-like structures near ``node`` (same scope, or the Loop/Scan's body) are not recurrences."""
    where = tuple(node.provenance.branch)
    reasons = []
    for cand in getattr(facts.program, "recurrence_candidates", ()):
        path = tuple(cand.scope_path)
        if path == where or (isinstance(node, Compute) and node.op in ("Loop", "Scan") and path[: len(where)] == where):
            if cand.reason not in reasons:
                reasons.append(cand.reason)
    return "".join(f"; {r}" for r in reasons[:2])


def _why_unverified(facts: ProgramFacts, pair: TracedPair, sm: SliceMap) -> _Unresolved | None:
    """None when the slice is resolved end to end; else what stopped the trace, and where."""
    ops = facts.recurrent_by_id
    label = sm.label
    stores = facts.stores_to_storage(pair.slot)
    stored = stores[0].value if stores else None
    exact_entries = [e for e in sm.entry if not e.note]
    if not sm.exit_kind:
        return _Unresolved(f"nothing is written back into {label!r}")
    if any(k in (ExitKind.WINDOW, ExitKind.APPEND) for k in sm.exit_kind.values()):
        return _cache_unresolved(pair, sm, stored)
    if any(e.note == "partial" for e in sm.entry):
        e = next(e for e in sm.entry if e.note == "partial")
        return _Unresolved(f"only part of {label!r} reaches {e.op} {e.onnx_node!r} (an inner-axis Slice or Gather rnnir does not split)", ops.get(e.node_id))
    if not exact_entries:
        derived = next((e for e in sm.entry if e.note == "derived"), None)
        if derived is not None:
            node = _first_consumer(facts.loads_of(pair.slot))
            via = f" through {_op_text(node)}" if node is not None else ""
            return _Unresolved(f"state {label!r} reaches {derived.op} {derived.onnx_node!r} only{via}, which changes its values", node or ops.get(derived.node_id))
        node = _first_consumer(facts.loads_of(pair.slot))
        if node is not None and isinstance(node, Compute) and node.op in ("Loop", "Scan"):
            return _Unresolved(f"state {label!r} reaches {_op_text(node)} whose body is not understood{_look_alikes(facts, node)}", node)
        if node is not None:
            return _Unresolved(f"state {label!r} reaches {_op_text(node)} and no recurrence rnnir recognises{_look_alikes(facts, node)}", node)
        if all(k is ExitKind.PASSTHROUGH for k in sm.exit_kind.values()):
            return _Unresolved(f"state {label!r} is handed back without reaching any recurrence")
        return _Unresolved(f"state {label!r} is read by no recurrence")
    matched = False
    for bp, kind in sm.exit_kind.items():
        where = f" in branch {bp}" if bp else ""
        if kind is ExitKind.DERIVED:
            node = _first_value_change_back(stored, bp)
            via = f"{_op_text(node)}" if node is not None else "an op that changes values"
            return _Unresolved(f"write-back of {label!r}{where} passes through {via}", node)
        if kind is ExitKind.CONSTANT:
            return _Unresolved(f"{label!r} is written back with a constant{where}")
        if kind is ExitKind.PASSTHROUGH:
            return _Unresolved(f"{label!r} is written back with a live-in value{where}, not a final state")
        if kind not in ("final", "sequence"):
            node = _first_value_change_back(stored, bp)
            via = f" through {_op_text(node)}" if node is not None else ""
            return _Unresolved(f"the write-back of {label!r}{where} could not be traced slice by slice{via}", node)
        refs = [r for r in sm.exit if ("/".join(r.branch) == bp or len(sm.exit_kind) == 1) and r.node_id in ops]
        if not refs:
            return _Unresolved(f"the write-back of {label!r}{where} comes from no recurrence")
        for r in refs:
            rec = ops[r.node_id]
            if r.port == rec.spec.sequence_output and r.step != "last":
                return _Unresolved(f"{label!r}{where} is written back with {r.label}, a step of the sequence output that is not the last", rec)
            entry = rec.spec.entry_of(r.port)
            if any(e.node_id == r.node_id and e.port == entry and (e.direction == r.direction or e.direction is None or r.direction is None) for e in exact_entries):
                matched = True
            elif not _starts_fresh(facts, rec):
                return _Unresolved(f"{label!r}{where} is written back with {r.label}, which does not read this slice", rec)
    if not matched:
        return _Unresolved(f"no call path writes back into {label!r} the final state of the recurrence that reads it")
    return None


def _cache_unresolved(pair: TracedPair, sm: SliceMap, stored: Value | None) -> _Unresolved | None:
    """None when every call path writes back this slot's own window (or appended cache), judged exactly."""
    for bp, kind in sm.exit_kind.items():
        w = sm.windows.get(bp)
        where = f" in branch {bp}" if bp else ""
        if kind not in (ExitKind.WINDOW, ExitKind.APPEND) or w is None:
            return _Unresolved(f"{sm.label!r} is written back as a cache on some call paths only ({kind.value}{where})")
        verdict = judge(pair.slot.name, pair.slot.type.shape, w)
        if verdict.problem is not None:
            return _Unresolved(f"{sm.label!r}{where} is written back with {verdict.detail} (appended by {w.via})")
    return None


def _starts_fresh(facts: ProgramFacts, rec: Recurrent) -> bool:
    """The op's initial states are absent, constants or values that depend on no state (a reset branch)."""
    for port in rec.state_ports:
        v = rec.port(port)
        if v is not None and facts.tracer.trace(v).all_origins():
            return False
    return True


class _Judged(RunFacts):
    """Why each slice is unverified and how each recurrence keeps its state, worked out once per run: the
    :class:`StateCoverage` pass asks first, and :func:`slice_verdicts` / :func:`recurrence_verdicts` (what
    :func:`rnnir.passes.verify` returns with the findings) ask the same questions of the same facts again."""

    def __init__(self, facts: ProgramFacts) -> None:
        super().__init__(facts)
        # (id of the pair, id of the slice map) -> (the two, kept alive so no other object takes their ids, the answer)
        self._why: dict[tuple[int, int], tuple[TracedPair, SliceMap, _Unresolved | None]] = {}
        self._recurrences: list[RecurrenceVerdict] | None = None
        self._whole: dict[int, tuple[TracedPair, tuple[SliceMap, ...]]] = {}  # a pair of no slices: its slot, whole

    def slices_of(self, pair: TracedPair) -> Sequence[SliceMap]:
        """The slices a verdict is given for: the pair's, or its whole slot when it has none."""
        if pair.slices:
            return pair.slices
        hit = self._whole.get(id(pair))
        if hit is None:
            hit = self._whole[id(pair)] = (pair, (SliceMap(index=(), label=pair.slot.name),))
        return hit[1]

    def why_unverified(self, pair: TracedPair, sm: SliceMap) -> _Unresolved | None:
        key = (id(pair), id(sm))
        hit = self._why.get(key)
        if hit is None:
            hit = self._why[key] = (pair, sm, _why_unverified(self.facts, pair, sm))
        return hit[2]

    def recurrences(self) -> list[RecurrenceVerdict]:
        if self._recurrences is None:
            self._recurrences = _recurrence_verdicts(self.facts)
        return list(self._recurrences)


# -- recurrence verdicts -------------------------------------------------------------------------


def _start_text(values: list[Value | None], facts: ProgramFacts | None = None) -> str:
    given = [v for v in values if v is not None]
    if not given:
        return "not given (zeros)"

    def constant(v: Value) -> bool:
        if v.has_const or (v.producer is not None and isinstance(v.producer, Compute) and v.producer.op in ("ConstantOfShape", "Constant")):
            return True
        # a recognised cell's entry is its state view rearranged for the op's port: constant when what it reads is
        return facts is not None and facts.tracer.trace(v).kind is AbsKind.CONST

    if all(constant(v) for v in given):
        return "a constant"
    names = ", ".join(repr(v.name) for v in given)
    return f"{names}, which comes from no paired state input (an unpaired graph input or a computed value)"


def _exact_refs(a: Abs) -> list[Ref]:
    """The state parts ``a`` holds as they are (per branch); a value merely computed from state (a linear head on
    h') is not the state returned."""
    if a.kind is AbsKind.ALT:
        return [r for _, alt in a.alts for r in _exact_refs(alt)]
    return list(a.refs()) if a.kind is AbsKind.EXACT else []


def _returned_exits(facts: ProgramFacts) -> dict[str, dict[str, list[str]]]:
    """Per recurrence id, per exit port (Y_h, Y_c): the graph outputs that return it (through layout-only ops).

    One walk over the output stores for all recurrences: asked per recurrence, it made a model with many
    recurrent ops quadratic (1,000 ops x 1,000 outputs at 100k nodes).
    """
    exits = {rec.id: rec.spec.exits for rec in facts.recurrents}
    tracer = facts.tracer
    out: dict[str, dict[str, list[str]]] = {}
    for st in facts.stores:
        value = st.value
        if not isinstance(st.dest, Output) or value is None:
            continue
        for ref in _exact_refs(tracer.trace(value)):
            if ref.origin.kind is not OriginKind.PORT:
                continue
            rec_exits = exits.get(ref.origin.owner)
            if rec_exits is not None and ref.origin.port in rec_exits:
                names = out.setdefault(ref.origin.owner, {}).setdefault(ref.origin.port, [])
                if st.dest.name not in names:
                    names.append(st.dest.name)
    return out


def _reads_state(facts: ProgramFacts, v: Value | None) -> bool:
    return v is not None and bool(facts.tracer.trace(v).all_origins())


def recurrence_verdicts(facts: ProgramFacts) -> list[RecurrenceVerdict]:
    """For every recurrence: stateful, stateless by design, or state not exposed.

    A state (h, or c) is *not exposed* when the recurrence starts it afresh on every call -- no initial
    value, a constant, or a value no paired state input reaches -- while a graph output returns its final
    value.  One such state makes the recurrence ``NOT_EXPOSED``, even when its other state is paired
    (declaring ``h0=hn`` alone leaves an LSTM's c behind).  Worked out once per run (``facts``).
    """
    return facts.derived(_Judged).recurrences()


def _recurrence_verdicts(facts: ProgramFacts) -> list[RecurrenceVerdict]:
    readers: set[str] = set()
    written: set[tuple[str, str]] = set()  # (node, exit port) written back into a slot
    for pair in facts.pairs:
        for sm in pair.slices:
            readers.update(e.node_id for e in sm.entry)
            written.update((r.node_id, r.port) for r in sm.exit)
    writers = {node for node, _ in written}
    out: list[RecurrenceVerdict] = []
    returned_by_rec = _returned_exits(facts)
    for rec in facts.recurrents:
        name = rec.describe()
        returned = returned_by_rec.get(rec.id, {}) if rec.direction == "forward" else {}
        # a state written back into a slot is exposed even when this op starts it afresh (a reset branch)
        lost = [
            (state, returned[state.exit])
            for state in rec.spec.states
            if state.exit in returned and (rec.id, state.exit) not in written and not _reads_state(facts, rec.port(state.entry))
        ]
        if lost:
            parts = [f"its {st.entry} is {_start_text([rec.port(st.entry)], facts)} while {st.exit} is returned as {', '.join(map(repr, outs))}" for st, outs in lost]
            state, reason = RecurrenceState.NOT_EXPOSED, "; ".join(parts)
        elif rec.id in readers or rec.id in writers:
            how = "reads a state input" if rec.id in readers else "writes a state output"
            state, reason = RecurrenceState.STATEFUL, how
        elif rec.direction != "forward":
            state, reason = RecurrenceState.STATELESS, f"{rec.direction}: its final state means nothing to the next chunk"
        else:
            state, reason = RecurrenceState.STATELESS, "its final state is not returned"
        out.append(RecurrenceVerdict(name, rec.id, rec.kind, rec.recognition, state, reason, rec.recognised_from))
    return out


# -- slice verdicts ------------------------------------------------------------------------------


def _slices_of(d: Diagnostic) -> set[str] | None:
    """The slice labels a finding names, or None when it is about the whole slot."""
    labels: set[str] = set()
    if isinstance(d.data.get("slice"), str):
        labels.add(d.data["slice"])
    for part in d.data.get("slices", ()) or ():
        if isinstance(part, dict) and isinstance(part.get("slice"), str):
            labels.add(part["slice"])
    return labels or None


def _violations(diagnostics: Iterable[Diagnostic], min_severity: Severity = Severity.WARNING) -> dict[str, list[tuple[Diagnostic, set[str] | None]]]:
    """Findings of the other rules at ``min_severity`` or above, per slot, with the slices they name."""
    own = {UNVERIFIED_STATE.code, NOT_EXPOSED.code}
    findings: dict[str, list[tuple[Diagnostic, set[str] | None]]] = {}
    for d in diagnostics:
        if d.slot is None or d.code in own or d.severity.rank < min_severity.rank:
            continue
        findings.setdefault(d.slot, []).append((d, _slices_of(d)))
    return findings


def _hits(findings: dict[str, list[tuple[Diagnostic, set[str] | None]]], slot: str, label: str) -> list[Diagnostic]:
    return [d for d, labels in findings.get(slot, []) if labels is None or label in labels]


def slice_verdicts(facts: ProgramFacts, diagnostics: Iterable[Diagnostic]) -> list[SliceVerdict]:
    """Every slice of every state pair: violated (a warning or error names it), unverified, or verified.

    ``diagnostics`` must keep their ``data`` (what :func:`passes.run` returns): it says which slice a
    finding is about.  Findings of this module's own rules never make a slice violated.
    """
    findings = _violations(diagnostics)
    judged = facts.derived(_Judged)
    out: list[SliceVerdict] = []
    for pair in facts.pairs:
        for sm in judged.slices_of(pair):
            hits = _hits(findings, pair.slot.name, sm.label)
            if hits:
                first = next((loc.onnx_node or loc.value for d in hits for loc in d.locations if loc.onnx_node or loc.value), None)
                codes = tuple(dict.fromkeys(d.code for d in hits))
                out.append(SliceVerdict(pair.input, pair.output, sm.label, Verdict.VIOLATED, hits[0].message, first, codes))
                continue
            why = judged.why_unverified(pair, sm)
            if why is None:
                out.append(SliceVerdict(pair.input, pair.output, sm.label, Verdict.VERIFIED))
            else:
                where = (onnx_node_of(why.node) or why.node.id) if why.node is not None else None
                out.append(SliceVerdict(pair.input, pair.output, sm.label, Verdict.UNVERIFIED, why.reason, where))
    return out


# -- the pass ------------------------------------------------------------------------------------


def _location(node: Node | None, value: str | None = None) -> list[Location]:
    if node is None:
        return [Location(value=value)] if value else []
    return [Location.at(node, value)]


@dataclass(frozen=True)
class StateCoverage(AnalysisPass):
    """SD009/SD010: slices rnnir could not follow, and recurrences whose state the model does not expose."""

    name: ClassVar[str] = "state-coverage"
    rules: ClassVar = rules_of(Family.STATE_COVERAGE)

    def analyse(self, facts: ProgramFacts) -> Iterator[Diagnostic]:
        judged = facts.derived(_Judged)
        for pair in facts.pairs:
            for sm in judged.slices_of(pair):
                why = judged.why_unverified(pair, sm)
                if why is None:
                    continue
                yield UNVERIFIED_STATE.diagnostic(
                    "unverified-slice",
                    slot=pair.slot.name,
                    locations=_location(why.node, pair.slot.name),
                    data={"slice": sm.label},
                    label=sm.label,
                    reason=why.reason,
                )
        if not facts.pairs and not facts.recurrents:
            yield UNVERIFIED_STATE.diagnostic("nothing-found")
        by_id = facts.recurrent_by_id
        for v in recurrence_verdicts(facts):
            if v.state is not RecurrenceState.NOT_EXPOSED:
                continue
            rec = by_id.get(v.ir_node)
            ports = "/".join(rec.state_ports) if rec is not None else STATE_H.entry
            recurrence = {"kind": v.kind, "node": v.node}  # for the fix, which never reads the message
            if "unpaired" in v.reason:
                yield NOT_EXPOSED.diagnostic("unpaired-input", locations=_location(rec), data=recurrence, kind=v.kind, node=v.node, reason=v.reason)
            else:
                yield NOT_EXPOSED.diagnostic(
                    "state-not-exposed", locations=_location(rec), data=recurrence, kind=v.kind, node=v.node, reason=v.reason, ports=ports
                )

    def settle(self, own: list[Diagnostic], others: list[Diagnostic]) -> list[Diagnostic]:
        """A slice another rule already reports on (at any severity) needs no SD009 repeating it."""
        findings = _violations(others, min_severity=Severity.INFO)
        return [d for d in own if d.code != UNVERIFIED_STATE.code or not _hits(findings, d.slot or "", str(d.data.get("slice")))]
