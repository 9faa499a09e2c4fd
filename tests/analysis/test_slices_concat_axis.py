"""Concat with a negative axis in slice tracing, when the rank that decides which axis it is cannot be known.

ONNX counts a negative Concat axis from the rank of its operands (``-3`` of ``[2, 1, H]`` is axis 0, the packing
axis; ``-1`` is the hidden axis).  The packed LSTM state ``state[2, 1, 4] = Concat(Y_h, Y_c)`` is written back
through a Concat whose operands carry no type: the tracer must refuse (leave the slices unverified) or trace the
axis right -- never read ``-1`` (hidden axis: the halves are not h and c) as the packing axis, and never call a
correct program wrong.  The expectation per case follows from the ONNX definition of the axis, not from rnnir.
"""

from __future__ import annotations

import pytest

from rnnir import passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir.text import parse_program
from rnnir.passes.coverage import Verdict

W = "  value %W : float32[1,16,3]\n  value %R : float32[1,16,4]\n  value %x : float32[5,1,3]\n  value %sizes : int64[2] = dense<int64[2] [1, 1]>"


def program(axis: int, concat_type: str) -> str:
    return "\n".join(
        [
            "program @p {",
            "  slot @state : float32[2,1,4] init=zeros",
            "  output stateN : float32[2,1,4]",
            W,
            '  pair state -> stateN declared "the caller feeds it back"',
            "",
            "  %state = load_slot<@state, copy>()",
            "  %h0, %c0 = Split<axis=0>(%state, %sizes)",
            # no result types on the LSTM: Y_h and Y_c are of unknown rank
            "  %Y, %Yh, %Yc = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h0, %c0, _) loc{'node': 'lstm'}",
            f"  %new = Concat<axis={axis}>(%Yh, %Yc){concat_type}",
            "  %s1 = store<@state, token>(%new)",
            "  %s2 = store<out:stateN, value>(%new)",
            "  return<by runtime>(%s1, %s2)",
            "}",
        ]
    )


def _exits(text: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    prog = parse_program(text)
    (pair,) = slice_maps(prog).declared
    exits = {sm.label: sorted(e.port for e in sm.exit) for sm in pair.slices}
    verdicts = {s.slice: s.verdict.value for s in passes.verify(prog, noqa=False).slices}
    return exits, verdicts


#: the Concat result's type: none at all (unknown rank everywhere), or the output's rank known (ONNX's shape inference
#: would give it) while the operands' is not
TYPES = ["", " : float32[?,?,?]"]


@pytest.mark.parametrize("concat_type", TYPES, ids=["no-rank", "output-rank"])
@pytest.mark.parametrize("axis", [-1, -2])
def test_a_negative_concat_axis_that_is_not_the_packing_axis_is_never_traced_as_it(axis, concat_type):
    exits, verdicts = _exits(program(axis, concat_type))
    # axis -1 / -2 of a rank-3 state joins h and c along the hidden / batch axis: state[0] is not Y_h
    assert exits.get("state[0]") != ["Y_h"] and exits.get("state[1]") != ["Y_c"], exits
    assert Verdict.VERIFIED.value not in verdicts.values(), verdicts


def test_axis_minus_3_with_the_output_rank_known_is_the_packing_axis():
    exits, verdicts = _exits(program(-3, " : float32[?,?,?]"))
    assert exits == {"state[0]": ["Y_h"], "state[1]": ["Y_c"]}
    assert set(verdicts.values()) == {Verdict.VERIFIED.value}, verdicts


def test_axis_minus_3_of_unknown_rank_is_refused_or_traced_never_wrong():
    exits, verdicts = _exits(program(-3, ""))
    # the right answer is the packing (h, c); a tracer that cannot know the rank leaves it unverified
    assert Verdict.VIOLATED.value not in verdicts.values(), verdicts
    if Verdict.UNVERIFIED.value not in verdicts.values():
        assert exits == {"state[0]": ["Y_h"], "state[1]": ["Y_c"]}
