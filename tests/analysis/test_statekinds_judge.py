"""``statekinds.judge`` and ``Window.to_json`` read directly, at their edges (rnnir.analysis.statekinds).

The frames are the ones of test_statekinds_windows: a cache of 3 frames (``c0 c1 c2``) on axis 1 with 2 new
frames appended (``n0 n1``); what a cut keeps is Python's own slicing of that frame list, counted by hand.  The
edges here are the ones a program rarely reaches: a slot of unknown rank, a window of a slot of higher rank, a
Slice that starts or ends at exactly 0, an end written as INT64_MAX (what exporters write for "to the end"), and
the JSON of a window proven element by element (docs/json-schema.md: ``{of, axis, kind[, cut][, segments]}``).
"""

from __future__ import annotations

from rnnir.analysis.slices import slice_maps
from rnnir.analysis.statekinds import CacheKind, Cut, Problem, Window, judge
from rnnir.ir.text import parse_program
from tests.analysis.test_statekinds_windows import attention

INT64_MAX = 2**63 - 1
FRAMES = ["c0", "c1", "c2", "n0", "n1"]  # cache ++ new, oldest first
NEW_FIRST = ["n0", "n1", "c0", "c1", "c2"]  # new ++ cache


def cut(start: int, end: int, *, new_len: int | None = 2, new_first: bool = False, slot: str = "cache", axis: int = 1, axes=(0, 1, 2)) -> Window:
    return Window(slot, axis, tuple(axes), new_first=new_first, new_len=new_len, cut=Cut(axis, start, end, 1), via="Slice")


def test_cuts_at_their_edges_are_judged_by_the_frames_they_keep():
    static, unknown_len, unknown_rank = (1, 3, 2), (1, "N", 2), None
    # what each cut keeps, by Python's slicing (the judgement's numbers are these lengths)
    assert len(FRAMES[0:]) == 5 and FRAMES[0:0] == [] and NEW_FIRST[0:0] == [] and FRAMES[-3:] == ["c2", "n0", "n1"]
    cases = [  # (slot shape, window) -> (problem, the judgement's words)
        # the whole of cache ++ new: 2 stale frames (a start of 0 counts from the oldest, not from the newest)
        (static, cut(0, INT64_MAX), Problem.LENGTH, "the newest 5 frames kept on axis 1 while the cache holds 3: 2 stale frame(s) too many"),
        # a Slice ending at 0 keeps nothing: every frame dropped when the length is known, unprovable when not
        (static, cut(-3, 0), Problem.DROPS_NEWEST, "a window ending at frame 0 of the 5 of cache ++ new: the newest 5 dropped"),
        (static, cut(-3, 0, new_len=None), Problem.UNKNOWN, "a window ending at frame 0 of cache ++ new, whose length is not static"),
        # new ++ cache cut 0:0 keeps nothing of it
        (static, cut(0, 0, new_first=True), Problem.LENGTH, "the newest 0 frames kept on axis 1, newest first, while the cache holds 3: 3 frame(s) too few"),
        (unknown_len, cut(0, 3, new_first=True), Problem.UNKNOWN, "the first frames of new ++ cache on axis 1, whose length is not static"),
        # INT64_MAX is "to the newest frame" whatever the number of new frames
        (static, cut(-3, INT64_MAX, new_len=None), None, "keeps the newest 3 frames on axis 1"),
        (static, cut(-3, 2**62, new_len=None), None, "keeps the newest 3 frames on axis 1"),
        # a slot of unknown rank: its length is unknown too
        (unknown_rank, cut(-3, INT64_MAX), Problem.UNKNOWN, "the newest 3 frames kept, but the slot's length on axis 1 is not static"),
        # the window of a slot of rank 4, cut on its axis 3, written into this rank-3 slot
        (static, cut(-3, INT64_MAX, slot="big", axis=3, axes=(0, 1, 2, 3)), Problem.OTHER_SLOT, "the window of slot 'big'"),
        (static, cut(-3, INT64_MAX, axes=(0, 2, 1)), Problem.REARRANGED, "its axes rearranged ((0, 2, 1), the slot's are 0..2)"),
    ]
    for shape, w, problem, words in cases:
        j = judge("cache", shape, w)
        assert (j.kind, j.problem, j.detail) == (CacheKind.WINDOW, problem, words), (shape, w, j)


def test_an_append_says_which_end_its_new_entries_go():
    for new_first, words in ((False, "grows along axis 1 by the new entries (append-only)"),
                             (True, "grows along axis 1 by the new entries, newest first (append-only)")):
        for shape in ((1, "P", 2), None):
            j = judge("cache", shape, Window("cache", 1, (0, 1, 2), new_first=new_first))
            assert (j.kind, j.problem, j.detail) == (CacheKind.APPEND, None, words)
    j = judge("cache", (1, "P", 2), Window("cache", 1, (1, 0, 2)))
    assert (j.kind, j.problem) == (CacheKind.APPEND, Problem.REARRANGED)


def test_window_json_holds_the_cut_or_the_packed_segments_never_both():
    packed = Window("cache", 2, (0, 1, 2), new_len=1, cut=Cut(2, 0, INT64_MAX, 1), segments=((0, 2), (2, 4)))
    assert packed.to_json() == {"of": "cache", "axis": 2, "kind": "window", "segments": [[0, 2], [2, 4]]}
    assert cut(-3, INT64_MAX).to_json() == {"of": "cache", "axis": 1, "kind": "window", "cut": {"axis": 1, "start": -3, "end": None, "step": 1}}
    assert cut(-3, 2**62).to_json()["cut"]["end"] is None
    assert cut(1, 4).to_json()["cut"] == {"axis": 1, "start": 1, "end": 4, "step": 1}


def test_attention_appends_past_key_and_past_value_on_their_axis_2():
    # ONNX Attention (opset 23): present_key = Concat(past_key, K, axis=2), present_value likewise from past_value
    (key,) = [p for p in slice_maps(parse_program(attention())).pairs if p.input == "key"]
    (value,) = [p for p in slice_maps(parse_program(attention())).pairs if p.input == "value"]
    assert key.slices[0].to_json()["windows"][""] == {"of": "key", "axis": 2, "kind": "append"}
    assert value.slices[0].to_json()["windows"][""] == {"of": "value", "axis": 2, "kind": "append"}
