"""Lowering walks what it needs once, and only when it needs it: the dataflow only when names leave a pairing
undecided, its links only from inputs left over, a layout walk from a recurrent initial state once, a recurrence
kind's ports once.  Each fast path next to the walk it avoids gives the same answer; expected values are read off
the hand-built models."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.ir.nodes import PendingConst
from rnnir.ir.pairs import PairSource
from rnnir.ir.recurrence import KINDS
from rnnir.lower.dataflow import Dataflow, layout_sources
from rnnir.lower.pairing import _name_candidates, find_pairs
from rnnir.lower.scope import ModelIndex
from rnnir.lower.tensors import SMALL_CONST, small_const
from tests.support.onnx_models import const, model, vi

H, I = 2, 1


def _gru(state_in: str, state_out: str, *, x_input: bool = True):
    """x -> GRU (initial_h = ``state_in``, Y_h = ``state_out``) and y = Identity(x); x is a graph input, or a
    constant when not ``x_input`` (then the state is the only input)."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", state_in], ["", state_out], hidden_size=H, name="gru"), helper.make_node("Identity", ["x"], ["y"])]
    weights = [const("W", rng.standard_normal((1, 3 * H, I)).astype(np.float32)), const("R", rng.standard_normal((1, 3 * H, H)).astype(np.float32))]
    inputs = [vi(state_in, [1, 1, H])]
    if x_input:
        inputs.insert(0, vi("x", ["T", 1, I]))
    else:
        weights.append(const("x", np.ones((1, 1, I), dtype=np.float32)))
    return model(nodes, inputs, [vi("y", ["T", 1, I]), vi(state_out, [1, 1, H])], weights)


class _Counted:
    """A dataflow maker that counts its calls."""

    def __init__(self, m) -> None:
        self.index = ModelIndex(m, "m")
        self.calls = 0

    def __call__(self) -> Dataflow:
        self.calls += 1
        return Dataflow(self.index)


def test_the_dataflow_is_made_only_when_names_leave_an_input_and_an_output_over_and_then_once():
    # state -> stateN by name, and y is the only output left: no input is left to link, none to place
    m = _gru("state", "stateN", x_input=False)
    maker = _Counted(m)
    pairs = find_pairs(m, label="m", dataflow=maker)
    assert [(p.input, p.output, p.source) for p in pairs] == [("state", "stateN", PairSource.NAME)]
    assert maker.calls == 0
    # x and y are left over: the links are asked for (none starts from x), once
    m = _gru("state", "stateN")
    maker = _Counted(m)
    assert [(p.input, p.output) for p in find_pairs(m, label="m", dataflow=maker)] == [("state", "stateN")]
    assert maker.calls == 1
    # plain names: state_flows for the name rule, then links, then position: still one dataflow
    m = _gru("foo", "bar")
    maker = _Counted(m)
    assert [(p.input, p.output, p.source) for p in find_pairs(m, label="m", dataflow=maker)] == [("foo", "bar", PairSource.DATAFLOW)]
    assert maker.calls == 1


def test_position_asks_the_dataflow_which_left_overs_stream_a_sequence():
    # inputs x, s; outputs y, t = Squeeze(GRU(s).Y): no name rule pairs s with t, and both stream the GRU's
    # sequence; position would pair them (same [1, 1, 2] type), as it does with no dataflow to ask
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("GRU", ["s", "W", "R"], ["Y", ""], hidden_size=2, name="gru"),
        helper.make_node("Squeeze", ["Y", "one"], ["t"]),
        helper.make_node("Identity", ["x"], ["y"]),
    ]
    inits = [const("W", rng.standard_normal((1, 6, 2)).astype(np.float32)), const("R", rng.standard_normal((1, 6, 2)).astype(np.float32)), const("one", np.array([1]))]
    m = model(nodes, [vi("x", [1, 1, 2]), vi("s", [1, 1, 2])], [vi("y", [1, 1, 2]), vi("t", [1, 1, 2])], inits)
    maker = _Counted(m)
    assert find_pairs(m, label="m", dataflow=maker) == []
    assert maker.calls == 1
    assert [(p.input, p.output, p.source) for p in find_pairs(m, label="m", dataflow=lambda: None)] == [("s", "t", PairSource.POSITION)]


def test_links_from_inputs_no_state_starts_from_walk_no_output():
    m = _gru("foo", "bar")
    flow = Dataflow(ModelIndex(m, "m"))
    assert flow.links_from({"x"}) == ()
    assert "_ends" not in vars(flow)  # the outputs were not walked
    (link,) = flow.links_from({"x", "foo"})
    assert (link.input, link.output) == ("foo", "bar")
    assert [(k.input, k.output) for k in flow.links] == [("foo", "bar")]
    assert flow.links_from({"bar"}) == ()  # an output's name is no input


def test_a_layout_walk_is_made_once_per_name_and_agrees_with_the_walk_itself():
    m = _gru("state", "stateN")
    index = ModelIndex(m, "m")
    flow = Dataflow(index)
    first = flow.sources_of(index.root, "state")
    assert first == layout_sources(index, index.root, "state") == ["state"]
    assert flow.sources_of(index.root, "state") is first
    assert flow.sources_of(index.root, "W") == []  # an initializer is no graph input


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_kinds_ports_are_where_its_port_lists_put_them(name):
    kind = KINDS[name]
    for k, port in enumerate(kind.inputs):
        assert kind.input_index(port) == k
    for k, port in enumerate(kind.outputs):
        assert kind.output_index(port) == k
    assert kind.input_index("Y_h") is None and kind.output_index("initial_h") is None and kind.input_index("nope") is None
    # sequence_lens is input 4 of every kind, initial_h 5, initial_c 6 (an LSTM's)
    assert kind.state_inputs == ((4, 5, 6) if len(kind.states) == 2 else (4, 5))
    assert kind.entries == tuple(["initial_h", "initial_c"][: len(kind.states)])
    assert kind.exits == tuple(["Y_h", "Y_c"][: len(kind.states)])


def test_a_small_constant_waits_for_its_array_and_a_large_one_has_none():
    small = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "s")
    c = small_const(small)
    assert isinstance(c, PendingConst) and c.dims == (2, 3) and c.ints() == [0, 1, 2, 3, 4, 5]
    big = numpy_helper.from_array(np.zeros(SMALL_CONST + 1, dtype=np.float32), "b")
    assert small_const(big) is None
    edge = numpy_helper.from_array(np.zeros(SMALL_CONST, dtype=np.float32), "e")
    assert isinstance(small_const(edge), PendingConst)
    # raw data one element short: not surely convertible, and numpy refuses it too
    bad = numpy_helper.from_array(np.zeros(3, dtype=np.float32), "bad")
    bad.raw_data = bad.raw_data[:-4]
    assert small_const(bad) is None


def _io_only(inputs: list[str], outputs: list[str]):
    """A model whose outputs are Neg of its first input (only its inputs' and outputs' names matter to pairing)."""
    nodes = [helper.make_node("Neg", [inputs[0]], [o]) for o in outputs]
    return model(nodes, [vi(i, [1, 1, H]) for i in inputs], [vi(o, [1, 1, H]) for o in outputs])


def test_no_dataflow_is_made_for_left_overs_nothing_could_pair_with():
    # k (a plain name) has no candidate among the outputs, stateN_prev (plain too) names stateN, which state took
    # first; no output is left for a link, none but the first for position: the dataflow is never asked
    m = _io_only(["state", "stateN_prev", "k"], ["stateN"])
    maker = _Counted(m)
    assert [(p.input, p.output, p.source) for p in find_pairs(m, label="m", dataflow=maker)] == [("state", "stateN", PairSource.NAME)]
    assert maker.calls == 0
    # every input paired, an output left over (y, after the first): nothing for a link or position to pair it with
    m = _io_only(["state"], ["stateN", "y"])
    maker = _Counted(m)
    assert [(p.input, p.output) for p in find_pairs(m, label="m", dataflow=maker)] == [("state", "stateN")]
    assert maker.calls == 0


def test_name_candidates_are_each_tried_once_in_the_rules_order():
    # the state rule's templates, then the generic suffixes and prefixes it has not given already
    assert _name_candidates("state") == [
        "stateN", "state_n", "state_out", "new_state", "next_state", "stateOut", "out_state",
        "staten", "state_next", "state_new", "state_final", "state_output",
    ]
    # h0 matches both h0 rules: hn and hN come once
    assert _name_candidates("h0") == [
        "hn", "hN", "hout", "h_final", "h_out", "h0_out", "h0_n", "h0n", "h0N", "h0_next", "h0_new", "h0_final", "h0_output",
        "new_h0", "next_h0", "out_h0",
    ]


def test_a_constant_with_a_negative_dim_is_read_at_once_not_left_pending():
    # no element count to test the size with (and no crash for it): numpy reads the empty data as it comes
    t = TensorProto()
    t.name, t.data_type = "neg", TensorProto.FLOAT
    t.dims.extend([-1])
    c = small_const(t)
    assert not isinstance(c, PendingConst) and c is not None and c.size == 0
