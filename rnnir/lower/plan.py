"""Lowering's planning stage: which definitions carry state, in the order to build them.

Only values that depend on a state input or on a recurrent op's results become IR nodes. Two walks
decide which: first the state's own journey (paired outputs and recurrent state inputs, through any op),
then the other outputs only where they read a slot or rearrange a final state (a fan-out output like
``hn``, a reader of the live-in state), not everything downstream of a recurrent op. Each walk is
bounded by a forward pass from the state's seeds (:func:`may_carry_state`), so its cost follows the
state-carrying part of the graph, not the whole model.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, compress
from operator import attrgetter, not_

from rnnir.ir.recurrence import kind_for_op
from rnnir.lower.dataflow import if_dependencies
from rnnir.lower.recognise import Key, Recognised
from rnnir.lower.scope import Definition, ModelIndex, Scope
from rnnir.lower.state import LAYOUT_OPS, DeclaredState, key_of, recurrence_kind
from rnnir.onnxio.proto import ATTR

_NODES = attrgetter("nodes")

Demand = tuple[Scope, str]


@dataclass(frozen=True)
class BuildPlan:
    """The state-carrying definitions, each after every state-carrying definition it reads."""

    order: tuple[Definition, ...]


def dependencies(index: ModelIndex, recognised: Recognised, d: Definition) -> list[Demand]:
    """What a defined value depends on, for the taint walk (recurrent outputs depend on nothing)."""
    if d.kind != "node" or d.node is None:
        return []
    key = key_of(d)
    site = recognised.by_key.get(key)
    if site is not None:  # a recognised recurrence: like a recurrent op, only its state entries count,
        # and an input that is another recognised recurrence's output (a stacked layer), so it is built first;
        # a Loop output made from other state carried in reads that too (every key of a site builds all of it)
        carried = [site.carried[key].source] if key in site.carried else []
        return site.deps + [(sc, nm) for sc, nm in site.inputs if key_of(sc.resolve(nm)) in recognised.by_key] + carried
    if id(d.node) in recognised.replaced:
        return []  # an output of a Loop that a recognised recurrence stands for, carrying no state of it
    node = d.node
    if node.op_type == "If":
        return if_dependencies(d.scope, node)
    kind = kind_for_op(node.op_type, node.domain)
    if kind is not None:
        # only the state-carrying inputs (sequence_lens, initial_h, initial_c): X, W, R, B and P
        # are external to the state analysis, however large the graph that computes them
        return [(d.scope, node.input[i]) for i in kind.state_inputs if i < len(node.input) and node.input[i]]
    deps = [(d.scope, i) for i in node.input if i]
    for a in node.attribute:
        if a.type == ATTR.GRAPH:
            deps.extend((d.scope, nm) for nm in sorted(index.outer_names(a.g)))
    return deps


def plan_build(index: ModelIndex, state: DeclaredState, recognised: Recognised) -> BuildPlan:
    """The definitions to build: the state's journey first, then the other outputs that touch the state."""
    root = index.root
    outputs = [vi.name for vi in index.model.graph.output]
    paired_out = state.paired_outputs
    # 1. the state's own journey: paired outputs and recurrent state inputs, through any op
    demands: list[Demand] = [(root, name) for name in outputs if name in paired_out]
    for scope, node in index.recurrent:
        for i in recurrence_kind(node).state_inputs:
            if i < len(node.input) and node.input[i]:
                demands.append((scope, node.input[i]))
    for site in recognised.sites:
        demands.extend(site.deps)
    for p in state.pairs:
        demands.append((root, p.input))
    walk = _TaintWalk(index, state, recognised)
    order = walk.walk(demands, may_carry_state(index, state, recognised, through_recurrent_results=True))
    # 2. other outputs only where they read a slot or rearrange a final state (a fan-out output
    # like hn, a reader of the live-in state): not everything downstream of a recurrent op
    reachable = may_carry_state(index, state, recognised, through_recurrent_results=False)
    order += walk.walk([(root, name) for name in outputs if name not in paired_out], reachable)
    return BuildPlan(tuple(order))


def may_carry_state(index: ModelIndex, state: DeclaredState, recognised: Recognised, *, through_recurrent_results: bool) -> set[str]:
    """Names that may depend on state: the walk never leaves this set.

    Live-in state (slot loads) spreads through every op except into recurrent results.  Recurrent
    results spread through every op when ``through_recurrent_results``, else through layout-only ops.
    """
    if through_recurrent_results:
        closure = _closure_in_node_order(index, _seeds(index, state, recognised))
        if closure is not None:
            return closure
    seen: set[str] = set()
    queue: list[tuple[str, bool]] = []  # (name, reached through layout-only ops from a recurrent result)

    def add(name: str, layout_only: bool) -> None:
        if name and name not in seen:
            seen.add(name)
            queue.append((name, layout_only))

    for name in state.input_slots:
        add(name, False)
    for _, name in state.constant_slots:
        add(name, False)
    for _, node in index.recurrent:
        for o in node.output:
            add(o, not through_recurrent_results)
    for site in recognised.sites:
        for _scope, name in site.exit_names.values():
            add(name, not through_recurrent_results)
    consumers = index.consumers
    # each visited node's op and outputs: from the index's tables by id when made, else read from protobuf (a
    # flood from a few seeds visits a few thousand of 100k nodes: cheaper than making the tables); a flood that
    # goes on past an eighth of the nodes has the tables made and reads them from there on
    tables = index.node_tables_made
    budget = sum(map(len, map(_NODES, index.scopes()))) >> 3
    node_op, node_outputs = (index.node_op, index.node_outputs) if tables else ({}, {})
    # per (op_type, domain): 0 stops the spread (a recurrent op: its results are seeds already, the state it
    # reads does not flow through it), 1 passes any state, 2 passes state reached through layout-only ops too;
    # decided once per op, and the walk below inlines ``add``: it visits most of a big graph, twice
    spread: dict[tuple[str, str], int] = {}
    pop, push, mark = queue.pop, queue.append, seen.add
    while queue:
        name, layout_only = pop()
        for node in consumers.get(name, ()):
            nid = id(node)
            if tables:
                key = node_op[nid]
            else:
                budget -= 1
                if budget < 0:
                    tables = True
                    node_op, node_outputs = index.node_op, index.node_outputs
                    key = node_op[nid]
                else:
                    key = (node.op_type, node.domain)
            how = spread.get(key)
            if how is None:
                how = spread[key] = 0 if index.is_recurrent(*key) else 2 if key[0] in LAYOUT_OPS or key[0] == "If" else 1
            if how == 0 or (layout_only and how == 1):
                continue
            for o in node_outputs[nid] if tables else node.output:
                if o and o not in seen:
                    mark(o)
                    push((o, layout_only))
        for owner, k in index.subgraph_outputs.get(name, ()):
            if owner.op_type == "If":
                if k < len(owner.output):
                    add(owner.output[k], layout_only)
            elif not layout_only:  # Loop/Scan: any body output may feed any owner output
                for o in owner.output:
                    add(o, layout_only)
    return seen


def _seeds(index: ModelIndex, state: DeclaredState, recognised: Recognised) -> set[str]:
    """Where state starts: slot loads, constants made slots, recurrent results and recognised recurrences' exits."""
    seeds = set(state.input_slots)
    seeds.update(name for _, name in state.constant_slots)
    for _, node in index.recurrent:
        seeds.update(node.output)
    for site in recognised.sites:
        seeds.update(name for _scope, name in site.exit_names.values())
    seeds.discard("")  # an absent optional output is no value
    return seeds


def _closure_in_node_order(index: ModelIndex, seeds: set[str]) -> set[str] | None:
    """:func:`may_carry_state` through any op but a recurrent one, as one pass over the nodes in order: a node whose
    inputs are all defined before it carries state when one of them does.  None where that does not hold or the
    flood must look further: subgraphs (their outer reads and outputs), nodes out of order.

    The flood visits most of a large graph downstream of the first recurrent op, a dictionary lookup per reader;
    this is a set test per node (100k nodes: a third of the flood's time)."""
    root = index.root
    if not root.in_order:  # never with subgraphs either: a node holding one is not checked in order
        return None
    seen = set(seeds)
    # a recurrent op's results are seeds already, so no op needs leaving out; the set grows while it is tested,
    # each node against what the nodes before it added (update pulls the chain one output at a time, and compress
    # tests a node only once the outputs before it are taken); an absent output ("") is no value, and kept out, an
    # absent input never matches.  map and compress keep the per-node step out of Python bytecode
    touched = map(not_, map(seen.isdisjoint, root.node_inputs))
    seen.update(filter(None, chain.from_iterable(compress(root.node_outputs, touched))))
    return seen


class _TaintWalk:
    """Post-order walks over backward cones; a definition's verdict (tainted or not) is kept across walks."""

    def __init__(self, index: ModelIndex, state: DeclaredState, recognised: Recognised) -> None:
        self.index = index
        self.state = state
        self.recognised = recognised
        self.taint: dict[Key, bool] = {}

    def is_source(self, d: Definition) -> bool:
        """A slot's input, a constant made a slot, a recognised recurrence's exit or a recurrent op's output."""
        key = key_of(d)
        if d.kind == "input" and d.scope is self.index.root and d.name in self.state.input_slots:
            return True
        if key in self.state.constant_slots:
            return True
        if key in self.recognised.by_key:
            return self.recognised.by_key[key].exits[key] != "none"
        return d.kind == "node" and d.node is not None and kind_for_op(d.node.op_type, d.node.domain) is not None

    def walk(self, demands: list[Demand], reachable: set[str]) -> list[Definition]:
        """Post-order over the backward cone of ``demands`` within ``reachable``; returns the tainted definitions in order."""
        order: list[Definition] = []
        taint = self.taint
        for scope, name in demands:
            # each entry: a definition, and None until it is expanded, then what it reads (resolved once, and kept
            # for its verdict: a big model's state path is walked once, not read twice)
            stack: list[tuple[Definition, list[Definition] | None]] = [(scope.resolve(name), None)]
            while stack:
                d, deps = stack.pop()
                key = (id(d.scope), d.name)  # key_of, inline: once per definition and visit
                if deps is not None:
                    t = self.is_source(d) or any(taint.get((id(x.scope), x.name), False) for x in deps)
                    taint[key] = t
                    if t:
                        order.append(d)
                    continue
                if key in taint:
                    continue  # decided already, or in progress (this check alone breaks accidental loops)
                taint[key] = False  # provisional: marks "in progress"
                # what it reads outside ``reachable`` cannot depend on state: an external value at build time
                deps = [sc.resolve(nm) for sc, nm in dependencies(self.index, self.recognised, d) if nm in reachable]
                stack.append((d, deps))
                stack.extend((x, None) for x in deps)
        return order
