"""The shape of a recurrence's final state when its outputs carry no types (rnnir.analysis.elements ``_port_shape``).

ONNX's GRU gives ``Y_h`` the shape ``[num_directions, batch, hidden_size]``, and ``initial_h`` has that same shape.
So when ``Y_h`` is untyped the element tracer reads it off what the GRU reads as its state, else off ``X``'s batch
and ``hidden_size``; with neither known it proves nothing -- and never fails.  The programs are the packed rows of
test_elements_slices (``state[2, 1, 4]``, row ``k`` GRU ``k``'s own ``h``).
"""

from __future__ import annotations

from rnnir import passes
from rnnir.ir.text import parse_program
from tests.analysis.test_elements_slices import rows, verdicts

BOTH = {"state[0]": "verified", "state[1]": "verified"}
TYPED = " : float32[5,1,1,4], float32[1,1,4]"


def test_an_untyped_final_state_takes_the_shape_of_the_state_it_read_when_the_batch_is_symbolic():
    # X of symbolic batch B: only initial_h ([1, 1, 4], a row of the slot) says what Y_h's shape is
    text = rows().replace(TYPED, "").replace("value %x : float32[5,1,3]", "value %x : float32[5,B,3]")
    assert verdicts(text) == BOTH


def with_gru_c(gru: str, extra: str = "") -> str:
    """rows() with row 1 written back with GRU c's Y_h (GRU c reads no state, its outputs are untyped)."""
    return rows(extra=extra).replace(
        "  %new = ScatterND(%s1, %i1, %Yhb) : float32[2,1,4]", f"  %Yc, %Yhc = {gru} loc{{'node': 'gru_c'}}\n  %new = ScatterND(%s1, %i1, %Yhc) : float32[2,1,4]")


def test_a_final_state_whose_shape_nothing_says_proves_nothing_and_breaks_nothing():
    cases = {
        # X's batch symbolic and no initial_h: Y_h's batch is unknown
        "symbolic batch": with_gru_c("recurrent.GRU<hidden_size=4>(%xc, %W, %R)", "  value %xc : float32[5,B,3]"),
        # no hidden_size attribute: Y_h's last axis is unknown
        "no hidden_size": with_gru_c("recurrent.GRU(%x, %W, %R)"),
    }
    for what, text in cases.items():
        diags = passes.run(parse_program(text))  # no exception: the element tracer gives up quietly
        assert not any(d.severity.value == "error" and "internal" in d.message.lower() for d in diags), what
        assert verdicts(text).get("state[1]") != "verified", what
