"""Planning what to build (rnnir/lower/plan.py, with state.py's If dependencies), pinned through the public lowering:
which definitions carry state and so become IR nodes, and which stay external values. Each model is built here (or
is a committed PyTorch export); the expected IR is read off the graph by hand: a value depends on the state when the
state reaches it through any op (a recurrent op only through its state inputs), and an unpaired output is built only
where it rearranges a final state (layout-only ops, If joins) or reads the live-in state."""

from __future__ import annotations

import pathlib

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.ir import Compute, LoadSlot
from tests.support.cell_models import gru_cell
from tests.support.recurrent_op_models import H, I, T, model, shadowing_loop_model, vi, weights
from tests.support.recurrent_op_models import stored_value as _stored
from tests.support.recurrent_op_models import value_chain as _chain

TORCH_CELLS = pathlib.Path(__file__).parents[1] / "data" / "torch_cells"




def _gru(name, h_in, x="x"):
    return helper.make_node("GRU", [x, "W", "R", "", "", h_in], [f"{name}_Y", f"{name}_Yh"], hidden_size=H, name=name)


def test_a_recurrent_ops_sequence_input_stays_external_though_it_reads_the_state():
    # x_in = x * mean(h0) reads the live-in state, but a GRU's X is no state port: only initial_h is followed, so
    # x_in is an external value and nothing computing it is built
    nodes = [
        helper.make_node("ReduceMean", ["h0"], ["gain"], keepdims=1),
        helper.make_node("Mul", ["x", "gain"], ["x_in"]),
        helper.make_node("GRU", ["x_in", "W", "R", "", "", "h0"], ["Y", "hn"], hidden_size=H, name="gru"),
    ]
    prog = rnnir.load(model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], weights("GRU")))
    assert prog.nodes_of(Compute) == []
    (gru,) = prog.recurrents
    assert _chain(gru.port("X")) == ["external x_in"]
    assert _chain(gru.port("initial_h")) == ["load h0"]


def test_an_initial_state_computed_from_a_slot_is_built_though_no_output_uses_the_op():
    # h0 is declared a state that nothing returns; the GRU starts from h0 * decay and its results go nowhere
    nodes = [helper.make_node("Mul", ["h0", "decay"], ["h_in"]), _gru("gru", "h_in"), helper.make_node("Identity", ["x"], ["x_copy"])]
    inits = [*weights("GRU"), numpy_helper.from_array(np.float32(0.5), "decay")]
    prog = rnnir.load(model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("x_copy", [T, 1, I])], inits), pairs={"h0": None})
    (gru,) = prog.recurrents
    assert _chain(gru.port("initial_h")) == ["Mul", "load h0"]
    sd001 = [d.message for d in passes.run(prog) if d.code == "SD001"]
    assert sd001 == ["state input 'h0', which feeds 'gru', is live-in but no graph output returns its final state: every call restarts from the initial state"]


def test_a_recognised_cell_whose_new_state_goes_nowhere_still_reads_the_state_views():
    # a GRU cell written as plain ops on a packed state (Gather(state, 0) is h); the cell's new state is not returned
    m, expected = gru_cell(packed=True)
    g = m.graph
    returned = {"stateN"} | {n.output[0] for n in g.node if n.op_type == "Unsqueeze"}  # the packing back into stateN
    kept = [n for n in g.node if n.output[0] not in returned]
    del g.node[:]
    g.node.extend([*kept, helper.make_node("Identity", ["x"], ["x_copy"])])
    del g.output[:]
    g.output.append(vi("x_copy", None))
    prog = rnnir.load(m, pairs={"state": None})
    (cell,) = prog.recurrents
    assert cell.kind == "GRU"
    assert _chain(cell.port("initial_h")) == ["Unsqueeze", "Gather", "load state"]
    sd001 = [d.message for d in passes.run(prog) if d.code == "SD001"]
    assert len(sd001) == 1 and sd001[0].startswith(f"state input 'state', which feeds {cell.describe()!r}, is live-in")


def test_stacked_cells_read_the_state_before_the_layer_below_is_built():
    # PyTorch's two stacked GRUCells on h0[0] and h0[1] (cell 1's input is cell 0's new h): a correct model, so no
    # finding, and each cell starts from its own row of the loaded state
    prog = rnnir.load(TORCH_CELLS / "gru_cell_stacked.ts.onnx")
    assert [d.code for d in passes.run(prog)] == []
    first, second = sorted(prog.recurrents, key=lambda r: r.describe())
    assert [_chain(r.port("initial_h")) for r in (first, second)] == [["Unsqueeze", "Gather", "load h0"]] * 2
    assert _chain(second.port("X"))[-1] == "GRU.Y_h"  # the layer below's new state, through its Squeeze and Unsqueeze


def test_each_slot_is_loaded_in_the_order_of_the_pairs():
    # a_state is read by nothing (the GRU starts from a constant), b_state only by an unpaired output: the loads still
    # come in pair order, so the IR (its ids and text) does not depend on who reads which slot
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "", "", "h_zero"], ["Y", "hn"], hidden_size=H, name="gru"),
        helper.make_node("Add", ["b_state", "x"], ["y"]),
    ]
    inits = [*weights("GRU"), numpy_helper.from_array(np.zeros((1, 1, H), np.float32), "h_zero")]
    m = model(nodes, [vi("x", [T, 1, I]), vi("a_state", [1, 1, H]), vi("b_state", [T, 1, I])], [vi("hn", [1, 1, H]), vi("y", [T, 1, I])], inits)
    prog = rnnir.load(m, pairs={"a_state": "hn", "b_state": None})
    loads = prog.nodes_of(LoadSlot)
    assert [ld.slot.name for ld in loads] == ["a_state", "b_state"]
    assert [ld.id for ld in loads] == sorted(ld.id for ld in loads)


def _branch(name, value):
    const = helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.full((1,), value, np.float32)))
    return helper.make_graph([const], name, [], [vi(name, [1])])


def test_unpaired_outputs_that_rearrange_or_branch_on_a_final_state_are_built():
    # last_h: the final state reshaped, then copied (two layout ops); flag: an If choosing -1 or 1 by the first
    # element of the final state (through Reshape, Gather and Cast), then copied. Both read the GRU's new state
    nodes = [
        _gru("gru", "h0"),
        helper.make_node("Identity", ["gru_Yh"], ["hn"]),
        helper.make_node("Reshape", ["gru_Yh", "flat"], ["flat_h"]),
        helper.make_node("Identity", ["flat_h"], ["last_h"]),
        helper.make_node("Gather", ["flat_h", "first"], ["h_first"], axis=1),
        helper.make_node("Cast", ["h_first"], ["on"], to=TensorProto.BOOL),
        helper.make_node("If", ["on"], ["picked"], then_branch=_branch("minus", -1.0), else_branch=_branch("plus", 1.0)),
        helper.make_node("Identity", ["picked"], ["flag"]),
    ]
    inits = [*weights("GRU"), numpy_helper.from_array(np.array([1, H], np.int64), "flat"), numpy_helper.from_array(np.array(0, np.int64), "first")]
    m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H]), vi("last_h", [1, H]), vi("flag", [1, 1])], inits)
    ort.InferenceSession(m.SerializeToString())  # a model onnxruntime runs
    prog = rnnir.load(m)
    assert _chain(_stored(prog, "last_h")) == ["Identity", "Reshape", "GRU.Y_h"]
    assert _chain(_stored(prog, "flag")) == ["Identity", "If", "Cast", "Gather", "Reshape", "GRU.Y_h"]


def test_an_if_whose_condition_reads_the_state_carries_the_state():
    # state_out = -1 if sum(state) > 0 else 1: both branches are constants, but which one depends on the state
    # (onnxruntime: state 1 -> -1, state -1 -> 1), so the If is built on the loaded state
    nodes = [
        helper.make_node("ReduceSum", ["state"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["on"]),
        helper.make_node("If", ["on"], ["state_out"], then_branch=_branch("minus", -1.0), else_branch=_branch("plus", 1.0)),
    ]
    m = model(nodes, [vi("state", [1])], [vi("state_out", [1])], [numpy_helper.from_array(np.float32(0), "zero")])
    sess = ort.InferenceSession(m.SerializeToString())
    assert [sess.run(None, {"state": np.array([s], np.float32)})[0].tolist() for s in (1.0, -1.0)] == [[-1.0], [1.0]]
    prog = rnnir.load(m)
    assert [(p.input, p.output) for p in prog.state_pairs] == [("state", "state_out")]
    assert _chain(_stored(prog, "state")) == ["If", "Greater", "ReduceSum", "load state"]


def test_a_loop_body_input_named_like_a_slot_is_not_that_slot():
    # the main graph's `hidden` is a slot (paired with hidden_out by name); the Loop body's own `hidden` is its carried
    # value, started from h_start: the body's GRU starts from that, not from a second load of the slot
    m = shadowing_loop_model("hidden_out")
    ort.InferenceSession(m.SerializeToString())  # onnxruntime takes the shadowing body input
    prog = rnnir.load(m)
    assert [(p.input, p.output) for p in prog.state_pairs] == [("hidden", "hidden_out")]
    assert [ld.slot.name for ld in prog.nodes_of(LoadSlot)] == ["hidden"]
    (gru,) = prog.recurrents
    assert gru.port("initial_h").producer is None  # the body's carried value: external to the state analysis


def test_a_final_state_returned_along_many_shared_paths_is_planned_once():
    # hn is the GRU's final state after 40 levels of Concat(prev, prev) -> Slice: 2**40 paths, 120 definitions. A
    # walk that revisited a definition would never finish; one that visits each once takes milliseconds
    nodes = [_gru("gru", "h0")]
    prev = "gru_Yh"
    for k in range(40):
        nodes.append(helper.make_node("Concat", [prev, prev], [f"twice{k}"], axis=0))
        nodes.append(helper.make_node("Slice", [f"twice{k}", "zero", "one"], [f"once{k}"]))
        prev = f"once{k}"
    nodes.append(helper.make_node("Identity", [prev], ["hn"]))
    bounds = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("one", 1))]
    prog = rnnir.load(model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1, 1, H])], [*weights("GRU"), *bounds]))
    assert _chain(_stored(prog, "h0")) == ["Identity"] + ["Slice", "Concat"] * 40 + ["GRU.Y_h"]
    assert len(prog.nodes_of(Compute)) == 81
