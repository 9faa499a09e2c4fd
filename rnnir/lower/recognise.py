"""Recurrences written as plain ops, turned into sites that lowering builds as :class:`rnnir.ir.Recurrent` nodes.

:func:`rnnir.lower.cells.find_cells` finds and confirms cells. This module decides what each one stands
for in the IR:

- **a cell** (one time step): a ``Recurrent`` whose ``initial_h``/``initial_c`` are the state views the cell
  reads and whose ``Y_h``/``Y_c`` are the values of its new state;
- **an unrolled loop**: cells with the same weights threaded ``h -> h`` and ``c -> c`` become *one*
  ``Recurrent`` from the first step's state to the last step's. A step's state read anywhere else is that
  recurrence at an inner step: ``h`` after step ``t`` is ``Y[t]`` (so writing it back is SD003, "the state
  after step t ... not its final state"); ``c`` after an inner step has no ONNX port and is a value derived
  from the recurrence (SD003 as a warning when written back). Steps threaded any other way (``c`` read
  from the previous step's ``h``) stay separate recurrences, so the write-back comes from one that never read
  the slot: SD003 again;
- **a Loop carrying state**: its body's cell reads loop-carried values; the ``Recurrent`` stands for the whole
  Loop: ``initial_h``/``initial_c`` are the Loop inputs carried into the cell's ``h``/``c``, ``Y_h``/``Y_c`` the
  Loop outputs whose body yields are the cell's new ``h``/``c``, ``Y`` a scan output that collects ``h``.
  A body that yields ``(c', h')`` in the carried slots of ``(h, c)`` therefore makes the Loop's first output
  ``Y_c``: returning it as ``h`` is SD002 by the existing rules. A carried state the body transforms in a way
  no recognised cell explains is reported as a candidate (unverified), naming the Loop and the body node.

Keys are lowering's value keys: ``(id(defining scope), name)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.ir.recurrence import STATE_C, STATE_H, Recognition, kind_for_op
from rnnir.lower.cells.ops import carry_layout
from rnnir.lower.cells.results import CellCandidate, CellMatch, CellWeights
from rnnir.lower.cells.scan import CellScan, find_cells
from rnnir.lower.scope import ModelIndex, Scope
from rnnir.lower.scope import attribute_value as _attr
from rnnir.onnxio.proto import attribute_value

if TYPE_CHECKING:
    import numpy as np
    import onnx
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["RecurrenceSite", "Recognised", "recognise"]

Key = tuple[int, str]

#: ops through which a new state may travel to where it is returned (for "is this cell's output state?")
_CARRY_OPS = ops_with(OpTrait.LAYOUT) - {"Expand"}
_SAME_DATA_OPS = frozenset({"Identity", "Cast", "CastLike", "Squeeze", "Unsqueeze", "Reshape", "Flatten"})  # one input, same elements
_DEFAULT_ACTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}




@dataclass(frozen=True)
class CarriedExit:
    """A replaced Loop's output for a carried state its recognised cell does not read or write.

    ``op`` is ``Identity`` when the body yields the carried value back through Identity only (the output is
    the input, whatever the trip count), else the Loop's own op type: an opaque change of the state that
    rnnir does not follow, so the slot it is written to is reported unverified, not "depends on no state".
    """

    source: tuple[Scope, str]  # the Loop input carried in
    op: str


@dataclass(eq=False)
class RecurrenceSite:
    """One recurrence found in plain ops, ready to be built as a ``Recurrent``.

    ``entries`` maps an entry port (initial_h/initial_c) to the (scope, name) of the value it reads;
    ``exits`` maps a value key to the role it plays: ``Y``, ``Y_h``, ``Y_c``, ``h@t`` / ``c@t`` (the state
    after inner step ``t`` of an unrolled loop) or ``none`` (an output of a replaced Loop that carries no
    recognised state: an external value, unless ``carried`` says which carried state it comes from).
    ``carried`` maps a replaced Loop's output that carries state the recognised cell does not explain to how
    it is made from the Loop input carried in.
    """

    kind: str
    recognition: Recognition
    scope: Scope
    anchor: str
    recognised_from: tuple[str, ...]
    weights: CellWeights
    hidden_size: int
    x: tuple[Scope, str] | None  # a Loop's sequence input, sliced per iteration by its body
    entries: dict[str, tuple[Scope, str]]
    exits: dict[Key, str] = field(default_factory=dict)
    exit_names: dict[Key, tuple[Scope, str]] = field(default_factory=dict)
    steps: int = 1
    cells: tuple[CellMatch, ...] = ()
    zero_starts: frozenset[str] = frozenset()  # entry ports that read zeros the model makes (not a state input)
    carried: dict[Key, CarriedExit] = field(default_factory=dict)

    @property
    def deps(self) -> list[tuple[Scope, str]]:
        """What the site's results depend on in the state analysis: its state entries only."""
        return list(self.entries.values())

    @property
    def inputs(self) -> list[tuple[Scope, str]]:
        """The values the site reads as X (each step's cell inputs, or a Loop's sequence)."""
        if self.x is not None:
            return [self.x]
        return [(m.scope, name) for m in self.cells if m.scope is not None for name in m.x]


@dataclass
class Recognised:
    sites: list[RecurrenceSite] = field(default_factory=list)
    candidates: list[CellCandidate] = field(default_factory=list)
    by_key: dict[Key, RecurrenceSite] = field(default_factory=dict)
    replaced: set[int] = field(default_factory=set)  # ids of Loop nodes a site stands for

    def role(self, key: Key) -> tuple[RecurrenceSite, str] | None:
        site = self.by_key.get(key)
        return None if site is None else (site, site.exits[key])


def _key(scope: Scope, name: str) -> Key:
    d = scope.resolve(name)
    return (id(d.scope), d.name)


def _same_cell(a: CellMatch, b: CellMatch) -> bool:
    wa, wb = a.weights, b.weights
    return (
        a.kind == b.kind
        and wa.activations == wb.activations
        and wa.linear_before_reset == wb.linear_before_reset
        and wa.W.shape == wb.W.shape
        and bool(np.allclose(wa.W, wb.W, atol=1e-6) and np.allclose(wa.R, wb.R, atol=1e-6) and np.allclose(wa.B, wb.B, atol=1e-6))
    )


class _Builder:
    def __init__(self, index: ModelIndex, scan: CellScan, state_outputs: set[str]) -> None:
        self.index = index
        self.scan = scan
        self.state_outputs = state_outputs
        self.graph_outputs = {o.name for o in index.root.graph.output}
        self.out = Recognised(candidates=list(scan.candidates))

    def _scope_of(self, m: CellMatch) -> Scope:
        assert m.scope is not None
        return m.scope

    def _out_key(self, m: CellMatch, name: str | None) -> Key | None:
        return None if name is None else _key(self._scope_of(m), name)

    def _feeds_state(self, m: CellMatch, cell_sources: set[Key]) -> bool:
        """An RNN match only counts when its new state goes somewhere state goes (LSTM/GRU shapes are specific enough)."""
        if m.kind != "RNN":
            return True
        start = self._out_key(m, m.h_out)
        assert start is not None
        stack = [start]
        seen: set[Key] = set()
        consumers = self.index.consumers
        while stack and len(seen) < 64:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            if k in cell_sources or (k[0] == id(self.index.root) and k[1] in self.state_outputs):
                return True
            if k[0] == id(self.index.root) and k[1] in self.graph_outputs and self.scan.is_zero_start(self._scope_of(m), m.h_source):
                return True  # a cell that starts from zeros and returns its new state: a state the model does not expose
            name = k[1]
            for owner, _pos in self.index.subgraph_outputs.get(name, ()):
                if owner.op_type in ("Loop", "If"):
                    return True  # yielded as a loop-carried or branch result: state leaves through it
            for node in consumers.get(name, ()):
                if node.op_type in _CARRY_OPS:
                    for sc in self._scopes_under(m):
                        if sc.producers.get(node.output[0], (None,))[0] is node:
                            stack.extend(_key(sc, o) for o in node.output if o)
                            break
        return False

    def _scopes_under(self, m: CellMatch) -> list[Scope]:
        out = []
        stack = [self._scope_of(m)]
        while stack:
            sc = stack.pop()
            out.append(sc)
            stack.extend(sc.children.values())
        return out

    def build(self) -> Recognised:
        matches = self.scan.matches
        cell_sources = {_key(self._scope_of(m), m.h_source) for m in matches} | {_key(self._scope_of(m), m.c_source) for m in matches if m.c_source}
        matches = [m for m in matches if self._feeds_state(m, cell_sources)]
        # unrolled loops: link each cell to the one whose outputs it reads as h and c, when it is the same cell
        by_out: dict[Key, CellMatch] = {}
        for m in matches:
            by_out[self._out_key(m, m.h_out)] = m  # type: ignore[index]
        pred: dict[int, CellMatch] = {}
        succ: dict[int, list[CellMatch]] = {}
        for m in matches:
            p = by_out.get(_key(self._scope_of(m), m.h_source))
            if p is None or not _same_cell(p, m):
                continue
            if m.kind == "LSTM" and (m.c_source is None or p.c_out is None or _key(self._scope_of(m), m.c_source) != self._out_key(p, p.c_out)):
                continue
            pred[id(m)] = p
            succ.setdefault(id(p), []).append(m)
        in_loop = {k for k in self.scan.loop_carried}
        loop_cells: list[CellMatch] = []
        for m in matches:
            if id(m) in pred:
                continue
            chain = [m]
            while len(succ.get(id(chain[-1]), [])) == 1:
                chain.append(succ[id(chain[-1])][0])
            if (self._scope_of(m), m.h_source) in in_loop or any(self.scan.view_source(self._scope_of(m), m.h_source) == k for k in in_loop):
                loop_cells.append(m)
                continue
            self._chain_site(chain)
        self._loop_sites(loop_cells)
        return self.out

    def _register(self, site: RecurrenceSite, key: Key | None, role: str, scope: Scope, name: str) -> None:
        if key is None:
            return
        site.exits[key] = role
        site.exit_names[key] = (scope, name)
        self.out.by_key[key] = site

    def _chain_site(self, chain: list[CellMatch]) -> None:
        first, last = chain[0], chain[-1]
        scope = self._scope_of(first)
        entries = {STATE_H.entry: (scope, first.h_in)}
        if first.c_in is not None:
            entries[STATE_C.entry] = (scope, first.c_in)
        nodes: list[str] = []
        for m in chain:
            nodes.extend(n for n in m.nodes if n not in nodes)
        site = RecurrenceSite(
            kind=first.kind,
            recognition=Recognition.CELL if len(chain) == 1 else Recognition.UNROLLED,
            scope=self._scope_of(last),
            anchor=first.anchor,
            recognised_from=tuple(nodes),
            weights=first.weights,
            hidden_size=first.hidden_size,
            x=None,
            entries=entries,
            steps=len(chain),
            cells=tuple(chain),
            zero_starts=frozenset(
                port for port, src in ((STATE_H.entry, first.h_source), (STATE_C.entry, first.c_source)) if src and self.scan.is_zero_start(scope, src)
            ),
        )
        for t, m in enumerate(chain):
            ms = self._scope_of(m)
            final = t == len(chain) - 1
            self._register(site, self._out_key(m, m.h_out), STATE_H.exit if final else f"h@{t}", ms, m.h_out)
            if m.c_out is not None:
                self._register(site, self._out_key(m, m.c_out), STATE_C.exit if final else f"c@{t}", ms, m.c_out)
        self.out.sites.append(site)

    def _loop_sites(self, cells: Iterable[CellMatch]) -> None:
        by_loop: dict[int, list[CellMatch]] = {}
        loops: dict[int, tuple[onnx.NodeProto, Scope]] = {}
        for m in cells:
            src = self.scan.view_source(self._scope_of(m), m.h_source)
            where = self.scan.loop_carried.get(src) if src is not None else None
            if where is None:
                continue
            loop, lscope, _slot = where
            by_loop.setdefault(id(loop), []).append(m)
            loops[id(loop)] = (loop, lscope)
        # an ONNX recurrent op in a Loop body that reads carried state (TorchScript's aten::lstm_cell in a scripted loop)
        for scope, node in self.index.recurrent:
            owner = scope.owner
            if owner is None or carry_layout(owner) is None or scope.parent is None:
                continue
            op_cell = self._op_as_cell(scope, node)
            if op_cell is None:
                continue
            src = self.scan.view_source(scope, op_cell.h_in)
            where = self.scan.loop_carried.get(src) if src is not None else None
            if where is not None and where[0] is owner:
                by_loop.setdefault(id(owner), []).append(op_cell)
                loops[id(owner)] = (owner, scope.parent)
        # Loops that carry state but hold no recognised cell: say what stopped understanding
        carried_by_loop: dict[int, list[tuple[Scope, str, int]]] = {}
        for (bscope, bname), (loop, lscope, slot) in self.scan.loop_carried.items():
            carried_by_loop.setdefault(id(loop), []).append((bscope, bname, slot))
            loops.setdefault(id(loop), (loop, lscope))
        for lid, (loop, lscope) in loops.items():
            ms = by_loop.get(lid, [])
            if not ms:
                continue  # no recurrence in the body: the unverified verdict already says the body is not understood
            if len(ms) > 1:
                lname = self.index.node_name(loop)
                for bscope, bname, _slot in carried_by_loop.get(lid, []):
                    self.out.candidates.append(
                        CellCandidate("Loop", lname, f"state carried by Loop {lname!r} as {bname!r} reaches {len(ms)} recurrences in its body", bscope.path)
                    )
                continue
            self._loop_site(loop, lscope, ms[0], carried_by_loop.get(lid, []))

    def _loop_site(self, loop: onnx.NodeProto, lscope: Scope, m: CellMatch, carried: list[tuple[Scope, str, int]]) -> None:
        body = lscope.child(loop, "body")
        layout = carry_layout(loop)
        assert layout is not None
        n_carried, in_off, _body_in_off, body_out_off, out_off = layout
        lname = self.index.node_name(loop)
        if loop.op_type == "Scan" and any(
            a.name in ("scan_input_directions", "scan_output_directions") and any(attribute_value(a)) for a in loop.attribute
        ):
            for bscope, bname, _slot in carried:
                self.out.candidates.append(CellCandidate("Loop", lname, f"state carried by Scan {lname!r} as {bname!r} runs over a reversed sequence", bscope.path))
            return
        yields = [o.name for o in body.graph.output]
        slot_of = {bname: slot for _bs, bname, slot in carried}

        def carried_slot(name: str | None) -> int | None:
            if name is None:
                return None
            src = self.scan.view_source(body, name)
            return slot_of.get(src[1]) if src is not None and src[0] is body else None

        h_slot = carried_slot(m.h_in)
        c_slot = carried_slot(m.c_in)
        entries = {}
        if h_slot is not None:
            entries[STATE_H.entry] = (lscope, loop.input[in_off + h_slot])
        if c_slot is not None:
            entries[STATE_C.entry] = (lscope, loop.input[in_off + c_slot])
        site = RecurrenceSite(
            kind=m.kind,
            recognition=Recognition.LOOP,
            scope=lscope,
            anchor=lname,
            recognised_from=(lname, *m.nodes),
            weights=m.weights,
            hidden_size=m.hidden_size,
            x=self._loop_sequence(loop, lscope, body, m),
            entries=entries,
            cells=(m,),
        )
        h_key, c_key = _key(body, m.h_out), (None if m.c_out is None else _key(body, m.c_out))
        mapped: set[int] = set()
        for j in range(n_carried):
            y = yields[body_out_off + j] if body_out_off + j < len(yields) else None
            out = loop.output[out_off + j] if out_off + j < len(loop.output) else ""
            if y is None or not out:
                continue
            role = self._yield_role(body, y, h_key, c_key)
            if role is not None:
                self._register(site, _key(lscope, out), role, lscope, out)
                mapped.add(j)
            else:
                self._register(site, _key(lscope, out), "none", lscope, out)
        for k, y in enumerate(yields[body_out_off + n_carried :]):
            pos = out_off + n_carried + k
            if pos < len(loop.output) and loop.output[pos]:
                role = self._yield_role(body, y, h_key, None)
                self._register(site, _key(lscope, loop.output[pos]), "Y" if role == STATE_H.exit else "none", lscope, loop.output[pos])
        # a carried state slot the recognised cell does not explain: unverified
        for bscope, bname, slot in carried:
            if slot in mapped:
                continue
            y = yields[body_out_off + slot] if body_out_off + slot < len(yields) else None
            src = self.scan.view_source(body, y) if y else None
            out = loop.output[out_off + slot] if out_off + slot < len(loop.output) else ""
            if out and y is not None:
                op = "Identity" if self._yields_input(body, y, bname) else loop.op_type
                site.carried[_key(lscope, out)] = CarriedExit((lscope, loop.input[in_off + slot]), op)
            if src is not None and src[1] == bname:
                continue  # carried through unchanged
            what = self._first_compute(body, y) if y else "nothing"
            self.out.candidates.append(
                CellCandidate("Loop", lname, f"state carried by Loop {lname!r} as {bname!r} is transformed in its body by {what}, which rnnir does not understand", bscope.path)
            )
        self.out.replaced.add(id(loop))
        self.out.sites.append(site)

    def _op_as_cell(self, scope: Scope, node: onnx.NodeProto) -> CellMatch | None:
        """A one-direction ONNX RNN/GRU/LSTM with constant weights, described like a recognised cell."""
        kind = kind_for_op(node.op_type, node.domain)
        if kind is None or not kind.onnx or _attr(node, "direction", "forward") != "forward" or _attr(node, "layout", 0):
            return None
        ins = list(node.input) + [""] * (len(kind.inputs) - len(node.input))
        port = {p: ins[i] for i, p in enumerate(kind.inputs)}
        if port.get("sequence_lens") or port.get("P") or _attr(node, "clip") is not None or _attr(node, "input_forget", 0):
            return None
        W, R = self.scan.const(scope, port["W"]), self.scan.const(scope, port["R"])
        hidden = _attr(node, "hidden_size")
        if W is None or R is None or not isinstance(hidden, int) or not port.get(STATE_H.entry):
            return None
        gates = W.shape[1]
        B = self.scan.const(scope, port["B"]) if port.get("B") else np.zeros((1, 2 * gates))
        if B is None:
            return None
        acts = _attr(node, "activations") or _DEFAULT_ACTS[kind.name]
        outs = list(node.output) + ["", "", ""]
        h_in = port[STATE_H.entry]
        c_in = port.get(STATE_C.entry) or None
        return CellMatch(
            kind=kind.name,
            scope_path=scope.path,
            nodes=(self.index.node_name(node),),
            x=(port["X"],),
            h_in=self._strip_unsqueeze(scope, h_in),
            c_in=None if c_in is None else self._strip_unsqueeze(scope, c_in),
            h_out=outs[1],
            c_out=outs[2] or None if kind.name == "LSTM" else None,
            hidden_size=hidden,
            weights=CellWeights(
                W.astype(np.float64),
                R.astype(np.float64),
                B.astype(np.float64),
                tuple(acts),
                int(_attr(node, "linear_before_reset", 0) or 0),
                None if _attr(node, "activation_alpha") is None else tuple(_attr(node, "activation_alpha")),
                None if _attr(node, "activation_beta") is None else tuple(_attr(node, "activation_beta")),
            ),
            h_source="",
            scope=scope,
        )

    def _strip_unsqueeze(self, scope: Scope, name: str) -> str:
        """The [batch, hidden] value an op's [1, batch, hidden] initial state unsqueezes (the site adds the axis back)."""
        d = scope.resolve(name)
        if d.node is not None and d.node.op_type == "Unsqueeze" and d.node.input:
            inner: str = d.node.input[0]
            return inner
        return name

    @staticmethod
    def _yields_input(body: Scope, name: str, body_input: str) -> bool:
        """``name`` is the body input ``body_input`` itself or reached from it through Identity only (a Reshape or
        Transpose in the way would make the Loop's result a rearrangement, not the value carried in)."""
        d = body.resolve(name)
        while d.node is not None and d.node.op_type == "Identity" and d.node.domain in ("", "ai.onnx"):
            d = d.scope.resolve(d.node.input[0])  # scope validation: an Identity has its input, and no cycle
        return d.kind == "input" and d.scope is body and d.name == body_input

    def _first_compute(self, body: Scope, name: str) -> str:
        """The first op on the way back from a yield that is not a layout-only rearrangement (what changed the state)."""
        d = body.resolve(name)
        for _ in range(32):
            node = d.node
            if node is None:
                return f"{d.kind} {d.name!r}"
            if node.op_type not in _CARRY_OPS or not node.input or not node.input[0]:
                return f"{node.op_type} {self.index.node_name(node)!r}"
            d = d.scope.resolve(node.input[0])
        return repr(name)

    def _loop_sequence(self, loop: onnx.NodeProto, lscope: Scope, body: Scope, m: CellMatch) -> tuple[Scope, str] | None:
        """The tensor the body reads one step of as the cell's input: a Scan's scanned input (axis 0), or in a Loop
        x[t] = Gather(seq, t) on axis 0, ``t`` the iteration number or a carried counter that equals it."""
        if len(m.x) != 1 or not body.graph.input:
            return None
        if loop.op_type == "Scan":
            layout = carry_layout(loop)
            assert layout is not None
            names = [vi.name for vi in body.graph.input]
            pos = names.index(m.x[0]) if m.x[0] in names else -1
            axes = next((list(attribute_value(a)) for a in loop.attribute if a.name == "scan_input_axes"), [])
            if pos < layout[0] or any(axes) or pos >= len(loop.input):
                return None
            return (lscope, loop.input[pos])
        d = body.resolve(m.x[0])
        while d.node is not None and d.node.op_type in ("Unsqueeze", "Identity") and d.node.input:
            d = body.resolve(d.node.input[0])
        node = d.node
        if node is None or node.op_type != "Gather" or len(node.input) < 2 or int(next((a.i for a in node.attribute if a.name == "axis"), 0)) != 0:
            return None
        if not self.scan.is_step_number(body, node.input[1]):
            return None
        seq = body.resolve(node.input[0])
        return (seq.scope, seq.name) if seq.scope is not body else None

    def _yield_role(self, body: Scope, y: str, h_key: Key, c_key: Key | None) -> str | None:
        """Y_h / Y_c when the body yields (a layout view of) the cell's new h / c."""
        k = _key(body, y)
        seen = 0
        while seen < 16:
            seen += 1
            if k == h_key:
                return STATE_H.exit
            if c_key is not None and k == c_key:
                return STATE_C.exit
            d = body.resolve(k[1]) if k[0] == id(body) else None
            if d is None or d.node is None or d.node.op_type not in _SAME_DATA_OPS or not d.node.input:
                return None
            k = _key(d.scope, d.node.input[0])
        return None


def recognise(index: ModelIndex, sources: Iterable[tuple[Scope, str]], state_outputs: Iterable[str] = ()) -> Recognised:
    """Recurrences written as plain ops in the cone of ``sources``, as sites for lowering (see the module doc)."""
    scan = find_cells(index, sources)
    if not scan.matches and not scan.candidates and not scan.loop_carried:
        return Recognised()
    return _Builder(index, scan, set(state_outputs)).build()
