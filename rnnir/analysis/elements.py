"""Element-exact slices of a packed state with static shape: every element traced to where it goes and comes from.

The slice tracer (:mod:`rnnir.analysis.tracer`) follows a state along its leading axes.  Exporters also pack states
on inner axes and write them back row by row: GTCRN's ``tra_cache [2, 3, 1, 1, 16]`` holds six GRUs' ``h``,
each written through a chain of ``ScatterND``; its ``inter_cache [2, 1, 33, 16]`` holds two GRUs of hidden
size 8 per row, side by side on the last axis (``Slice(..., 0:8)`` in, ``Concat(Y_h, Y_h', axis=-1)`` out).

When a slot's shape is static and small, this module runs the state path on *element ids* instead of values:
each slot element and each element of a recurrent op's final state gets its own integer, and the layout ops
(Gather, Slice, Split, Concat, Transpose, Reshape, Squeeze, Unsqueeze, Expand, ScatterND and ScatterElements
with constant indices, Where on a constant condition, ``x + 0``) are applied to the id arrays: in plain Python
(:mod:`rnnir.analysis.intarray`), numpy only for the last two, so a model whose caches are traced here does not
import numpy for it.
What the recurrent ports read and what is written back are then compared element by element: a slice is the
set of slot elements one recurrent port reads, and its exit is the op whose final state lands there, at the
same positions.  Used only when it resolves every slice exactly; otherwise the leading-axis result stands.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rnnir.analysis import intarray as ia
from rnnir.analysis.intarray import IntArray
from rnnir.analysis.slicemaps import ExitKind, PortRef, SliceMap
from rnnir.analysis.statekinds import END, Cut, Window
from rnnir.analysis.tracer import _identity_operands  # the one definition of x + 0, x * 1
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, LoadSlot, PendingConst, Recurrent, Slot, Store, Value
from rnnir.onnxio.proto import EXTERNAL, element_count, tensor_ints, tensor_to_array

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["element_slices"]

MAX_SLOT = 1 << 16  # elements of a slot traced element by element
MAX_ARRAY = 1 << 20  # elements of any intermediate id array
UNKNOWN = -2  # an element computed by an op that changes values
CONSTANT = -1


class _Fail(Exception):
    """The path holds something the element tracer does not follow."""


@dataclass(frozen=True)
class _Block:
    """The ids ``base .. base + size`` name the elements of one source (a slot, or a recurrent op's port)."""

    base: int
    shape: tuple[int, ...]
    slot: str | None = None
    node: Recurrent | None = None
    port: str = ""


class _Ids:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.blocks: list[_Block] = []
        self.bases: list[int] = []
        self.by_source: dict[tuple[str, str], _Block] = {}
        self.memo: dict[int, IntArray] = {}
        self.next = 0
        self.initializers: dict[str, Any] | None = None

    def block(self, key: tuple[str, str], shape: tuple[int, ...], **kw: object) -> _Block:
        b = self.by_source.get(key)
        if b is None:
            size = math.prod(shape)
            if size > MAX_ARRAY:
                raise _Fail
            b = _Block(self.next, shape, **kw)  # type: ignore[arg-type]
            self.next += size
            self.blocks.append(b)
            self.bases.append(b.base)
            self.by_source[key] = b
        return b

    def owner(self, i: int) -> tuple[_Block, int] | None:
        """The source an id names, and the element's flat position in it (blocks are handed out in order)."""
        if i < 0 or i >= self.next:
            return None
        k = bisect.bisect_right(self.bases, i) - 1
        b = self.blocks[k]
        return b, i - b.base

    def big_index(self, v: Value) -> IntArray | None:
        """An integer initializer of the main graph too large for the IR to keep (ScatterND's index tensors)."""
        src = self.program.source
        if src is None or v.type.dtype not in ("int64", "int32"):
            return None
        if self.initializers is None:
            self.initializers = {t.name: t for t in src.model.graph.initializer}
        t = self.initializers.get(v.name)
        n = element_count(t) if t is not None else None
        if t is None or n is None or n > MAX_ARRAY or t.data_location == EXTERNAL:
            return None
        dims = tuple(int(d) for d in t.dims)
        if dims != tuple(v.type.shape or ()):
            return None
        ints = tensor_ints(t)
        return IntArray(dims, ints if ints is not None else [int(x) for x in tensor_to_array(t).ravel().tolist()])

    # -- evaluation ------------------------------------------------------------------------
    def ids(self, v: Value | None) -> IntArray:
        if v is None:
            raise _Fail
        hit = self.memo.get(id(v))
        if hit is not None:
            return hit
        stack = [v]
        while stack:  # operands first, iteratively (state paths can be deep)
            top = stack[-1]
            if id(top) in self.memo:
                stack.pop()
                continue
            p = top.producer
            pending = [u for u in (p.operands() if isinstance(p, (Compute, Store)) else []) if u is not None and id(u) not in self.memo]
            if pending:
                stack.extend(pending)
                if len(stack) > 100_000:
                    raise _Fail
                continue
            stack.pop()
            out = self._eval(top)
            if out.size > MAX_ARRAY:
                raise _Fail
            self.memo[id(top)] = out
        return self.memo[id(v)]

    def fresh(self, v: Value) -> IntArray:
        """A value computed off the traced ops (new frames, a conv's output): ids of its own, so a window's
        new frames can be told apart and placed."""
        shape = self._static(v)
        b = self.block(("value", str(id(v))), shape)
        return ia.arange(b.base, b.shape)

    def _static(self, v: Value) -> tuple[int, ...]:
        shape = v.type.shape
        if shape is None or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise _Fail
        return tuple(int(d) for d in shape)  # type: ignore[arg-type]

    def _eval(self, v: Value) -> IntArray:
        p = v.producer
        if isinstance(p, LoadSlot):
            if p.slot is None:
                raise _Fail
            shape = self._static_slot(p.slot)
            b = self.block(("slot", p.slot.name), shape, slot=p.slot.name)
            return ia.arange(b.base, b.shape)
        if isinstance(p, Recurrent):
            port = p.port_of(v) or "Y"
            if port not in p.spec.exits or p.layout != 0:
                return ia.full(self._static(v), UNKNOWN)
            shape = self._port_shape(p, port, v)
            b = self.block((p.id, port), shape, node=p, port=port)
            return ia.arange(b.base, b.shape)
        if p is None:
            if v.has_const:
                return ia.full(_const_dims(v), CONSTANT)
            return self.fresh(v)
        if isinstance(p, Store):
            return self.memo[id(p.inputs[0])]
        if not isinstance(p, Compute) or p.op in ("If", "Loop", "Scan"):
            raise _Fail
        i = p.outputs.index(v)
        return _apply(self, p, i, v)

    def _static_slot(self, slot: Slot) -> tuple[int, ...]:
        shape = slot.type.shape
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            raise _Fail
        return tuple(int(d) for d in shape)  # type: ignore[arg-type]

    def _port_shape(self, rec: Recurrent, port: str, v: Value) -> tuple[int, ...]:
        try:
            return self._static(v)
        except _Fail:
            pass
        entry = rec.spec.entry_of(port)
        init = rec.port(entry) if entry else None
        if init is not None:
            shape = tuple(self.ids(init).shape)
            if len(shape) == 3:
                return shape
        x = rec.port("X")
        batch = x.type.dim(1) if x is not None else None
        if isinstance(batch, int) and rec.hidden_size:
            return (rec.num_directions, batch, int(rec.hidden_size))
        raise _Fail


def _const_dims(v: Value) -> tuple[int, ...]:
    """The shape of ``v``'s constant, without making a pending constant an array (numpy)."""
    c = v.__dict__.get("_const")
    if isinstance(c, PendingConst):
        return tuple(c.dims)
    return tuple(int(d) for d in np.shape(v.const))  # type: ignore[arg-type]


def _const(ids: _Ids, node: Compute, k: int) -> IntArray | None:
    """Input ``k`` of ``node`` as integers (as numpy's ``astype(int64)`` reads them) when it is a constant."""
    v = node.inputs[k] if k < len(node.inputs) else None
    if v is None:
        return None
    c = v.const_ints()
    if c is not None:
        return IntArray(tuple(c[0]), c[1])
    return ids.big_index(v)


def _need(c: IntArray | None) -> IntArray:
    if c is None:
        raise _Fail
    return c


def _to_numpy(a: IntArray) -> np.ndarray:
    return np.array(a.flat, dtype=np.int64).reshape(a.shape)


def _from_numpy(a: np.ndarray) -> IntArray:
    return IntArray(tuple(int(d) for d in a.shape), [int(x) for x in a.ravel().tolist()])


def _apply(ids: _Ids, node: Compute, out_index: int, v: Value) -> IntArray:
    op = node.op
    a = node.attributes
    xs = [ids.memo[id(u)] if u is not None else None for u in node.inputs]
    x = xs[0] if xs else None
    try:
        if op in ("Identity", "Cast", "CastLike"):
            return _need(x)
        if op == "Gather":
            return ia.take(_need(x), _need(_const(ids, node, 1)), int(a.get("axis", 0)))
        if op == "Slice":
            return _slice(ids, node, _need(x))
        if op == "Split":
            return _split(ids, node, _need(x))[out_index]
        if op == "Concat":
            return ia.concatenate([_need(t) for t in xs if t is not None], int(a["axis"]))
        if op == "Transpose":
            perm = a.get("perm")
            return ia.transpose(_need(x), [int(p) for p in perm] if perm is not None else None)
        if op == "Reshape":
            shape = [int(s) for s in _need(_const(ids, node, 1)).flat]
            data = _need(x)
            if not int(a.get("allowzero", 0)):
                shape = [data.shape[k] if s == 0 else s for k, s in enumerate(shape)]
            return ia.reshape(data, shape)
        if op in ("Squeeze", "Unsqueeze"):
            axes = a.get("axes")
            axes = [int(t) for t in (axes if axes is not None else _need(_const(ids, node, 1)).flat)]
            data = _need(x)
            if op == "Squeeze":
                return ia.squeeze(data, axes)
            rank = data.ndim + len(axes)
            for ax in sorted(t + rank if t < 0 else t for t in axes):
                data = ia.expand_dims(data, ax)
            return data
        if op == "Expand":
            data = _need(x)
            shape = [int(s) for s in _need(_const(ids, node, 1)).flat]
            return ia.broadcast_to(data, ia.broadcast_shapes(data.shape, tuple(shape)))
        if op == "ScatterND" and a.get("reduction", "none") == "none":
            return ia.scatter_nd(_need(x), _need(_const(ids, node, 1)), _need(xs[2]))
        if op in ("ScatterElements", "Scatter") and a.get("reduction", "none") == "none":
            out = _to_numpy(_need(x))
            idx = _to_numpy(_need(_const(ids, node, 1)))
            np.put_along_axis(out, np.where(idx < 0, idx + out.shape[int(a.get("axis", 0))], idx), _to_numpy(_need(xs[2])), axis=int(a.get("axis", 0)))
            return _from_numpy(out)
        if op == "Where":
            cond = _const(ids, node, 0)  # bool (ONNX), so its integers are its truth values
            if cond is not None:
                return _from_numpy(np.where(_to_numpy(cond).astype(bool), _to_numpy(_need(xs[1])), _to_numpy(_need(xs[2]))))
        if op in ("Add", "Sub", "Mul", "Div") and len(xs) == 2:
            for k in (0, 1):
                other = xs[1 - k]
                if xs[k] is not None and other is not None and _identity_operands(node, k) and all(t == CONSTANT for t in other.flat):
                    return _need(xs[k])
    except (ValueError, IndexError, TypeError, KeyError, OverflowError):
        raise _Fail from None
    return ids.fresh(v)


def _slice(ids: _Ids, node: Compute, data: IntArray) -> IntArray:
    a = node.attributes
    if "starts" in a:
        starts, ends = [int(t) for t in a["starts"]], [int(t) for t in a["ends"]]
        axes = [int(t) for t in a.get("axes", range(len(starts)))]
        steps = [1] * len(starts)
    else:
        starts = [int(t) for t in _need(_const(ids, node, 1)).flat]
        ends = [int(t) for t in _need(_const(ids, node, 2)).flat]
        c3, c4 = _const(ids, node, 3), _const(ids, node, 4)
        axes = [int(t) for t in c3.flat] if c3 is not None else list(range(len(starts)))
        steps = [int(t) for t in c4.flat] if c4 is not None else [1] * len(starts)
    index: list[range] = [range(n) for n in data.shape]
    for s, e, ax, st in zip(starts, ends, axes, steps):
        n = data.shape[ax]
        e = max(min(e, n), -n - 1) if st < 0 else min(e, n)
        # the positions themselves: a stop of -1 from .indices() is "past the first element" (a negative step down
        # to 0); slicing with it again, as numpy's data[3:-1:-2] did here before, reads it as the last element
        index[ax] = range(*slice(s, e, st).indices(n))
    return ia.select(data, index)


def _split(ids: _Ids, node: Compute, data: IntArray) -> list[IntArray]:
    axis = int(node.attributes.get("axis", 0))
    sizes = node.attributes.get("split")
    if sizes is None:
        c = _const(ids, node, 1)
        sizes = c.flat if c is not None else None
    n = len(node.outputs)
    if sizes is None:
        if data.shape[axis] % n:
            raise _Fail
        sizes = [data.shape[axis] // n] * n
    return ia.split(data, [int(s) for s in sizes], axis)


# -- slices --------------------------------------------------------------------------------------


def _label(slot: str, shape: tuple[int, ...], members: list[int]) -> tuple[tuple[int, ...], str] | None:
    """The index key and label of the slot elements ``members`` (flat ids): ``slot[0][1]`` for a whole
    sub-tensor, ``slot[0][:, :, 0:8]`` for a box on inner axes; None when they form no box."""
    rank = len(shape)
    per_axis = list(zip(*(_unravel(m, shape) for m in members))) or [()] * rank
    lo, hi = [min(c) for c in per_axis], [max(c) for c in per_axis]
    if math.prod(h - lo_ + 1 for lo_, h in zip(lo, hi)) != len(members):
        return None
    full = [lo[k] == 0 and hi[k] == shape[k] - 1 for k in range(rank)]
    p_whole = rank
    while p_whole > 0 and full[p_whole - 1]:
        p_whole -= 1
    q = next((k for k in range(rank) if lo[k] != hi[k]), rank)
    q = min(q, p_whole)
    if q < p_whole:  # a box: trailing indices into size-1 axes read as ":" (inter_cache[0][:, :, 0:8])
        while q > 1 and shape[q - 1] == 1:
            q -= 1
    prefix = lo[:q]
    text = slot + "".join(f"[{i}]" for i in prefix)
    if q >= p_whole:
        return tuple(prefix), text
    parts = [":" if full[k] else f"{lo[k]}:{hi[k] + 1}" for k in range(q, rank)]
    while parts and parts[-1] == ":":
        parts.pop()
    return tuple(prefix) + tuple(lo[q:]), f"{text}[{', '.join(parts)}]"


def element_slices(program: Program, slot: Slot, value: Value) -> list[SliceMap] | None:
    """Element-exact slice maps of ``slot`` written back with ``value``, or None when not every slice resolves."""
    try:
        return _element_slices(program, _Ids(program), slot, value)
    except _Fail:
        return None


def _element_slices(program: Program, ids: _Ids, slot: Slot, value: Value) -> list[SliceMap] | None:
    declared = slot.type.shape
    if declared is None or not all(isinstance(d, int) and d > 0 for d in declared):
        return None
    shape = tuple(int(d) for d in declared)  # type: ignore[arg-type]
    size = math.prod(shape)
    if size > MAX_SLOT:
        return None
    # entries: every slot element read by a recurrent state port, and where in the port
    reader: dict[int, tuple[Recurrent, str, int]] = {}
    for rec in program.recurrents:
        # one in an If branch or of layout 1 that reads this slot: per-branch maps are the leading-axis tracer's job
        laid_out = not rec.provenance.branch and rec.layout == 0  # (layout 1's ports are not laid out here either)
        for port in rec.state_ports:
            pv = rec.port(port)
            if pv is None:
                continue
            try:
                arr = ids.ids(pv)
            except _Fail:
                continue
            for pos, i in enumerate(arr.flat):
                hit = ids.owner(i) if i >= 0 else None
                if hit is None or hit[0].slot != slot.name:
                    continue
                if hit[1] in reader or not laid_out:
                    return None  # one element read twice (not a partition into slices), or read where ids cannot say
                reader[hit[1]] = (rec, port, pos)
    if not reader:  # no recurrence reads it: a cache, verified only when it is provably this slot's windows
        window = _window_of(ids, slot, tuple(shape), ids.ids(value), value)
        if window is None:
            return None
        sm = SliceMap(index=(), label=slot.name)
        sm.exit_kind[""] = ExitKind.WINDOW
        sm.windows[""] = window
        return [sm]
    if len(reader) != size:
        return None
    out = ids.ids(value)
    if tuple(out.shape) != tuple(shape):
        return None
    written = out.flat
    groups: dict[tuple[str, str], list[int]] = {}
    for e in range(size):
        rec, port, _ = reader[e]
        groups.setdefault((rec.id, port), []).append(e)
    maps: list[SliceMap] = []
    for members in groups.values():
        rec, port, _ = reader[members[0]]
        lab = _label(slot.name, tuple(shape), members)
        if lab is None:
            return None
        key, text = lab
        port_shape = tuple(ids.ids(rec.port(port)).shape)
        direction = _direction(rec, port_shape, [reader[e][2] for e in members])
        sm = SliceMap(index=key, label=text)
        sm.entry.append(PortRef(rec.id, rec.describe(), rec.kind, port, direction, rec.provenance.branch))
        exit_ref = _exit_of(ids, [int(written[e]) for e in members], [reader[e][2] for e in members], port_shape)
        if exit_ref is None:
            return None
        node, exit_port = exit_ref
        sm.exit.append(PortRef(node.id, node.describe(), node.kind, exit_port, direction, node.provenance.branch))
        sm.exit_kind[""] = ExitKind.FINAL
        maps.append(sm)
    return sorted(maps, key=lambda m: m.index)


def _window_of(ids: _Ids, slot: Slot, shape: tuple[int, ...], out: IntArray, value: Value) -> Window | None:
    """``slot`` written back with ``out`` (element ids) as sliding windows of its own frames along one axis:
    on every line along that axis, each segment ``[start, start + L)`` holds the segment's frames shifted by
    ``s`` toward the past followed by the newest ``s`` frames of one new value, in order.  GTCRN's conv_cache
    packs several such windows (one per dilated conv) on its time axis.  None when that is not what ``out`` is."""
    if out.shape != shape:
        return None
    flat = out.flat
    first = ids.owner(flat[0])
    if first is None or first[0].slot is None or first[0].shape != shape or first[1] == 0:
        return None  # every line starts with an old frame moved toward the past, the first line too
    old = first[0]
    moved = [k for k, c in enumerate(_unravel(first[1], shape)) if c]
    if len(moved) != 1:
        return None  # old frames move along exactly one axis
    axis = moved[0]
    n = shape[axis]
    step = math.prod(shape[axis + 1 :])  # between neighbours on a line
    lead_coords = shape[:axis] + shape[axis + 1 :]
    line_strides = ia.strides(shape)
    del line_strides[axis]  # a line's first element: its place on the other axes, the window axis at 0
    layout: tuple[tuple[int, int], ...] | None = None
    lines: list[_Segment] = []  # the last line's parse, tried first on the next line: caches repeat one layout
    news: set[int] = set()
    for coords in _product(lead_coords):
        start = sum(c * st for c, st in zip(coords, line_strides))
        line = flat[start : start + n * step : step]
        if lines and all(seg.matches(line, start, coords, axis) for seg in lines):
            continue
        parsed = _segments(ids, old, line, start, step, coords, shape, axis)
        if parsed is None:
            return None
        segs = tuple((seg.start, seg.kept + seg.shift) for seg in parsed)
        if layout is not None and segs != layout:
            return None
        layout, lines = segs, parsed
        news.update(seg.shift for seg in parsed)
    if not layout:
        return None
    lengths = {n for _, n in layout}
    rank = len(shape)
    cut = Cut(axis, -min(lengths), END, 1) if len(layout) == 1 else None
    return Window(old.slot or slot.name, axis, tuple(range(rank)), new_len=news.pop() if len(news) == 1 else None,
                  cut=cut or Cut(axis, 0, END, 1), via=value.producer.describe() if value.producer is not None else value.name,
                  segments=layout)


def _product(dims: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every index into ``dims``, in C order."""
    out: list[tuple[int, ...]] = [()]
    for d in dims:
        out = [c + (i,) for c in out for i in range(d)]
    return out


@dataclass(frozen=True)
class _Segment:
    """One window on a line: ``kept`` old frames, each ``shift`` places toward the past, then the newest ``shift``
    frames of the new value ``new``, whose axes are the slot's last ones (``lead`` fewer)."""

    start: int
    kept: int
    shift: int
    old_base: int
    step: int
    new: _Block
    lead: int

    def matches(self, line: list[int], line_start: int, coords: tuple[int, ...], axis: int) -> bool:
        """The same window on another line (``coords``: its place on the slot's other axes)."""
        p, k, s = self.start, self.kept, self.shift
        first_old = self.old_base + line_start + (p + s) * self.step
        if line[p : p + k] != list(range(first_old, first_old + k * self.step, self.step)):
            return False
        expected = _newest_ids(self.new, self.lead, coords, axis, s)
        return expected is not None and line[p + k : p + k + s] == expected


def _segments(ids: _Ids, old: _Block, line: list[int], line_start: int, step: int, coords: tuple[int, ...],
              shape: tuple[int, ...], axis: int) -> list[_Segment] | None:
    """One line along the window axis, parsed into windows: ``k`` old frames shifted by ``s``, then ``s`` new."""
    n = len(line)
    size = math.prod(shape)
    # each frame's shift toward the past when it is an old frame that moved only along the axis (None: a new frame)
    shifts: list[int | None] = []
    for t, i in enumerate(line):
        rel = i - old.base
        if not 0 <= rel < size:
            shifts.append(None)
            continue
        delta, rest = divmod(rel - line_start - t * step, step)
        if rest or delta <= 0 or t + delta >= n:
            return None  # an old frame that stays, moves toward the future or along another axis
        shifts.append(delta)
    segs = []
    p = 0
    while p < n:
        s = shifts[p]
        if s is None:
            return None  # a window that starts with a new frame: more new frames than it keeps (not parsed)
        k = 0
        while p + k < n and shifts[p + k] == s:
            k += 1
        if p + k + s > n or any(x is not None for x in shifts[p + k : p + k + s]):
            return None
        owner = ids.owner(line[p + k])
        if owner is None or owner[0].slot is not None or owner[0].node is not None:
            return None
        lead = len(shape) - len(owner[0].shape)
        seg = _Segment(p, k, s, old.base, step, owner[0], lead)
        if line[p + k : p + k + s] != _newest_ids(owner[0], lead, coords, axis, s):
            return None
        segs.append(seg)
        p += k + s
    return segs


def _newest_ids(v: _Block, lead: int, coords: tuple[int, ...], axis: int, s: int) -> list[int] | None:
    """The ids of the newest ``s`` frames of ``v`` on the line at ``coords`` (the slot's other axes; ``v`` has the
    slot's last axes), in order; None when ``v`` has no such frames or that line."""
    t_axis = axis - lead
    if lead < 0 or t_axis < 0:
        return None
    vshape = v.shape
    frames = vshape[t_axis]
    if s > frames:
        return None
    place = coords[lead:axis] + (frames - s,) + coords[axis:]
    if any(c >= m for c, m in zip(place, vshape)):
        return None
    st = ia.strides(vshape)
    first = v.base + sum(c * q for c, q in zip(place, st))
    return [first + j * st[t_axis] for j in range(s)]


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """``list(np.unravel_index(flat, shape))`` for one in-range index, in Python integers."""
    coords = [0] * len(shape)
    for q in range(len(shape) - 1, -1, -1):
        flat, coords[q] = divmod(flat, int(shape[q]))
    return coords


def _direction(rec: Recurrent, port_shape: tuple[int, ...], positions: list[int]) -> int | None:
    if rec.num_directions == 1:
        return 0
    dirs = {_unravel(p, port_shape)[0] for p in positions}
    return dirs.pop() if len(dirs) == 1 else None


def _exit_of(ids: _Ids, written: list[int], read_at: list[int], port_shape: tuple[int, ...]) -> tuple[Recurrent, str] | None:
    """The one recurrent final state whose elements land on these slot elements at the positions they were
    read from (a final state of another op is still returned: the passes name the wrong slot)."""
    first = ids.owner(written[0]) if written[0] >= 0 else None
    if first is None or first[0].node is None:
        return None
    block = first[0]
    if tuple(block.shape) != port_shape:
        return None
    for w, pos in zip(written, read_at):
        if w != block.base + pos:
            return None
    assert block.node is not None
    return block.node, block.port
