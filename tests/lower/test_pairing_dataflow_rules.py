"""The dataflow rules of pairing (rnnir.lower.dataflow), each with a model that meets it and a near miss, read
through rnnir.load's state pairs.

Names here say nothing (``a``, ``p``), so a pair comes from dataflow (an input that starts a recurrence's state,
through layout-only ops and If joins, and the output that returns that very state's final value), or else from
position (which never pairs a sequence: an input feeding ``X`` or a scan, an output returning ``Y`` or a scan
output), or not at all.  A name pair (``foo`` -> ``foo_out``) of a name without a state word needs the output to be
computed from the input, not that input handed back.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.ir.pairs import PairSource

H, I, T = 2, 3, 4
F = TensorProto.FLOAT
DATAFLOW, POSITION, NAME = PairSource.DATAFLOW, PairSource.POSITION, PairSource.NAME


def vi(name: str, shape: list, dtype: int = F) -> object:
    return helper.make_tensor_value_info(name, dtype, shape)


def _weights(prefix: str) -> list:
    rng = np.random.default_rng(len(prefix))
    return [numpy_helper.from_array(rng.standard_normal((1, H, I)).astype(np.float32), f"{prefix}W"),
            numpy_helper.from_array(rng.standard_normal((1, H, H)).astype(np.float32), f"{prefix}R")]


def rnn(name: str, h0: str, y: str = "", yh: str = "", x: str = "x") -> object:
    return helper.make_node("RNN", [x, f"{name}W", f"{name}R", "", "", h0], [y, yh], hidden_size=H, name=name)


def model(nodes: list, inputs: list, outputs: list, rnns: tuple[str, ...] = ("r",), inits: tuple = (), opset: int = 17) -> object:
    g = helper.make_graph(nodes, "g", inputs, outputs, [w for r in rnns for w in _weights(r)] + list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def axes(name: str, values: list[int]) -> object:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def pairs(m: object) -> list[tuple[str, str | None, PairSource]]:
    return [(p.input, p.output, p.source) for p in rnnir.load(m).state_pairs]


def unsqueezed(src: str, dst: str) -> object:
    return helper.make_node("Unsqueeze", [src, "ax0"], [dst])


def squeezed(src: str, dst: str) -> object:
    return helper.make_node("Squeeze", [src, "ax0"], [dst])


X = vi("x", [T, 1, I])
A2, P2 = vi("a", [1, H]), vi("p", [1, H])


# -- a state link --------------------------------------------------------------------------------------


def test_an_input_that_starts_a_state_pairs_with_the_output_returning_its_final_value_through_layout_ops():
    m = model([unsqueezed("a", "a3"), rnn("r", "a3", "Y", "Yh"), squeezed("Yh", "p")], [X, A2], [vi("Y", [T, 1, 1, H]), P2],
              inits=(axes("ax0", [0]),))
    prog = rnnir.load(m)
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("a", "p", DATAFLOW)]
    assert prog.state_pairs[0].reason == "'a' starts initial_h -> Y_h of 'r', whose final value 'p' returns"
    # near miss: the output computed from the final state (not the state rearranged) is no link; position pairs it
    m = model([unsqueezed("a", "a3"), rnn("r", "a3", "Y", "Yh"), helper.make_node("Add", ["Yh", "Yh"], ["p2"]), squeezed("p2", "p")],
              [X, A2], [vi("Y", [T, 1, 1, H]), P2], inits=(axes("ax0", [0]),))
    assert pairs(m) == [("a", "p", POSITION)]


def test_sequence_inputs_and_outputs_never_pair_by_position():
    # x feeds X, Y2 returns Y (squeezed): both are streams.  Without them position lines up the state alone.
    nodes = [unsqueezed("a", "a3"), rnn("r", "a3", "Y", "Yh"), squeezed("Y", "Y2"), helper.make_node("Mul", ["Yh", "Yh"], ["p3"]),
             squeezed("p3", "p")]
    m = model(nodes, [vi("u", [1]), X, A2], [vi("o", [1]), vi("Y2", [1, 1, H]), P2], inits=(axes("ax0", [0]),))
    m.graph.node.append(helper.make_node("Identity", ["u"], ["o"]))
    assert pairs(m) == [("a", "p", POSITION)]


def test_an_if_joins_a_state_from_its_branches_yields_not_its_condition():
    then_b = helper.make_graph([helper.make_node("Unsqueeze", ["a", "ax0"], ["t3"])], "then", [], [vi("t3", [1, 1, H])])
    else_b = helper.make_graph([helper.make_node("Constant", [], ["e3"], value=numpy_helper.from_array(np.zeros((1, 1, H), np.float32)))],
                               "else", [], [vi("e3", [1, 1, H])])
    nodes = [helper.make_node("If", ["c"], ["h3"], then_branch=then_b, else_branch=else_b), rnn("r", "h3", "", "Yh"), squeezed("Yh", "p")]
    m = model(nodes, [X, vi("c", [], TensorProto.BOOL), A2], [P2], inits=(axes("ax0", [0]),))
    assert pairs(m) == [("a", "p", DATAFLOW)]


def test_a_state_started_from_two_inputs_is_no_link():
    nodes = [helper.make_node("Concat", ["a", "b"], ["ab"], axis=1), unsqueezed("ab", "a3"), rnn("r", "a3", "", "Yh"), squeezed("Yh", "p")]
    m = model(nodes, [X, vi("a", [1, 1]), vi("b", [1, 1])], [P2], inits=(axes("ax0", [0]),))
    assert [s for _, _, s in pairs(m)] != [DATAFLOW]
    assert all(s is not DATAFLOW for _, _, s in pairs(m))


def test_an_output_returning_every_state_one_input_starts_is_a_link_and_one_returning_part_is_not():
    # a [2,1,H] split into the initial states of r and s; p stacks both final states
    split = helper.make_node("Split", ["a", "two"], ["a0", "a1"], axis=0)
    nodes = [split, rnn("r", "a0", "", "Yh1"), rnn("s", "a1", "", "Yh2"), helper.make_node("Concat", ["Yh1", "Yh2"], ["p"], axis=0)]
    m = model(nodes, [X, vi("a", [2, 1, H])], [vi("p", [2, 1, H])], rnns=("r", "s"), inits=(axes("two", [1, 1]),))
    prog = rnnir.load(m)
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("a", "p", DATAFLOW)]
    assert prog.state_pairs[0].reason == "'a' starts initial_h -> Y_h of 'r' and initial_h -> Y_h of 's', whose final value 'p' returns"
    # a starts two states, p returns one of them: no link (position pairs the leftovers)
    nodes = [rnn("r", "a", "Y", "Yh1"), rnn("s", "a", "", "Yh2"), helper.make_node("Identity", ["Yh1"], ["p"])]
    m = model(nodes, [X, vi("a", [1, 1, H])], [vi("Y", [T, 1, 1, H]), vi("p", [1, 1, H])], rnns=("r", "s"))
    assert pairs(m) == [("a", "p", POSITION)]
    # the final states of states two inputs started, stacked: no link (and position has two inputs for one output)
    nodes = [rnn("r", "a", "", "Yh1"), rnn("s", "b", "", "Yh2"), helper.make_node("Concat", ["Yh1", "Yh2"], ["p"], axis=0)]
    m = model(nodes, [X, vi("a", [1, 1, H]), vi("b", [1, 1, H])], [vi("p", [2, 1, H])], rnns=("r", "s"))
    assert pairs(m) == []


def test_links_come_in_the_graphs_input_order():
    nodes = [unsqueezed("a", "a3"), unsqueezed("b", "b3"), rnn("r", "a3", "", "Yh1"), rnn("s", "b3", "", "Yh2"),
             squeezed("Yh1", "pa"), squeezed("Yh2", "pb")]
    for order in (("a", "b"), ("b", "a")):
        ins = {"a": A2, "b": vi("b", [1, H])}
        m = model(nodes, [X, *(ins[n] for n in order)], [vi("pa", [1, H]), vi("pb", [1, H])], rnns=("r", "s"), inits=(axes("ax0", [0]),))
        assert pairs(m) == [(n, f"p{n}", DATAFLOW) for n in order]


# -- Loop and Scan state variables -----------------------------------------------------------------------


def _loop(body_op: str) -> object:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["s_in"], ["s_out"]) if body_op == "Identity" else helper.make_node(body_op, ["s_in", "s_in"], ["s_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("s_in", [2, 2])],
        [vi("cond_out", [], TensorProto.BOOL), vi("s_out", [2, 2])],
    )
    loop = helper.make_node("Loop", ["n", "", "acc"], ["total"], body=body)
    g = helper.make_graph([loop], "g", [vi("n", [], TensorProto.INT64), vi("acc", [2, 2])], [vi("total", [2, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])


def test_a_loop_carried_value_pairs_by_dataflow_only_when_its_body_computes_it():
    assert pairs(_loop("Add")) == [("acc", "total", DATAFLOW)]
    assert rnnir.load(_loop("Add")).state_pairs[0].reason == "'acc' starts Loop state variable 0 of 'Loop(total)', whose final value 'total' returns"
    assert all(s is not DATAFLOW for _, _, s in pairs(_loop("Identity")))


def _scan8(body_op: str) -> object:
    """Scan-8: sequence_lens first, then the state ``acc``, then the scanned ``xs`` (batch-major)."""
    nodes = [helper.make_node(body_op, ["s_in", "x_t"], ["s_out"]) if body_op != "Identity" else helper.make_node("Identity", ["s_in"], ["s_out"]),
             helper.make_node("Add", ["x_t", "s_in"], ["z_t"])]
    body = helper.make_graph(nodes, "body", [vi("s_in", [2]), vi("x_t", [2])], [vi("s_out", [2]), vi("z_t", [2])])
    scan = helper.make_node("Scan", ["", "acc", "xs"], ["total", "zs"], num_scan_inputs=1, body=body)
    g = helper.make_graph([scan], "g", [vi("acc", [1, 2]), vi("xs", [1, "T", 2])], [vi("total", [1, 2]), vi("zs", [1, "T", 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])


def test_a_scan8_state_variable_is_found_after_its_sequence_lens():
    assert pairs(_scan8("Add")) == [("acc", "total", DATAFLOW)]
    assert rnnir.load(_scan8("Add")).state_pairs[0].reason == "'acc' starts Scan state variable 0 of 'Scan(total)', whose final value 'total' returns"
    assert all(s is not DATAFLOW for _, _, s in pairs(_scan8("Identity")))


# -- a name pair needs state to flow ------------------------------------------------------------------


def _named(how: str) -> object:
    nodes = {
        "identity": [helper.make_node("Identity", ["foo"], ["foo_out"])],
        "reshape": [helper.make_node("Reshape", ["foo", "shape"], ["foo_out"])],
        "add": [helper.make_node("Add", ["foo", "v"], ["foo_out"])],
        "other": [helper.make_node("Add", ["v", "v"], ["foo_out"])],
    }[how]
    shape = numpy_helper.from_array(np.asarray([2], np.int64), "shape")
    g = helper.make_graph(nodes, "g", [vi("v", [2]), vi("foo", [2])], [vi("foo_out", [2])], [shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_plain_name_pairs_only_when_the_output_is_computed_from_the_input():
    assert pairs(_named("add")) == [("foo", "foo_out", NAME)]
    for how in ("identity", "reshape", "other"):
        assert pairs(_named(how)) == [], how


def _scan9_and_loop(carry: bool) -> object:
    """Inputs (u, acc, xs, lacc), outputs (o, total, zs, lfinal, lzs): a Scan-9 over xs with state acc, and a Loop
    (trip count an initializer) with state lacc and a scan output lzs.  ``carry``: the bodies compute the new state
    from the old one (else hand it back)."""
    snodes = [helper.make_node("Add" if carry else "Identity", ["s_in", "x_t"] if carry else ["s_in"], ["s_out"]),
              helper.make_node("Add", ["x_t", "x_t"], ["z_t"])]
    sbody = helper.make_graph(snodes, "sbody", [vi("s_in", [1, 2]), vi("x_t", [1, 2])], [vi("s_out", [1, 2]), vi("z_t", [1, 2])])
    lnodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
              helper.make_node("Add" if carry else "Identity", ["l_in", "l_in"] if carry else ["l_in"], ["l_out"]),
              helper.make_node("Identity", ["l_in"], ["l_scan"])]
    lbody = helper.make_graph(lnodes, "lbody", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("l_in", [1, 3])],
                              [vi("cond_out", [], TensorProto.BOOL), vi("l_out", [1, 3]), vi("l_scan", [1, 3])])
    nodes = [helper.make_node("Identity", ["u"], ["o"]),
             helper.make_node("Scan", ["acc", "xs"], ["total", "zs"], num_scan_inputs=1, body=sbody),
             helper.make_node("Loop", ["n", "", "lacc"], ["lfinal", "lzs"], body=lbody)]
    g = helper.make_graph(nodes, "g", [vi("u", [1]), vi("acc", [1, 2]), vi("xs", ["T", 1, 2]), vi("lacc", [1, 3])],
                          [vi("o", [1]), vi("total", [1, 2]), vi("zs", ["T", 1, 2]), vi("lfinal", [1, 3]), vi("lzs", ["N", 1, 3])],
                          [numpy_helper.from_array(np.asarray(3, np.int64), "n")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m


def test_scan_and_loop_states_pair_by_dataflow_and_their_scans_never_pair():
    assert pairs(_scan9_and_loop(True)) == [("acc", "total", DATAFLOW), ("lacc", "lfinal", DATAFLOW)]
    # handed back unchanged: no state for dataflow.  The scanned xs and the scan outputs zs, lzs are streams position
    # passes over, so what is left lines up one to one
    assert pairs(_scan9_and_loop(False)) == [("acc", "total", POSITION), ("lacc", "lfinal", POSITION)]


def _stateless_scan(opset: int) -> object:
    """A Scan with no state variable at all: zs = xs + xs, step by step (Scan-8 takes an empty sequence_lens first);
    beside it q = -w, which only position pairs (names and dataflow say nothing)."""
    seq = [1, "T", 2] if opset < 9 else ["T", 1, 2]
    body = helper.make_graph([helper.make_node("Add", ["x_t", "x_t"], ["z_t"])], "body", [vi("x_t", [1, 2] if opset >= 9 else [2])],
                             [vi("z_t", [1, 2] if opset >= 9 else [2])])
    scan = helper.make_node("Scan", ([""] if opset < 9 else []) + ["xs"], ["zs"], num_scan_inputs=1, body=body)
    nodes = [helper.make_node("Identity", ["u"], ["o"]), scan, helper.make_node("Neg", ["w"], ["q"])]
    g = helper.make_graph(nodes, "g", [vi("u", [1]), vi("xs", seq), vi("w", [1, 2])], [vi("o", [1]), vi("zs", seq), vi("q", [1, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_a_scan_without_state_variables_pairs_nothing_and_its_streams_stay_out_of_position():
    # the scanned xs and the scan output zs are streams: neither a state link nor a position pair, so w and q line up
    for opset in (8, 16):
        assert pairs(_stateless_scan(opset)) == [("w", "q", POSITION)], opset


def _scan_at(opset: int, carry: bool) -> object:
    """Inputs (u, acc, xs), outputs (o, total, zs) with rank-2 state; Scan-8 (batch-major, sequence_lens first) below 9."""
    s, x = [1, 2], [1, 2]
    nodes = [helper.make_node("Add" if carry else "Identity", ["s_in", "s_in"] if carry else ["s_in"], ["s_out"]),  # from s_in, not x_t
             helper.make_node("Add", ["x_t", "x_t"], ["z_t"])]
    if opset < 9:
        s, x = [2], [2]
    body = helper.make_graph(nodes, "body", [vi("s_in", s), vi("x_t", x)], [vi("s_out", s), vi("z_t", x)])
    scan = helper.make_node("Scan", ([""] if opset < 9 else []) + ["acc", "xs"], ["total", "zs"], num_scan_inputs=1, body=body)
    state, seq = ([1, 2], [1, "T", 2]) if opset < 9 else ([1, 2], ["T", 1, 2])
    g = helper.make_graph([helper.make_node("Identity", ["u"], ["o"]), scan], "g", [vi("u", [1]), vi("acc", state), vi("xs", seq)],
                          [vi("o", [1]), vi("total", state), vi("zs", seq)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_scan_offsets_follow_the_opset_scan_8_takes_sequence_lens_first():
    for opset in (8, 9, 16):
        assert pairs(_scan_at(opset, True)) == [("acc", "total", DATAFLOW)], opset
        assert pairs(_scan_at(opset, False)) == [("acc", "total", POSITION)], opset  # xs and zs still streams


def test_a_recurrence_without_an_initial_state_or_its_final_state_output_is_no_link_and_no_error():
    for h0, outs in ((None, ["Y", "Yh"]), ("", ["Y", "Yh"]), ("h0", ["Y", ""]), ("h0", ["Y"])):
        ins = ["x", "rW", "rR"] + ([] if h0 is None else ["", "", h0])
        nodes = [helper.make_node("RNN", ins, outs, hidden_size=H, name="r"), helper.make_node("Identity", ["Y"], ["y"])]
        m = model(nodes, [X, vi("h0", [1, 1, H])], [vi("y", [T, 1, 1, H])])
        assert all(s is not DATAFLOW for _, _, s in pairs(m)), (h0, outs)


def test_an_if_whose_branches_yield_the_same_value_is_one_source_and_a_constant_branch_is_none():
    then_b = helper.make_graph([helper.make_node("Identity", ["a3"], ["t3"])], "then", [], [vi("t3", [1, 1, H])])
    else_b = helper.make_graph([helper.make_node("Identity", ["a3"], ["e3"])], "else", [], [vi("e3", [1, 1, H])])
    nodes = [unsqueezed("a", "a3"), helper.make_node("If", ["c"], ["h3"], then_branch=then_b, else_branch=else_b),
             rnn("r", "h3", "", "Yh"), squeezed("Yh", "p")]
    m = model(nodes, [X, vi("c", [], TensorProto.BOOL), A2], [P2], inits=(axes("ax0", [0]),))
    assert pairs(m) == [("a", "p", DATAFLOW)]
    # one branch yields an initializer of the main graph: still the one input a
    then_b = helper.make_graph([helper.make_node("Identity", ["zinit"], ["t3"])], "then", [], [vi("t3", [1, 1, H])])
    else_b = helper.make_graph([helper.make_node("Unsqueeze", ["a", "ax0"], ["e3"])], "else", [], [vi("e3", [1, 1, H])])
    nodes = [helper.make_node("If", ["c"], ["h3"], then_branch=then_b, else_branch=else_b), rnn("r", "h3", "", "Yh"), squeezed("Yh", "p")]
    m = model(nodes, [X, vi("c", [], TensorProto.BOOL), A2], [P2],
              inits=(axes("ax0", [0]), numpy_helper.from_array(np.zeros((1, 1, H), np.float32), "zinit")))
    assert pairs(m) == [("a", "p", DATAFLOW)]


def test_a_plain_name_pairs_when_an_if_computes_the_output_from_the_input_in_a_branch():
    def branchy(reads: str) -> object:
        then_b = helper.make_graph([helper.make_node("Add", [reads, "v"], ["t"])], "then", [], [vi("t", [2])])
        else_b = helper.make_graph([helper.make_node("Neg", ["v"], ["e"])], "else", [], [vi("e", [2])])
        g = helper.make_graph([helper.make_node("If", ["c"], ["foo_out"], then_branch=then_b, else_branch=else_b)], "g",
                              [vi("c", [], TensorProto.BOOL), vi("v", [2]), vi("foo", [2])], [vi("foo_out", [2])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m

    assert pairs(branchy("foo")) == [("foo", "foo_out", NAME)]
    assert pairs(branchy("v")) == []
