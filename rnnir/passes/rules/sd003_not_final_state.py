"""SD003 not-final-state: the value written back is not the final state of the op that read the slot.

Found by :mod:`rnnir.passes.store_destinations.destinations`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD003`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD003", "not-final-state", Severity.ERROR, "the value written back is not the final state of the op that read the slot", """
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
