"""Element-exact slices of packed states and caches, written as IR text (rnnir.analysis.elements).

Each program is written for one case: a state ``state[2, 1, 4]`` holding two GRUs' ``h`` as rows (GTCRN's
``tra_cache`` in small: read by Gather, written back row by row by ScatterND), or a cache ``cache[1, 6]`` holding
two sliding windows (frames 0:2 and 2:6, GTCRN's ``conv_cache`` in small).  What each slice is read by and
written back from is worked out by hand from what the ops do (ScatterND writes row ``i`` of its updates at index
``i``); the near misses are the same program one index off.
"""

from __future__ import annotations

from rnnir import passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir.text import parse_program


def ints(name: str, values: list, shape: list[int] | None = None) -> str:
    dims = ",".join(map(str, shape or [len(values)]))
    return f"  value %{name} : int64[{dims}] = dense<int64[{dims}] {values}>"


def rows(*, write_b: str = "%i1", extra: str = "", read_b: str = "%r1") -> str:
    """state[2, 1, 4]: row 0 -> GRU a, row 1 -> GRU b (Gather); written back by ScatterND(state, i0, Y_h a) then
    ScatterND(., ``write_b``, Y_h b)."""
    return "\n".join(
        [
            "program @p {",
            "  slot @state : float32[2,1,4] init=zeros",
            "  output stateN : float32[2,1,4]",
            "  value %x : float32[5,1,3]",
            "  value %W : float32[1,12,3] = dense<float32[1,12,3] ...>",
            "  value %R : float32[1,12,4] = dense<float32[1,12,4] ...>",
            ints("r0", [0]),
            ints("r1", [1]),
            ints("i0", [[0]], [1, 1]),
            ints("i1", [[1]], [1, 1]),
            ints("im1", [[-1]], [1, 1]),
            extra,
            '  pair state -> stateN declared "the caller feeds it back"',
            "  %state = load_slot<@state, copy>()",
            "  %h0a = Gather<axis=0>(%state, %r0) : float32[1,1,4]",
            f"  %h0b = Gather<axis=0>(%state, {read_b}) : float32[1,1,4]",
            "  %Ya, %Yha = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h0a) loc{'node': 'gru_a'} : float32[5,1,1,4], float32[1,1,4]",
            "  %Yb, %Yhb = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h0b) loc{'node': 'gru_b'} : float32[5,1,1,4], float32[1,1,4]",
            "  %s1 = ScatterND(%state, %i0, %Yha) : float32[2,1,4]",
            f"  %new = ScatterND(%s1, {write_b}, %Yhb) : float32[2,1,4]",
            "  %st1 = store<@state, token>(%new)",
            "  %st2 = store<out:stateN, value>(%new)",
            "  return<by runtime>(%st1, %st2)",
            "}",
        ]
    )


def slices_of(text: str) -> dict[str, tuple[str, str, str]]:
    """Per slice: the GRU that reads it, the GRU and port it is written back from."""
    (pair,) = slice_maps(parse_program(text)).declared
    return {sm.label: (sm.entry[0].onnx_node, sm.exit[0].onnx_node, sm.exit[0].port) for sm in pair.slices if sm.entry and sm.exit}


def verdicts(text: str) -> dict[str, str]:
    return {s.slice: s.verdict.value for s in passes.verify(parse_program(text)).slices}


def test_rows_written_back_by_scatternd_are_each_grus_own_state():
    assert slices_of(rows()) == {"state[0]": ("gru_a", "gru_a", "Y_h"), "state[1]": ("gru_b", "gru_b", "Y_h")}
    assert verdicts(rows()) == {"state[0]": "verified", "state[1]": "verified"}
    # a negative index counts from the end: -1 of 2 rows is row 1, the same program
    assert verdicts(rows(write_b="%im1")) == {"state[0]": "verified", "state[1]": "verified"}


def test_rows_written_to_the_wrong_place_are_never_verified():
    # GRU b's state written over row 0 (where GRU a's was): row 1 keeps the stale state, row 0 is b's
    assert set(verdicts(rows(write_b="%i0")).values()) != {"verified"}
    # GRU b reads row 0 too: one element read twice is no partition into slices
    assert set(verdicts(rows(read_b="%r0")).values()) != {"verified"}


def test_an_index_the_model_computes_leaves_the_write_back_derived_and_never_verified():
    # the row index is the caller's input: unknown to rnnir, whatever it is at run time (and no crash reading it)
    text = rows(write_b="%rows", extra="  value %rows : int64[1,1]")
    (pair,) = slice_maps(parse_program(text)).declared
    assert {k.value for sm in pair.slices for k in sm.exit_kind.values()} == {"derived"}
    assert "verified" not in verdicts(text).values()


def cache(body: list[str], extra: str = "") -> str:
    """cache[1, 6] with windows at frames 0:2 and 2:6, written back from %out; %new is this call's frame."""
    return "\n".join(
        [
            "program @p {",
            "  slot @cache : float32[1,6] init=zeros",
            "  output cacheN : float32[1,6]",
            "  value %x : float32[1,1]",
            ints("a1", [1]),
            ints("a2", [2]),
            ints("b1", [3]),
            ints("b2", [6]),
            ints("ax", [1]),
            extra,
            '  pair cache -> cacheN declared "the caller feeds it back"',
            "  %cache = load_slot<@cache, copy>()",
            "  %new = Relu(%x) : float32[1,1]",
            *body,
            "  %s1 = store<@cache, token>(%out)",
            "  %s2 = store<out:cacheN, value>(%out)",
            "  return<by runtime>(%s1, %s2)",
            "}",
        ]
    )


WINDOWS = [
    "  %oa = Slice(%cache, %a1, %a2, %ax)",
    "  %ob = Slice(%cache, %b1, %b2, %ax)",
    "  %na = Concat<axis=1>(%oa, %new)",
    "  %nb = Concat<axis=1>(%ob, %new)",
    "  %out = Concat<axis=1>(%na, %nb)",
]


def windows_of(text: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...] | None]:
    prog = parse_program(text)
    (sm,) = slice_maps(prog).pair("cache").slices
    w = sm.windows.get("")
    return tuple(s.verdict.value for s in passes.verify(prog).slices), (w.segments if w else None)


def test_two_windows_of_one_cache_are_proven_whichever_load_of_the_slot_they_read():
    assert windows_of(cache(WINDOWS)) == (("verified",), ((0, 2), (2, 4)))
    # the second window read through a second load of the same slot: still this slot's frames
    second = [line.replace("Slice(%cache, %b1", "Slice(%again, %b1") for line in WINDOWS]
    assert windows_of(cache(["  %again = load_slot<@cache, copy>()", *second])) == (("verified",), ((0, 2), (2, 4)))


def test_the_same_windows_written_by_one_concat_naming_the_new_frame_twice_are_proven():
    one = ["  %oa = Slice(%cache, %a1, %a2, %ax)", "  %ob = Slice(%cache, %b1, %b2, %ax)", "  %out = Concat<axis=1>(%oa, %new, %ob, %new)"]
    assert windows_of(cache(one)) == (("verified",), ((0, 2), (2, 4)))


def test_a_window_whose_new_frame_may_be_a_stale_one_is_never_verified():
    # cache[1, 6]'s window 1:2 ++ pick, where an If picks either the new frame or the cache's stalest frame: in the
    # then branch the window keeps a stale frame -- an If's output is no new value the element tracer may assume
    then_b, else_b = "If_0.then_branch", "If_0.else_branch"
    body = [
        f"  %stale = Slice(%cache, %z, %a1, %ax) loc{{'branch': ({then_b!r},)}}",
        f"  %pick = If<region.then_branch=({then_b!r},), region.else_branch=({else_b!r},)>(%cond, %stale, %new) : float32[1,1]",
        "  %oa = Slice(%cache, %a1, %a2, %ax)",
        "  %ob = Slice(%cache, %b1, %b2, %ax)",
        "  %out = Concat<axis=1>(%oa, %pick, %ob, %new)",
    ]
    verdict, layout = windows_of(cache(body, extra="  value %cond : bool[]\n" + ints("z", [0])))
    assert verdict != ("verified",) and layout is None


def test_new_frames_or_another_slot_of_unknown_shape_prove_nothing_and_break_nothing():
    # the frames appended come from a value of symbolic length, or from another slot whose shape is symbolic or
    # unknown: the element tracer cannot lay them out; the cache is not verified, and nothing fails
    for extra, frames in [
        ("  value %feat : float32[1,T]", "  %f = Relu(%feat) : float32[1,T]"),
        ("  slot @other : float32[1,T] init=zeros", "  %f = load_slot<@other, copy>()"),
        ("  slot @other : float32[*] init=zeros", "  %f = load_slot<@other, copy>()"),
    ]:
        body = ["  %oa = Slice(%cache, %a1, %a2, %ax)", frames, "  %ob = Slice(%cache, %b1, %b2, %ax)", "  %out = Concat<axis=1>(%oa, %f, %ob, %f)"]
        verdict, layout = windows_of(cache(body, extra=extra))
        assert verdict != ("verified",) and layout is None, frames


def test_a_row_written_with_the_state_of_a_recurrence_that_starts_from_zeros_is_an_error_naming_it():
    # GRU c reads no state (no initial_h) and its outputs carry no types: its Y_h's shape is read from its input
    # (batch 1) and hidden size.  Writing it into row 1, which GRU b reads, is an error naming GRU c's state
    text = rows(write_b="%i1", extra="").replace(
        "  %new = ScatterND(%s1, %i1, %Yhb) : float32[2,1,4]",
        "  %Yc, %Yhc = recurrent.GRU<hidden_size=4>(%x, %W, %R) loc{'node': 'gru_c'}\n  %new = ScatterND(%s1, %i1, %Yhc) : float32[2,1,4]",
    )
    assert slices_of(text) == {"state[0]": ("gru_a", "gru_a", "Y_h"), "state[1]": ("gru_b", "gru_c", "Y_h")}
    diags = passes.run(parse_program(text))
    assert [(d.code, d.slot) for d in diags if d.severity.value == "error"] == [("SD003", "state")]
    assert "state[1] (initial_h of GRU 'gru_b') is written with GRU 'gru_c'.Y_h" in diags[0].message
    # the GRUs' outputs untyped too: their shapes are read from what they read
    untyped = rows().replace(" : float32[5,1,1,4], float32[1,1,4]", "")
    assert verdicts(untyped) == {"state[0]": "verified", "state[1]": "verified"}


def test_rows_read_by_a_gather_without_an_axis_or_through_transposes_are_the_same_rows():
    # Gather's axis defaults to 0; Transpose without perm reverses the axes, twice is the identity
    assert verdicts(rows().replace("Gather<axis=0>", "Gather")) == {"state[0]": "verified", "state[1]": "verified"}
    twice = rows().replace(
        "  %h0a = Gather<axis=0>(%state, %r0) : float32[1,1,4]",
        "  %t1 = Transpose(%state)\n  %t2 = Transpose(%t1)\n  %h0a = Gather<axis=0>(%t2, %r0) : float32[1,1,4]",
    )
    assert verdicts(twice) == {"state[0]": "verified", "state[1]": "verified"}
    once = rows().replace("  %h0a = Gather<axis=0>(%state, %r0) : float32[1,1,4]", "  %t1 = Transpose(%state)\n  %h0a = Gather<axis=2>(%t1, %r0) : float32[4,1,1]")
    assert "verified" not in verdicts(once).values()  # near miss: one Transpose puts h's 4 values on axis 0


def test_a_scatternd_that_adds_is_no_write():
    # reduction='add' leaves old + new in row 1: not GRU b's final state
    added = rows().replace("  %new = ScatterND(%s1", "  %new = ScatterND<reduction='add'>(%s1")
    assert "verified" not in verdicts(added).values()
    assert verdicts(rows().replace("  %new = ScatterND(%s1", "  %new = ScatterND<reduction='none'>(%s1")) == {"state[0]": "verified", "state[1]": "verified"}



def test_rows_written_by_scatterelements_along_its_default_axis_and_never_by_one_that_adds():
    # ScatterElements' axis defaults to 0: indices all 0 (all 1) put Y_h a (Y_h b) in row 0 (row 1); -1 is row 1 too
    extra = "\n".join([ints("e0", [0] * 4, [1, 1, 4]), ints("e1", [1] * 4, [1, 1, 4]), ints("em1", [-1] * 4, [1, 1, 4])])
    base = rows(extra=extra).replace("  %s1 = ScatterND(%state, %i0, %Yha) : float32[2,1,4]", "  %s1 = ScatterElements(%state, %e0, %Yha) : float32[2,1,4]")
    plain = base.replace("  %new = ScatterND(%s1, %i1, %Yhb)", "  %new = ScatterElements(%s1, %e1, %Yhb)")
    assert verdicts(plain) == {"state[0]": "verified", "state[1]": "verified"}
    assert verdicts(plain.replace("%s1, %e1", "%s1, %em1")) == {"state[0]": "verified", "state[1]": "verified"}
    assert "verified" not in verdicts(plain.replace("ScatterElements(%s1", "ScatterElements<reduction='add'>(%s1")).values()


def test_rows_split_reversed_or_plus_zero_are_still_each_grus_own():
    both = {"state[0]": "verified", "state[1]": "verified"}
    # Split without axis or sizes: two equal parts along axis 0
    split = rows().replace("  %h0a = Gather<axis=0>(%state, %r0) : float32[1,1,4]\n  %h0b = Gather<axis=0>(%state, %r1) : float32[1,1,4]",
                           "  %h0a, %h0b = Split(%state)")
    assert "Split(%state)" in split and verdicts(split) == both
    # read through state[::-1] (step -1 from the last row): reversed row 1 is state row 0
    rev = rows(extra="\n".join([ints("m1", [-1]), ints("far", [-(2**62)]), ints("ax0", [0])])).replace(
        "  %h0a = Gather<axis=0>(%state, %r0) : float32[1,1,4]\n  %h0b = Gather<axis=0>(%state, %r1) : float32[1,1,4]",
        "  %rev = Slice(%state, %m1, %far, %ax0, %m1)\n  %h0a = Gather<axis=0>(%rev, %r1) : float32[1,1,4]\n  %h0b = Gather<axis=0>(%rev, %r0) : float32[1,1,4]",
    )
    assert "Slice(%state, %m1" in rev and verdicts(rev) == both
    swapped = rev.replace("Gather<axis=0>(%rev, %r1) : float32[1,1,4]\n  %h0b = Gather<axis=0>(%rev, %r0)", "Gather<axis=0>(%rev, %r0) : float32[1,1,4]\n  %h0b = Gather<axis=0>(%rev, %r1)")
    assert swapped != rev and "verified" not in verdicts(swapped).values()  # near miss: each GRU reads the other's row
    # Y_h + 0 written back is Y_h, whichever side the zero is on
    zero = "  value %zero : float32[] = dense<float32[] 0.0>"
    for expr in ["Add(%Yhb, %zero)", "Add(%zero, %Yhb)"]:
        plus = rows(extra=zero).replace("  %new = ScatterND(%s1, %i1, %Yhb)", f"  %b = {expr} : float32[1,1,4]\n  %new = ScatterND(%s1, %i1, %b)")
        assert verdicts(plus) == both, expr
    plus_one = rows(extra="  value %one : float32[] = dense<float32[] 1.0>").replace(
        "  %new = ScatterND(%s1, %i1, %Yhb)", "  %b = Add(%Yhb, %one) : float32[1,1,4]\n  %new = ScatterND(%s1, %i1, %b)")
    assert "verified" not in verdicts(plus_one).values()


def test_one_recurrence_reading_the_whole_state_is_one_slice_named_after_the_slot():
    text = "\n".join([
        "program @p {",
        "  slot @state : float32[1,1,4] init=zeros",
        "  output stateN : float32[1,1,4]",
        "  value %x : float32[5,1,3]",
        "  value %W : float32[1,12,3] = dense<float32[1,12,3] ...>",
        "  value %R : float32[1,12,4] = dense<float32[1,12,4] ...>",
        ints("i0", [[0]], [1, 1]),
        '  pair state -> stateN declared "the caller feeds it back"',
        "  %state = load_slot<@state, copy>()",
        "  %Y, %Yh = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %state) loc{'node': 'gru'} : float32[5,1,1,4], float32[1,1,4]",
        "  %new = ScatterND(%state, %i0, %Yh) : float32[1,1,4]",
        "  %st1 = store<@state, token>(%new)",
        "  %st2 = store<out:stateN, value>(%new)",
        "  return<by runtime>(%st1, %st2)",
        "}",
    ])
    assert slices_of(text) == {"state": ("gru", "gru", "Y_h")}
    assert verdicts(text) == {"state": "verified"}


def test_two_windows_cut_apart_by_a_split_with_sizes():
    # Split<axis=1>(cache, [2, 4]): window 0:2 and window 2:6, each shifted by one frame
    body = [
        "  %wa, %wb = Split<axis=1>(%cache, %sizes)",
        "  %oa = Slice(%wa, %a1, %a2, %ax)",
        "  %ob = Slice(%wb, %a1, %b2, %ax)",
        "  %out = Concat<axis=1>(%oa, %new, %ob, %new)",
    ]
    assert windows_of(cache(body, extra=ints("sizes", [2, 4]))) == (("verified",), ((0, 2), (2, 4)))
    # near miss: an even split (3 and 3) keeps a stale frame in the first window
    assert windows_of(cache(body, extra=ints("sizes", [3, 3])))[1] is None


def gru_pair(state: str, read_a: str, read_b: str, write: str, h: str = "float32[1,1,4]", extra: str = "", x: str = "float32[5,1,3]") -> str:
    """Slot state[``state``] read by GRUs a and b through ``read_a``/``read_b`` (making %h0a, %h0b), written back
    as ``write`` (making %new from %Yha, %Yhb); the GRUs' final states have type ``h``."""
    return "\n".join([
        "program @p {",
        f"  slot @state : float32[{state}] init=zeros",
        f"  output stateN : float32[{state}]",
        f"  value %x : {x}",
        "  value %W : float32[1,12,3] = dense<float32[1,12,3] ...>",
        "  value %R : float32[1,12,4] = dense<float32[1,12,4] ...>",
        extra,
        '  pair state -> stateN declared "the caller feeds it back"',
        "  %state = load_slot<@state, copy>()",
        read_a,
        read_b,
        f"  %Ya, %Yha = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h0a) loc{{'node': 'gru_a'}} : ?[*], {h}",
        f"  %Yb, %Yhb = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h0b) loc{{'node': 'gru_b'}} : ?[*], {h}",
        write,
        "  %st1 = store<@state, token>(%new)",
        "  %st2 = store<out:stateN, value>(%new)",
        "  return<by runtime>(%st1, %st2)",
        "}",
    ])


def test_labels_of_slices_on_inner_axes_skip_axes_of_size_one():
    # state[1, 1, 3, 8]: two GRUs of batch 3, hidden 4, side by side on the last axis (GTCRN's inter_cache in
    # small): each reads state[0][:, :, 0:4] or [..., 4:8] -- the size-1 axis 1 reads as ":"
    consts = "\n".join([ints("z", [0]), ints("four", [4]), ints("eight", [8]), ints("last", [3]), ints("ax0", [0])])
    text = gru_pair(
        "1,1,3,8",
        "  %sa = Slice(%state, %z, %four, %last)\n  %h0a = Squeeze(%sa, %ax0) : float32[1,3,4]",
        "  %sb = Slice(%state, %four, %eight, %last)\n  %h0b = Squeeze(%sb, %ax0) : float32[1,3,4]",
        "  %cat = Concat<axis=2>(%Yha, %Yhb) : float32[1,3,8]\n  %new = Unsqueeze(%cat, %ax0) : float32[1,1,3,8]",
        h="float32[1,3,4]", extra=consts, x="float32[5,3,3]",
    )
    assert slices_of(text) == {"state[0][:, :, 0:4]": ("gru_a", "gru_a", "Y_h"), "state[0][:, :, 4:8]": ("gru_b", "gru_b", "Y_h")}
    # state[2, 1, 1, 4]: one GRU per row; a row is the whole of its trailing axes: state[0], state[1]
    rows4 = gru_pair(
        "2,1,1,4",
        "  %h0a = Gather<axis=0>(%state, %r0) : float32[1,1,4]",
        "  %h0b = Gather<axis=0>(%state, %r1) : float32[1,1,4]",
        "  %both = Concat<axis=0>(%Yha, %Yhb) : float32[2,1,4]\n  %new = Unsqueeze(%both, %ax1) : float32[2,1,1,4]",
        extra="\n".join([ints("r0", [0]), ints("r1", [1]), ints("ax1", [1])]),
    ).replace("Gather<axis=0>(%state, %r0)", "Gather<axis=0>(%sq, %r0)").replace("Gather<axis=0>(%state, %r1)", "Gather<axis=0>(%sq, %r1)")
    rows4 = rows4.replace("  %state = load_slot<@state, copy>()", "  %state = load_slot<@state, copy>()\n  %sq = Squeeze(%state, %ax1) : float32[2,1,4]")
    # the GRUs read [1, 1, 4] = state[k][0] of [2, 1, 1, 4]; written back as Unsqueeze(Concat(...), 1)
    assert slices_of(rows4) == {"state[0]": ("gru_a", "gru_a", "Y_h"), "state[1]": ("gru_b", "gru_b", "Y_h")}


def test_states_the_element_tracer_cannot_lay_out_break_nothing():
    both = {"state[0]": "verified", "state[1]": "verified"}
    # a symbolic batch: element tracing gives up, the slice tracer's answer stands (ScatterND computes: SD003)
    symbolic = rows().replace("float32[2,1,4]", "float32[2,B,4]").replace("float32[1,1,4]", "float32[1,B,4]").replace("float32[5,1,3]", "float32[5,B,3]")
    assert "verified" not in verdicts(symbolic).values()
    # a third GRU whose initial state is the caller's (symbolic): it reads no slot, the rows stay verified
    third = rows(extra="  value %hc : float32[1,B,4]\n  value %xc : float32[5,B,3]").replace(
        "  %st1 = store<@state", "  %Yc, %Yhc = recurrent.GRU<hidden_size=4>(%xc, %W, %R, _, _, %hc) loc{'node': 'gru_c'}\n  %st1 = store<@state")
    third = third.replace("  %h0a = Gather", "  %Yc0, %Yhc0 = recurrent.GRU<hidden_size=4>(%xc, %W, %R, _, _, %hc) loc{'node': 'gru_c0'}\n  %h0a = Gather")
    assert verdicts(third) == both


def test_a_cache_written_back_with_another_shape_or_another_slots_frames_is_never_verified():
    # cache[1, 6] written back with 7 frames (the second window one frame longer): no window of the slot
    longer = cache(["  %oa = Slice(%cache, %a1, %a2, %ax)", "  %ob = Slice(%cache, %b1b, %b2, %ax)", "  %out = Concat<axis=1>(%oa, %new, %ob, %new) : float32[1,7]"],
                   extra=ints("b1b", [2]))
    assert windows_of(longer)[0] != ("verified",)
    # frames of slot other[1, 8] written into cache[1, 6]: not this slot's window, and nothing breaks
    other = cache(["  %other = load_slot<@other, copy>()", "  %ob = Slice(%other, %o1, %o2, %ax)", "  %out = Concat<axis=1>(%ob, %new)"],
                  extra="\n".join(["  slot @other : float32[1,8] init=zeros", ints("o1", [3]), ints("o2", [8])]))
    assert windows_of(other)[0] != ("verified",)
