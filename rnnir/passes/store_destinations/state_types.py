"""State types: does the final state written back have the slot's dtype, shape, layout and quantization? (SD005)"""

from __future__ import annotations

from collections.abc import Iterator

from rnnir.analysis.slicemaps import PortRef, SliceMap
from rnnir.analysis.slices import TracedPair
from rnnir.ir.nodes import Output, Recurrent, Store
from rnnir.ir.recurrence import FINAL_STATE_PORTS
from rnnir.passes.diagnostics import Diagnostic
from rnnir.passes.rules.sd005_state_type_mismatch import RULE as STATE_TYPE_MISMATCH
from rnnir.passes.store_destinations.context import Context, branch_text, static_dim

__all__ = ["STATE_TYPE_MISMATCH", "state_types"]


# ONNX TensorProto data types (numbers fixed by the ONNX spec) -> numpy names, for Cast(to=...)
_ONNX_DTYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16",
}


def state_types(ctx: Context, pair: TracedPair, stores: list[Store]) -> Iterator[Diagnostic]:
    """SD005: the slot's declared type against the value written back, its paired output and the ops that made it."""
    slot = pair.slot
    name = slot.name
    st_type = slot.type
    value = next((st.value for st in stores if st.value is not None), None)
    if value is None:
        return
    findings: dict[str, list[str]] = {}

    def add(aspect: str, text: str) -> None:
        lst = findings.setdefault(aspect, [])
        if text not in lst:
            lst.append(text)

    # dtype: the written value, the paired output, casts on the exit path
    sd = st_type.dtype
    if sd:
        if value.type.dtype and value.type.dtype != sd:
            add("dtype", f"the value written back (%{value.name}) is {value.type.dtype}")
        out = _paired_output(ctx, pair)
        if out is not None and out.type.dtype and out.type.dtype != sd:
            add("dtype", f"paired output {out.name!r} is {out.type.dtype}")
        for path, alt in ctx.facts.tracer.trace(value).branches():
            to = _cast_target(alt.cast)
            if to is not None and to != sd:
                add("dtype", f"a Cast to {to} sits on the exit path{branch_text(path)}")
    # declared shapes of the written value vs the slot
    vshape = value.type.shape
    sshape = st_type.shape
    # a cache's frame axis is judged by its window (rnnir.analysis.statekinds): an append-only cache grows there by design
    frame_axes = {w.axis for sm in pair.slices for w in sm.windows.values()}
    if vshape is not None and sshape is not None and len(vshape) == len(sshape):
        for axis, (a, b) in enumerate(zip(sshape, vshape)):
            if a == b or axis in frame_axes:
                continue  # the same dim (no static one can differ), or a cache's frame axis
            a, b = static_dim(a), static_dim(b)
            if a is not None and b is not None and a != b:
                add(_aspect(axis, len(sshape)), f"dim {axis} is {b} in the value written back (%{value.name}), {a} in the slot")
    # per-slice: the op that produced the final state
    for sm in pair.slices:
        sub = None if sshape is None else sshape[len(sm.index) :]
        for r in sm.exit:
            rec = ctx.ops.get(r.node_id)
            if rec is None or r.port not in FINAL_STATE_PORTS or r.note == "derived" or sub is None:
                continue
            if sub and static_dim(sub[-1]) is not None and rec.hidden_size and sub[-1] != rec.hidden_size:
                add("hidden size", f"{_exit_text(sm, r)}: the op's hidden_size is {rec.hidden_size}, the slot's last dim is {sub[-1]}")
            ytype = port.type if (port := rec.port(r.port)) is not None else None
            batch = static_dim(ytype.dim(0 if rec.layout == 1 else 1)) if ytype is not None and ytype.rank == 3 else None
            if len(sub) == 3:
                dirs_axis, batch_axis = (1, 0) if rec.layout == 1 else (0, 1)
                n = rec.num_directions if r.direction is None else 1
                if static_dim(sub[dirs_axis]) is not None and sub[dirs_axis] != n:
                    add("directions", f"{_exit_text(sm, r)}: the op writes {n} direction(s), the slot holds {sub[dirs_axis]}")
                if batch is not None and static_dim(sub[batch_axis]) is not None and sub[batch_axis] != batch:
                    add("batch", f"{_exit_text(sm, r)}: the op's batch is {batch}, the slot's is {sub[batch_axis]}")
            elif len(sub) == 2 and batch is not None and static_dim(sub[0]) is not None and sub[0] != batch:
                add("batch", f"{_exit_text(sm, r)}: the op's batch is {batch}, the slot's is {sub[0]}")
            lay = _layout_of(st_type.layout)
            if lay is not None and lay != rec.layout:
                add("layout", f"{_exit_text(sm, r)}: the slot is declared layout {st_type.layout!r}, the op runs layout={rec.layout}")
    # quantization
    q_slot, q_val = st_type.quant, value.type.quant
    known = value.type.dtype is not None or isinstance(value.producer, Recurrent)  # a recurrent op's result is never quantized
    if q_slot != q_val and (q_slot is not None and q_val is not None or (known and (q_slot or q_val))):
        add("quantization", f"the slot is {'quantized ' + str(q_slot) if q_slot else 'not quantized'}, "
            f"the value written back is {'quantized ' + str(q_val) if q_val else 'not quantized'}")
    if findings:
        aspects = list(findings)
        detail = "; ".join(f"{aspect}: " + ", ".join(texts) for aspect, texts in findings.items())
        yield STATE_TYPE_MISMATCH.diagnostic(
            "mismatch", slot=name, locations=ctx.store_locs(stores), data={"aspects": aspects}, declared=st_type, aspects=" and ".join(aspects), detail=detail
        )


def _exit_text(sm: SliceMap, r: PortRef) -> str:
    """How a message names a slice's exit (worded when a mismatch is found, not for every exit)."""
    return f"{sm.label} <- {r.label}"


def _paired_output(ctx: Context, pair: TracedPair) -> Output | None:
    if pair.output is None:
        return None
    try:
        return ctx.facts.program.output(pair.output)
    except KeyError:
        return None


def _cast_target(cast: str | None) -> str | None:
    if cast is None or cast == "like":
        return None
    try:
        return _ONNX_DTYPES.get(int(cast))
    except ValueError:
        return cast


def _aspect(axis: int, rank: int) -> str:
    if axis == rank - 1:
        return "hidden size"
    if axis == rank - 2:
        return "batch"
    return "directions/layers" if rank == 3 and axis == 0 else f"dim {axis}"


def _layout_of(layout: str | None) -> int | None:
    if layout is None:
        return None
    text = layout.strip().lower().replace("layout=", "")
    if text in ("0", "seq_first", "time_first", "tbh"):
        return 0
    if text in ("1", "batch_first", "bth"):
        return 1
    return None
