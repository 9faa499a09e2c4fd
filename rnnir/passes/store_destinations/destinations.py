"""Slice destinations: is each slice written back with the final state that belongs to it?

For every slice whose exit is a recurrent port, the live-in value of a slice or a
constant: SD002 (another slice's state), SD003 (not a final state, or the final
state of an op that never read the slice), SD006 (a reverse direction's final
state) and SD008 (Y's last step where sequence_lens can end a sequence early).
Exits computed through value-changing ops are :mod:`.derived`'s.
"""

from __future__ import annotations

from collections.abc import Iterator

from rnnir.ir import Store
from rnnir.pairs import ExitKind, PortRef, SliceMap, StatePair

from ..diagnostics import Diagnostic, Location, Message, Severity, rule
from .context import INIT_OF, Context, branch_text, expected_final, forward_dir, is_reset, ref_loc, refs_for, store_loc

__all__ = ["NOT_FINAL_STATE", "REVERSE_STATE_PERSISTED", "SEQ_LENS_LAST_STEP", "WRONG_SLOT", "exits"]


WRONG_SLOT = rule("SD002", "wrong-slot", Severity.ERROR, "a final state is written into the wrong slot or slice (h/c swap, other layer, other direction)", """
    What it finds
        A slice of a slot written back with a final state that belongs to
        another slice: the slice is read as one recurrent port (its live-in
        role, e.g. ``state[0]`` = ``initial_h``) but written with the final
        state of another role (``Y_c``), of another layer, of another
        direction, or with the incoming value of a different slice.

    Why it matters
        The next call starts each layer/direction/gate from somebody else's
        state.  The first call is right; from the second on, h and c (or the
        two layers) are mixed and the output drifts, often plausibly.

    Bad (ONNX sketch: packed state, h/c swapped)
        h0 = Unsqueeze(Gather(state, 0)); c0 = Unsqueeze(Gather(state, 1))
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=h0, initial_c=c0)
        stateN = Concat(Y_c, Y_h, axis=0)               # state[0] gets c

    Fixed
        stateN = Concat(Y_h, Y_c, axis=0)               # state[0] = Y_h, state[1] = Y_c

    Bad (two layers swapped)
        Y0, H0 = GRU(x,  ..., initial_h=Slice(h0, 0:1))
        Y1, H1 = GRU(Y0, ..., initial_h=Slice(h0, 1:2))
        hn = Concat(H1, H0, axis=0)

    Fixed
        hn = Concat(H0, H1, axis=0)

    Bad (two sliding-window caches crossed)
        out_cache1 = Slice(Concat(in_cache0, new0, axis=2), starts=-19, axes=[2])   # block 0's history

    Fixed
        out_cache1 = Slice(Concat(in_cache1, new1, axis=2), starts=-19, axes=[2])

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          slot @c : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          output cn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,16,3]
          value %R : float32[1,16,4]
          pair h -> hn declared "the caller feeds hn back as h"
          pair c -> cn declared "the caller feeds cn back as c"

          %h = load_slot<@h, copy>()
          %c = load_slot<@c, copy>()
          %y, %hn, %cn = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h, %c, _)
          %sh = store<@h, token>(%cn)                        // h and c swapped
          %sc = store<@c, token>(%hn)
          %oh = store<out:hn, value>(%cn)
          %oc = store<out:cn, value>(%hn)
          return<by runtime>(%sh, %sc, %oh, %oc)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          slot @c : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          output cn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,16,3]
          value %R : float32[1,16,4]
          pair h -> hn declared "the caller feeds hn back as h"
          pair c -> cn declared "the caller feeds cn back as c"

          %h = load_slot<@h, copy>()
          %c = load_slot<@c, copy>()
          %y, %hn, %cn = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h, %c, _)
          %sh = store<@h, token>(%hn)
          %sc = store<@c, token>(%cn)
          %oh = store<out:hn, value>(%hn)
          %oc = store<out:cn, value>(%cn)
          return<by runtime>(%sh, %sc, %oh, %oc)
        }
    """, messages={
    "window-of-other-slot": Message(
        "slot {slot!r} is written back with {got}{where}",
        consequence="the next call continues another cache's history",
        hint="write this slot's own window: Slice(Concat({slot}, new, axis={axis}), starts=-{length}, axes=[{axis}])",
    ),
    "slice-from-other-slice": Message(
        "slice {here} is written with the live-in value of {other}{where}",
        consequence="the next call starts each slice from another slice's state",
        hint="write the final state of {expected} into {label}",
    ),
    "belongs-elsewhere": Message(
        "slice {here} is written with {got}{where}, the final state that belongs to {whose}",
        consequence="the next call starts each slice from another slice's state",
        hint="write the final state of {expected} into {label}",
    ),
    "other-port": Message(
        "slice {here} is written with {got}{where}, the final state of another port or direction of the same op",
        consequence="the next call starts this slice from the wrong state",
        hint="write the final state of {expected} into {label}",
    ),
})


NOT_FINAL_STATE = rule("SD003", "not-final-state", Severity.ERROR, "the value written back is not the final state of the op that read the slot", """
    What it finds
        The live-out value of a slot is not the final state of the recurrent
        op that consumed the live-in value: ``Y`` at the first step of a
        forward op (or at an inner step), the whole ``Y`` sequence, the final
        state of an op that never read this slot, or a constant in every
        branch.  When the written value is computed from state through
        value-changing ops (not just layout ops), rnnir cannot prove the slices
        line up: it reports a WARNING when the value depends on anything but the
        right final states; when it depends on those only (silero_vad_16k_op15
        adds a zero term: ``stateN = Add(Concat(hn, cn), zero)``) the slice is
        unverified and SD009 says so.

    Why it matters
        The next call resumes from a point the sequence has already passed (or
        from another op's state), so chunked inference silently differs from
        running the whole sequence at once.

    Not this rule
        An op in an If alternative that does not read the slot and starts from
        a constant (a deliberate reset branch) while another branch writes the
        slot's real final state; a constant written back in some branches only.

    Bad (ONNX sketch)
        Y, Y_h = RNN(x, W, R, initial_h=h0)             # forward
        hn = Gather(Y, 0, axis=0)                       # the state after step 1

    Fixed
        hn = Y_h                                        # or Gather(Y, -1) for a forward op without sequence_lens

    Bad (a sliding window off by one frame)
        out_cache = Slice(Concat(in_cache, new, axis=2), starts=-20, axes=[2])   # in_cache holds 19 frames
        out_cache = Slice(Concat(in_cache, new, axis=2), starts=-20, ends=-1, axes=[2])  # drops the newest

    Fixed
        out_cache = Slice(Concat(in_cache, new, axis=2), starts=-19, axes=[2])   # exactly the newest 19

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          value %zero : int64[] = dense<int64[] 0>
          value %one : int64[1] = dense<int64[1] [1]>

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %first = Gather<axis=0>(%y, %zero)                 // Y at step 0, not the last step
          %f = Squeeze(%first, %one)
          %s = store<@h, token>(%f)
          %o = store<out:hn, value>(%f)
          return<by runtime>(%s, %o)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // Y_h: the final state
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "bad-window": Message(
        "slot {slot!r} is written back with {got}{where}",
        consequence="each call keeps the wrong frames",
        hint="keep exactly the newest {length} frames on axis {axis}: Slice(Concat({slot}, new, axis={axis}), starts=-{length}, axes=[{axis}])",
    ),
    "constant-slice": Message(
        "slice {here} is overwritten with a constant on every call path, not with a final state",
        consequence="every call restarts",
        hint="write the final state of the op that reads {label} into it",
    ),
    "y-of-layout-1": Message(
        "slice {here} is written with {got} of a layout=1 op{where}",
        consequence="rnnir cannot tell which time step that is",
        hint="write {op}.Y_h (the final state) instead of a step of Y",
        severity=Severity.WARNING,
    ),
    "whole-sequence": Message(
        "slice {here} is written with {got}, the whole output sequence of the {direction} {op}{where}, not its final state",
        consequence="the next call resumes from the wrong point of the sequence",
        hint="write {op}.Y_h into {label}",
    ),
    "inner-step": Message(
        "slice {here} is written with {got}, the state after step {step!r} of the {direction} {op}{where}, not its final state",
        consequence="the next call resumes from the wrong point of the sequence",
        hint="write {op}.Y_h into {label}",
    ),
    "unread-op": Message(
        "slice {here} is written with {got}{where}, the final state of an op that never read this {unread} (it starts from {start})",
        consequence="the live-out value is not the live-in's final state",
        hint="write the final state of {expected} into {label}",
    ),
    "stateless-value": Message(
        "slot {slot!r} is written back with %{stored}{where}, a value that depends on no state "
        "(a constant or a graph input computed{via}): every call restarts from it",
        hint="write the final state (Y_h/Y_c) of the op that reads the slot",
    ),
    "computed-value": Message(
        "slot {slot!r} is written back with a value computed{via} from {finals}{where}, which depends on {others}: "
        "the live-out value may not be the live-in's final state",
        hint="write the final state (Y_h/Y_c) of the op that reads the slot, through layout ops only",
        severity=Severity.WARNING,
    ),
})


REVERSE_STATE_PERSISTED = rule("SD006", "reverse-state-persisted", Severity.WARNING, "persisting the final state of a reverse or bidirectional op across calls", """
    What it finds
        A slot written with the final state of the reverse direction of an
        RNN/GRU/LSTM (``direction="reverse"``, or direction 1 of a
        bidirectional op).

    Why it matters
        A reverse recurrence runs from the end of the chunk to its start; its
        final state belongs to the *start* of this chunk.  Feeding it into the
        next chunk joins the sequence out of order, so chunked results never
        equal a single pass.  It is a warning, not an error: some streaming
        models do this on purpose and accept the approximation.

    Bad (ONNX sketch)
        Y, Y_h, Y_c = LSTM(x, ..., direction="bidirectional", initial_h=h0, initial_c=c0)
        hn = Y_h; cn = Y_c                              # [1] is the reverse direction

    Fixed
        persist only the forward direction (Y_h[0:1], Y_c[0:1]) and start the
        reverse direction from zeros at every chunk (or use a forward-only
        model for streaming)

    Bad (IR)
        program @bad {
          slot @h : float32[2,1,4] init=zeros
          output hn : float32[2,1,4]
          value %x : float32[T,1,3]
          value %W : float32[2,4,3]
          value %R : float32[2,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<direction='bidirectional', hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // the reverse direction's state persisted
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<direction='forward', hidden_size=4>(%x, %W, %R, _, _, %h)
          %s = store<@h, token>(%hn)                         // a forward op: its state continues the stream
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "slice-reverse": Message(
        "slice {here} persists {got}, the final state of the reverse direction of {which} {op}{where}",
        consequence="across chunks the reverse recurrence sees the chunks out of order",
        hint="persist only forward-direction state; restart the reverse direction from zeros at every chunk",
    ),
    "computed-from-reverse": Message(
        "slot {slot!r} is written back with a value computed from {got}, the final state of the reverse direction of "
        "{direction} {op}: across chunks the reverse recurrence sees the chunks out of order",
        hint="persist only forward-direction state; restart the reverse direction from zeros at every chunk",
    ),
})


SEQ_LENS_LAST_STEP = rule("SD008", "seq-lens-last-step", Severity.ERROR, "the state written back is Y at the last step although sequence_lens can end the sequence earlier", """
    What it finds
        A slot written with ``Y`` at the last time step of an op that has a
        ``sequence_lens`` input.

    Why it matters
        For a batch entry shorter than the chunk, ONNX zeroes ``Y`` past its
        length, so ``Y[-1]`` is zeros for that entry while ``Y_h`` holds its
        real final state: padded entries restart from zero at the next call.

    Bad (ONNX sketch)
        Y, Y_h = GRU(x, W, R, B, seq_lens, initial_h=h0)
        hn = Squeeze(Slice(Y, -1:), axis=0)

    Fixed
        hn = Y_h

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          value %lens : int32[1]
          value %minus1 : int64[] = dense<int64[] -1>
          value %one : int64[1] = dense<int64[1] [1]>

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, %lens, %h)
          %last = Gather<axis=0>(%y, %minus1)                // Y[-1]: zeros where a sequence ended early
          %f = Squeeze(%last, %one)
          %s = store<@h, token>(%f)
          %o = store<out:hn, value>(%f)
          return<by runtime>(%s, %o)
        }

    Fixed (IR)
        program @fixed {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          value %lens : int32[1]

          %h = load_slot<@h, copy>()
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, %lens, %h)
          %s = store<@h, token>(%hn)                         // Y_h: each sequence's own last step
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "last-step": Message(
        "slice {here} is written with {got}, Y at the last time step of {op}{where}, which has a sequence_lens input",
        consequence="a batch entry shorter than the chunk gets zeros there and restarts at the next call",
        hint="write {op}.Y_h (the final state per entry) into {label}",
    ),
})


def exits(ctx: Context, pair: StatePair, stores: list[Store], ignored: set[tuple[int, ...]], reverse_seen: set[str]) -> Iterator[Diagnostic]:
    """SD002/SD003/SD006/SD008 for every slice whose exit is a final state, a sequence, a live-in value or a constant.

    ``ignored`` holds the slices SD007 already reported; ``reverse_seen`` the ops SD006 already named.
    """
    name = pair.slot.name
    locs = [store_loc(st) for st in stores]
    for sm in pair.slices:
        here = ctx.slice_text(name, sm.index)
        kinds = sm.exit_kind
        if kinds and all(k is ExitKind.CONSTANT for k in kinds.values()):
            yield NOT_FINAL_STATE.diagnostic("constant-slice", slot=name, locations=locs, data={"slice": sm.label}, here=here, label=sm.label)
            continue
        for bp, kind in kinds.items():
            if kind is ExitKind.PASSTHROUGH:
                other = sm.exit_slot_refs.get(bp)
                if other is not None and other != (name, sm.index):
                    yield WRONG_SLOT.diagnostic(
                        "slice-from-other-slice",
                        slot=name,
                        locations=locs,
                        data={"slice": sm.label, "branch": bp},
                        here=here,
                        other=ctx.slice_text(*other),
                        where=branch_text(bp),
                        expected=expected_final(ctx, sm),
                        label=sm.label,
                    )
                continue
            if kind in ("final", "sequence"):
                for r in refs_for(sm, bp):
                    yield from _check_final(ctx, pair, sm, bp, r, locs, ignored, reverse_seen)


def _check_final(
    ctx: Context,
    pair: StatePair,
    sm: SliceMap,
    bp: str,
    r: PortRef,
    locs: list[Location],
    ignored: set[tuple[int, ...]],
    reverse_seen: set[str],
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    rec = ctx.ops.get(r.node_id)
    if rec is None:
        return
    here = ctx.slice_text(name, sm.index)
    where = branch_text(bp or r.branch)
    loc = [*locs, ref_loc(r)]
    op = f"{rec.kind} {rec.describe()!r}"
    data = {"slice": sm.label}
    if r.port == "Y":
        if rec.layout == 1:
            yield NOT_FINAL_STATE.diagnostic("y-of-layout-1", slot=name, locations=loc, data=data, here=here, got=r.label, where=where, op=op)
            return
        fwd = forward_dir(rec, r.direction)
        final_step = (fwd is True and r.step == "last") or (fwd is False and r.step == "first")
        if not final_step:
            direction = "forward" if fwd else "reverse" if fwd is False else "bidirectional"
            step = {} if r.step == "all" else {"step": r.step}
            yield NOT_FINAL_STATE.diagnostic(
                "whole-sequence" if r.step == "all" else "inner-step",
                slot=name,
                locations=loc,
                data=data,
                here=here,
                got=r.label,
                direction=direction,
                op=op,
                where=where,
                label=sm.label,
                **step,
            )
            return
        if fwd and rec.port("sequence_lens") is not None:
            yield SEQ_LENS_LAST_STEP.diagnostic("last-step", slot=name, locations=loc, data=data, here=here, got=r.label, op=op, where=where, label=sm.label)
    yield from _owner_check(ctx, pair, sm, bp, r, loc, ignored)
    fwd = forward_dir(rec, r.direction)
    if fwd is not True and rec.id not in reverse_seen:
        reverse_seen.add(rec.id)
        which = "reverse" if rec.direction == "reverse" else f"bidirectional (direction {r.direction if r.direction is not None else '0 and 1'})"
        yield REVERSE_STATE_PERSISTED.diagnostic("slice-reverse", slot=name, locations=loc, data=data, here=here, got=r.label, which=which, op=op, where=where)


def _owner_check(
    ctx: Context, pair: StatePair, sm: SliceMap, bp: str, r: PortRef, loc: list[Location], ignored: set[tuple[int, ...]]
) -> Iterator[Diagnostic]:
    name = pair.slot.name
    owners = ctx.owners_of(r)
    if any(o.slot == name and o.index == sm.index for o in owners):
        return
    here = ctx.slice_text(name, sm.index)
    where = branch_text(bp or r.branch)
    expected = expected_final(ctx, sm)
    if owners:
        o = owners[0]
        whose = ctx.slice_text(o.slot, o.index)
        whose = whose if o.slot == name else f"slot {o.slot!r}, slice {whose}"
        data = {"slice": sm.label, "got": r.label, "belongs_to": ctx.labels.get((o.slot, o.index), o.slot)}
        yield WRONG_SLOT.diagnostic(
            "belongs-elsewhere", slot=name, locations=loc, data=data, here=here, got=r.label, where=where, whose=whose, expected=expected, label=sm.label
        )
        return
    reads_slice = {e.node_id for e in sm.entry if e.note != "derived"}
    if r.node_id in reads_slice:
        data = {"slice": sm.label, "got": r.label}
        yield WRONG_SLOT.diagnostic("other-port", slot=name, locations=loc, data=data, here=here, got=r.label, where=where, expected=expected, label=sm.label)
        return
    if r.node_id in ctx.derived_readers.get(name, set()) or sm.index in ignored:
        return
    if is_reset(ctx, name, sm, bp, r):
        return
    rec = ctx.ops[r.node_id]
    yield NOT_FINAL_STATE.diagnostic(
        "unread-op",
        slot=name,
        locations=loc,
        data={"slice": sm.label},
        here=here,
        got=r.label,
        where=where,
        unread="slice" if r.node_id in ctx.reads(name) else "slot",
        start=ctx.start_text(rec, INIT_OF.get(r.port, "initial_h")),
        expected=expected,
        label=sm.label,
    )
