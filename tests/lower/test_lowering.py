"""ONNX -> IR: scoping, state pairs and where they come from, slice-by-slice tracing, policies."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import LoadSlot, PairSource, Recurrent, StoreResult
from rnnir.analysis.slices import slice_maps
from rnnir.analysis.suggest import suggested_pairs
from rnnir.ir.recurrence import Recognition
from tests.support.onnx_models import const, lstm_h0c0, lstm_weights, model, packed_lstm_in_if, vi


def _slices(prog, name):
    pair = slice_maps(prog).pair(name)
    return {s.label: s for s in pair.slices}


def test_h0_c0_pairs_by_name_and_map_to_lstm_ports():
    prog = rnnir.load(lstm_h0c0())
    pairs = {p.input: (p.output, p.source) for p in prog.state_pairs}
    assert pairs == {"h0": ("hn", PairSource.NAME), "c0": ("cn", PairSource.NAME)}
    h = _slices(prog, "h0")["h0"]
    assert [(e.op, e.port, e.direction) for e in h.entry] == [("LSTM", "initial_h", 0)]
    assert [(e.op, e.port) for e in h.exit] == [("LSTM", "Y_h")]
    c = _slices(prog, "c0")["c0"]
    assert [(e.port) for e in c.entry] == ["initial_c"] and [e.port for e in c.exit] == ["Y_c"]


def test_ir_has_the_fanout_shape():
    prog = rnnir.load(lstm_h0c0())
    slot = prog.slot("h0")
    (slot_store,) = prog.stores_to(slot)
    (out_store,) = prog.stores_to(prog.output("hn"))
    assert slot_store.value is out_store.value
    assert isinstance(slot_store.value.producer, Recurrent)
    assert isinstance(prog.loads_of(slot)[0], LoadSlot)
    text = str(prog)
    assert "load_slot<@h0, copy>" in text and "store<@h0, token>" in text and "recurrent.LSTM" in text


def test_packed_state_in_if_branches_resolves_each_slice():
    prog = rnnir.load(packed_lstm_in_if())
    s = _slices(prog, "state")
    assert set(s) == {"state[0]", "state[1]"}
    for label, port, final in (("state[0]", "initial_h", "Y_h"), ("state[1]", "initial_c", "Y_c")):
        assert sorted(e.onnx_node for e in s[label].entry) == ["else_branch_lstm", "then_branch_lstm"]
        assert {e.port for e in s[label].entry} == {port}
        assert {e.port for e in s[label].exit} == {final}
        branches = {"/".join(e.branch) for e in s[label].exit}
        assert branches == {"sr_if.then_branch", "sr_if.else_branch"}
        assert set(s[label].exit_kind.values()) == {"final"}


def test_swapped_packed_state_is_visible_in_the_mapping():
    prog = rnnir.load(packed_lstm_in_if(swap=True))
    s = _slices(prog, "state")
    assert {e.port for e in s["state[0]"].exit} == {"Y_c"}
    assert {e.port for e in s["state[1]"].exit} == {"Y_h"}


def test_outer_scope_reference_and_shadowed_initializer():
    # the If branch reads 'h0' and the weights from the enclosing graph; 'h0' is a graph input
    # shadowed by an initializer (an input with a default value)
    H, I = 2, 1
    ws = lstm_weights(I=I, H=H)
    then_g = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", ""], ["", "t_hn"], hidden_size=H, name="inner")],
        "then", [], [vi("t_hn", [1, 1, H])],
    )
    else_g = helper.make_graph([helper.make_node("Identity", ["h0"], ["e_hn"])], "else", [], [vi("e_hn", [1, 1, H])])
    nodes = [helper.make_node("If", ["go"], ["hn"], then_branch=then_g, else_branch=else_g, name="gate")]
    m = model(
        nodes,
        [vi("x", ["T", 1, I]), vi("h0", [1, 1, H]), vi("go", [], TensorProto.BOOL)],
        [vi("hn", [1, 1, H])],
        inits=ws + [const("h0", np.full((1, 1, H), 0.5, np.float32))],
    )
    prog = rnnir.load(m)
    pair = slice_maps(prog).pair("h0")
    assert pair.output == "hn"
    assert pair.slot.init.kind == "constant" and np.allclose(pair.slot.init.value, 0.5)
    sm = pair.slices[0]
    assert [e.onnx_node for e in sm.entry] == ["inner"]
    assert sm.exit_kind == {"gate.then_branch": "final", "gate.else_branch": "passthrough"}


def test_optional_inputs_may_be_empty():
    prog = rnnir.load(lstm_h0c0())
    (rec,) = prog.recurrents
    assert rec.port("sequence_lens") is None and rec.port("P") is None


def test_declared_pairs_replace_every_other_source():
    prog = rnnir.load(lstm_h0c0(), pairs={"h0": "hn"})
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("h0", "hn", PairSource.DECLARED)]


def test_metadata_pairs():
    m = lstm_h0c0(names=("a", "b", "p", "q"))
    m.metadata_props.add(key="rnnir.pairs", value=json.dumps({"a": "p", "b": "q"}))
    prog = rnnir.load(m)
    assert {(p.input, p.output, p.source) for p in prog.state_pairs} == {("a", "p", PairSource.METADATA), ("b", "q", PairSource.METADATA)}


def test_triton_config_pairs(tmp_path):
    m = lstm_h0c0(names=("IN_H", "IN_C", "OUT_H", "OUT_C"))
    d = tmp_path / "lstm" / "1"
    d.mkdir(parents=True)
    import onnx

    onnx.save_model(m, str(d / "model.onnx"))
    (tmp_path / "lstm" / "config.pbtxt").write_text(
        """
name: "lstm"
sequence_batching {
  state [
    { input_name: "IN_H" output_name: "OUT_H" data_type: TYPE_FP32 dims: [1, 1, 4] },
    { input_name: "IN_C" output_name: "OUT_C" data_type: TYPE_FP32 dims: [1, 1, 4] }
  ]
}
"""
    )
    prog = rnnir.load(d / "model.onnx")
    assert {(p.input, p.output, p.source) for p in prog.state_pairs} == {("IN_H", "OUT_H", PairSource.TRITON), ("IN_C", "OUT_C", PairSource.TRITON)}


@pytest.mark.parametrize(
    "names",
    [("cache_h", "cache_c", "new_cache_h", "new_cache_c"), ("h_in", "c_in", "h_out", "c_out"), ("state0", "state1", "state0N", "state1N")],
)
def test_naming_conventions(names):
    prog = rnnir.load(lstm_h0c0(names=names))
    assert {(p.input, p.output) for p in prog.state_pairs} == {(names[0], names[2]), (names[1], names[3])}
    assert all(p.source is PairSource.NAME for p in prog.state_pairs)


def test_dataflow_pairs_when_names_say_nothing():
    # a starts the LSTM's initial_h and p returns its Y_h; b starts initial_c and q returns Y_c (read off the node)
    prog = rnnir.load(lstm_h0c0(names=("a", "b", "p", "q")))
    assert {(p.input, p.output, p.source) for p in prog.state_pairs} == {("a", "p", PairSource.DATAFLOW), ("b", "q", PairSource.DATAFLOW)}
    assert prog.pair("a").reason == "'a' starts initial_h -> Y_h of 'lstm', whose final value 'p' returns"
    assert suggested_pairs(prog) == ()
    # near-miss: the outputs listed the other way round; position would pair a -> q, the dataflow pairs a -> p
    m = lstm_h0c0(names=("a", "b", "p", "q"))
    outs = list(m.graph.output)
    del m.graph.output[:]
    m.graph.output.extend([outs[0], outs[2], outs[1]])
    assert {(p.input, p.output) for p in rnnir.load(m).state_pairs} == {("a", "p"), ("b", "q")}


def test_position_pairs_when_neither_names_nor_dataflow_say_anything():
    # no recurrent op: p = tanh(a + x) is a step written as plain ops, which the dataflow does not see before lowering
    nodes = [helper.make_node("Neg", ["x"], ["y"]), helper.make_node("Add", ["a", "x"], ["s"]), helper.make_node("Tanh", ["s"], ["p"])]
    m = model(nodes, [vi("x", [1, 4]), vi("a", [1, 4])], [vi("y", [1, 4]), vi("p", [1, 4])], [])
    assert [(p.input, p.output, p.source) for p in rnnir.load(m).state_pairs] == [("a", "p", PairSource.POSITION)]


def _gru_foo_bar(bar_shape):
    H, I = 2, 1
    n = helper.make_node("GRU", ["x", "W", "R", "", "", "foo"], ["", "bar"], hidden_size=H, name="gru")
    rng = np.random.default_rng(0)
    return model(
        [n, helper.make_node("Identity", ["x"], ["echo"])],
        [vi("x", ["T", 1, I]), vi("foo", [1, 1, H])],
        [vi("echo", ["T", 1, I]), vi("bar", bar_shape)],
        [const("W", rng.standard_normal((1, 3 * H, I)).astype(np.float32)), const("R", rng.standard_normal((1, 3 * H, H)).astype(np.float32))],
    )


def test_dataflow_pairs_an_input_starting_the_state_with_the_output_returning_it_when_their_types_agree():
    # input 'foo' feeds initial_h, output 'bar' returns Y_h; an output of unknown shape does not disagree
    prog = rnnir.load(_gru_foo_bar(None))
    assert [(p.input, p.output, p.source) for p in prog.state_pairs] == [("foo", "bar", PairSource.DATAFLOW)]
    # near-miss: bar declared [1, 1, 3] is not the state foo [1, 1, 2] starts: no pair, only the suggestion
    other = rnnir.load(_gru_foo_bar([1, 1, 3]))
    assert other.state_pairs == ()
    assert [(p.input, p.output, p.source) for p in suggested_pairs(other)] == [("foo", "bar", PairSource.DATAFLOW)]


def test_stacked_layers_map_per_layer():
    H, I = 2, 1
    rng = np.random.default_rng(1)
    inits, nodes = [], []
    for layer in range(2):
        p = f"l{layer}_"
        inits += [
            const(p + "W", rng.standard_normal((1, 3 * H, I if layer == 0 else H)).astype(np.float32)),
            const(p + "R", rng.standard_normal((1, 3 * H, H)).astype(np.float32)),
            const(p + "s", np.array([layer], np.int64)),
            const(p + "e", np.array([layer + 1], np.int64)),
        ]
        x = "x" if layer == 0 else "l0_y"
        nodes += [
            helper.make_node("Slice", ["h0", p + "s", p + "e", "ax0"], [p + "h"]),
            helper.make_node("GRU", [x if layer == 0 else "l0_y3", p + "W", p + "R", "", "", p + "h"], [p + "Y", p + "Yh"], hidden_size=H, name=f"gru{layer}"),
        ]
        if layer == 0:
            nodes.append(helper.make_node("Squeeze", ["l0_Y", "ax1"], ["l0_y3"]))
    nodes.append(helper.make_node("Concat", ["l0_Yh", "l1_Yh"], ["hn"], axis=0))
    inits += [const("ax0", np.array([0], np.int64)), const("ax1", np.array([1], np.int64))]
    m = model(nodes, [vi("x", ["T", 1, I]), vi("h0", [2, 1, H])], [vi("hn", [2, 1, H])], inits)
    prog = rnnir.load(m)
    s = _slices(prog, "h0")
    assert [(e.onnx_node, e.port) for e in s["h0[0]"].entry] == [("gru0", "initial_h")]
    assert [(e.onnx_node, e.port) for e in s["h0[1]"].entry] == [("gru1", "initial_h")]
    assert [(e.onnx_node, e.port) for e in s["h0[0]"].exit] == [("gru0", "Y_h")]
    assert [(e.onnx_node, e.port) for e in s["h0[1]"].exit] == [("gru1", "Y_h")]


def test_plain_rnn_cell_becomes_a_recognised_recurrence():
    # h' = tanh(h @ R + x @ W): no recurrent node; recognised as an RNN cell (issue 8), its slice verified
    H = 3
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("MatMul", ["h", "R"], ["hr"], name="rec_matmul"),
        helper.make_node("MatMul", ["x", "W"], ["xw"], name="in_matmul"),
        helper.make_node("Add", ["hr", "xw"], ["pre"], name="add"),
        helper.make_node("Tanh", ["pre"], ["h_out"], name="tanh"),
    ]
    m = model(
        nodes,
        [vi("x", [1, H]), vi("h", [1, H])],
        [vi("h_out", [1, H])],
        [const("R", rng.standard_normal((H, H)).astype(np.float32)), const("W", rng.standard_normal((H, H)).astype(np.float32))],
    )
    prog = rnnir.load(m)
    pair = slice_maps(prog).pair("h")
    (rec,) = prog.recurrents
    assert pair.output == "h_out" and rec.kind == "RNN" and rec.recognition is Recognition.CELL
    assert set(rec.recognised_from) >= {"tanh", "add", "rec_matmul"}
    # the weights the cell was confirmed with: R as the model stores it, transposed to ONNX's [H, H] layout
    R = next(t for t in m.graph.initializer if t.name == "R")
    np.testing.assert_allclose(rec.port("R").const[0], numpy_helper.to_array(R).T, atol=1e-6)
    (sm,) = pair.slices
    assert [(e.port, e.node_id) for e in sm.entry] == [("initial_h", rec.id)]
    assert [(e.port, e.node_id) for e in sm.exit] == [("Y_h", rec.id)] and sm.exit_kind == {"": "final"}
    assert pair.plain_recurrence is None


def test_state_named_input_without_output_becomes_an_unwritten_slot():
    H, I = 2, 1
    rng = np.random.default_rng(3)
    n = helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y"], hidden_size=H, name="gru")
    m = model(
        [n],
        [vi("x", ["T", 1, I]), vi("h0", [1, 1, H])],
        [vi("Y", ["T", 1, 1, H])],
        [const("W", rng.standard_normal((1, 3 * H, I)).astype(np.float32)), const("R", rng.standard_normal((1, 3 * H, H)).astype(np.float32))],
    )
    prog = rnnir.load(m)
    pair = prog.pair("h0")
    assert pair.output is None
    assert prog.stores_to(pair.slot) == []


def test_exit_policies():
    chain = rnnir.load(lstm_h0c0(), exit="chain")
    slot_store = chain.stores_to(chain.slot("h0"))[0]
    out_store = chain.stores_to(chain.output("hn"))[0]
    assert slot_store.result is StoreResult.ALIAS
    assert out_store.value.producer is slot_store  # the chain: output store reads the slot store's result

    reuse = rnnir.load(lstm_h0c0(), exit="reuse-single-store")
    assert reuse.stores_to(reuse.slot("h0")) == []
    assert reuse.slot("h0").alias_of is reuse.output("hn")

    with pytest.raises(ValueError):
        rnnir.load(lstm_h0c0(), exit="sideways")


def test_entry_constant_policy_makes_a_slot_of_a_constant_initial_state():
    H, I = 2, 1
    rng = np.random.default_rng(4)
    n = helper.make_node("RNN", ["x", "W", "R", "", "", "h_init"], ["Y", "h_last"], hidden_size=H, name="rnn")
    m = model(
        [n],
        [vi("x", ["T", 1, I])],
        [vi("Y", ["T", 1, 1, H]), vi("h_last", [1, 1, H])],
        [
            const("W", rng.standard_normal((1, H, I)).astype(np.float32)),
            const("R", rng.standard_normal((1, H, H)).astype(np.float32)),
            const("h_init", np.full((1, 1, H), 0.25, np.float32)),
        ],
    )
    assert rnnir.load(m).state_pairs == ()
    prog = rnnir.load(m, entry="constant")
    (pair,) = slice_maps(prog).declared
    assert (pair.input, pair.output, pair.source) == ("h_init", "h_last", PairSource.CONSTANT)
    assert pair.slot.init.kind == "constant" and np.allclose(pair.slot.init.value, 0.25)
    assert [e.port for e in pair.slices[0].entry] == ["initial_h"]
    exported = rnnir.export(prog)
    assert "h_init" in [i.name for i in exported.graph.input]


def test_lowering_builds_only_the_state_carrying_part():
    # a long chain of ordinary ops feeding x must not become IR nodes
    H, I = 2, 4
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"r{i - 1}"], [f"r{i}"]) for i in range(200)]
    nodes.append(helper.make_node("LSTM", ["r199", "W", "R", "B", "", "h0", "c0"], ["Y", "hn", "cn"], hidden_size=H))
    m = model(nodes, [vi("x", ["T", 1, I]), vi("h0", [1, 1, H]), vi("c0", [1, 1, H])], [vi("hn", [1, 1, H]), vi("cn", [1, 1, H])], lstm_weights(I=I, H=H))
    prog = rnnir.load(m)
    assert len(prog) < 20


def test_loop_body_borrowing_outer_state_is_followed():
    # a Loop whose body reads the outer 'h0' (outer-scope reference) and whose result is returned as hn
    H = 2
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc_in", "h0"], ["acc_out"])],
        "body",
        [vi("iter", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("acc_in", [1, 1, H])],
        [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [1, 1, H])],
    )
    nodes = [helper.make_node("Loop", ["trip", "", "zero"], ["hn"], body=body, name="loop")]
    m = model(
        nodes,
        [vi("h0", [1, 1, H])],
        [vi("hn", [1, 1, H])],
        [const("trip", np.array(3, np.int64)), const("zero", np.zeros((1, 1, H), np.float32))],
    )
    prog = rnnir.load(m)
    pair = slice_maps(prog).pair("h0")
    (loop,) = [n for n in prog.nodes if getattr(n, "op", "") == "Loop"]
    assert prog.loads_of(pair.slot)[0].outputs[0] in loop.inputs  # the borrowed outer value is an operand
    assert pair.slices[0].exit_kind == {"": "derived"}
    assert pair.plain_recurrence is not None


def test_show_full_prints_the_suggested_pair_of_a_lowered_model(tmp_path):
    # suggestions are an analysis now, not written by lowering: `rnnir show --full` still names them, as IR text may
    import subprocess
    import sys

    path = tmp_path / "foo_bar.onnx"
    onnx.save(_gru_foo_bar([1, 1, 3]), path)
    done = subprocess.run([sys.executable, "-m", "rnnir", "show", "--full", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "  suggested pair foo -> bar dataflow " in done.stdout
    near = tmp_path / "declared.onnx"
    onnx.save(_gru_foo_bar(None), near)  # paired by dataflow: a pair, not a suggestion
    done = subprocess.run([sys.executable, "-m", "rnnir", "show", "--full", str(near)], capture_output=True, text=True, timeout=120)
    assert "  pair foo -> bar dataflow " in done.stdout and "suggested pair" not in done.stdout
