"""SD007's fix (feed the state input to the op that starts from a constant) on near misses it must refuse, each with
its exact reason and the model untouched (the slot read in slices, by one op or by an op that runs both ways; a GRU in each If branch), and
a slot also read by an op that is not recurrent, which the fix still repairs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

import rnnir
from tests.fixes.test_planner_near_misses import _assert_same_calls, _calls, _codes, _load, _xs


def _read_elsewhere() -> onnx.ModelProto:
    """h0 is also returned through an Identity: a reader that is no recurrent op's state port."""
    model = _load("sd007_zero_init")
    model.graph.node.append(helper.make_node("Identity", ["h0"], ["h0_seen"], name="seen"))
    model.graph.output.append(helper.make_tensor_value_info("h0_seen", onnx.TensorProto.FLOAT, [1, 1, 4]))
    return model


def _both_directions() -> onnx.ModelProto:
    """The GRU runs both ways from zeros, its Y_h ([2,1,4]) written back: a backward pass never continues a stream."""
    model = _load("sd007_zero_init")
    g = model.graph
    weights = []
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        if t.name.startswith("gru_"):
            a = np.concatenate([a, a])
        elif t.name == "zshape":
            a = np.array([2, 1, 4], dtype=a.dtype)
        weights.append(numpy_helper.from_array(a, t.name))
    del g.initializer[:]
    g.initializer.extend(weights)
    next(n for n in g.node if n.op_type == "GRU").attribute.append(helper.make_attribute("direction", "bidirectional"))
    for vi, axis in ((g.input[1], 0), (g.output[1], 0), (g.output[0], 1)):
        vi.type.tensor_type.shape.dim[axis].dim_value = 2
    return model


def _both_slices_from_zeros() -> onnx.ModelProto:
    """sd002_hc_swap repaired (Concat(Y_h, Y_c)) but its LSTM starts from zeros: the slot is read in slices."""
    model = _load("sd002_hc_swap")
    g = model.graph
    next(n for n in g.node if n.name == "concat_state_swapped").input[:] = ["Y_h", "Y_c"]
    del next(n for n in g.node if n.op_type == "LSTM").input[4:]
    for name in ("slice_h", "slice_c"):
        g.node.remove(next(n for n in g.node if n.name == name))
    return model


def _gru_in_each_if_branch() -> onnx.ModelProto:
    """Each If branch runs its own copy of the GRU from zeros; hn is whichever ran: two ops, which one to feed is a choice."""
    model = _load("sd007_zero_init")
    g = model.graph
    gru = next(n for n in g.node if n.op_type == "GRU")
    g.node.remove(gru)

    def branch(name: str) -> onnx.GraphProto:
        copy = onnx.NodeProto()
        copy.CopyFrom(gru)
        copy.name, copy.output[:] = f"{name}_gru", [f"{name}_y", f"{name}_hn"]
        outs = [helper.make_tensor_value_info(f"{name}_y", onnx.TensorProto.FLOAT, ["T", 1, 1, 4]),
                helper.make_tensor_value_info(f"{name}_hn", onnx.TensorProto.FLOAT, [1, 1, 4])]
        return helper.make_graph([copy], name, [], outs)

    g.node.append(helper.make_node("If", ["flag"], ["y", "hn"], name="pick", then_branch=branch("then"), else_branch=branch("else")))
    g.input.append(helper.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []))
    return model


def test_sd007_near_misses_are_refused_with_their_reason() -> None:
    read = "the slot is read in slices, or read at all: which port it should feed is not certain"
    cases = [
        (_both_slices_from_zeros(), "state", read),
        (_both_directions(), "h0", read),  # one slice per direction
        (_gru_in_each_if_branch(), "h0", "the value written back comes from several ports"),
    ]
    for model, slot, reason in cases:
        onnx.checker.check_model(model, full_check=True)
        assert "SD007" in _codes(model), reason
        result = rnnir.fix(model, unsafe=True)
        assert result.edits == [] and result.model.graph == model.graph, reason
        assert [str(e) for e in result.skipped if e.code == "SD007"] == [f"SD007 [no fix] SD007 on slot {slot!r}: {reason}"]


def test_sd007_slot_also_read_by_another_op_is_still_fed_to_the_gru() -> None:
    model = _read_elsewhere()
    assert _codes(model) == ["SD007"]
    result = rnnir.fix(model, unsafe=True)
    assert [str(e) for e in result.edits] == [
        "SD007 [unsafe] slot 'h0': fed the state input to the op whose final state it gets: GRU 'gru'.initial_h: 'h_zero' -> 'h0'"
    ]
    assert _codes(result.model) == []
    assert [n.name for n in result.model.graph.node] == ["gru", "seen"]  # the zeros have no reader left: pruned
    correct = _read_elsewhere()  # by hand: the GRU starts from h0, the Identity still returns h0
    next(n for n in correct.graph.node if n.op_type == "GRU").input[5] = "h0"
    xs = _xs(33)
    _assert_same_calls(_calls(result.model, xs), _calls(correct, xs), "sd007 read elsewhere")
