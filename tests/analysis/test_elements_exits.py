"""Where each slice of a packed state is written back from, read element by element (rnnir.analysis.elements).

Two cases the rows of test_elements_slices do not reach: a row written back with a constant (the state reset to
zeros every call: GRU b never carries its state, whatever rnnir can say of it, it must not be "verified" -- and
nothing may crash), and a slice that is one direction of a bidirectional GRU, whose other direction starts from
zeros: its entry and exit name that direction (``GRU 'gru_a'.initial_h[0]``), worked out by hand from ONNX's
``initial_h`` layout ``[num_directions, batch, hidden]``.
"""

from __future__ import annotations

from rnnir.analysis.slices import slice_maps
from rnnir.ir.text import parse_program
from tests.analysis.test_elements_slices import ints, rows, verdicts


def test_a_row_written_back_with_zeros_is_never_verified():
    zeros = "  value %zeros : float32[1,1,4] = dense<float32[1,1,4] [[[0.0, 0.0, 0.0, 0.0]]]>"
    text = rows(extra=zeros).replace("  %new = ScatterND(%s1, %i1, %Yhb) : float32[2,1,4]", "  %new = ScatterND(%s1, %i1, %zeros) : float32[2,1,4]")
    got = verdicts(text)  # no exception: a constant is no recurrence's final state
    assert got.get("state[1]", got.get("state")) != "verified", got


def one_direction() -> str:
    """state[1, 1, 8]: GRU a (bidirectional) reads [..., 0:4] as its forward h (backward from zeros), GRU b reads
    [..., 4:8]; written back as Concat(a's forward Y_h, b's Y_h) on the last axis."""
    return "\n".join([
        "program @p {",
        "  slot @state : float32[1,1,8] init=zeros",
        "  output stateN : float32[1,1,8]",
        "  value %x : float32[5,1,3]",
        "  value %W2 : float32[2,12,3] = dense<float32[2,12,3] ...>",
        "  value %R2 : float32[2,12,4] = dense<float32[2,12,4] ...>",
        "  value %W : float32[1,12,3] = dense<float32[1,12,3] ...>",
        "  value %R : float32[1,12,4] = dense<float32[1,12,4] ...>",
        "  value %zeros : float32[1,1,4] = dense<float32[1,1,4] [[[0.0, 0.0, 0.0, 0.0]]]>",
        ints("z", [0]), ints("four", [4]), ints("eight", [8]), ints("last", [2]), ints("r0", [0]),
        '  pair state -> stateN declared "the caller feeds it back"',
        "  %state = load_slot<@state, copy>()",
        "  %fwd = Slice(%state, %z, %four, %last) : float32[1,1,4]",
        "  %h0a = Concat<axis=0>(%fwd, %zeros) : float32[2,1,4]",
        "  %h0b = Slice(%state, %four, %eight, %last) : float32[1,1,4]",
        "  %Ya, %Yha = recurrent.GRU<hidden_size=4, direction='bidirectional'>(%x, %W2, %R2, _, _, %h0a) loc{'node': 'gru_a'} : ?[*], float32[2,1,4]",
        "  %Yb, %Yhb = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h0b) loc{'node': 'gru_b'} : ?[*], float32[1,1,4]",
        "  %afwd = Slice(%Yha, %z, %r1, %r0) : float32[1,1,4]",
        "  %new = Concat<axis=2>(%afwd, %Yhb) : float32[1,1,8]",
        "  %st1 = store<@state, token>(%new)",
        "  %st2 = store<out:stateN, value>(%new)",
        "  return<by runtime>(%st1, %st2)",
        "}",
    ]).replace(ints("r0", [0]), ints("r0", [0]) + "\n" + ints("r1", [1]))


def test_a_slice_that_is_one_direction_of_a_bidirectional_recurrence_names_it():
    (pair,) = slice_maps(parse_program(one_direction())).declared
    got = {sm.label: [(r.onnx_node, r.port, r.direction) for r in (*sm.entry, *sm.exit)] for sm in pair.slices}
    assert got == {"state[0][:, 0:4]": [("gru_a", "initial_h", 0), ("gru_a", "Y_h", 0)],
                   "state[0][:, 4:8]": [("gru_b", "initial_h", 0), ("gru_b", "Y_h", 0)]}
    assert set(verdicts(one_direction()).values()) == {"verified"}


def test_a_row_written_with_a_value_of_symbolic_shape_or_through_an_output_store():
    # row 1 written with a value computed from the caller's input of symbolic batch: no ids can be laid out for it,
    # nothing is verified and nothing fails
    sym = rows(extra="  value %u : float32[1,B,4]").replace(
        "  %new = ScatterND(%s1, %i1, %Yhb) : float32[2,1,4]", "  %v = Relu(%u) : float32[1,B,4]\n  %new = ScatterND(%s1, %i1, %v) : float32[2,1,4]")
    assert "verified" not in verdicts(sym).values()
    # the slot written back from the value the output store hands on (store<out, value> returns what it stores)
    chained = rows().replace("  %st1 = store<@state, token>(%new)\n  %st2 = store<out:stateN, value>(%new)",
                             "  %st2 = store<out:stateN, value>(%new)\n  %st1 = store<@state, token>(%st2)")
    assert "store<@state, token>(%st2)" in chained
    assert verdicts(chained) == {"state[0]": "verified", "state[1]": "verified"}
