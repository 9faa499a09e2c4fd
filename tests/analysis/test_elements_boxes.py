"""Packed states whose slices are boxes deep inside the slot, and pieces of nothing (rnnir.analysis.elements).

``state[1, 2, 8]`` holds four GRUs (hidden 4, batch 1): GRU ``g<row><half>`` reads ``state[0, row, 4*half :
4*half + 4]`` with one Slice and is written back by Concat on the last axis then on the row axis.  Each slice is
one row's half: fixed on axes 0 and 1 (of sizes 1 and 2) and a range on the last, so its label indexes both fixed
axes and cuts the last, ``state[0][1][4:8]`` -- worked out by hand from the reads.
"""

from __future__ import annotations

from rnnir import passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir.text import parse_program
from tests.analysis.test_elements_slices import rows

GRUS = [(row, half) for row in (0, 1) for half in (0, 1)]


def ints(name: str, values: list[int]) -> str:
    return f"  value %{name} : int64[{len(values)}] = dense<int64[{len(values)}] {values}>"


def four_grus(write: list[str], extra: list[str] | None = None) -> str:
    lines = [
        "program @p {",
        "  slot @state : float32[1,2,8] init=zeros",
        "  output stateN : float32[1,2,8]",
        "  value %x : float32[5,1,3]",
        "  value %W : float32[1,12,3] = dense<float32[1,12,3] ...>",
        "  value %R : float32[1,12,4] = dense<float32[1,12,4] ...>",
        ints("axes", [0, 1, 2]),
        *(extra or []),
        '  pair state -> stateN declared "the caller feeds it back"',
        "  %state = load_slot<@state, copy>()",
    ]
    for row, half in GRUS:
        g = f"{row}{half}"
        lines += [
            ints(f"s{g}", [0, row, 4 * half]),
            ints(f"e{g}", [1, row + 1, 4 * half + 4]),
            f"  %h{g} = Slice(%state, %s{g}, %e{g}, %axes) : float32[1,1,4]",
            f"  %Y{g}, %Yh{g} = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h{g}) loc{{'node': 'g{g}'}} : ?[*], float32[1,1,4]",
        ]
    return "\n".join([*lines, *write, "  %st1 = store<@state, token>(%new)", "  %st2 = store<out:stateN, value>(%new)",
                      "  return<by runtime>(%st1, %st2)", "}"])


ROWS = ["  %row0 = Concat<axis=2>(%Yh00, %Yh01) : float32[1,1,8]", "  %row1 = Concat<axis=2>(%Yh10, %Yh11) : float32[1,1,8]"]


def slices_of(text: str) -> dict[str, tuple[str, str]]:
    (pair,) = slice_maps(parse_program(text)).declared
    return {sm.label: (sm.entry[0].onnx_node, sm.exit[0].onnx_node) for sm in pair.slices if sm.entry and sm.exit}


def verdicts(text: str) -> dict[str, str]:
    return {s.slice: s.verdict.value for s in passes.verify(parse_program(text)).slices}


def test_a_box_fixed_on_two_axes_of_size_above_one_is_labelled_by_both_indices():
    good = four_grus([*ROWS, "  %new = Concat<axis=1>(%row0, %row1) : float32[1,2,8]"])
    want = {f"state[0][{row}][{4 * half}:{4 * half + 4}]": (f"g{row}{half}", f"g{row}{half}") for row, half in GRUS}
    assert slices_of(good) == want
    assert verdicts(good) == dict.fromkeys(want, "verified")
    # the rows written back swapped: each half lands on the other row's, written by another GRU
    swapped = four_grus([*ROWS, "  %new = Concat<axis=1>(%row1, %row0) : float32[1,2,8]"])
    got = slices_of(swapped)
    assert set(got) == set(want) and all(read != written for read, written in got.values())
    assert "verified" not in verdicts(swapped).values()


def test_a_piece_of_no_elements_in_the_write_back_changes_nothing():
    # Concat(Y_h a, nothing[1, 1, 0], Y_h b) is Concat(Y_h a, Y_h b): an exporter's empty piece is no element
    empty = ["  value %none : float32[1,1,0]", "  value %two : float32[] = dense<float32[] 2.0>"]
    write = [
        "  %nothing = Mul(%none, %two) : float32[1,1,0]",
        "  %row0 = Concat<axis=2>(%Yh00, %nothing, %Yh01) : float32[1,1,8]",
        ROWS[1],
        "  %new = Concat<axis=1>(%row0, %row1) : float32[1,2,8]",
    ]
    text = four_grus(write, empty)
    assert set(verdicts(text).values()) == {"verified"} and len(verdicts(text)) == 4


def test_slices_of_one_element_each():
    # the packed rows of test_elements_slices with hidden size 1: state[2, 1, 1], each GRU's h one element
    def hidden_1(text: str) -> str:
        for a, b in [("float32[2,1,4]", "float32[2,1,1]"), ("float32[1,1,4]", "float32[1,1,1]"), ("hidden_size=4", "hidden_size=1"),
                     ("float32[1,12,3] = dense<float32[1,12,3]", "float32[1,3,3] = dense<float32[1,3,3]"),
                     ("float32[1,12,4] = dense<float32[1,12,4]", "float32[1,3,1] = dense<float32[1,3,1]"), ("float32[5,1,1,4]", "float32[5,1,1,1]")]:
            assert a in text, a
            text = text.replace(a, b)
        return text

    assert slices_of(hidden_1(rows())) == {"state[0]": ("gru_a", "gru_a"), "state[1]": ("gru_b", "gru_b")}
    assert verdicts(hidden_1(rows())) == {"state[0]": "verified", "state[1]": "verified"}
    assert "verified" not in verdicts(hidden_1(rows(write_b="%i0"))).values()  # b's state over a's row


def test_slices_read_by_an_opset_1_slice_with_attributes_are_the_same_boxes():
    # Slice-1 (opset < 10) keeps starts/ends/axes as attributes and has no steps: every step is 1
    good = four_grus([*ROWS, "  %new = Concat<axis=1>(%row0, %row1) : float32[1,2,8]"])
    for row, half in GRUS:
        g = f"{row}{half}"
        attrs = f"Slice<starts=[0, {row}, {4 * half}], ends=[1, {row + 1}, {4 * half + 4}], axes=[0, 1, 2]>(%state)"
        good = good.replace(f"Slice(%state, %s{g}, %e{g}, %axes)", attrs)
    assert "Slice<starts=" in good and "%s00, %e00" not in good
    want = {f"state[0][{row}][{4 * half}:{4 * half + 4}]": (f"g{row}{half}", f"g{row}{half}") for row, half in GRUS}
    assert slices_of(good) == want
    assert verdicts(good) == dict.fromkeys(want, "verified")


def test_grus_packed_on_the_batch_axis_are_labelled_by_their_rows():
    # state[1, 4, 2]: GRU a's batch of 2 is rows 0:2, GRU b's rows 2:4 (hidden 2, the whole last axis): the label
    # cuts axis 1 only, state[0][0:2] -- a trailing whole axis is not written out as ", :"
    text = "\n".join([
        "program @p {",
        "  slot @state : float32[1,4,2] init=zeros",
        "  output stateN : float32[1,4,2]",
        "  value %x : float32[5,2,3]",
        "  value %W : float32[1,6,3] = dense<float32[1,6,3] ...>",
        "  value %R : float32[1,6,2] = dense<float32[1,6,2] ...>",
        ints("z", [0]), ints("two", [2]), ints("four", [4]), ints("ax1", [1]),
        '  pair state -> stateN declared "the caller feeds it back"',
        "  %state = load_slot<@state, copy>()",
        "  %h0a = Slice(%state, %z, %two, %ax1) : float32[1,2,2]",
        "  %h0b = Slice(%state, %two, %four, %ax1) : float32[1,2,2]",
        "  %Ya, %Yha = recurrent.GRU<hidden_size=2>(%x, %W, %R, _, _, %h0a) loc{'node': 'gru_a'} : ?[*], float32[1,2,2]",
        "  %Yb, %Yhb = recurrent.GRU<hidden_size=2>(%x, %W, %R, _, _, %h0b) loc{'node': 'gru_b'} : ?[*], float32[1,2,2]",
        "  %new = Concat<axis=1>(%Yha, %Yhb) : float32[1,4,2]",
        "  %st1 = store<@state, token>(%new)",
        "  %st2 = store<out:stateN, value>(%new)",
        "  return<by runtime>(%st1, %st2)",
        "}",
    ])
    assert slices_of(text) == {"state[0][0:2]": ("gru_a", "gru_a"), "state[0][2:4]": ("gru_b", "gru_b")}
