"""How StatefulSession resolves a state's symbolic dims from the first call's feeds, pinned where the rules give
different answers (the module docstring's order): a dim symbol shared with a fed input of the declared rank, then
the batch axis of an input that feeds a recurrent op, then the leading dim of the first fed input (in the model's
input order) whose declared leading dim is dynamic.  Feeds that cannot tell anything (another rank, a scalar, an
input without a declared shape, a state input) are passed over, never a traceback.  Expected shapes are read off
the declarations by hand; onnxruntime runs the model where a call is made."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import StateError
from rnnir.ir import SlotInit
from rnnir.runtime import StatefulSession, StateShapeError

F = TensorProto.FLOAT


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def build(nodes, inputs, outputs, inits=(), name="m", opset=11):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def val(a):
    return np.asarray(a).ravel().tolist()


def column_sums(extra_inputs=()):
    """hn = h0 + (column sums of x): x [N, K], h0 [K]; the state's K is x's second dim, not its leading one."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], axes=[0], keepdims=0), helper.make_node("Add", ["h0", "sx"], ["hn"])]
    return build(nodes, [*extra_inputs, vi("x", ["N", "K"]), vi("h0", ["K"])], [vi("hn", ["K"])], name="cols")


def test_a_symbol_shared_with_a_feed_sizes_the_state_before_the_leading_dim_does():
    s = StatefulSession(column_sums())
    x = np.ones((2, 3), np.float32)
    assert s.initial_state({"x": x})["h0"].shape == (3,)
    assert val(s.run_dict({"x": x})["hn"]) == [2.0, 2.0, 2.0]
    assert val(s.run_dict({"x": x})["hn"]) == [4.0, 4.0, 4.0]


def test_an_input_without_a_declared_shape_tells_no_symbol_and_is_no_error():
    # u has no shape (any array): it is fed first and tells nothing; x still sizes the state
    s = StatefulSession(column_sums([helper.make_tensor_value_info("u", F, None)]))
    feeds = {"u": np.ones((4, 4), np.float32), "x": np.ones((2, 3), np.float32)}
    assert s.initial_state(feeds)["h0"].shape == (3,)
    assert val(s.run_dict(feeds)["hn"]) == [2.0, 2.0, 2.0]


def test_a_feed_of_another_rank_than_declared_tells_no_symbol():
    s = StatefulSession(column_sums())
    # x is declared [N, K]: a 3-d array says nothing of K, so the leading-dim rule decides (2), not its second dim (3)
    assert s.initial_state({"x": np.ones((2, 3, 4), np.float32)})["h0"].shape == (2,)


def test_a_state_input_among_the_feeds_tells_nothing_about_its_own_initial_shape():
    # h0 [M, 2] shares no symbol; the first call (which would use a fed h0 as the state itself) resolves M from x
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "sx"], ["hn"])]
    s = StatefulSession(build(nodes, [vi("x", ["N", 2]), vi("h0", ["M", 2])], [vi("hn", ["M", 2])], name="plain"))
    got = s.initial_state({"h0": np.ones((5, 2), np.float32), "x": np.ones((3, 2), np.float32)})["h0"]
    assert got.shape == (3, 2) and not got.any()


def leading(inputs):
    """hn = h0 + sum(x): h0 [M, 2] shares no symbol and no recurrent op reads a batch axis: only a leading dim can
    size M.  ``inputs`` are extra plain inputs declared before x, all added into the sum so the model reads them."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0)]
    last = "sx"
    for k, (name, _) in enumerate(inputs):
        nodes.append(helper.make_node("ReduceSum", [name], [f"s{k}"], keepdims=0))
        nodes.append(helper.make_node("Add", [last, f"s{k}"], [f"t{k}"]))
        last = f"t{k}"
    nodes.append(helper.make_node("Add", ["h0", last], ["hn"]))
    return build(nodes, [*(vi(n, s) for n, s in inputs), vi("x", ["N", 2]), vi("h0", ["M", 2])], [vi("hn", ["M", 2])], name="lead")


def test_the_first_input_in_model_order_with_a_dynamic_leading_dim_is_the_batch():
    s = StatefulSession(leading([("a", ["A"]), ("b", ["B", 2])]))
    feeds = {"x": np.ones((3, 2), np.float32), "b": np.ones((4, 2), np.float32), "a": np.ones(5, np.float32)}
    assert s.initial_state(feeds)["h0"].shape == (5, 2)  # a is declared first, and one dim is enough
    assert s.initial_state({k: v for k, v in feeds.items() if k != "a"})["h0"].shape == (4, 2)


def test_fixed_leading_dims_scalars_and_shapeless_inputs_are_passed_over():
    s = StatefulSession(leading([("one", [1, "P"]), ("three", [3]), ("u", None), ("a", ["A"])]))
    feeds = {
        "one": np.ones((1, 7), np.float32),  # leading dim fixed at 1: not a batch
        "three": np.ones(3, np.float32),  # fixed at 3
        "u": np.ones((6, 2), np.float32),  # no declared shape: nothing to say its leading dim is a batch
        "a": np.float32(1.0),  # a scalar fed to [A] has no leading dim
        "x": np.ones((4, 2), np.float32),
    }
    assert s.initial_state(feeds)["h0"].shape == (4, 2)


def test_a_state_whose_dims_nothing_tells_asks_for_state_shapes():
    s = StatefulSession(leading([("a", ["A"])]))
    with pytest.raises(StateShapeError, match=re.escape("lead: cannot tell dim 0 (M) of state input 'h0' (declared [M, 2]) from the feeds")):
        s.initial_state({"a": np.float32(1.0)})  # x not fed, and a scalar a tells nothing


def rnn(x_shape, h_shape):
    """y, hn = RNN(x, h0) with one hidden unit: x [T, B, 1] has its batch on axis 1."""
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1)
    inits = [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "R")]
    return build([node], [vi("x", x_shape), vi("h0", h_shape)], [vi("y", None), vi("hn", h_shape)], inits, name="rnn", opset=14)


def test_a_recurrent_input_fed_with_too_few_axes_falls_back_to_its_leading_dim_and_errs_cleanly():
    s = StatefulSession(rnn(["T", "B", 1], [1, "N", 1]))
    assert s.initial_state({"x": np.ones((4, 3, 1), np.float32)})["h0"].shape == (1, 3, 1)  # the batch axis
    assert s.initial_state({"x": np.ones(4, np.float32)})["h0"].shape == (1, 4, 1)  # no axis 1: the leading dim
    with pytest.raises(StateError, match=re.escape("rnn: the first call failed with state shapes rnnir had to guess (h0: dim 1 = 4 (leading dim of 'x'))")):
        s.run_dict({"x": np.ones(4, np.float32)})


def test_a_slot_the_caller_must_fill_asks_for_its_state_at_the_first_call():
    m = build([helper.make_node("Add", ["h0", "x"], ["hn"])], [vi("x", [2]), vi("h0", [2])], [vi("hn", [2])], name="given", opset=14)
    program = rnnir.load(m)
    (pair,) = program.state_pairs
    pair.slot.init = SlotInit("caller")  # this state has no initial value: the caller brings it
    s = StatefulSession(program)
    with pytest.raises(StateError, match=re.escape("given: state input 'h0' has no initial value; pass it in the first call's feeds")):
        s.run_dict({"x": np.ones(2, np.float32)})
    with pytest.raises(StateError, match="has no initial value"):
        s.initial_state()
    assert val(s.run_dict({"x": np.ones(2, np.float32), "h0": np.array([5, 6], np.float32)})["hn"]) == [6.0, 7.0]
    assert val(s.run_dict({"x": np.ones(2, np.float32)})["hn"]) == [7.0, 8.0]


def test_a_zeros_init_starts_from_zeros_whatever_value_it_carries():
    m = build([helper.make_node("Add", ["h0", "x"], ["hn"])], [vi("x", [2]), vi("h0", [2])], [vi("hn", [2])], name="zeros", opset=14)
    program = rnnir.load(m)
    (pair,) = program.state_pairs
    pair.slot.init = SlotInit("zeros", np.array([7.0, 8.0], np.float32))  # the kind decides; a stray value is ignored
    s = StatefulSession(program)
    assert val(s.initial_state()["h0"]) == [0.0, 0.0]
    assert val(s.run_dict({"x": np.ones(2, np.float32)})["hn"]) == [1.0, 1.0]
    pair.slot.init = SlotInit("constant", np.array([7.0, 8.0], np.float32))
    assert val(StatefulSession(program).run_dict({"x": np.ones(2, np.float32)})["hn"]) == [8.0, 9.0]


def test_a_dim_declared_0_is_not_a_fixed_size_but_resolved_like_a_symbol():
    # the session treats only a positive declared dim as fixed (as `state =` and a state file's check do): a 0 in a
    # state's declaration is resolved from the feeds, and a plain input declared [0, 2] has a dynamic leading dim
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "sx"], ["hn"])]
    s = StatefulSession(build(nodes, [vi("x", ["N", 2]), vi("h0", [0, 2])], [vi("hn", [0, 2])], name="zero"))
    assert s.initial_state({"x": np.ones((3, 2), np.float32)})["h0"].shape == (3, 2)
    t = StatefulSession(build(nodes, [vi("x", [0, 2]), vi("h0", ["M", 2])], [vi("hn", ["M", 2])], name="zero"))
    assert t.initial_state({"x": np.ones((0, 2), np.float32)})["h0"].shape == (0, 2)  # x's leading dim, though 0
