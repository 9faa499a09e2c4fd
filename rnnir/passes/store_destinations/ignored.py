"""The caller's state ignored: SD007, a state input that never reaches the op whose final state is written back."""

from __future__ import annotations

from collections.abc import Generator

from rnnir.ir import Store
from rnnir.pairs import PortRef, SliceMap, StatePair

from ..diagnostics import Diagnostic, Message, Severity, rule
from .context import INIT_OF, Context, ref_loc

__all__ = ["STATE_IGNORED", "ignored"]


STATE_IGNORED = rule("SD007", "state-ignored", Severity.ERROR, "a state input never reaches the op it is paired for: the caller's state is ignored", """
    What it finds
        A state pair whose input never reaches the recurrent op that produces
        the state written back: the op starts from zeros, a constant or some
        other value, while its final state is returned as this slot's state.
        Not reported for recurrences written as plain ops (no RNN/GRU/LSTM
        node carries them).

    Why it matters
        The caller dutifully feeds the state back and the model ignores it:
        every call restarts, exactly like a slot that is never written, but the
        graph's interface looks stateful.

    Bad (ONNX sketch)
        inputs: x, state
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=zeros, initial_c=zeros)
        stateN = Concat(Y_h, Y_c)

    Fixed
        Y, Y_h, Y_c = LSTM(x, W, R, initial_h=Unsqueeze(Gather(state, 0)),
                                    initial_c=Unsqueeze(Gather(state, 1)))

    Bad (IR)
        program @bad {
          slot @h : float32[1,1,4] init=zeros
          output hn : float32[1,1,4]
          value %x : float32[T,1,3]
          value %W : float32[1,4,3]
          value %R : float32[1,4,4]
          pair h -> hn declared "the caller feeds hn back as h"
          value %zeros : float32[1,1,4] = dense<float32[1,1,4] [0.0, 0.0, 0.0, 0.0]>

          %h = load_slot<@h, copy>()                          // loaded, never read
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %zeros)
          %s = store<@h, token>(%hn)
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
          %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h)    // the op starts from the slot
          %s = store<@h, token>(%hn)
          %o = store<out:hn, value>(%hn)
          return<by runtime>(%s, %o)
        }
    """, messages={
    "slice-ignored": Message(
        "slice {here} never reaches the op whose final state is written back ({finals}); {starts}",
        consequence="the caller's state is ignored and every call restarts",
        hint="feed {slot!r} (its slice) into the op's initial state instead of the constant/other value",
    ),
    "input-ignored": Message(
        "the state input never reaches the op whose final state is written back ({finals}); {starts}",
        consequence="the caller's state is ignored and every call restarts",
        hint="feed {slot!r} (its slice) into the op's initial state instead of the constant/other value",
    ),
})


def _final_refs(sm: SliceMap) -> list[PortRef]:
    return [r for r in sm.exit if r.note != "derived" and r.port in ("Y_h", "Y_c", "Y")]


def ignored(ctx: Context, pair: StatePair, stores: list[Store], plain: bool) -> Generator[Diagnostic, None, set[tuple[int, ...]]]:
    """SD007; returns the slice indices it covered (so SD003 does not report them again)."""
    slot = pair.slot
    covered: set[tuple[int, ...]] = set()
    if plain:
        return covered
    any_entry = any(sm.entry for sm in pair.slices)
    targets = [sm for sm in pair.slices if not sm.entry] if any_entry else list(pair.slices[:1])
    for sm in targets:
        exits = _final_refs(sm) if any_entry else [r for s in pair.slices for r in s.exit]
        refs = list({(r.node_id, r.port, r.direction): r for r in exits if r.node_id in ctx.ops}.values())
        if not refs:
            continue
        starts: list[str] = []
        for r in refs:
            rec = ctx.ops[r.node_id]
            init = INIT_OF.get(r.port)
            if init in rec.state_ports:
                t = f"{rec.kind} {rec.describe()!r}.{init} starts from {ctx.start_text(rec, init)}"
                if t not in starts:
                    starts.append(t)
        finals = ", ".join(dict.fromkeys(r.label for r in refs))
        covered.add(sm.index)
        start = "; ".join(starts) if starts else "the op does not read it"
        locations = [ref_loc(r) for r in refs]
        if any_entry:
            here = ctx.slice_text(slot.name, sm.index)
            yield STATE_IGNORED.diagnostic("slice-ignored", slot=slot.name, locations=locations, data={"slice": sm.label}, here=here, finals=finals, starts=start)
            continue
        yield STATE_IGNORED.diagnostic("input-ignored", slot=slot.name, locations=locations, finals=finals, starts=start)
        covered.update(s.index for s in pair.slices)
        break
    return covered
