"""The verdict of a multi-call check: pass, fail, inconclusive or no-state, and why, from the variants compared.

``persistent`` against one call over the whole stream decides pass or fail when the model can take that
call; a broken variant that never diverges means the stream cannot reveal that bug, and the verdict says so
instead of passing silently.  Without a whole-stream oracle, a pass also needs rnnir's own check of what each
call writes back (``rnnir lint``'s slice verdicts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rnnir.check.multicall.report import BROKEN, MulticallReport
from rnnir.check.multicall.text import format_number
from rnnir.runtime.session import StatefulSession

if TYPE_CHECKING:
    from onnx import GraphProto, NodeProto

    from rnnir.ir.nodes import Value

__all__ = ["judge"]


def judge(report: MulticallReport, session: StatefulSession) -> None:
    """Fill in the report's status, verdict, ``persistent_matches_whole``, ``revealing`` and the notes that
    explain a broken variant that did not diverge."""
    persist = [v for v in report.variants if v.variant == "persistent"]
    with_whole = [v for v in persist if v.reference == "whole"]
    if with_whole:
        report.persistent_matches_whole = not any(v.diverges for v in with_whole)
    reinit = [v for v in report.variants if v.variant == "reinit"]
    report.revealing = any(v.diverges for v in reinit)
    notes = report.notes
    reverse = [r.describe() for r in session.program.recurrents if r.direction in ("reverse", "bidirectional")]

    unwritten = [i for i, o in report.pairs if o is None]
    for v in report.variants:
        if v.variant in BROKEN and not v.diverges:
            v.note = _why_not(v.variant, report)
            if unwritten and len(unwritten) == len(report.pairs):
                v.note = "no state is ever written back (no state input has a paired output), so every variant restarts alike"
    restart = (
        f" State input(s) {', '.join(repr(i) for i in unwritten)} have no paired output: nothing writes them back, "
        "so every call restarts from the initial state (SD001)."
        if unwritten
        else ""
    )
    restarting = _restarting_states(session)
    if not report.pairs:
        report.status = "no-state"
        extra = ""
        if report.persistent_matches_whole is False:
            extra = " Chunked calls differ from one call over the whole stream: the model restarts every call, so it cannot stream."
        report.verdict = "NO STATE: the model has no state pairs, so nothing persists across calls." + extra
        return
    if report.persistent_matches_whole is False:
        bad = min((v.first_divergence for v in with_whole if v.first_divergence), key=lambda d: (d.call, d.chunk or 0))
        report.status = "fail"
        report.verdict = (
            f"FAIL: chunked calls with persistence differ from one call over the whole stream "
            f"(chunk {bad.chunk}, call {bad.call}, output {bad.output!r}, max |diff| {format_number(bad.max_abs_diff)}): "
            "the state carried between calls is not the state the model needs."
        ) + restart
        if reverse:
            report.verdict += (
                f" The model runs {', '.join(repr(r) for r in reverse)} backwards in time (reverse/bidirectional): "
                "its final state is the state at the chunk's start, which no later call can use (SD006)."
            )
        return
    broken_by_design = restarting + (
        [f"state input {i!r} has no paired output: nothing writes it back, so every call restarts it from its initial value (SD001)" for i in unwritten]
        if len(unwritten) < len(report.pairs)
        else []
    )
    if broken_by_design and report.persistent_matches_whole is not True:
        # the graph itself restarts part of the state every call while it carries the rest: no stream makes that
        # persistence, whether or not this one can show it (a static time axis leaves no whole-stream oracle)
        report.status = "fail"
        report.verdict = "FAIL: part of the state restarts on every call while the rest is carried: " + "; ".join(broken_by_design) + "."
        return
    if broken_by_design:
        notes.extend(f"{why}; this stream does not show it (chunked calls equal one whole call)" for why in broken_by_design)
    if reverse and report.persistent_matches_whole is None:
        notes.append(
            f"the model runs {', '.join(repr(r) for r in reverse)} backwards in time: carrying its state across calls is "
            "not equivalent to one call over the whole stream (SD006), but no whole-stream oracle is here to show it"
        )
    if not report.revealing:
        report.status = "inconclusive"
        report.verdict = (
            "INCONCLUSIVE: re-initialising the state before every call gives the same outputs as keeping it, "
            "so this stream cannot reveal a persistence bug (the state never leaves its initial value, or the "
            "outputs do not depend on it: silent or zero input?). Use a stream with activity from the first chunk."
        )
        return
    first = report.first_divergence["reinit"]
    assert first is not None  # revealing: the re-initialised variant diverged somewhere
    unverified = [] if report.persistent_matches_whole else _unverified_slices(session)
    if unverified:
        # the broken variants show that the state matters, not that what is fed back is the state: without a
        # whole-stream oracle only rnnir's own check of the write-back can say that, and it could not
        report.status = "inconclusive"
        report.verdict = (
            "NOT VERIFIED: the state matters (a lost state shows from call "
            f"{first.call} on, output {first.output!r}), but no whole-stream oracle is here and rnnir could not verify "
            "that what each call writes back is the state: " + "; ".join(unverified) + ". Pass whole= (or a stream with a "
            "time axis) to compare with one call over the whole stream."
        )
        return
    if report.persistent_matches_whole:
        matched = "persistence holds: chunked calls equal one call over the whole stream"
    else:
        matched = "no whole-stream oracle, so persistence is judged by the broken variants only"
    report.status = "pass"
    report.verdict = f"PASS: {matched}; a lost state shows from call {first.call} on (output {first.output!r})."
    for v in reinit:
        d = v.first_divergence
        if d is not None and d.call > 1:
            notes.append(
                f"chunk {v.chunk}: re-initialising makes no difference before call {d.call}: the state stays at its "
                f"initial value through call {d.call - 1}, so a stream that starts with silence shows a lost or stale "
                "state only after the onset"
            )


def _unverified_slices(session: StatefulSession) -> list[str]:
    """Each state slice rnnir's passes do not verify, with the reason (``rnnir lint``'s verdicts)."""
    from rnnir.passes import verify
    from rnnir.passes.coverage import Verdict

    return [
        f"{s.slice!r} {s.verdict.value} ({s.reason})" if s.reason else f"{s.slice!r} {s.verdict.value}"
        for s in verify(session.program, noqa=False).slices
        if s.verdict is not Verdict.VERIFIED
    ]


def _restarting_states(session: StatefulSession) -> list[str]:
    """Recurrences that carry one state across calls (read from a slot that is written back) while another of their
    states starts every call from a plain input the caller feeds, a constant, or nothing (zeros), or is computed from
    those alone: with ``--pair initial_h=Y_h`` alone an LSTM keeps h and restarts c, and chunked calls cannot equal
    one call over the whole stream.  Which states a written slot reaches is dataflow through any op (:func:`_cone_sources`),
    not a list of ops that pass a value through."""
    from rnnir.ir.nodes import Compute
    from rnnir.ir.optraits import OpTrait, ops_with

    layout = ops_with(OpTrait.LAYOUT)
    source = session.program.source
    # the ONNX graph's names, indexed on the first state whose cone leaves the IR and then shared by every other
    onnx_names = functools.cache(lambda: None if source is None else _OnnxNames.of(source.model.graph))
    written = {s.input for s in session.slots if s.output is not None}
    plain = set(session.inputs)
    out: list[str] = []
    for rec in session.program.recurrents:
        carried: list[str] = []
        restarted: list[str] = []
        for state in rec.spec.states:
            v = rec.port(state.entry)
            if v is None:
                restarted.append(f"its {state.entry} is not given (zeros every call)")
                continue
            sources = _cone_sources(v, onnx_names, written, plain)
            if sources.slot:
                carried.append(state.entry)
                continue
            if sources.opaque:
                continue  # an unwritten slot (SD001, said elsewhere) or a value rnnir cannot follow: not judged here
            # the words for the common direct forms: the input or constant itself, moved by layout ops at most
            u = v
            while isinstance(u.producer, Compute) and u.producer.op in layout:
                u = next(u.producer.operands())  # a layout op moves its first input
            if u.name in plain:
                restarted.append(f"its {state.entry} comes from the plain input {u.name!r}, fed anew every call")
            elif u.has_const or (isinstance(u.producer, Compute) and u.producer.op in _CONSTANT_OPS):
                restarted.append(f"its {state.entry} is the constant {u.name!r}, the same every call")
            elif sources.plain:
                named = ", ".join(repr(n) for n in sorted(sources.plain))
                restarted.append(f"its {state.entry} ({v.name!r}) is computed from the plain input(s) {named} alone, fed anew every call")
            else:
                restarted.append(f"its {state.entry} ({v.name!r}) is computed from constants alone, the same every call")
        if carried and restarted:
            out.append(f"{rec.kind} {rec.describe()!r} carries {', '.join(carried)} across calls but " + " and ".join(restarted))
    return out


#: ops whose output values are the same every call whatever their inputs hold (ConstantOfShape's input is a shape)
_CONSTANT_OPS = frozenset({"Constant", "ConstantOfShape"})


@dataclass
class _ConeSources:
    """What the producer cone of a value reads: a slot that is written back (the value carries state), the plain
    inputs, and whether it reads something rnnir does not judge here (an unwritten slot, which SD001 reports, or a
    name it cannot find)."""

    slot: bool = False
    opaque: bool = False
    plain: set[str] = field(default_factory=set)


def _cone_sources(start: Value, onnx_names: Callable[[], _OnnxNames | None], written: set[str], plain: set[str]) -> _ConeSources:
    """The sources of ``start``'s value, walking back through every op: first the IR, then, for a value lowering
    left outside it (off every state path), the ONNX main graph by name.  An op that reads only its inputs' shapes
    (Shape, Size) or makes a constant (Constant, ConstantOfShape) passes no value on.  An op with subgraphs (If,
    Loop, Scan) passes on everything it reads, its bodies' outer-scope names included: more than it may use, so a
    state is never called restarted when a written slot could reach it."""
    from rnnir.ir.nodes import LoadSlot
    from rnnir.ir.optraits import OpTrait, traits_of

    found = _ConeSources()
    seen: set[int] = set()
    stack = [start]
    escaped: list[str] = []
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        node = v.producer
        if node is None:
            if v.name in plain:
                found.plain.add(v.name)
            elif not v.has_const:
                escaped.append(v.name)
            continue
        if isinstance(node, LoadSlot):
            if node.slot is not None and node.slot.name in written:
                found.slot = True
                return found  # one written slot is enough: the value carries state
            found.opaque = True
        elif not (node.opname in _CONSTANT_OPS or traits_of(node.opname) & OpTrait.SHAPE_ONLY):
            stack.extend(node.operands())
    if escaped:
        _onnx_cone(escaped, onnx_names(), written, plain, found)
    return found


@dataclass(frozen=True)
class _OnnxNames:
    """The producing node of every name in an ONNX graph and its subgraphs (ONNX names are unique across a graph and
    its subgraphs, and a body's outer-scope reads are names of the graphs around it), and its constants' names."""

    producers: dict[str, NodeProto]
    constants: set[str]

    @classmethod
    def of(cls, main: GraphProto) -> _OnnxNames:
        producers: dict[str, NodeProto] = {}
        constants: set[str] = set()
        graphs = [main]
        while graphs:
            graph = graphs.pop()
            producers.update((o, n) for n in graph.node for o in n.output if o)
            constants.update(t.name for t in graph.initializer)
            constants.update(t.values.name for t in graph.sparse_initializer)
            graphs.extend(sub for n in graph.node for a in n.attribute for sub in ([a.g] if a.HasField("g") else a.graphs))
        return cls(producers, constants)


def _onnx_cone(names: list[str], onnx: _OnnxNames | None, written: set[str], plain: set[str], found: _ConeSources) -> None:
    """Continue :func:`_cone_sources` in the ONNX graph (``onnx``; None: the program has no ONNX source) from ``names``,
    values the IR does not compute."""
    from rnnir.ir.optraits import OpTrait, traits_of
    from rnnir.lower.scope import outer_names

    if onnx is None:
        found.opaque = True
        return
    producers, constants = onnx.producers, onnx.constants
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in written:
            found.slot = True
            return
        if name in plain:
            found.plain.add(name)
            continue
        node = producers.get(name)
        if node is None:
            if name not in constants:
                found.opaque = True  # an unwritten slot (SD001, said elsewhere), or a name lowering made
        elif not (node.op_type in _CONSTANT_OPS or traits_of(node.op_type) & OpTrait.SHAPE_ONLY):
            stack.extend(i for i in node.input if i)
            for attr in node.attribute:
                for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    stack.extend(outer_names(sub))


def _why_not(variant: str, report: MulticallReport) -> str:
    if variant == "reinit":
        return "re-initialised state gives the same outputs: the state never leaves its initial value on this stream"
    if variant == "stale":
        if all(v.calls < 3 for v in report.variants if v.variant == "stale"):
            return "fewer than 3 calls: a state one call stale cannot differ yet"
        return "the state one call stale equals the current state at every call: the state does not change between calls on this stream"
    return "h and c are equal wherever they are swapped on this stream, so a swap is invisible"
