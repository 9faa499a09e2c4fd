"""What the main graph's dataflow says about its inputs and outputs: which carry a recurrence's state, which a sequence.

Pairing reads it (:func:`rnnir.lower.pairing.find_pairs`) when names say nothing:

- a **state link** is a graph input that reaches a recurrence's initial state through layout-only ops (and ``If``
  joins) together with the graph output that returns that very state's final value through layout-only ops: an
  ``RNN``/``GRU``/``LSTM`` (any kind in :data:`rnnir.ir.recurrence.KINDS`) ``initial_h`` and its ``Y_h``, or a
  ``Scan``/``Loop`` state variable and its final value, when the body computes the new value from the old one;
- a **sequence** input or output is one that feeds a recurrence's ``X`` or a ``Scan``'s scanned inputs, or returns
  ``Y`` or a scan output: data that streams through the call, never state, so position never pairs it;
- :meth:`Dataflow.state_flows` says whether an output is computed from an input at all, and not just the input
  handed back: a name alone (``opt_in`` / ``opt_out``) is no state when nothing flows between them.

The walks are over the ONNX graph before anything is built (pairs decide the slots), so a recurrence written as
plain ops is not seen here: its pairs come from names, position or a declaration.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.ir.recurrence import kind_for_op
from rnnir.lower.scope import Definition, ModelIndex, Scope, attribute_value
from rnnir.onnxio.proto import ATTR
from rnnir.util.fastinit import fast_init

if TYPE_CHECKING:  # `rnnir lint` of an exported model imports neither onnx nor numpy
    import onnx

__all__ = ["Dataflow", "StateLink", "if_dependencies", "layout_sources"]

LAYOUT_OPS = ops_with(OpTrait.LAYOUT)

#: what a layout-only walk back from a graph output ends at: a node's output (by node identity and output index),
#: or a value no node makes (a graph input, an initializer or a missing name)
_End = tuple[int, int] | str


@fast_init
@dataclass(frozen=True)
class StateLink:
    """A graph input that starts a recurrence's state and the graph output that returns the same state's final value."""

    input: str
    output: str
    reason: str


@fast_init
@dataclass(frozen=True)
class _Carrier:
    """One state of one recurrence: the node, the input position the state enters at and the output it leaves at."""

    scope: Scope
    node: onnx.NodeProto
    entry: int
    exit: int
    what: str  # "initial_h -> Y_h" / "state variable 0"


_LOOP_OPS = frozenset({("Scan", ""), ("Loop", ""), ("Scan", "ai.onnx"), ("Loop", "ai.onnx")})


def if_dependencies(scope: Scope, node: onnx.NodeProto) -> list[tuple[Scope, str]]:
    """What an If's outputs depend on: its condition and every branch's yields (the If is built once, for all its outputs)."""
    out = [(scope, node.input[0])] if node.input and node.input[0] else []
    for attr in ("then_branch", "else_branch"):
        sub = scope.child(node, attr)
        out.extend((sub, o.name) for o in sub.graph.output)
    return out


def _layout_walk(scope: Scope, name: str) -> Iterator[Definition]:
    """The definitions a walk back from ``name`` stops at, through layout-only ops (every part of a Concat: a stack)
    and the yields of both branches of an If (not its condition, which picks a branch and is no part of the value)."""
    stack = [(scope, name)]
    seen: set[tuple[int, str]] = set()
    while stack:
        sc, nm = stack.pop()
        d = sc.resolve(nm)
        key = (id(d.scope), d.name)
        if key in seen:
            continue
        seen.add(key)
        node = d.node  # set exactly when the name is a node's output (Scope.resolve)
        if node is not None and node.op_type in LAYOUT_OPS:
            parts = [i for i in node.input if i] if node.op_type == "Concat" else [node.input[0]] if node.input and node.input[0] else []
            stack.extend((d.scope, i) for i in parts)
        elif node is not None and node.op_type == "If":
            stack.extend((sub, o) for sub, o in if_dependencies(d.scope, node) if sub is not d.scope)
        else:
            yield d


def layout_sources(index: ModelIndex, scope: Scope, name: str) -> list[str]:
    """Main-graph inputs ``name`` is made of, through layout-only ops and If joins (:func:`_layout_walk`)."""
    return [d.name for d in _layout_walk(scope, name) if d.kind == "input" and d.scope is index.root]


def _layout_ends(scope: Scope, name: str) -> frozenset[_End]:
    """What ``name`` is made of, through layout-only ops and If joins: node outputs and values no node makes."""
    return frozenset(d.name if d.node is None else (id(d.node), d.index) for d in _layout_walk(scope, name))


def _depends(index: ModelIndex, scope: Scope, output: str, source: str) -> bool:
    """``output`` of ``scope``'s graph is computed from ``source`` (a name of the same scope), not merely ``source``
    handed back through layout-only ops."""
    if _layout_ends(scope, output) == {source}:
        return False  # the source itself, rearranged at most
    stack, seen = [output], set()
    while stack:
        nm = stack.pop()
        if nm == source:
            return True
        if nm in seen:
            continue
        seen.add(nm)
        hit = scope.producers.get(nm)
        if hit is None:
            continue
        node = hit[0]
        stack.extend(i for i in node.input if i)
        for attr in node.attribute:
            subs = [attr.g] if attr.type == ATTR.GRAPH else list(attr.graphs)
            for sub in subs:
                stack.extend(index.outer_names(sub))
    return False


class Dataflow:
    """The state links and sequence inputs/outputs of one model's main graph (see the module docstring)."""

    def __init__(self, index: ModelIndex) -> None:
        self.index = index
        # Scan and Loop nodes with a body, from the (op_type, domain) the index read once per node
        # (a scope's nodes are looked at only if it has such an op at all: most have none, and big graphs are big)
        self._loops = [
            (scope, node)
            for scope in index.scopes()
            if not _LOOP_OPS.isdisjoint(scope.node_ops)
            for node, key in zip(scope.nodes, scope.node_ops)
            if key in _LOOP_OPS and (id(node), "body") in scope.children
        ]
        self._sources: dict[tuple[int, str], list[str]] = {}

    def sources_of(self, scope: Scope, name: str) -> list[str]:
        """:func:`layout_sources`, walked once per name: lowering asks for every recurrent initial state's (which
        graph inputs feed one), pairing for the same states' again (which input starts each)."""
        key = (id(scope), name)
        hit = self._sources.get(key)
        if hit is None:
            hit = self._sources[key] = layout_sources(self.index, scope, name)
        return hit

    # each part is walked when first asked for: pairing asks for the links only when an input and an output are left
    # over, and for the sequences only when some could pair by position (1,000 recurrences: a layout walk each)
    @cached_property
    def _started(self) -> dict[_End, tuple[_Carrier, str | None]]:
        """Each state: its exit as a layout walk sees it, and the one graph input it starts from (None: none, or several)."""
        started: dict[_End, tuple[_Carrier, str | None]] = {}
        for c in self._carriers():
            if c.entry >= len(c.node.input) or not c.node.input[c.entry] or c.exit >= len(c.node.output) or not c.node.output[c.exit]:
                continue
            sources = self.sources_of(c.scope, c.node.input[c.entry])
            started[(id(c.node), c.exit)] = (c, sources[0] if len(sources) == 1 else None)
        return started

    @cached_property
    def _ends(self) -> dict[str, frozenset[_End]]:
        """What each graph output is made of (:func:`_layout_ends`)."""
        root = self.index.root
        return {vi.name: _layout_ends(root, vi.name) for vi in root.graph.output}

    @cached_property
    def links(self) -> tuple[StateLink, ...]:
        """The state links, in the graph's input order."""
        index, started = self.index, self._started
        # the ends each input starts, gathered once: checking every start per graph output is quadratic in 1,000 RNNs
        started_from: dict[str | None, set[_End]] = {}
        for e, (_, src) in started.items():
            started_from.setdefault(src, set()).add(e)
        links: list[StateLink] = []
        for out, ends in self._ends.items() if started else ():
            if not ends or not ends <= started.keys():
                continue  # not made of final states alone
            inputs = {started[e][1] for e in ends}
            if len(inputs) != 1 or None in inputs:
                continue  # final states of states started from different inputs (or from one an If picks): no one pair
            (name,) = inputs
            assert name is not None
            if not started_from[name] <= ends:
                continue  # the input starts more states than the output returns: a part is no pair
            what = " and ".join(sorted({f"{started[e][0].what} of {index.node_name(started[e][0].node)!r}" for e in ends}))
            links.append(StateLink(name, out, f"{name!r} starts {what}, whose final value {out!r} returns"))
        order = {vi.name: k for k, vi in enumerate(index.root.graph.input)}
        return tuple(sorted(links, key=lambda link: order.get(link.input, len(order))))  # in the graph's input order

    def links_from(self, inputs: Collection[str]) -> tuple[StateLink, ...]:
        """The links whose input is one of ``inputs``: none without walking the outputs when no state starts from one."""
        if not any(src in inputs for _, src in self._started.values()):
            return ()
        return tuple(link for link in self.links if link.input in inputs)

    @property
    def sequence_inputs(self) -> frozenset[str]:
        return self._sequences[0]

    @property
    def sequence_outputs(self) -> frozenset[str]:
        return self._sequences[1]

    def state_flows(self, input: str, output: str) -> bool:
        """Graph output ``output`` is computed from graph input ``input``, not that input handed back unchanged."""
        return _depends(self.index, self.index.root, output, input)

    def _made_of(self, ends: set[_End]) -> list[str]:
        """Graph outputs made of nothing but (some of) ``ends``, through layout-only ops."""
        return [name for name, e in self._ends.items() if e and e <= ends]

    def _carriers(self) -> Iterator[_Carrier]:
        index = self.index
        for scope, node in index.recurrent:
            kind = kind_for_op(node.op_type, node.domain)
            if kind is None:
                continue
            for state in kind.states:
                entry, exit_ = kind.input_index(state.entry), kind.output_index(state.exit)
                if entry is not None and exit_ is not None:
                    yield _Carrier(scope, node, entry, exit_, f"{state.entry} -> {state.exit}")
        for scope, node in self._loops:
            body = scope.child(node, "body")
            first_in, first_body_in, first_body_out = self._carried_offsets(node)
            for k in range(max(0, self._carried_count(node, body))):
                if first_body_in + k >= len(body.graph.input) or first_body_out + k >= len(body.graph.output):
                    break  # a body with fewer outputs than carried inputs: onnx refuses it; nothing to pair
                body_in = body.graph.input[first_body_in + k].name
                body_out = body.graph.output[first_body_out + k].name
                if _depends(index, body, body_out, body_in):  # the body computes the new value from the old one
                    yield _Carrier(scope, node, first_in + k, k, f"{node.op_type} state variable {k}")

    def _carried_offsets(self, node: onnx.NodeProto) -> tuple[int, int, int]:
        """(first carried input of the node, of its body, first carried output of its body)."""
        if node.op_type == "Loop":
            return 2, 2, 1  # Loop(M, cond, v...): body(iter, cond, v...) -> (cond, v..., scans...)
        scan8 = self.index.opsets.get("", 0) < 9
        return (1 if scan8 else 0), 0, 0  # Scan-8 takes sequence_lens first

    def _carried_count(self, node: onnx.NodeProto, body: Scope) -> int:
        if node.op_type == "Loop":
            return len(body.graph.input) - 2
        return len(body.graph.input) - int(attribute_value(node, "num_scan_inputs", 0))

    @cached_property
    def _sequences(self) -> tuple[frozenset[str], frozenset[str]]:
        index = self.index
        ins: set[str] = set()
        seq_ends: set[_End] = set()
        for scope, node in index.recurrent:
            kind = kind_for_op(node.op_type, node.domain)
            if kind is None:
                continue
            x, y = kind.input_index("X"), kind.output_index(kind.sequence_output)
            if x is not None and x < len(node.input) and node.input[x]:
                ins.update(layout_sources(index, scope, node.input[x]))
            if y is not None:
                seq_ends.add((id(node), y))
        for scope, node in self._loops:
            carried = self._carried_count(node, scope.child(node, "body"))
            first_in = self._carried_offsets(node)[0]
            if node.op_type == "Scan":
                for name in node.input[first_in + max(0, carried) :]:
                    if name:
                        ins.update(layout_sources(index, scope, name))
            seq_ends.update((id(node), k) for k in range(max(0, carried), len(node.output)))
        return frozenset(ins), frozenset(self._made_of(seq_ends))
