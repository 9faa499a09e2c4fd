"""Sliding windows and append-only caches judged frame by frame (rnnir.analysis.statekinds, through the passes).

Each program is IR text: a cache ``cache[1, 3, 2]`` (3 frames on axis 1) with this call's frames appended --
``Concat(cache, new)`` or ``Concat(new, cache)`` -- and a Slice of the result written back.  What the Slice keeps
is worked out by hand with Python's own slicing of the frame list (the oracle): the newest 3 frames are
verified, anything else is an error saying which frames, or unverified when it depends on a length rnnir
cannot know.  One table per behaviour, in one function each, so a wrong row anywhere fails.
"""

from __future__ import annotations

from rnnir import passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir.text import parse_program

INT64_MAX = 2**63 - 1
CACHED, NEW = ["c0", "c1", "c2"], ["n0", "n1"]  # frames oldest first; the newest 3 of cache ++ new: c2 n0 n1


def ints(name: str, values: list[int]) -> str:
    return f"  value %{name} : int64[{len(values)}] = dense<int64[{len(values)}] {values}>"


def window(start: int, end: int, *, step: int = 1, axis: int = 1, new_first: bool = False, frames: str = "2", cache: str = "1,3,2",
           after: str = "", of_other: bool = False, cut: bool = True) -> str:
    """cache[``cache``] written back as Slice(Concat(cache, new, axis=1), start, end, ``axis``, ``step``); ``frames``:
    the new frames' length (a number or a symbol); ``after``: IR lines from %w to %out (else %out is %w)."""
    parts = "%new, %cache" if new_first else ("%other, %new" if of_other else "%cache, %new")
    return "\n".join([
        "program @p {",
        f"  slot @cache : float32[{cache}] init=zeros",
        f"  slot @other : float32[{cache}] init=zeros",
        f"  value %x : float32[1,{frames},2]",
        ints("s", [start]), ints("e", [end]), ints("ax", [axis]), ints("st", [step]),
        "  %cache = load_slot<@cache, copy>()",
        "  %other = load_slot<@other, copy>()",
        f"  %new = Relu(%x) : float32[1,{frames},2]",
        f"  %cat = Concat<axis=1>({parts})",
        "  %w = Slice(%cat, %s, %e, %ax, %st)" if cut else "  %w = Identity(%cat)",
        after or "  %out = Identity(%w)",
        "  %s1 = store<@cache, token>(%out)",
        "  %s2 = store<@other, token>(%other)",
        "  return<by runtime>(%s1, %s2)",
        "}",
    ])


def judged(text: str, slot: str = "cache") -> tuple[str, str]:
    """What the passes say of ``slot``: ("verified", "") or the finding's code and message."""
    found = [d for d in passes.run(parse_program(text)) if d.slot == slot]
    if not found:
        return ("verified", "")
    (d,) = found
    return (d.code, d.message)


def test_a_window_keeping_exactly_the_newest_frames_is_verified_and_any_other_cut_says_which_frames():
    frames = CACHED + NEW
    assert frames[-3:] == frames[2:5] == ["c2", "n0", "n1"]
    cases = [  # (start, end, step) -> code, words of the finding
        ((-3, INT64_MAX, 1), "verified", ""),
        ((2, 5, 1), "verified", ""),  # counted from the oldest: 5 frames in all, static
        ((2, INT64_MAX, 1), "verified", ""),
        ((-4, INT64_MAX, 1), "SD003", "the newest 4 frames kept on axis 1 while the cache holds 3: 1 stale frame(s) too many"),
        ((1, INT64_MAX, 1), "SD003", "the newest 4 frames kept on axis 1 while the cache holds 3: 1 stale frame(s) too many"),
        ((3, INT64_MAX, 1), "SD003", "the newest 2 frames kept on axis 1 while the cache holds 3: 1 frame(s) too few"),
        ((9, INT64_MAX, 1), "SD003", "the newest 0 frames kept on axis 1 while the cache holds 3: 3 frame(s) too few"),
        ((1, 4, 1), "SD003", "a window ending at frame 4 of the 5 of cache ++ new: the newest 1 dropped"),
        ((-4, -1, 1), "SD003", "the newest 1 frame(s) of cache ++ new dropped (Slice ends at -1)"),
        ((-3, INT64_MAX, 2), "SD003", "every 2th frame kept"),
    ]
    for (start, end, step), code, words in cases:
        if code == "verified":
            assert frames[start:end:step] == ["c2", "n0", "n1"], (start, end, step)
        got = judged(window(start, end, step=step))
        assert got[0] == code and words in got[1], ((start, end, step), got)


def test_new_frames_first_keep_time_newest_first():
    frames = NEW + CACHED  # new ++ cache: the newest 3 are its first 3
    cases = [
        ((0, 3), "verified", ""),
        ((0, -2), "verified", ""),  # 5 frames in all, static: 0:-2 is 0:3
        ((-3, INT64_MAX), "SD003", "the last 3 frames of new ++ cache on axis 1: the stalest, not the newest"),
        ((1, 4), "SD003", "the newest 1 frame(s) of new ++ cache dropped (Slice starts at 1)"),
        ((0, 4), "SD003", "the newest 4 frames kept on axis 1, newest first, while the cache holds 3: 1 stale frame(s) too many"),
        ((0, -3), "SD003", "the newest 2 frames kept on axis 1, newest first, while the cache holds 3: 1 frame(s) too few"),
    ]
    for (start, end), code, words in cases:
        if code == "verified":
            assert frames[start:end] == ["n0", "n1", "c0"]
        got = judged(window(start, end, new_first=True))
        assert got[0] == code and words in got[1], ((start, end), got)


def test_a_window_whose_lengths_are_not_static_is_unverified_never_an_error():
    cases = [
        (window(2, 5, frames="T"), "a window ending at frame 5 of cache ++ new, whose length is not static"),
        (window(2, INT64_MAX, frames="T"), "frames counted from the oldest (Slice starts at 2) of cache ++ new, whose length is not static"),
        (window(0, 3, frames="T", new_first=True), ""),  # 0:3 of new ++ cache whatever T is: verified
        (window(0, -2, frames="T", new_first=True), "the first frames of new ++ cache on axis 1, whose length is not static"),
        (window(-3, INT64_MAX, cache="1,N,2"), "the newest 3 frames kept, but the slot's length on axis 1 is not static"),
    ]
    for text, words in cases:
        got = judged(text)
        if not words:
            assert got == ("verified", "")
        else:
            assert got[0] == "SD009" and words in got[1], (words, got)


def test_a_window_cut_on_another_axis_of_another_slot_or_with_its_axes_moved_is_wrong():
    assert judged(window(-1, INT64_MAX, axis=2))[1].count("cut on axis 2, not on axis 1 where the new frames were appended") == 1
    code, msg = judged(window(-3, INT64_MAX, of_other=True))
    assert code == "SD002" and "the window of slot 'other'" in msg
    # the window transposed back and forth is the same window; transposed once its axes are the slot's no more
    square = dict(cache="1,3,3", frames="2")
    back = "  %t1 = Transpose<perm=[0, 2, 1]>(%w)\n  %out = Transpose<perm=[0, 2, 1]>(%t1)"
    once = "  %out = Transpose<perm=[0, 2, 1]>(%w)"
    text = window(-3, INT64_MAX, **square).replace("float32[1,2,2]", "float32[1,2,3]")
    assert judged(text.replace("  %out = Identity(%w)", back)) == ("verified", "")
    code, msg = judged(text.replace("  %out = Identity(%w)", once))
    assert code == "SD003" and "its axes rearranged ((0, 2, 1), the slot's are 0..2)" in msg


def test_an_append_only_cache_grows_by_design():
    assert judged(window(0, 0, cut=False, cache="1,P,2")) == ("verified", "")
    assert judged(window(0, 0, cut=False, cache="1,P,2", new_first=True)) == ("verified", "")
    code, msg = judged(window(0, 0, cut=False, cache="1,P,2", of_other=True))
    assert code == "SD002" and "the append of slot 'other'" in msg


def test_a_window_on_axis_0_and_a_cache_changed_before_the_append():
    axis0 = "\n".join([
        "program @p {",
        "  slot @cache : float32[3,2] init=zeros",
        "  value %x : float32[1,2]",
        "  value %two : float32[] = dense<float32[] 2.0>",
        ints("s", [-3]), ints("e", [INT64_MAX]), ints("ax", [0]),
        "  %cache = load_slot<@cache, copy>()",
        "  %new = Relu(%x) : float32[1,2]",
        "  %c = Identity(%cache)",
        "  %cat = Concat<axis=0>(%c, %new)",
        "  %out = Slice(%cat, %s, %e, %ax)",
        "  %s1 = store<@cache, token>(%out)",
        "  return<by runtime>(%s1)",
        "}",
    ])
    assert judged(axis0) == ("verified", "")
    # the cache doubled before the new frame is appended: its frames are no longer the cache's (never verified)
    assert judged(axis0.replace("%c = Identity(%cache)", "%c = Mul(%cache, %two)"))[0] != "verified"
    # the cache and the frame stacked on a new axis: no window of the cache (and nothing breaks)
    stacked = axis0.replace("  %c = Identity(%cache)", "  %c = Unsqueeze(%cache, %ax)\n  %n1 = Unsqueeze(%new, %ax)").replace(
        "Concat<axis=0>(%c, %new)", "Concat<axis=0>(%c, %n1)").replace("  %out = Slice(%cat, %s, %e, %ax)", "  %out = Identity(%cat)")
    assert judged(stacked)[0] != "verified"


def attention(past_key: str = "%pk", past_value: str = "%pv", op: str = "Attention", into_key: str = "%key") -> str:
    """Slots key/value [1, 2, P, 4] given to ONNX Attention as past_key/past_value; present_key/present_value
    (past ++ this call's K/V on axis 2) written back into ``into_key`` and value."""
    return "\n".join([
        "program @p {",
        "  slot @key : float32[1,2,P,4] init=zeros",
        "  slot @value : float32[1,2,P,4] init=zeros",
        "  value %q : float32[1,2,1,4]",
        "  value %k : float32[1,2,1,4]",
        "  value %v : float32[1,2,1,4]",
        "  value %two : float32[] = dense<float32[] 2.0>",
        "  %key = load_slot<@key, copy>()",
        "  %value = load_slot<@value, copy>()",
        "  %pk = Identity(%key)",
        "  %pv = Identity(%value)",
        "  %kx = Mul(%key, %two)",
        f"  %y, %present_key, %present_value = {op}(%q, %k, %v, _, {past_key}, {past_value})",
        f"  %s1 = store<@key, token>({'%present_key' if into_key == '%key' else '%present_value'})",
        f"  %s2 = store<@value, token>({'%present_value' if into_key == '%key' else '%present_key'})",
        "  return<by runtime>(%s1, %s2)",
        "}",
    ])


def test_attention_appends_to_its_key_and_value_caches():
    assert judged(attention(), "key") == judged(attention(), "value") == ("verified", "")
    code, msg = judged(attention(into_key="%value"), "key")  # present_value written into the key cache and back
    assert code == "SD002" and "the append of slot 'value'" in msg
    # past_key doubled before Attention appends to it: not the key cache grown
    assert judged(attention(past_key="%kx"), "key")[0] != "verified"
    assert judged(attention(past_key="%kx"), "value") == ("verified", "")
    # an op of another domain named Attention (com.microsoft's has other inputs) appends nothing rnnir knows
    assert judged(attention(op='"com.microsoft.Attention"'), "key")[0] != "verified"


def test_attention_that_hands_back_no_present_or_reads_a_cache_on_a_new_axis_appends_nothing():
    # the caches given but present_key/present_value not taken: key and value are handed straight back (SD001)
    text = attention().replace("  %y, %present_key, %present_value = Attention", "  %y = Attention").replace(
        "store<@key, token>(%present_key)", "store<@key, token>(%key)").replace("store<@value, token>(%present_value)", "store<@value, token>(%value)")
    assert judged(text, "key")[0] == judged(text, "value")[0] == "SD001"
    # key [1, 2, 4] unsqueezed to [1, 2, 1, 4]: Attention appends on the new axis 2, which the slot lacks
    ax = "  value %a2 : int64[1] = dense<int64[1] [2]>"
    text = attention().replace("slot @key : float32[1,2,P,4]", "slot @key : float32[1,2,4]").replace(
        "  %pk = Identity(%key)", f"{ax}\n  %pk = Unsqueeze(%key, %a2)")
    assert judged(text, "key")[0] != "verified"


def test_ops_other_than_a_slice_compute_from_a_window():
    # Clip(cache ++ new, 0, 3) with no cut at all: values clipped, no frames cut away -- computed from the cache
    clip = window(0, 0, cut=False, after="\n".join([
        "  value %lo : float32[] = dense<float32[] 0.0>", "  value %hi : float32[] = dense<float32[] 3.0>", "  %out = Clip(%w, %lo, %hi)"]))
    assert judged(clip)[0] == "SD009"


def test_each_finding_names_its_problem_and_the_json_says_what_the_window_keeps():
    # the problem each wrong cut is (a data field of the finding), read off the same frames as above
    problems = {
        window(-4, INT64_MAX): "length",
        window(1, 4): "drops-newest",
        window(-4, -1): "drops-newest",
        window(-3, INT64_MAX, step=2): "step",
        window(-1, INT64_MAX, axis=2): "other-axis",
        window(-3, INT64_MAX, new_first=True): "new-first",
        window(1, 4, new_first=True): "drops-newest",
        window(0, 4, new_first=True): "length",
    }
    for text, problem in problems.items():
        (d,) = [d for d in passes.run(parse_program(text)) if d.slot == "cache"]
        assert (d.data["problem"], d.data["kind"]) == (problem, "window"), problem
    # the JSON of the traced window: the cut as written (an end past the last frame is null), or none for an append
    def window_json(text: str) -> dict:
        (pair,) = [p for p in slice_maps(parse_program(text)).pairs if p.input == "cache"]
        (sm,) = pair.slices
        return sm.to_json()["windows"][""]
    assert window_json(window(-3, INT64_MAX)) == {"of": "cache", "axis": 1, "kind": "window", "cut": {"axis": 1, "start": -3, "end": None, "step": 1}}
    assert window_json(window(2, 5)) == {"of": "cache", "axis": 1, "kind": "window", "cut": {"axis": 1, "start": 2, "end": 5, "step": 1}}
    assert window_json(window(0, 0, cut=False, cache="1,P,2")) == {"of": "cache", "axis": 1, "kind": "append"}
