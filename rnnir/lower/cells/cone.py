"""The state cone: the values that depend on a state source (state inputs, zeros a cell starts from, Loop-carried
state, confirmed cells' outputs), the state views among them, and the recogniser's record of anchors checked."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from itertools import compress
from typing import TYPE_CHECKING

from rnnir.ir.recurrence import kind_for_op
from rnnir.lower.cells.net import Net
from rnnir.lower.cells.ops import VIEW_OPS, Key, carry_layout
from rnnir.lower.cells.results import CellMatch, NotACell
from rnnir.lower.cells.zeros import constant_states as find_constant_states
from rnnir.lower.cells.zeros import output_region
from rnnir.lower.scope import ModelIndex, Scope

if TYPE_CHECKING:
    import onnx

    from rnnir.lower.cells.execute import ProbeData, Runner
    from rnnir.lower.cells.probe import Prober


class Recogniser:
    """One model's search for cells: its state cone and sources, the views into them, and which anchors were checked."""

    def __init__(self, index: ModelIndex, sources: Iterable[tuple[Scope, str]]) -> None:
        self.net = Net(index)
        self.sources: dict[Key, str] = {}  # source key -> "input" | cell output role ("h"/"c")
        self.cell_of_source: dict[Key, CellMatch] = {}
        self.loop_carried: dict[Key, tuple[onnx.NodeProto, Scope, int]] = {}  # body input -> (Loop, its scope, carried slot)
        for scope, name in sources:
            self.sources[self.net.key(scope, name)] = "input"
        # constant initial states (zeros) near the outputs are state sources too, so a cell that starts from one is
        # found and confirmed like any other; their cone stays inside the region walked back from the outputs
        region = output_region(self.net)
        constant_states = find_constant_states(self.net, region, self.sources)
        self.net.set_free(constant_states)
        self.cone = self._forward_cone(list(self.sources))
        if constant_states:
            for k in constant_states:
                self.sources.setdefault(k, "constant")
            self.cone |= self._forward_cone([k for k in constant_states if k not in self.cone], within=region)
        self._views: dict[Key, Key | None] = {}
        self.claimed: set[int] = set()  # ids of activation nodes that belong to an LSTM/GRU structure (never an RNN)
        self.lstm_claimed: set[int] = set()  # ... to an LSTM structure (never a GRU)
        self.done: set[int] = set()  # anchors checked by execution (confirmed or not): never checked again

    @cached_property
    def rng(self) -> ProbeData:
        """Probe data for checks by execution, made on first use."""
        from rnnir.lower.cells.execute import ProbeData  # the probing side loads only for a cone that holds nodes

        return ProbeData()

    @cached_property
    def prober(self) -> Prober:
        """Reads weights off the model and feeds its cells, on this recogniser's probe data."""
        from rnnir.lower.cells.probe import Prober

        return Prober(self.net, self.rng)

    @property
    def runner(self) -> Runner:
        return self.prober.runner

    def _forward_cone(self, seeds: list[Key], within: set[Key] | None = None) -> set[Key]:
        net = self.net
        seen = set(seeds)
        stack = list(seeds)
        while stack:
            k = stack.pop()
            for node, sc in net.consumers(k):
                if kind_for_op(node.op_type, node.domain) is not None:
                    continue  # its own state ports are handled by lowering; its results are not this cone
                layout = carry_layout(node)
                if layout is not None and within is None:  # a constant carried into a Loop is not looked for
                    # a state value carried into a Loop/Scan enters its body as a body input: a state source there
                    body = sc.children.get((id(node), "body"))
                    n_carried, in_off, body_in_off, _bo, _oo = layout
                    for j in range(n_carried):
                        pos = in_off + j
                        if pos < len(node.input) and node.input[pos] == k[1] and body is not None and body_in_off + j < len(body.graph.input):
                            carried = net.key(body, body.graph.input[body_in_off + j].name)
                            self.loop_carried[carried] = (node, sc, j)
                            self.sources.setdefault(carried, "input")
                            if carried not in seen:
                                seen.add(carried)
                                stack.append(carried)
                for ok in net.outputs_of(node, sc):
                    if ok is not None and ok not in seen and (within is None or ok in within):
                        seen.add(ok)
                        stack.append(ok)
            for ok in net.owner_outputs(k):
                if ok not in seen and (within is None or ok in within):
                    seen.add(ok)
                    stack.append(ok)
        return seen

    def view_source(self, k: Key) -> Key | None:
        """The state source ``k`` is a layout-only rearrangement of, or None."""
        if k in self._views:
            return self._views[k]
        chain: list[Key] = []
        cur: Key | None = k
        found: Key | None = None
        while cur is not None:
            if cur in self._views:
                found = self._views[cur]
                break
            if cur in self.sources:
                found = cur
                break
            chain.append(cur)
            if cur not in self.cone:
                break
            node = self.net.node(cur)
            if node is None or node.op_type not in VIEW_OPS or not node.input:
                break
            ins = self.net.inputs(cur)
            if any(i is not None and not self.net.is_const(i) for i in ins[1:]):
                break
            cur = ins[0]
        for c in chain:
            self._views[c] = found
        return found

    def cone_nodes(self) -> list[tuple[onnx.NodeProto, Scope, Key]]:
        """Each node producing a cone value, once, in a stable order (scope path, position)."""
        seen: set[int] = set()
        out: list[tuple[onnx.NodeProto, Scope, Key]] = []
        scopes: dict[int, Scope] = {}
        for k in self.cone:
            d = self.net.d(k)
            if d.kind != "node" or d.node is None or id(d.node) in seen:
                continue
            seen.add(id(d.node))
            scopes[id(d.scope)] = d.scope
            out.append((d.node, d.scope, self.net.key(d.scope, next(o for o in d.node.output if o))))
        # each cone node's position in its scope's node list, found by one C-level pass over the list: a map of every
        # output name to its position (Scope.positions) costs a hundred thousand entries for a cone of a few thousand
        position: dict[int, int] = {}
        for sc in scopes.values():
            nodes = sc.nodes
            for pos in compress(range(len(nodes)), map(seen.__contains__, map(id, nodes))):
                position[id(nodes[pos])] = pos
        out.sort(key=lambda t: (t[1].path, position[id(t[0])]))
        return out

    def add_sources(self, m: CellMatch) -> None:
        """A confirmed cell's outputs are state sources for the next step of an unrolled loop."""
        assert m.scope is not None
        self.sources[self.net.key(m.scope, m.h_out)] = "h"
        self.cell_of_source[self.net.key(m.scope, m.h_out)] = m
        if m.c_out is not None:
            self.sources[self.net.key(m.scope, m.c_out)] = "c"
            self.cell_of_source[self.net.key(m.scope, m.c_out)] = m
        self._views = {}

    def producer_op(self, k: Key | None) -> str | None:
        if k is None:
            return None
        n = self.net.node(k)
        return n.op_type if n is not None and n.domain in ("", "ai.onnx") else None

    def describe(self, k: Key) -> str:
        n = self.net.node(k)
        if n is None:
            return f"{self.net.d(k).kind} {k[1]!r}"
        return f"{n.op_type} {self.net.node_name(n)!r}"

    def pre(self, act_out: Key) -> Key:
        pre = self.net.inputs(act_out)[0]
        if pre is None:
            raise NotACell(f"activation {act_out[1]!r} has no input")
        return pre

    def step_number(self, body: Scope, name: str) -> bool:
        """``name`` is the Loop's iteration number in its body: the body's first input, or a carried counter that
        starts at 0 and is yielded as itself + 1 (TensorFlow's ``while`` keeps its own ``time`` this way)."""
        names = [vi.name for vi in body.graph.input]
        if name == names[0]:
            return True
        owner = body.owner
        pos = names.index(name) if name in names else -1
        if owner is None or pos < 2 or pos >= len(owner.input) or not owner.input[pos] or pos - 1 >= len(body.graph.output):
            return False
        start = self.net.const(self.net.key(body.parent, owner.input[pos])) if body.parent is not None else None
        if start is None or start.size != 1 or start.reshape(-1)[0] != 0:
            return False
        d = body.resolve(body.graph.output[pos - 1].name)
        while d.node is not None and d.node.op_type == "Identity" and d.node.domain in ("", "ai.onnx"):
            d = body.resolve(d.node.input[0])
        if d.node is None or d.node.op_type != "Add" or d.node.domain not in ("", "ai.onnx") or d.scope is not body:
            return False
        ins = list(d.node.input)
        if name not in ins or len(ins) != 2:
            return False
        one = self.net.const(self.net.key(body, ins[1 - ins.index(name)]))
        return one is not None and one.size == 1 and one.reshape(-1)[0] == 1
