"""A packed state's verdict depends on the ops that read and write it, not on other recurrences of the program.

The element tracer (rnnir.analysis.elements) once gave up on every packed state of a program as soon as the
program held *any* recurrence in an If branch or of ``layout=1`` -- and the leading-axis tracer's answer then stood:
SD003 on a correct model whose rows are written back by ScatterND.  The programs here are the packed rows of
test_elements_slices (``state[2, 1, 4]``: row ``k`` GRU ``k``'s own ``h``), correct and one row off, with a third
GRU added that touches nothing of ``state``: the verdicts must be the ones without it.  A third GRU that does
read a row of ``state`` through ports the ids do not lay out is never verified.
"""

from __future__ import annotations

from tests.analysis.test_elements_slices import rows, verdicts

THEN, ELSE = "If_0.then_branch", "If_0.else_branch"
OTHER = "  value %hc : float32[1,1,4]\n  value %xc : float32[1,5,3]\n  value %cond : bool[]\n  output yc : float32[1,1,4]"


def with_third_gru(text: str, gru: str, reads: str = "%hc") -> str:
    """``text`` with GRU c (``gru``: its op and attributes, loc included) reading ``reads`` and its Y_h returned in
    output yc through an If whose then branch is the GRU's."""
    lines = "\n".join([
        f"  %Yc, %Yhc = {gru.format(h=reads)}",
        f"  %e = Identity(%hc) loc{{'branch': ({ELSE!r},)}}",
        f"  %pick = If<region.then_branch=({THEN!r},), region.else_branch=({ELSE!r},)>(%cond, %Yhc, %e) : float32[1,1,4]",
        "  %s9 = store<out:yc, value>(%pick)",
        "  %st1 = store<@state",
    ])
    text = text.replace("  %st1 = store<@state", lines)
    return text.replace("  return<by runtime>(%st1, %st2)", "  return<by runtime>(%st1, %st2, %s9)")


BRANCH_GRU = "recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, {h}) loc{{'node': 'gru_c', 'branch': ('If_0.then_branch',)}} : ?[*], float32[1,1,4]"
LAYOUT1_GRU = "recurrent.GRU<hidden_size=4, layout=1>(%xc, %W, %R, _, _, {h}) loc{{'node': 'gru_c'}} : ?[*], float32[1,1,4]"


def test_a_recurrence_that_touches_nothing_of_the_packed_state_changes_none_of_its_verdicts():
    good, wrong_row = rows(extra=OTHER), rows(write_b="%i0", extra=OTHER)
    assert verdicts(good) == {"state[0]": "verified", "state[1]": "verified"}
    assert set(verdicts(wrong_row).values()) != {"verified"}
    for what, gru in (("in an If branch", BRANCH_GRU), ("of layout 1", LAYOUT1_GRU)):
        for text in (good, wrong_row):
            assert verdicts(with_third_gru(text, gru)) == verdicts(text), what


def test_a_recurrence_of_layout_1_reading_a_row_is_never_verified():
    # GRU c (layout 1: h is [batch, directions, hidden]) reads row 1, which GRU b reads and writes back too
    read_row = rows(extra=OTHER).replace("  %st1 = store<@state", "  %h1c = Gather<axis=0>(%state, %r1) : float32[1,1,4]\n  %st1 = store<@state")
    text = with_third_gru(read_row, LAYOUT1_GRU, reads="%h1c")
    assert "verified" not in verdicts(text).values()
