"""Running analysis passes: the pass type, the facts they share, and the manager.

An :class:`AnalysisPass` reads a program and returns diagnostics; it never
returns a program and never changes one.  The type says so: ``analyse`` gets a
:class:`ProgramFacts` (the program plus what is worth computing once — the
slice maps, the topological order, the two-call happens-before graph) and
yields :class:`~passes.diagnostics.Diagnostic` values.  The manager enforces
the promise: it runs every pass with the program frozen (a write raises) and
checks the program's version after it, raising :class:`PassContractError`.

    manager = PassManager(PASSES, select=["SD"], ignore=["SD006"])
    diagnostics = manager.run(program)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, TypeVar, cast

from rnnir.analysis.facts import AnalysisManager, analyses
from rnnir.analysis.slices import SliceAnalysis, TracedPair
from rnnir.analysis.tracer import Tracer
from rnnir.errors import RnnirError
from rnnir.ir import digraph
from rnnir.ir.core import Program
from rnnir.ir.nodes import LoadSlot, Node, Output, Recurrent, Return, Slot, Store
from rnnir.ir.ownership import FrozenProgramError, ImmutableIRError
from rnnir.passes.diagnostics import Diagnostic, Rule, Severity

__all__ = [
    "AnalysisPass",
    "PassContractError",
    "PassManager",
    "ProgramFacts",
    "RunFacts",
    "SelectionError",
    "fingerprint",
    "selected_codes",
]


class PassContractError(RnnirError):
    """A pass broke its contract: its ``requires`` failed, or it changed the program it analysed."""


class SelectionError(RnnirError, ValueError):
    """``select``/``ignore`` named something that is neither a rule code nor a code prefix."""


# -- the pass type -------------------------------------------------------------------------


@dataclass(frozen=True)
class AnalysisPass:
    """Base of every pass: a frozen dataclass whose fields are its options.

    Subclasses set the class-level ``name`` (a slug) and ``rules`` (the
    :class:`Rule` objects it may emit) and implement :meth:`analyse`.
    ``requires`` (a precondition) and ``ensures`` (a postcondition on the
    diagnostics) return a reason when broken, and the manager raises
    :class:`PassContractError` with it.  That the program is unchanged is
    ensured for every pass by the manager itself.
    """

    name: ClassVar[str] = "analysis"
    rules: ClassVar[tuple[Rule, ...]] = ()

    @classmethod
    def codes(cls) -> tuple[str, ...]:
        return tuple(r.code for r in cls.rules)

    def requires(self, facts: ProgramFacts) -> str | None:
        if not facts.acyclic:
            cycle = " -> ".join(str(u) for u, _ in digraph.find_cycle(facts.program.graph))
            return f"its graph has a cycle ({cycle}); happens-before needs a DAG"
        return None

    def ensures(self, facts: ProgramFacts, diagnostics: Sequence[Diagnostic]) -> str | None:
        undeclared = sorted({d.code for d in diagnostics} - set(self.codes()))
        if undeclared:
            return f"it emitted {', '.join(undeclared)}, which it does not declare"
        return None

    def analyse(self, facts: ProgramFacts) -> Iterable[Diagnostic]:
        raise NotImplementedError

    def settle(self, own: list[Diagnostic], others: list[Diagnostic]) -> list[Diagnostic]:
        """Once every pass has run: this pass's findings in the light of the others' (default: unchanged)."""
        return own


# -- facts shared by the passes ------------------------------------------------------------


CALL_BOUNDARY = ("call-boundary",)


class ProgramFacts:
    """Read-only facts about one program, shared by every pass of a run.

    The analyses proper (the tracer, the slice maps) come from the program's
    :class:`~rnnir.analysis.facts.AnalysisManager`, computed once per version of
    the program and shared with every other reader (``rnnir show``, the JSON, the
    fixer...); the rest are per-run indexes of the program's nodes.
    """

    def __init__(self, program: Program) -> None:
        self.program = program
        self.analyses: AnalysisManager = analyses(program)
        self._derived: dict[type[RunFacts], RunFacts] = {}
        self._storage: dict[Slot, list[Store]] = {}  # a slot (hashed by identity) -> the stores into its memory

    def derived(self, kind: type[R]) -> R:
        """``kind(self)``, made once per run: what a pass works out and another reader needs again (the coverage
        pass's per-slice answers, which the verdicts of :func:`rnnir.passes.verify` repeat) is worked out once."""
        hit = self._derived.get(kind)
        if hit is None:
            hit = self._derived[kind] = kind(self)
        return cast(R, hit)  # stored above under its own type

    # -- slice maps -------------------------------------------------------------------------
    @property
    def tracer(self) -> Tracer:
        return self.analyses.get(Tracer)

    @property
    def pairs(self) -> list[TracedPair]:
        """Every state pair with a slot, traced, then a pair for every slot nobody declared (:class:`SliceAnalysis`)."""
        return list(self.analyses.get(SliceAnalysis).pairs)

    # -- nodes ------------------------------------------------------------------------------
    @cached_property
    def acyclic(self) -> bool:
        """Whether the program's graph has no cycle: every pass's precondition, sorted once per run, not once per pass
        (the program's own topological order, which its analyses have sorted already, fails on a cycle)."""
        try:
            _ = self.nodes  # sorted topologically: a cycle raises
        except ValueError:
            return False
        return True

    @cached_property
    def nodes(self) -> list[Node]:
        return self.program.nodes

    @cached_property
    def position(self) -> dict[str, int]:
        """Topological position of every node id."""
        return {n.id: i for i, n in enumerate(self.nodes)}

    @cached_property
    def recurrents(self) -> list[Recurrent]:
        return [n for n in self.nodes if isinstance(n, Recurrent)]

    @cached_property
    def recurrent_by_id(self) -> dict[str, Recurrent]:
        """Recurrent ops by node id (built once: passes asked per slice, which is quadratic in big models)."""
        return {r.id: r for r in self.recurrents}

    @cached_property
    def stores(self) -> list[Store]:
        return [n for n in self.nodes if isinstance(n, Store)]

    @cached_property
    def returns(self) -> list[Return]:
        return [n for n in self.nodes if isinstance(n, Return)]

    @cached_property
    def _loads_by_slot(self) -> dict[int, list[LoadSlot]]:
        out: dict[int, list[LoadSlot]] = {}
        for n in self.nodes:
            if isinstance(n, LoadSlot) and n.slot is not None:
                out.setdefault(id(n.slot), []).append(n)
        return out

    @cached_property
    def _stores_by_dest(self) -> dict[int, list[Store]]:
        out: dict[int, list[Store]] = {}
        for st in self.stores:
            if st.dest is not None:
                out.setdefault(id(st.dest), []).append(st)
        return out

    def loads_of(self, slot: Slot) -> list[LoadSlot]:
        return self._loads_by_slot.get(id(slot), [])

    def stores_to(self, dest: Slot | Output) -> list[Store]:
        return self._stores_by_dest.get(id(dest), [])

    def stores_to_storage(self, slot: Slot) -> list[Store]:
        """Stores that write ``slot``'s memory: to the slot itself, or to what it is declared an alias of (found once
        per slot and run: every pass asks it of every slot)."""
        hit = self._storage.get(slot)
        if hit is None:
            stores = list(self.stores_to(slot))
            if slot.alias_of is not None:
                stores += [st for st in self.stores_to(slot.alias_of) if st not in stores]
            hit = self._storage[slot] = sorted(stores, key=lambda st: self.position[st.id])
        return list(hit)

    # -- happens-before over two calls --------------------------------------------------------
    @cached_property
    def two_calls(self) -> digraph.DiGraph:
        """Call k and call k+1 of the program, joined by the sequencing its Return promises.

        Nodes are ``(k, node_id)`` for k in (0, 1).  Every Return of call 0
        whose layer orders anything (not ``OrderingLayer.NONE``) precedes a
        boundary node, which precedes every node of call 1: what the runtime,
        a device event or the caller guarantees between two calls.
        """
        g = self.program.graph
        h = digraph.DiGraph()
        for k in (0, 1):
            h.add_nodes_from((k, n) for n in g.nodes)
            h.add_edges_from(((k, u), (k, v)) for u, v in g.edges)
        joins = self._ordering_returns()
        h.add_node(CALL_BOUNDARY)
        h.add_edges_from(((0, r), CALL_BOUNDARY) for r in joins)
        if joins:
            h.add_edges_from((CALL_BOUNDARY, (1, n)) for n in g.nodes)
        return h

    @cached_property
    def before_next_call(self) -> set[Hashable]:
        """Nodes of call k that happen before every node of call k+1.

        The only edges from call k into call k+1 run through the boundary node,
        so ``x`` reaches ``LoadSlot_{k+1}(slot)`` exactly when ``x`` reaches the
        boundary and the boundary reaches the load: one traversal for all slots.
        """
        # = digraph.ancestors(self.two_calls, CALL_BOUNDARY), read off the program itself: the boundary's
        # ancestors are the ordering Returns of call k and their ancestors, all in call k (no edge enters
        # call k from outside), so the doubled graph is never built for it
        joins = self._ordering_returns()
        return {(0, n) for n in digraph.ancestors_of_any(self.program.graph, joins) | set(joins)}

    @cached_property
    def after_previous_call(self) -> set[Hashable]:
        """Nodes of call k+1 that happen after the boundary (all of them, unless nobody orders the calls)."""
        # = digraph.descendants(self.two_calls, CALL_BOUNDARY): the boundary precedes every node of call k+1 when
        # a Return orders the calls, and nothing leaves call k+1
        return {(1, n) for n in self.program.graph.nodes} if self._ordering_returns() else set()

    def runs_before_next_call(self, node_id: Hashable) -> bool:
        """Whether node ``node_id`` of call k happens before every node of call k+1: ``(0, node_id) in
        before_next_call``.  An ordering Return, or a node with an edge into one (what a slot's store nearly always
        is), is answered from its edges; any other node from :attr:`before_next_call`, walked once per run."""
        g = self.program.graph
        if node_id not in g:
            return False
        joins = self._joins
        if node_id in joins or any(s in joins for s in g.successors(node_id)):
            return True
        return (0, node_id) in self.before_next_call

    def runs_after_previous_call(self, node_id: Hashable) -> bool:
        """Whether node ``node_id`` of call k+1 happens after the boundary: ``(1, node_id) in after_previous_call``,
        without making that set (every node of the program, when a Return orders the calls)."""
        return bool(self._joins) and node_id in self.program.graph

    @cached_property
    def _joins(self) -> frozenset[Hashable]:
        return frozenset(self._ordering_returns())

    def _ordering_returns(self) -> list[Hashable]:
        """The ids of the Returns that join call k to call k+1 (those whose layer orders anything)."""
        return [r.id for r in self.returns if r.layer.value != "none"]


class RunFacts:
    """Base of what one run derives from its :class:`ProgramFacts` once (:meth:`ProgramFacts.derived`), for the
    readers that ask again after the pass that worked it out; like the facts, valid while the program is unchanged."""

    def __init__(self, facts: ProgramFacts) -> None:
        self.facts = facts


R = TypeVar("R", bound=RunFacts)


# -- the program's fingerprint ---------------------------------------------------------------


def fingerprint(program: Program) -> tuple[object, ...]:
    """Everything a pass could change: the printed program, every edge, slot identities, pairs, def-use."""
    edges = tuple(sorted((u, v, str(d.get("kind"))) for u, v, d in program.graph.edges(data=True)))
    slots = tuple(
        (s.name, str(s.type), str(s.init), s.address, None if s.alias_of is None else (type(s.alias_of).__name__, s.alias_of.name))
        for s in program.slots
    )
    pairs = tuple((str(p), id(p.slot)) for p in program.state_pairs)
    uses = tuple(
        (n.id, tuple(None if v is None else (v.name, len(v.uses), v.kind) for v in n.outputs))
        for n in (program.graph.nodes[i]["node"] for i in program.graph.nodes)
    )
    nodes = tuple(sorted(program.graph.nodes, key=str))  # node ids
    return (str(program), edges, slots, pairs, uses, nodes, tuple(o.name for o in program.outputs))


# -- selection ------------------------------------------------------------------------------


def _matches(code: str, pattern: str) -> bool:
    return code.startswith(pattern.strip().upper())


def selected_codes(known: Iterable[str], select: Sequence[str] | None = None, ignore: Sequence[str] | None = None) -> set[str]:
    """Codes left by ``select`` (codes or prefixes; None = all) minus ``ignore``; unknown patterns raise."""
    known = list(known)
    for pattern in [*(select or ()), *(ignore or ())]:
        if not pattern or not any(_matches(c, pattern) for c in known):
            raise SelectionError(f"{pattern!r} is not a rule code or prefix; known codes: {', '.join(known)}")
    chosen = {c for c in known if select is None or any(_matches(c, p) for p in select)}
    return {c for c in chosen if not any(_matches(c, p) for p in (ignore or ()))}


# -- the manager ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PassManager:
    """Runs passes over a program, keeps the selected codes, sorts the findings.

    Passes run with the program frozen (:meth:`rnnir.ir.Program.frozen`): a write to any of its slots,
    outputs, nodes, values or pairs raises, its containers are immutable, and the program's version must be
    the same after each pass.  That costs nothing per pass.  ``check_immutable="fingerprint"`` also prints
    and compares the whole program around every pass (a test-only switch: it catches writes that go around
    the freeze, such as ``object.__setattr__`` on a node, at the price of one printing per pass); ``False`` checks nothing.
    """

    passes: tuple[AnalysisPass, ...]
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    check_immutable: bool | str = True  # True: freeze + version; "fingerprint": also compare printings; False: off
    severity: Mapping[str, Severity] = dataclasses.field(default_factory=dict)  # per-code overrides (--strict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "passes", tuple(self.passes))
        if self.select is not None:
            object.__setattr__(self, "select", tuple(self.select))
        if self.ignore is not None:
            object.__setattr__(self, "ignore", tuple(self.ignore))
        _ = self.codes  # validate the selection now, not at the first run

    @property
    def codes(self) -> set[str]:
        known = [c for p in self.passes for c in p.codes()]
        return selected_codes(known, self.select, self.ignore)

    def run(self, program: Program) -> list[Diagnostic]:
        return self.run_with_facts(program)[0]

    def run_with_facts(self, program: Program, *, every_pass: bool = False) -> tuple[list[Diagnostic], ProgramFacts]:
        """The selected findings and the facts they were computed from (``every_pass``: run and keep every rule)."""
        codes = self.codes if not every_pass else {c for p in self.passes for c in p.codes()}
        facts = ProgramFacts(program)
        found: list[Diagnostic] = []
        per_pass: list[tuple[AnalysisPass, list[Diagnostic]]] = []
        before: tuple[object, ...] | None = None
        for p in self.passes:
            if not codes.intersection(p.codes()):
                continue
            reason = p.requires(facts)
            if reason is not None:
                raise PassContractError(f"pass {p.name!r} cannot run on program {program.name!r}: {reason}")
            if self.check_immutable == "fingerprint" and before is None:
                before = fingerprint(program)  # only once the first pass's requirements hold (a cycle has no print)
            version = program.version
            try:
                if self.check_immutable:
                    with program.frozen():
                        out = list(p.analyse(facts))
                else:
                    out = list(p.analyse(facts))
            except (FrozenProgramError, ImmutableIRError) as exc:
                raise PassContractError(f"analysis pass {p.name!r} changed program {program.name!r}: {exc}; analyses must not mutate the IR") from None
            if self.check_immutable and program.version != version:
                raise PassContractError(f"analysis pass {p.name!r} changed program {program.name!r}; analyses must not mutate the IR")
            if before is not None:  # one fingerprint per pass: each pass's "after" is the next one's "before"
                after = fingerprint(program)
                if after != before:
                    raise PassContractError(f"analysis pass {p.name!r} changed program {program.name!r}; analyses must not mutate the IR")
                before = after
            broken = p.ensures(facts, out)
            if broken is not None:
                raise PassContractError(f"pass {p.name!r} broke its contract on program {program.name!r}: {broken}")
            per_pass.append((p, out))
        for p, out in per_pass:
            others = [d for q, o in per_pass if q is not p for d in o]
            found.extend(d for d in p.settle(out, others) if d.code in codes)
        if self.severity:
            found = [dataclasses.replace(d, severity=self.severity[d.code]) if d.code in self.severity else d for d in found]
        return sorted(_dedupe(found), key=Diagnostic.sort_key), facts


def _dedupe(diags: Iterable[Diagnostic]) -> Iterator[Diagnostic]:
    seen: set[tuple[object, ...]] = set()
    for d in diags:
        key = (d.code, d.severity, d.message, d.locations, d.hint, d.slot)
        if key not in seen:
            seen.add(key)
            yield d
