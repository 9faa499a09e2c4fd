"""SD002 wrong-slot: a final state is written into the wrong slot or slice (h/c swap, other layer, other direction).

Found by :mod:`rnnir.passes.store_destinations.destinations`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain SD002`` prints the doc)."""

from __future__ import annotations

from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule("SD002", "wrong-slot", Severity.ERROR, "a final state is written into the wrong slot or slice (h/c swap, other layer, other direction)", """
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
