"""The slice tracer's answers on whole programs written as IR text (rnnir.analysis.tracer).

Each program is written for one behaviour of the tracer as the passes see it: which state reaches which
recurrent port, through which ops, and what a written-back value is made of.  The expectations are worked out by
hand from what the ops do to the data (a Concat on the time axis keeps both operands' values; ReduceMean mixes
them), and each case has a near miss that must get a different answer.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rnnir
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


def test_a_constant_of_the_neutral_value_in_any_shape_that_cannot_grow_the_state_is_neutral():
    # y + zeros of shape [], [1] or [1, 1, 1] is y; zeros of shape [1, 1, 1, 1] broadcast y to rank 4 and zeros
    # of shape [2, 1, 4] repeat y[1, B, 4] twice: not y
    for dims, same in [("", True), ("1", True), ("1,1,1", True), ("1,1,1,1", False), ("2,1,4", False)]:
        n = 8 if dims == "2,1,4" else 1
        zeros = f"  value %z : float32[{dims}] = dense<float32[{dims}] {'0.0' if not dims else [0.0] * n}>"
        assert (h_verdict(f"{zeros}\n  %hn = Add(%Yh, %z)") == "verified") is same, dims


def unknown_rank_state(body: str) -> list[str]:
    """Slot s of unknown shape, written back as %out computed by ``body`` from its live-in %s."""
    text = "\n".join(
        [
            "program @p {",
            "  slot @s : float32[*] init=zeros",
            "  value %zero : float32[] = dense<float32[] 0.0>",
            "  value %zero1 : float32[1] = dense<float32[1] [0.0]>",
            "  %s = load_slot<@s, copy>()",
            body,
            "  %st = store<@s, token>(%out)",
            "  return<by runtime>(%st)",
            "}",
        ]
    )
    return sorted(d.code for d in passes.run(parse_program(text)))


def test_a_state_of_unknown_rank_plus_a_scalar_zero_is_still_handed_straight_back():
    # s + 0 (a scalar: it broadcasts into any rank) is s itself: the state never advances (SD001)
    assert "SD001" in unknown_rank_state("  %out = Add(%s, %zero)")
    # s + zeros[1]: a rank-0 s would come back as [1], so it is not provably s -- not SD001, and no crash
    assert "SD001" not in unknown_rank_state("  %out = Add(%s, %zero1)")
    assert "SD001" not in unknown_rank_state("  %out = Add(%s, %s)")


# -- constants read from an ONNX model (integers read without numpy) ----------------------------------------------


def counter_model(op: str, value: int | float, dtype: int = TensorProto.INT64) -> rnnir.Program:
    """count[1] (int64 or float) written back as ``op(count, value)``: a step counter, or the same count."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    graph = helper.make_graph(
        [helper.make_node(op, ["count", "k"], ["count_out"], name="step")], "counter",
        [helper.make_tensor_value_info("count", dtype, [1])], [helper.make_tensor_value_info("count_out", dtype, [1])],
        initializer=[numpy_helper.from_array(np.array([value], np_type), "k")])
    return rnnir.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), pairs={"count": "count_out"})


def test_a_counter_that_steps_is_never_a_state_handed_straight_back():
    # count + 1 and count * 2 advance every call; count + 0 and count * 1 really hand the count back (SD001)
    for op, k, back in [("Add", 1, False), ("Mul", 2, False), ("Sub", 1, False), ("Add", 0, True), ("Mul", 1, True), ("Div", 1, True)]:
        assert ("SD001" in [d.code for d in passes.run(counter_model(op, k))]) is back, (op, k)
    # a float step of 0.5 is no zero, though it truncates to the integer 0
    assert "SD001" not in [d.code for d in passes.run(counter_model("Add", 0.5, TensorProto.FLOAT))]
    assert "SD001" in [d.code for d in passes.run(counter_model("Add", 0.0, TensorProto.FLOAT))]


def test_where_on_a_constant_condition_picks_its_operand_only_when_broadcasting_adds_nothing():
    consts = "\n".join([
        "  value %yes : bool[1,1,4] = dense<bool[1,1,4] [True, True, True, True]>",
        "  value %no : bool[1,1,4] = dense<bool[1,1,4] [False, False, False, False]>",
        "  value %mixed : bool[1,1,4] = dense<bool[1,1,4] [True, False, True, True]>",
        "  value %other : float32[1,B,4]",
        "  %Yt = Identity(%Yh) : float32[1,B,4]",
        "  %Yu = Identity(%Yh)",
    ])
    cases = {
        "Where(%yes, %Yt, %other) : float32[1,B,4]": "verified",  # all true: Y_h itself
        "Where(%no, %other, %Yt) : float32[1,B,4]": "verified",  # all false: the second operand
        "Where(%mixed, %Yt, %other) : float32[1,B,4]": "not",  # half of it is the caller's value
        "Where(%no, %Yt, %other) : float32[1,B,4]": "not",  # the caller's value written back
        "Where(%yes, %Yt, %other) : float32[2,B,4]": "not",  # Y_h repeated twice by broadcasting: no longer Y_h
        "Where(%yes, %Yu, %other)": "not",  # no shapes known: broadcasting may have changed it
        "Where(%yes, %Yt, %other)": "not",  # the output's shape unknown: the same doubt
    }
    got = {expr: "verified" if h_verdict(f"{consts}\n  %hn = {expr}") == "verified" else "not" for expr in cases}
    assert got == cases


def lstm_state(entry: str) -> dict[str, list[str]]:
    """state[2, B, 4] = (h, c) of an LSTM, symbolic batch (the slice tracer's answer stands): ``entry`` makes %h0
    and %c0; written back as Concat(Y_h, Y_c).  Per slice: the ports it enters."""
    text = "\n".join([
        "program @p {",
        "  slot @state : float32[2,B,4] init=zeros",
        "  value %x : float32[5,B,3]",
        "  value %W : float32[1,16,3]",
        "  value %R : float32[1,16,4]",
        ints("i0", [0]),
        ints("i1", [1]),
        "  %state = load_slot<@state, copy>()",
        entry,
        "  %Y, %Yh, %Yc = recurrent.LSTM<hidden_size=4>(%x, %W, %R, _, _, %h0, %c0, _) loc{'node': 'lstm'}",
        "  %new = Concat<axis=0>(%Yh, %Yc)",
        "  %s = store<@state, token>(%new)",
        "  return<by runtime>(%s)",
        "}",
    ])
    (pair,) = slice_maps(parse_program(text)).pairs
    return {sm.label: [e.port + (f" ({e.note})" if e.note else "") for e in sm.entry] for sm in pair.slices}


def test_a_gather_without_an_axis_picks_entries_along_axis_0_of_a_state_with_a_symbolic_batch():
    h_and_c = {"state[0]": ["initial_h"], "state[1]": ["initial_c"]}
    assert lstm_state("  %h0 = Gather(%state, %i0)\n  %c0 = Gather(%state, %i1)") == h_and_c
    # near miss: along axis 1 (the batch) each entry feeds both ports, partly
    along_1 = lstm_state("  %h0 = Gather<axis=1>(%state, %i0)\n  %c0 = Gather<axis=1>(%state, %i1)")
    assert along_1 != h_and_c and all("partial" in p for ports in along_1.values() for p in ports)


def test_attention_without_a_cache_is_plain_computation():
    # ONNX Attention appends to past_key/past_value only when they are given: without them its output is computed
    # from the state like any other op (unverified), and the tracer looks for no cache in the absent inputs
    text = "\n".join([
        "program @p {",
        "  slot @h : float32[1,2,3,4] init=zeros",
        "  value %k : float32[1,2,3,4]",
        "  value %v : float32[1,2,3,4]",
        "  %h = load_slot<@h, copy>()",
        "  %y = Attention(%h, %k, %v) : float32[1,2,3,4]",
        "  %s = store<@h, token>(%y)",
        "  return<by runtime>(%s)",
        "}",
    ])
    assert [(d.code, d.severity.value) for d in passes.run(parse_program(text))] == [("SD009", "info")]
