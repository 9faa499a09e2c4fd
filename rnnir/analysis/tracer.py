"""The slice tracer: abstract values of IR values, slice by slice along a state's leading axes.

An abstract interpreter over layout-only ops (Identity, Cast, Gather, Slice,
Split, Squeeze, Unsqueeze, Reshape, Concat, Transpose) follows each element
along a state's first axis: a packed ``state[2, B, H]`` resolves to
``state[0] -> LSTM.initial_h`` and ``state[1] -> LSTM.initial_c``, and the
value written back resolves to ``Y_h``/``Y_c`` of a recurrent op, per If
branch.  Anything computed by other ops is *derived* and keeps only the set of
origins it depends on.  The per-pair slice maps built from it are :mod:`rnnir.analysis.slices`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from rnnir.analysis.facts import Analysis, AnalysisManager, analyses
from rnnir.analysis.statekinds import APPEND_OPS, END, Cut, Window
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, LoadSlot, PendingConst, Recurrent, Store, Value
from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.util.fastinit import fast_init

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np

_BIG = 2**62
_MAX_ELEMS = 256

class OriginKind(str, Enum):
    """Where a traced tensor comes from: a slot's load, or a port of a recurrent op."""

    SLOT = "slot"
    PORT = "port"


class Origin(NamedTuple):
    """A source tensor of the trace: slot ``owner`` (``port`` empty), or port ``port`` of node ``owner`` (its id).

    A tuple, not a dataclass: the tracer hashes origins in every set it builds, and tuples hash fastest."""

    kind: OriginKind
    owner: str
    port: str = ""

    @classmethod
    def of_slot(cls, name: str) -> Origin:
        return cls(OriginKind.SLOT, name)

    @classmethod
    def of_port(cls, node_id: str, port: str) -> Origin:
        return cls(OriginKind.PORT, node_id, port)


class AbsKind(str, Enum):
    """What the tracer knows of a value: exactly which slice, derived from some origins, a constant, or per branch."""

    EXACT = "exact"
    DERIVED = "derived"
    CONST = "const"
    ALT = "alt"
    WINDOW = "window"  # a slot's live-in value with frames appended on one axis, maybe cut (rnnir.analysis.statekinds)


@fast_init
@dataclass(frozen=True)
class Ref:
    """The sub-tensor ``origin[index...]`` (indices along leading axes)."""

    origin: Origin
    index: tuple[int, ...] = ()

    def sub(self, i: int) -> Ref:
        return Ref(self.origin, self.index + (i,))


@fast_init
@dataclass(frozen=True)
class Abs:
    """Abstract value: exact (``whole`` or ``elems`` along axis 0), derived, constant, or per-branch alternatives."""

    kind: AbsKind
    whole: Ref | None = None
    elems: tuple[Ref, ...] | None = None
    origins: frozenset[Origin] = frozenset()
    alts: tuple[tuple[tuple[str, ...], Abs], ...] = ()
    cast: str | None = None
    partial: bool = False
    changed: bool = False  # element positions kept, values changed (e.g. Add of a constant)
    window: Window | None = None  # WINDOW: the slot, the axis and the cut; ``origins`` are the new frames'

    def refs(self) -> Iterator[Ref]:
        if self.kind is AbsKind.WINDOW:
            assert self.window is not None
            yield Ref(Origin.of_slot(self.window.slot))
            for o in self.origins:
                yield Ref(o)
        elif self.kind is AbsKind.EXACT:
            if self.whole is not None:
                yield self.whole
            else:
                yield from self.elems or ()
        elif self.kind is AbsKind.DERIVED:
            for o in self.origins:
                yield Ref(o)
        elif self.kind is AbsKind.ALT:
            for _, a in self.alts:
                yield from a.refs()

    def all_origins(self) -> frozenset[Origin]:
        return frozenset(r.origin for r in self.refs())

    def branches(self) -> list[tuple[tuple[str, ...], Abs]]:
        if self.kind is AbsKind.ALT:
            return list(self.alts)
        return [((), self)]


CONST = Abs(AbsKind.CONST)
EXTERNAL = Abs(AbsKind.DERIVED)


def exact(whole: Ref | None = None, elems: tuple[Ref, ...] | None = None, like: Abs | None = None) -> Abs:
    return Abs(
        AbsKind.EXACT,
        whole=whole,
        elems=elems,
        cast=like.cast if like else None,
        partial=like.partial if like else False,
        changed=like.changed if like else False,
    )


def derived(*inputs: Abs) -> Abs:
    origins: set[Origin] = set()
    for a in inputs:
        origins |= a.all_origins()
    return Abs(AbsKind.DERIVED, origins=frozenset(origins)) if origins else CONST


class Tracer(Analysis):
    """Memoised abstract evaluation of IR values (iterative, so deep graphs do not hit the recursion limit).

    An analysis: ``analyses(program).get(Tracer)`` is the one tracer every question about the program as it is
    shares (its memo holds values by identity, so it must not outlive a change of the program)."""

    def __init__(self, program: Program, facts: AnalysisManager | None = None) -> None:
        self.program = program
        self.memo: dict[int, Abs] = {}
        self._sizes: dict[tuple[Origin, int], int | None] = {}  # (origin, depth) -> size0 (asked per slice, per ref)

    # -- sizes --------------------------------------------------------------------------
    def size0(self, ref: Ref) -> int | None:
        """Size of the axis that ``ref``'s next index would take, when known."""
        return self._axis_size(ref.origin, len(ref.index))

    def _axis_size(self, origin: Origin, depth: int) -> int | None:
        """Size of axis ``depth`` of ``origin``, when known (worked out once per origin and axis)."""
        key = (origin, depth)
        if key in self._sizes:
            return self._sizes[key]
        size = self._sizes[key] = self._axis_size_of(origin, depth)
        return size

    def _axis_size_of(self, origin: Origin, depth: int) -> int | None:
        if origin.kind is OriginKind.SLOT:
            try:
                slot = self.program.slot(origin.owner)
            except KeyError:
                return None
            d = slot.type.dim(depth) if slot.type.shape is not None and depth < len(slot.type.shape) else None
            return d if isinstance(d, int) and d > 0 else None
        node = self.program.node(origin.owner)
        port = origin.port
        if isinstance(node, Recurrent):
            if port in node.spec.exits:
                # layout=1 puts batch first ([batch, directions, hidden]): its axis 0 is not the directions
                return node.num_directions if depth == 0 and node.layout == 0 else None
            if port == "Y":
                if depth == 1 and node.layout == 0:
                    return node.num_directions
                return None
        return None

    def to_elems(self, a: Abs, n: int | None = None) -> tuple[Ref, ...] | None:
        if a.kind is not AbsKind.EXACT:
            return None
        if a.elems is not None:
            return a.elems
        assert a.whole is not None
        size = self.size0(a.whole)
        if size is None and not self._batch_first_port(a.whole):
            size = n
        if size is None or size > _MAX_ELEMS:
            return None
        return tuple(a.whole.sub(i) for i in range(size))

    def _batch_first_port(self, ref: Ref) -> bool:
        """A layout=1 recurrent port indexed on its batch axis: never split it by directions."""
        if ref.origin.kind is not OriginKind.PORT or ref.index:
            return False
        node = self.program.node(ref.origin.owner)
        return isinstance(node, Recurrent) and node.layout == 1

    def canon(self, ref: Ref) -> Ref:
        """Drop trailing indices into axes of size 1: ``Y_h[0]`` of a one-direction op is ``Y_h``."""
        idx = ref.index
        n = len(idx)
        while n and idx[n - 1] in (0, -1) and self._axis_size(ref.origin, n - 1) == 1:
            n -= 1
        return ref if n == len(idx) else Ref(ref.origin, idx[:n])

    # -- evaluation ---------------------------------------------------------------------
    def trace(self, value: Value | None) -> Abs:
        if value is None:
            return CONST
        if id(value) in self.memo:
            return self.memo[id(value)]
        stack: list[tuple[Value, bool]] = [(value, False)]
        while stack:
            v, ready = stack.pop()
            if id(v) in self.memo:
                continue
            p = v.producer
            if p is None or isinstance(p, (LoadSlot, Recurrent)):
                self.memo[id(v)] = self._leaf(v)
                continue
            if not ready:
                stack.append((v, True))
                for u in p.operands():
                    if id(u) not in self.memo:
                        stack.append((u, False))
                continue
            self._eval(p)
        return self.memo[id(value)]

    def _leaf(self, v: Value) -> Abs:
        p = v.producer
        if isinstance(p, LoadSlot) and p.slot is not None:
            return exact(Ref(Origin.of_slot(p.slot.name)))
        if isinstance(p, Recurrent):
            port = p.port_of(v) or "Y"
            return exact(Ref(Origin.of_port(p.id, port)))
        return CONST if v.has_const else EXTERNAL

    def _eval(self, node: object) -> None:
        ins = [self.memo.get(id(u), CONST) if u is not None else CONST for u in getattr(node, "inputs", [])]
        outs = [v for v in getattr(node, "outputs", [])]
        if isinstance(node, Store):
            res = ins[0] if node.result.value in ("alias", "value") else derived(ins[0])
            for v in outs:
                if v is not None:
                    self.memo[id(v)] = res
            return
        if not isinstance(node, Compute):
            for v in outs:
                if v is not None:
                    self.memo[id(v)] = derived(*ins)
            return
        if node.op == "If":
            n = len(node.outputs)
            for i, v in enumerate(node.outputs):
                if v is None:
                    continue
                t = ins[1 + i]
                e = ins[1 + n + i]
                paths = {r: node.regions[r].path for r in node.regions}
                if t == e:
                    self.memo[id(v)] = t
                else:
                    alts: list[tuple[tuple[str, ...], Abs]] = []
                    for path, a in ((paths.get("then_branch", ("then_branch",)), t), (paths.get("else_branch", ("else_branch",)), e)):
                        for sub_path, sub in a.branches():
                            # region paths are full paths from the main graph: a nested one already has its prefix
                            alts.append((sub_path if sub_path[: len(path)] == path else path + sub_path, sub))
                    self.memo[id(v)] = Abs(AbsKind.ALT, alts=tuple(alts))
            return
        appended = _append_op_outputs(self, node, ins)
        if appended is not None:
            for v, r in zip(outs, appended):
                if v is not None:
                    self.memo[id(v)] = r
            return
        if node.op in _SHAPE_ONLY:  # the state's shape is no part of its value: zeros_like(h0) ignores h0
            for v in outs:
                if v is not None:
                    self.memo[id(v)] = CONST
            return
        results = self._layout(node, ins)
        for v, r in zip(outs, results):
            if v is not None:
                self.memo[id(v)] = r

    def _const(self, node: Compute, i: int) -> tuple[tuple[int, ...], list[int]] | None:
        """Shape and integer values of operand ``i`` when it is a constant (read without numpy where possible)."""
        v = node.inputs[i] if i < len(node.inputs) else None
        return None if v is None else v.const_ints()

    def _layout(self, node: Compute, ins: list[Abs]) -> list[Abs]:
        n_out = len(node.outputs)
        data = ins[0] if ins else CONST
        first_alt = next((a for a in ins if a.kind is AbsKind.ALT), None)
        if first_alt is not None and (node.op in _LAYOUT or node.op in _ELEMENTWISE):
            # evaluate once per branch; other per-branch operands must come from the same If choice
            per = []
            for path, _ in first_alt.alts:
                chosen = []
                for a in ins:
                    if a.kind is not AbsKind.ALT:
                        chosen.append(a)
                        continue
                    match = [x for p, x in a.alts if p == path]
                    if not match:
                        return [derived(*ins)] * n_out
                    chosen.append(match[0])
                per.append((path, self._layout(node, chosen)))
            return [Abs(AbsKind.ALT, alts=tuple((path, res[k]) for path, res in per)) for k in range(n_out)]
        if node.op == "Where":
            picked = _constant_choice(self, node)
            if picked is not None:
                return [ins[picked]]
        if data.kind is AbsKind.WINDOW:
            return [_window_op(self, node, data, ins)] + [derived(*ins)] * (n_out - 1)
        if node.op == "Concat":
            win = _append(self, node, ins)
            if win is not None:
                return [win]
        if node.op in _ELEMENTWISE and n_out == 1:
            stateful = [a for a in ins if a.all_origins()]
            if len(stateful) == 1 and stateful[0].kind is AbsKind.EXACT and _identity_operands(node, ins.index(stateful[0])):
                return [stateful[0]]  # x + 0, x - 0, x * 1, x / 1: exactly x
            if len(stateful) == 1 and stateful[0].kind is AbsKind.EXACT:
                # one state operand combined with state-free values: positions survive, values change
                a = stateful[0]
                return [Abs(AbsKind.EXACT, a.whole, a.elems, cast=a.cast, partial=a.partial, changed=True)]
        fn = _LAYOUT.get(node.op)
        if fn is None or data.kind is not AbsKind.EXACT:
            return [derived(*ins)] * n_out
        try:
            out = fn(self, node, data, ins)
        except (ValueError, IndexError, TypeError):
            out = None
        if out is None:
            return [derived(*ins)] * n_out
        return out


#: op -> (the constant that leaves the other operand as it is, may that operand come first)
_NEUTRAL = {"Add": (0, True), "Sub": (0, False), "Mul": (1, True), "Div": (1, False)}


def _identity_operands(node: Compute, state_at: int) -> bool:
    """Every operand of ``node`` but the state's is a constant equal to the op's neutral element, and broadcasting
    it leaves the state's shape alone (``x + 0``, ``x * 1``; ``0 - x`` is no identity)."""
    neutral = _NEUTRAL.get(node.op)
    if neutral is None or len(node.inputs) != 2 or (state_at != 0 and not neutral[1]):
        return False
    other = node.inputs[1 - state_at]
    state = node.inputs[state_at]
    if other is None or not other.has_const:
        return False
    pending = other.__dict__.get("_const")
    if isinstance(pending, PendingConst) and not all(d == 1 for d in pending.dims):
        return False  # no broadcast leaves the state alone (see the end): its values, a float bias's through numpy, are not read
    floats = pending.floats() if isinstance(pending, PendingConst) and pending.ints() is None else None
    if floats is not None:  # a float32/float64 constant, read without numpy
        dims = pending.dims  # type: ignore[union-attr]
        if any(v != neutral[0] for v in floats):  # one value: every dim is 1 (above)
            return False
    else:
        c = other.const_ints()
        if c is None:
            return False
        dims, values = c
        if any(v != neutral[0] for v in values) or not values:
            return False
        exact = isinstance(pending, PendingConst) and pending.ints() is not None  # integers, or zeros proven at lowering
        if not exact:  # const_ints truncates a float 0.5 to 0: compare the array itself
            try:
                if not bool((np.asarray(other.const) == neutral[0]).all()):
                    return False
            except (TypeError, ValueError):
                return False
    rank = _rank(state)
    # a constant of one element, or of no more axes than the state with size-1 axes only, broadcasts into it
    return all(d == 1 for d in dims) and (rank is not None and len(dims) <= rank or not dims)


def _constant_choice(tr: Tracer, node: Compute) -> int | None:
    """``Where(c, a, b)`` with a constant condition that is all true (1: a) or all false (2: b), when the output has
    the chosen operand's declared shape (so broadcasting added nothing)."""
    cond = tr._const(node, 0)
    if cond is None or len(node.inputs) != 3 or not cond[1]:
        return None
    values = {bool(v) for v in cond[1]}
    if len(values) != 1:
        return None
    k = 1 if values.pop() else 2
    chosen, out = node.inputs[k], node.outputs[0] if node.outputs else None
    if chosen is None or out is None or chosen.type.shape is None or chosen.type.shape != out.type.shape:
        return None
    return k


def _rank(v: Value | None) -> int | None:
    """A value's rank: its type's, else a recurrent state port's (always ``[directions, batch, hidden]``)."""
    if v is None:
        return None
    if v.type.rank is not None:
        return v.type.rank
    p = v.producer
    if isinstance(p, Recurrent) and p.port_of(v) in p.spec.exits:
        return 3
    return None


# elementwise ops that keep every element where it is (broadcasting a state-free operand)
_ELEMENTWISE = ops_with(OpTrait.ELEMENTWISE)
_SHAPE_ONLY = ops_with(OpTrait.SHAPE_ONLY)


def _axes(node: Compute, tr: Tracer, input_index: int, attr: str = "axes") -> list[int] | None:
    if attr in node.attributes:
        return [int(x) for x in node.attributes[attr]]
    c = tr._const(node, input_index)
    if c is None:
        return None
    return c[1]


def _front_axis(node: Compute, axis: int) -> int:
    """``axis`` counted from the front: ONNX counts a negative axis from the data's rank (``-3`` of ``[2, B, H]`` is 0)."""
    if axis < 0:
        # the data input's rank; Concat's other inputs and output have it too (Gather's indices and Split's sizes do not)
        values = (*node.inputs, *node.outputs) if node.op == "Concat" else node.inputs[:1]
        known = [v.type.rank for v in values if v is not None and v.type.rank is not None]
        if known:
            return axis + known[0]
    return axis


def _identity(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs]:
    if node.op in ("Cast", "CastLike"):
        to = node.attributes.get("to")
        return [Abs(a.kind, a.whole, a.elems, a.origins, a.alts, cast=str(to) if to is not None else "like", partial=a.partial, changed=a.changed)]
    return [a]


def _squeeze(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    axes = _axes(node, tr, 1)
    if axes is None or 0 in [_front_axis(node, x) for x in axes]:
        if a.elems is not None:
            if len(a.elems) == 1:
                return [exact(whole=a.elems[0], like=a)]
            return None
        return [a]  # squeezing a size-1 axis leaves the data as it is
    return [a]


def _unsqueeze(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    axes = _axes(node, tr, 1)
    if axes is None:
        return None
    # a negative axis counts from the output's rank, the data's rank plus one per inserted axis
    rank = node.inputs[0].type.rank if node.inputs and node.inputs[0] is not None else None
    if 0 in axes or (rank is not None and -(rank + len(axes)) in axes):
        if a.whole is not None:
            return [exact(elems=(a.whole,), like=a)]
        if a.elems is not None and len(a.elems) == 1:
            return [a]  # [1, ...] -> [1, 1, ...]: still the one element
        return None
    return [a]


def _gather(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    axis = _front_axis(node, int(node.attributes.get("axis", 0)))
    idx = tr._const(node, 1)
    if idx is None:
        return None
    if axis != 0:
        return [Abs(a.kind, a.whole, a.elems, cast=a.cast, partial=True, changed=a.changed)]
    idx_dims, idx_values = idx
    elems = a.elems
    if len(idx_dims) == 0:
        k = idx_values[0]
        if elems is not None:
            return [exact(whole=elems[k], like=a)]
        assert a.whole is not None
        size = tr.size0(a.whole)
        if size is not None and k < 0:
            k += size
        return [exact(whole=a.whole.sub(k), like=a)]
    if len(idx_dims) == 1:
        ks = idx_values
        if elems is None:
            assert a.whole is not None
            size = tr.size0(a.whole)
            return [exact(elems=tuple(a.whole.sub(k + size if (k < 0 and size) else k) for k in ks), like=a)]
        return [exact(elems=tuple(elems[k] for k in ks), like=a)]
    return None


def _slice_range(start: int, end: int, step: int, size: int | None) -> list[int] | None:
    if size is None:
        if step == 1 and start < 0 and end >= _BIG // 2:
            return list(range(start, 0))  # the last -start entries, counted from the end
        if step == 1 and start >= 0 and end < _BIG // 2:
            return list(range(start, end))
        return None
    return list(range(*slice(start, end, step).indices(size)))


def _slice_params(tr: Tracer, node: Compute) -> tuple[list[int], list[int], list[int], list[int]] | None:
    """A Slice's starts, ends, axes and steps (attributes before opset 10, constant inputs after), or None."""
    if "starts" in node.attributes:
        starts = list(node.attributes["starts"])
        ends = list(node.attributes["ends"])
        axes = list(node.attributes.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        s, e = tr._const(node, 1), tr._const(node, 2)
        if s is None or e is None:
            return None
        starts = s[1]
        ends = e[1]
        ax = tr._const(node, 3)
        axes = ax[1] if ax is not None else list(range(len(starts)))
        st = tr._const(node, 4)
        steps = st[1] if st is not None else [1] * len(starts)
    return starts, ends, axes, steps


def _slice(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    params = _slice_params(tr, node)
    if params is None:
        return None
    out = a
    for start, end, axis, step in zip(*params):
        if axis != 0:
            out = Abs(out.kind, out.whole, out.elems, cast=out.cast, partial=True, changed=out.changed)
            continue
        if out.elems is not None:
            rng = _slice_range(start, end, step, len(out.elems))
            if rng is None:
                return None
            out = exact(elems=tuple(out.elems[i] for i in rng), like=out)
        else:
            assert out.whole is not None
            size = tr.size0(out.whole)
            if size is not None and start == 0 and end >= size and step == 1:
                continue
            if size is None and start == 0 and end >= _BIG // 2 and step == 1:
                continue
            rng = _slice_range(start, end, step, size)
            if rng is None or len(rng) > _MAX_ELEMS:
                return None
            out = exact(elems=tuple(out.whole.sub(i) for i in rng), like=out)
    return [out]


def _split(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    axis = _front_axis(node, int(node.attributes.get("axis", 0)))
    n = len(node.outputs)
    if axis != 0:
        return [Abs(a.kind, a.whole, a.elems, cast=a.cast, partial=True, changed=a.changed)] * n
    elems = tr.to_elems(a)
    if elems is None:
        return None
    if "split" in node.attributes:
        sizes = [int(x) for x in node.attributes["split"]]
    else:
        c = tr._const(node, 1)
        if c is not None:
            sizes = c[1]
        else:
            if len(elems) % n:
                return None
            sizes = [len(elems) // n] * n
    out, pos = [], 0
    for s in sizes:
        out.append(exact(elems=elems[pos : pos + s], like=a))
        pos += s
    return out


def _concat(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    axis = _front_axis(node, int(node.attributes.get("axis", 0)))
    parts = [x for x, v in zip(ins, node.inputs) if v is not None]
    if axis != 0:
        return None
    elems: list[Ref] = []
    for p in parts:
        if p.kind is AbsKind.ALT:
            return None
        e = tr.to_elems(p)
        if e is None:
            return None
        elems.extend(e)
    return [Abs(AbsKind.EXACT, elems=tuple(elems), changed=any(p.changed for p in parts), partial=any(p.partial for p in parts))]


def _transpose(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    perm = node.attributes.get("perm")
    if perm is not None and int(perm[0]) == 0:
        return [a]
    return None


def _reshape(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> list[Abs] | None:
    shape = tr._const(node, 1)
    if a.elems is not None and len(a.elems) == 1:
        single = a.elems[0]
    elif a.whole is not None and tr.size0(a.whole) == 1:
        single = a.whole
    else:
        single = None
    if shape is None:
        return [exact(whole=single, like=a)] if single is not None else None
    dims = shape[1]
    if single is not None:
        if dims and dims[0] == 1:
            return [exact(elems=(single,), like=a)]
        return [exact(whole=single, like=a)]
    n = len(a.elems) if a.elems is not None else tr.size0(a.whole) if a.whole is not None else None
    if dims and n is not None and dims[0] == n:
        return [a]
    return None


_LAYOUT = {
    "Identity": _identity,
    "Cast": _identity,
    "CastLike": _identity,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Gather": _gather,
    "Slice": _slice,
    "Split": _split,
    "Concat": _concat,
    "Transpose": _transpose,
    "Reshape": _reshape,
}


# -- caches: a slot's live-in value with frames appended (rnnir.analysis.statekinds) --------------------------


def _slot_axes(v: Value | None, depth: int = 0) -> tuple[str, tuple[int | None, ...]] | None:
    """``(slot, value axis -> slot axis)`` when ``v`` is a slot's live-in value itself, seen only through
    Identity/Cast, Transpose, Unsqueeze and Squeeze (with constant axes); None otherwise."""
    if v is None or depth > 16:
        return None
    p = v.producer
    if isinstance(p, LoadSlot):
        if p.slot is None or p.slot.type.rank is None:
            return None
        return p.slot.name, tuple(range(p.slot.type.rank))
    if not isinstance(p, Compute) or not p.inputs:
        return None
    inner = _slot_axes(p.inputs[0], depth + 1)
    if inner is None:
        return None
    slot, axes = inner
    if p.op in ("Identity", "Cast", "CastLike"):
        return inner
    if p.op in ("Transpose", "Unsqueeze", "Squeeze"):
        moved = _slot_axes_after(p, axes)
        return (slot, moved) if moved is not None else None
    return None


def _static_dim(v: Value | None, axis: int) -> int | None:
    d = v.type.dim(axis) if v is not None else None
    return d if isinstance(d, int) else None


def _append(tr: Tracer, node: Compute, ins: list[Abs]) -> Abs | None:
    """``Concat(cache, new...)`` on an axis the slot has: one operand is a slot's live-in value, the others are
    not (new frames, whatever state they were computed from)."""
    views = [(i, _slot_axes(v)) for i, v in enumerate(node.inputs) if v is not None]
    cached = [(i, sa) for i, sa in views if sa is not None]
    if len(cached) != 1 or any(a.kind is AbsKind.EXACT and a.all_origins() for j, a in enumerate(ins) if j != cached[0][0]):
        return None
    i, (slot, axes) = cached[0]
    if ins[i].kind is not AbsKind.EXACT or ins[i].changed:
        return None
    axis = _front_axis(node, int(node.attributes.get("axis", 0)))
    if not 0 <= axis < len(axes) or axes[axis] is None:
        return None
    others = [v for j, v in enumerate(node.inputs) if j != i and v is not None]
    lens = [_static_dim(v, axis) for v in others]
    new_len = sum(x for x in lens if x is not None) if all(x is not None for x in lens) else None
    slot_axis = axes[axis]
    assert slot_axis is not None
    win = Window(slot, slot_axis, axes, new_first=i != 0, new_len=new_len, via=node.describe())
    return Abs(AbsKind.WINDOW, origins=derived(*(a for j, a in enumerate(ins) if j != i)).all_origins(), window=win)


def _append_op_outputs(tr: Tracer, node: object, ins: list[Abs]) -> list[Abs] | None:
    """The outputs of an op that appends to a state input inside itself (ONNX Attention's present_key)."""
    if not isinstance(node, Compute):
        return None
    specs = [a for a in APPEND_OPS if a.op_type == node.op and a.domain == (node.domain or "")]
    if not specs:
        return None
    out = [derived(*ins)] * len(node.outputs)
    new = derived(*(a for k, a in enumerate(ins) if k not in {s.entry for s in specs})).all_origins()
    for spec in specs:
        v = node.inputs[spec.entry] if spec.entry < len(node.inputs) else None
        sa = _slot_axes(v)
        if sa is None or spec.exit >= len(out) or ins[spec.entry].kind is not AbsKind.EXACT or ins[spec.entry].changed:
            continue
        slot, axes = sa
        if spec.axis >= len(axes) or axes[spec.axis] is None:
            continue
        slot_axis = axes[spec.axis]
        assert slot_axis is not None
        out[spec.exit] = Abs(AbsKind.WINDOW, origins=new, window=Window(slot, slot_axis, axes, via=node.describe()))
    return out


def _window_op(tr: Tracer, node: Compute, a: Abs, ins: list[Abs]) -> Abs:
    """A layout op applied to a window: Cast/Identity keep it, Slice cuts it (once), Transpose, Unsqueeze and
    Squeeze move its axes; anything else computes from it."""
    w = a.window
    assert w is not None
    op = node.op
    if op in ("Identity", "Cast", "CastLike"):
        return a
    try:
        if op == "Slice" and w.cut is None:
            cut = _single_cut(tr, node, w)
            if cut is not None:
                return Abs(AbsKind.WINDOW, origins=a.origins, window=Window(w.slot, w.axis, w.axes, w.new_first, w.new_len, cut, w.via))
        if op in ("Transpose", "Unsqueeze", "Squeeze"):
            probe = _slot_axes_after(node, w.axes)
            if probe is not None:
                return Abs(AbsKind.WINDOW, origins=a.origins, window=Window(w.slot, w.axis, probe, w.new_first, w.new_len, w.cut, w.via))
    except (ValueError, IndexError, TypeError):
        pass
    return derived(*ins)


def _slot_axes_after(node: Compute, axes: tuple[int | None, ...]) -> tuple[int | None, ...] | None:
    if node.op == "Transpose":
        perm = node.attributes.get("perm")
        order = [int(x) for x in perm] if perm is not None else list(range(len(axes)))[::-1]
        return tuple(axes[i] for i in order) if sorted(order) == list(range(len(axes))) else None
    given = node.attributes.get("axes")
    c = node.inputs[1].const_ints() if given is None and len(node.inputs) > 1 and node.inputs[1] is not None else None
    ax = [int(x) for x in given] if given is not None else c[1] if c is not None else None
    if ax is None:
        return None
    if node.op == "Unsqueeze":
        rank = len(axes) + len(ax)
        put = {x + rank if x < 0 else x for x in ax}
        it = iter(axes)
        return tuple(None if i in put else next(it) for i in range(rank))
    drop = {x + len(axes) if x < 0 else x for x in ax}
    if any(axes[i] is not None for i in drop):
        return None  # squeezing a slot axis away: not the slot's layout any more
    return tuple(x for i, x in enumerate(axes) if i not in drop)


def _single_cut(tr: Tracer, node: Compute, w: Window) -> Cut | None:
    """The Slice's one cut, on a slot axis (a Slice on several axes, or on an axis the slot lacks: None)."""
    params = _slice_params(tr, node)
    if params is None:
        return None
    rank = len(w.axes)
    cuts = []
    for start, end, axis, step in zip(*params):
        axis = axis + rank if axis < 0 else axis
        if start == 0 and end >= END // 4 and step == 1:
            continue  # the whole axis: no cut
        cuts.append((axis, start, end, step))
    if len(cuts) != 1 or not 0 <= cuts[0][0] < rank:
        return None
    axis, start, end, step = cuts[0]
    return Cut(w.axes[axis], start, END if end >= END // 4 else end, step)


#: layout ops the tracer follows slice by slice (the others, e.g. Flatten and Expand, it treats as derived)
TRACED_OPS = frozenset(_LAYOUT)


def tracer_for(program: Program) -> Tracer:
    """The program's tracer, shared by every question asked of the program in its current state."""
    return analyses(program).get(Tracer)


def trace_value(program: Program, value: Value, tracer: Tracer | None = None) -> Abs:
    return (tracer or tracer_for(program)).trace(value)
