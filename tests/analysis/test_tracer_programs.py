"""The slice tracer's answers on whole programs written as IR text (rnnir.analysis.tracer).

Each program is written for one behaviour of the tracer as the passes see it: which state reaches which
recurrent port, through which ops, and what a written-back value is made of.  The expectations are worked out by
hand from what the ops do to the data (a Concat on the time axis keeps both operands' values; ReduceMean mixes
them), and each case has a near miss that must get a different answer.
"""

from __future__ import annotations

from rnnir import passes
from rnnir.analysis.slices import slice_maps
from rnnir.ir.text import parse_program


def ints(name: str, values: list, shape: list[int] | None = None) -> str:
    dims = ",".join(map(str, shape or [len(values)]))
    return f"  value %{name} : int64[{dims}] = dense<int64[{dims}] {values}>"


def lint(text: str) -> list[tuple[str, str | None, str]]:
    return sorted((d.code, d.slot, d.message) for d in passes.run(parse_program(text)))


# -- state that reaches a recurrence through the new frames of a window ---------------------------------------


def h_through_a_window(frames: str) -> str:
    """Slot h read by a GRU through ReduceMean(Concat(cache, ``frames``)) on the time axis; cache handed back."""
    return "\n".join(
        [
            "program @p {",
            "  slot @h : float32[1,1,4] init=zeros",
            "  slot @cache : float32[1,3,4] init=zeros",
            "  value %x : float32[5,1,3]",
            "  value %W : float32[1,12,3]",
            "  value %R : float32[1,12,4]",
            "  value %feat : float32[1,1,4]",
            "  value %M : float32[4,4]",
            ints("ax", [1]),
            "  %h = load_slot<@h, copy>()",
            "  %cache = load_slot<@cache, copy>()",
            "  %t = MatMul(%h, %M)",
            f"  %cat = Concat<axis=1>(%cache, {frames})",
            "  %h0 = ReduceMean<keepdims=1>(%cat, %ax)",
            "  %Y, %Yh = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h0) loc{'node': 'gru'}",
            "  %s1 = store<@h, token>(%Yh)",
            "  %s2 = store<@cache, token>(%cat)",
            "  return<by runtime>(%s1, %s2)",
            "}",
        ]
    )


def test_state_in_a_windows_new_frames_still_reaches_the_recurrence_reading_the_window():
    # Concat(cache, h @ M) appends frames made from h: the GRU reads h (through MatMul), so h is unverified
    # for that reason -- not "read by no recurrence"
    got = [(code, slot, msg) for code, slot, msg in lint(h_through_a_window("%t")) if slot == "h"]
    assert [(c, s) for c, s, _ in got] == [("SD009", "h")]
    assert "reaches GRU 'gru' only through MatMul" in got[0][2]
    # near miss: the new frames are the caller's features, h reaches nothing
    near = [msg for _, slot, msg in lint(h_through_a_window("%feat")) if slot == "h"]
    assert near and not any("reaches GRU 'gru'" in m for m in near)


# -- x + 0, x * 1: the neutral element leaves the final state as it is --------------------------------------------


def gru_written_back(body: str, consts: str = "") -> str:
    """Slot h read by GRU 'gru' as initial_h; ``body`` makes %hn from %Yh, which is written back.  The batch is
    symbolic, so the element tracer (rnnir.analysis.elements) cannot step in: the slice tracer's answer stands."""
    return "\n".join(
        [
            "program @p {",
            "  slot @h : float32[1,B,4] init=zeros",
            "  value %x : float32[5,B,3]",
            "  value %W : float32[1,12,3]",
            "  value %R : float32[1,12,4]",
            "  value %zero : float32[] = dense<float32[] 0.0>",
            "  value %one : float32[] = dense<float32[] 1.0>",
            "  value %two : float32[] = dense<float32[] 2.0>",
            consts,
            "  %h = load_slot<@h, copy>()",
            "  %Y, %Yh = recurrent.GRU<hidden_size=4>(%x, %W, %R, _, _, %h) loc{'node': 'gru'}",
            body,
            "  %s = store<@h, token>(%hn)",
            "  return<by runtime>(%s)",
            "}",
        ]
    )


def h_verdict(body: str) -> str:
    (sv,) = passes.verify(parse_program(gru_written_back(body))).slices
    return sv.verdict.value


def test_only_the_neutral_element_on_its_own_side_leaves_the_final_state_exact():
    # one table in one function: each row is Y_h combined with a constant, and whether the value written back is
    # Y_h itself (hand-checked: 0 + y = y, but 0 - y = -y and 1 / y is no y)
    cases = {
        "Add(%Yh, %zero)": True,
        "Add(%zero, %Yh)": True,
        "Sub(%Yh, %zero)": True,
        "Sub(%zero, %Yh)": False,
        "Mul(%one, %Yh)": True,
        "Mul(%Yh, %two)": False,
        "Div(%Yh, %one)": True,
        "Div(%one, %Yh)": False,
        "Max(%Yh, %zero)": False,  # an elementwise op with no neutral element in the table: values change
        "Mul(%Yh, %gate)": False,  # a gate computed from the input (no state in it): values change
    }
    gate = "  value %feat : float32[1,B,4]\n  %gate = Sigmoid(%feat)\n"
    got = {expr: h_verdict(f"{gate}  %hn = {expr}") == "verified" for expr in cases}
    assert got == cases
