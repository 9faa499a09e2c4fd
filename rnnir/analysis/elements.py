"""Element-exact slices of a packed state with static shape: every element traced to where it goes and comes from.

The slice tracer (:mod:`rnnir.analysis.tracer`) follows a state along its leading axes.  Exporters also pack states
on inner axes and write them back row by row: GTCRN's ``tra_cache [2, 3, 1, 1, 16]`` holds six GRUs' ``h``,
each written through a chain of ``ScatterND``; its ``inter_cache [2, 1, 33, 16]`` holds two GRUs of hidden
size 8 per row, side by side on the last axis (``Slice(..., 0:8)`` in, ``Concat(Y_h, Y_h', axis=-1)`` out).

When a slot's shape is static and small, this module runs the state path on *element ids* instead of values:
each slot element and each element of a recurrent op's final state gets its own integer, and the layout ops
(Gather, Slice, Split, Concat, Transpose, Reshape, Squeeze, Unsqueeze, Expand, ScatterND and ScatterElements
with constant indices, Where on a constant condition, ``x + 0``) are applied to the id arrays with numpy.
What the recurrent ports read and what is written back are then compared element by element: a slice is the
set of slot elements one recurrent port reads, and its exit is the op whose final state lands there, at the
same positions.  Used only when it resolves every slice exactly; otherwise the leading-axis result stands.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rnnir.analysis.slicemaps import ExitKind, PortRef, SliceMap
from rnnir.analysis.statekinds import END, Cut, Window
from rnnir.analysis.tracer import _identity_operands  # the one definition of x + 0, x * 1
from rnnir.ir.core import Program
from rnnir.ir.nodes import Compute, LoadSlot, Recurrent, Slot, Store, Value
from rnnir.onnxio.proto import EXTERNAL, element_count, tensor_to_array

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
        self.memo: dict[int, np.ndarray] = {}
        self.next = 0
        self.initializers: dict[str, Any] | None = None

    def block(self, key: tuple[str, str], shape: tuple[int, ...], **kw: object) -> _Block:
        b = self.by_source.get(key)
        if b is None:
            size = int(np.prod(shape, dtype=np.int64)) if shape else 1
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

    def big_index(self, v: Value) -> np.ndarray | None:
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
        arr = tensor_to_array(t)
        return arr if tuple(arr.shape) == tuple(v.type.shape or ()) else None

    # -- evaluation ------------------------------------------------------------------------
    def ids(self, v: Value | None) -> np.ndarray:
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

    def fresh(self, v: Value) -> np.ndarray:
        """A value computed off the traced ops (new frames, a conv's output): ids of its own, so a window's
        new frames can be told apart and placed."""
        shape = self._static(v)
        return _arange(self.block(("value", str(id(v))), shape))

    def _static(self, v: Value) -> tuple[int, ...]:
        shape = v.type.shape
        if shape is None or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise _Fail
        return tuple(int(d) for d in shape)  # type: ignore[arg-type]

    def _eval(self, v: Value) -> np.ndarray:
        p = v.producer
        if isinstance(p, LoadSlot):
            if p.slot is None:
                raise _Fail
            shape = self._static_slot(p.slot)
            b = self.block(("slot", p.slot.name), shape, slot=p.slot.name)
            return _arange(b)
        if isinstance(p, Recurrent):
            port = p.port_of(v) or "Y"
            if port not in p.spec.exits or p.layout != 0:
                return np.full(self._static(v), UNKNOWN, dtype=np.int64)
            shape = self._port_shape(p, port, v)
            b = self.block((p.id, port), shape, node=p, port=port)
            return _arange(b)
        if p is None:
            if v.has_const:
                return np.full(np.asarray(v.const).shape, CONSTANT, dtype=np.int64)
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


def _arange(b: _Block) -> np.ndarray:
    size = int(np.prod(b.shape, dtype=np.int64)) if b.shape else 1
    return np.arange(b.base, b.base + size, dtype=np.int64).reshape(b.shape)


def _const(ids: _Ids, node: Compute, k: int) -> np.ndarray | None:
    v = node.inputs[k] if k < len(node.inputs) else None
    if v is None:
        return None
    if v.has_const:
        return np.asarray(v.const)
    return ids.big_index(v)


def _need(c: np.ndarray | None) -> np.ndarray:
    if c is None:
        raise _Fail
    return c


def _apply(ids: _Ids, node: Compute, out_index: int, v: Value) -> np.ndarray:
    op = node.op
    a = node.attributes
    xs = [ids.memo[id(u)] if u is not None else None for u in node.inputs]
    x = xs[0] if xs else None
    try:
        if op in ("Identity", "Cast", "CastLike"):
            return _need(x)
        if op == "Gather":
            return np.take(_need(x), _need(_const(ids, node, 1)).astype(np.int64), axis=int(a.get("axis", 0)))
        if op == "Slice":
            return _slice(ids, node, _need(x))
        if op == "Split":
            return _split(ids, node, _need(x))[out_index]
        if op == "Concat":
            return np.concatenate([_need(t) for t in xs if t is not None], axis=int(a["axis"]))
        if op == "Transpose":
            perm = a.get("perm")
            return np.transpose(_need(x), [int(p) for p in perm] if perm is not None else None)
        if op == "Reshape":
            shape = [int(s) for s in _need(_const(ids, node, 1)).ravel()]
            data = _need(x)
            if not int(a.get("allowzero", 0)):
                shape = [data.shape[k] if s == 0 else s for k, s in enumerate(shape)]
            return data.reshape(shape)
        if op in ("Squeeze", "Unsqueeze"):
            axes = a.get("axes")
            axes = [int(t) for t in (axes if axes is not None else _need(_const(ids, node, 1)).ravel())]
            data = _need(x)
            if op == "Squeeze":
                return np.squeeze(data, axis=tuple(axes))
            rank = data.ndim + len(axes)
            for ax in sorted(t + rank if t < 0 else t for t in axes):
                data = np.expand_dims(data, ax)
            return data
        if op == "Expand":
            data = _need(x)
            shape = [int(s) for s in _need(_const(ids, node, 1)).ravel()]
            return np.array(np.broadcast_to(data, np.broadcast_shapes(data.shape, tuple(shape))))
        if op == "ScatterND" and a.get("reduction", "none") == "none":
            out = np.array(_need(x))
            idx = _need(_const(ids, node, 1)).astype(np.int64)
            upd = _need(xs[2])
            k = idx.shape[-1]
            flat_idx = idx.reshape(-1, k)
            flat_upd = upd.reshape((flat_idx.shape[0], *out.shape[k:]))
            # each row's place: negative indices count from the end, as numpy reads them; past the data, ValueError
            # here as IndexError row by row (both fail the trace)
            dims = out.shape[:k]
            places = np.ravel_multi_index(tuple(np.where(flat_idx < 0, flat_idx + np.array(dims, dtype=np.int64), flat_idx).T), dims) if k else None
            if places is not None and len(set(places.tolist())) == len(places):
                out[tuple(flat_idx.T)] = flat_upd  # every row at once: no two write one place, so order cannot matter
            else:
                for row, where in enumerate(flat_idx):
                    out[tuple(where)] = flat_upd[row]
            return out
        if op in ("ScatterElements", "Scatter") and a.get("reduction", "none") == "none":
            out = np.array(_need(x))
            idx = _need(_const(ids, node, 1)).astype(np.int64)
            np.put_along_axis(out, np.where(idx < 0, idx + out.shape[int(a.get("axis", 0))], idx), _need(xs[2]), axis=int(a.get("axis", 0)))
            return out
        if op == "Where":
            cond = _const(ids, node, 0)
            if cond is not None:
                return np.array(np.where(cond.astype(bool), _need(xs[1]), _need(xs[2])))
        if op in ("Add", "Sub", "Mul", "Div") and len(xs) == 2:
            for k in (0, 1):
                other = xs[1 - k]
                if xs[k] is not None and other is not None and _identity_operands(node, k) and bool(np.all(other == CONSTANT)):
                    return _need(xs[k])
    except (ValueError, IndexError, TypeError, KeyError):
        raise _Fail from None
    return ids.fresh(v)


def _slice(ids: _Ids, node: Compute, data: np.ndarray) -> np.ndarray:
    a = node.attributes
    if "starts" in a:
        starts, ends = [int(t) for t in a["starts"]], [int(t) for t in a["ends"]]
        axes = [int(t) for t in a.get("axes", range(len(starts)))]
        steps = [1] * len(starts)
    else:
        starts = [int(t) for t in _need(_const(ids, node, 1)).ravel()]
        ends = [int(t) for t in _need(_const(ids, node, 2)).ravel()]
        c3, c4 = _const(ids, node, 3), _const(ids, node, 4)
        axes = [int(t) for t in c3.ravel()] if c3 is not None else list(range(len(starts)))
        steps = [int(t) for t in c4.ravel()] if c4 is not None else [1] * len(starts)
    index: list[slice] = [slice(None)] * data.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        n = data.shape[ax]
        e = max(min(e, n), -n - 1) if st < 0 else min(e, n)
        index[ax] = slice(s, e, st)  # numpy reads it as Python does; indices(n) is for range(): its stop -1 would re-read as n - 1
    return data[tuple(index)]


def _split(ids: _Ids, node: Compute, data: np.ndarray) -> list[np.ndarray]:
    axis = int(node.attributes.get("axis", 0))
    sizes = node.attributes.get("split")
    if sizes is None:
        c = _const(ids, node, 1)
        sizes = c.ravel().tolist() if c is not None else None
    n = len(node.outputs)
    if sizes is None:
        if data.shape[axis] % n:
            raise _Fail
        sizes = [data.shape[axis] // n] * n
    cuts = np.cumsum([int(s) for s in sizes])[:-1]
    return list(np.split(data, cuts, axis=axis))


# -- slices --------------------------------------------------------------------------------------


def _label(slot: str, shape: tuple[int, ...], members: np.ndarray) -> tuple[tuple[int, ...], str] | None:
    """The index key and label of the slot elements ``members`` (flat ids): ``slot[0][1]`` for a whole
    sub-tensor, ``slot[0][:, :, 0:8]`` for a box on inner axes; None when they form no box."""
    coords = np.array(np.unravel_index(members, shape)).T
    lo, hi = [int(t) for t in coords.min(axis=0)], [int(t) for t in coords.max(axis=0)]
    if int(np.prod([h - lo_ + 1 for lo_, h in zip(lo, hi)])) != len(members):
        return None
    rank = len(shape)
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
    size = int(np.prod(shape, dtype=np.int64))
    if size > MAX_SLOT:
        return None
    # entries: every slot element read by a recurrent state port, and where in the port
    reader: dict[int, tuple[Recurrent, str, int]] = {}
    for rec in program.recurrents:
        if rec.provenance.branch or rec.layout != 0:
            return None  # per-branch element maps are the leading-axis tracer's job
        for port in rec.state_ports:
            pv = rec.port(port)
            if pv is None:
                continue
            try:
                arr = ids.ids(pv)
            except _Fail:
                continue
            for pos, i in enumerate(arr.ravel().tolist()):
                hit = ids.owner(i) if i >= 0 else None
                if hit is None or hit[0].slot != slot.name:
                    continue
                if hit[1] in reader:
                    return None  # one element read twice: not a partition into slices
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
    written = out.ravel()
    groups: dict[tuple[str, str], list[int]] = {}
    for e in range(size):
        rec, port, _ = reader[e]
        groups.setdefault((rec.id, port), []).append(e)
    maps: list[SliceMap] = []
    for members in groups.values():
        rec, port, _ = reader[members[0]]
        lab = _label(slot.name, tuple(shape), np.array(members))
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


def _window_of(ids: _Ids, slot: Slot, shape: tuple[int, ...], out: np.ndarray, value: Value) -> Window | None:
    """``slot`` written back with ``out`` (element ids) as sliding windows of its own frames along one axis:
    on every line along that axis, each segment ``[start, start + L)`` holds the segment's frames shifted by
    ``s`` toward the past followed by the newest ``s`` frames of one new value, in order.  GTCRN's conv_cache
    packs several such windows (one per dilated conv) on its time axis.  None when that is not what ``out`` is."""
    if tuple(out.shape) != shape or not ids.blocks:
        return None
    flat = out.ravel()
    if (flat < 0).any():
        return None
    bases = np.array(ids.bases, dtype=np.int64)
    which = np.searchsorted(bases, flat, side="right") - 1
    blocks = [ids.blocks[int(k)] for k in np.unique(which)]
    olds = [b for b in blocks if b.slot is not None]
    if len(olds) != 1 or any(b.node is not None for b in blocks) or tuple(olds[0].shape) != shape:
        return None
    old = olds[0]
    rank = len(shape)
    is_old = which == ids.blocks.index(old)
    dst = np.array(np.unravel_index(np.arange(flat.size), shape))
    src = np.array(np.unravel_index(np.where(is_old, flat - old.base, 0), shape))
    delta = (src - dst)[:, is_old]
    moved = np.flatnonzero((delta != 0).any(axis=1))
    if len(moved) != 1 or (delta[moved[0]] <= 0).any():
        return None  # old frames move along exactly one axis, toward the past (a kept stale frame moves by 0)
    axis = int(moved[0])
    shift = np.zeros(flat.size, dtype=np.int64)
    shift[is_old] = delta[axis]
    lines_old = np.moveaxis(is_old.reshape(shape), axis, -1).reshape(-1, shape[axis])
    lines_shift = np.moveaxis(shift.reshape(shape), axis, -1).reshape(-1, shape[axis])
    lines_id = np.moveaxis(out, axis, -1).reshape(-1, shape[axis])
    lines_dst = np.moveaxis(np.arange(flat.size).reshape(shape), axis, -1).reshape(-1, shape[axis])
    layout: tuple[tuple[int, int], ...] | None = None
    # the lines as Python lists: _segments reads them element by element, where numpy's per-item cost dominates
    for line_old, line_shift, line_id, line_dst in zip(lines_old.tolist(), lines_shift.tolist(), lines_id.tolist(), lines_dst.tolist()):
        segs = _segments(ids, line_old, line_shift, line_id, line_dst, shape, axis)
        if segs is None or (layout is not None and segs != layout):
            return None
        layout = segs
    if not layout:
        return None
    lengths = {n for _, n in layout}
    news = {int(s) for s in shift[is_old]}
    cut = Cut(axis, -min(lengths), END, 1) if len(layout) == 1 else None
    return Window(old.slot or slot.name, axis, tuple(range(rank)), new_len=news.pop() if len(news) == 1 else None,
                  cut=cut or Cut(axis, 0, END, 1), via=value.producer.describe() if value.producer is not None else value.name,
                  segments=layout)


def _segments(ids: _Ids, old: list[bool], shift: list[int], got: list[int], dst: list[int], shape: tuple[int, ...],
              axis: int) -> tuple[tuple[int, int], ...] | None:
    """One line along the window axis, parsed into windows: ``k`` old frames shifted by ``s``, then ``s`` new."""
    segs = []
    p, n = 0, len(old)
    while p < n:
        if not old[p]:
            return None  # a window that starts with a new frame: more new frames than it keeps (not parsed)
        s = int(shift[p])
        k = 0
        while p + k < n and old[p + k] and int(shift[p + k]) == s:
            k += 1
        if p + k + s > n or any(old[p + k : p + k + s]):
            return None
        if not _newest(ids, got[p + k : p + k + s], dst[p + k : p + k + s], shape, axis):
            return None
        segs.append((p, k + s))
        p += k + s
    return tuple(segs)


def _newest(ids: _Ids, got: list[int], dst: list[int], shape: tuple[int, ...], axis: int) -> bool:
    """The ``len(got)`` elements are the newest frames of one new value, in order, aligned with the slot's other axes."""
    owner = ids.owner(int(got[0]))
    if owner is None or owner[0].slot is not None or owner[0].node is not None:
        return False
    v = owner[0]
    lead = len(shape) - len(v.shape)
    t_axis = axis - lead
    if lead < 0 or t_axis < 0:
        return False
    frames = v.shape[t_axis]
    # np.unravel_index / np.ravel_multi_index in plain integers: called per element of a few-frame segment, numpy's
    # per-call cost was most of a cache model's lint (GTCRN)
    strides = [1] * len(v.shape)
    for q in range(len(v.shape) - 2, -1, -1):
        strides[q] = strides[q + 1] * int(v.shape[q + 1])
    for j, (g, d) in enumerate(zip(got, dst)):
        coords = _unravel(d, shape)[lead:]
        coords[t_axis] = frames - len(got) + j
        if any(c >= m or c < 0 for c, m in zip(coords, v.shape)):
            return False
        if g != v.base + sum(c * st for c, st in zip(coords, strides)):
            return False
    return True


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """``list(np.unravel_index(flat, shape))`` for one in-range index, in Python integers."""
    coords = [0] * len(shape)
    for q in range(len(shape) - 1, -1, -1):
        flat, coords[q] = divmod(flat, int(shape[q]))
    return coords


def _direction(rec: Recurrent, port_shape: tuple[int, ...], positions: list[int]) -> int | None:
    if rec.num_directions == 1:
        return 0
    dirs = {int(np.unravel_index(p, port_shape)[0]) for p in positions}
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
