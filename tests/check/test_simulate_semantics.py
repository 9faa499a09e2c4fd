"""The simulator's own semantics, each against a hand-checkable number or onnx.reference.

The seed recurrence of tests/check/test_simulate.py: ``h_t = 0.5 h_{t-1} + x_t``; with x = 1, 0, 2 from h0 = 0 the
kept states are 1, 0.5, 2.25, a lost state gives 1, 0, 2 and a state one call stale 1, 0, 2.5.  What a store's
result is (token, alias, value), when a late store lands (a reader of its value, an order edge, an honoured
Return, else after the next call's loads), a slot's initial value, and the numpy op table (checked op by op
against onnx.reference, an independent implementation).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import rnnir
from rnnir.check.simulate import NO_TENSOR, Faults, SimulationError, Simulator, Token, run_calls
from rnnir.ir.attributes import OrderingLayer

KEPT = [1.0, 0.5, 2.25]
LOST = [1.0, 0.0, 2.0]
STALE = [1.0, 0.0, 2.5]
XS = [{"x": np.full((1, 1, 1), v, np.float32)} for v in (1, 0, 2)]


def _cell(b: rnnir.Builder, h0: rnnir.Value) -> rnnir.Value:
    x = b.input("x", "float32", (1, 1, 1))
    W = b.const("W", np.ones((1, 1, 1), np.float32))
    R = b.const("R", np.full((1, 1, 1), 0.5, np.float32))
    _, hn = b.recurrent("RNN", x, W, R, initial_h=h0, hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    return hn


def _scalar(x: object) -> float:
    return float(np.asarray(x).ravel()[0])


def seen_after_store(result: str, *, ordered: bool = False, load: str = "copy") -> rnnir.Program:
    """The slot store's result read by an Identity after the store: ``seen`` is what that reader got."""
    b = rnnir.Builder(f"seen_{result}")
    h = b.slot("h", "float32", (1, 1, 1))
    h0 = b.load(h, load)
    r = b.store(_cell(b, h0), h, result)
    seen = b.compute("Identity", [h0 if ordered else r], name="reader")
    if ordered:
        b.order(r, seen)
    b.store(seen, b.output("seen", "float32", (1, 1, 1)), "value")
    return b.build()


def returned_at(layer: str) -> rnnir.Program:
    """Correct fan-out whose Return (at ``layer``) waits for both stores."""
    b = rnnir.Builder(f"ret_{layer}")
    h = b.slot("h", "float32", (1, 1, 1))
    hn = _cell(b, b.load(h))
    s = b.store(hn, h)
    o = b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value")
    b.ret(s, o, layer=layer)
    return b.build()


def _values(sim: Simulator, output: str) -> list[object]:
    got = []
    for feed in XS:
        out = sim.run(feed)[output]
        got.append(out if out is NO_TENSOR else _scalar(out))
    return got


# -- when a late store lands -------------------------------------------------------------------------


def test_a_late_store_lands_before_a_reader_of_its_value_but_not_before_a_reader_of_its_alias():
    # VALUE: the reader needs the stored tensor, so the store lands first; the reader sees the new state
    assert _values(Simulator(seen_after_store("value"), Faults(late=True)), "seen") == KEPT
    # ALIAS: the slot memory is usable at once, before the write lands: a late store leaves the reader the old state
    assert _values(Simulator(seen_after_store("alias"), Faults(late=True)), "seen") == [0.0, 1.0, 0.5]
    assert _values(Simulator(seen_after_store("alias")), "seen") == KEPT  # on time: the write is in the memory
    # TOKEN: no tensor for the reader, which is a clear error
    with pytest.raises(SimulationError, match="token, not a tensor"):
        Simulator(seen_after_store("token")).run(XS[0])


def test_a_late_store_lands_before_a_node_an_order_edge_puts_after_it():
    # the reader holds a VIEW of the slot: ordered after the (late) store, it sees the new state
    assert _values(Simulator(seen_after_store("token", ordered=True, load="view"), Faults(late=True)), "seen") == KEPT
    # a COPY load ordered the same way keeps the old state: the order edge lands the write, the copy does not see it
    assert _values(Simulator(seen_after_store("token", ordered=True), Faults(late=True)), "seen") == [0.0, 1.0, 0.5]


def test_a_return_waits_for_its_stores_only_at_an_honoured_layer():
    for layer in ("runtime", "device", "caller"):
        sim = Simulator(returned_at(layer), Faults(late=True))
        assert _values(sim, "hn") == KEPT, layer
        assert not sim.events_of("landed-next-call"), layer
    for layer in OrderingLayer:
        honour = frozenset(OrderingLayer) - {layer}
        sim = Simulator(returned_at(layer.value), Faults(late=True, honour=honour))
        assert _values(sim, "hn") == STALE, layer
        landed = sim.events_of("landed-next-call")
        assert [(e.call, e.node, e.detail) for e in landed] == [
            (1, landed[0].node, "store to 'h' from call 0"),
            (2, landed[0].node, "store to 'h' from call 1"),
        ]


def test_faults_validate_and_normalise_their_fields():
    with pytest.raises(ValueError, match="schedule must be"):
        Faults(schedule="random")
    for schedule in ("program", "stores-first", "stores-last"):
        assert Faults(schedule=schedule).schedule == schedule
    f = Faults(late=["h"], drop=["g"])  # type: ignore[arg-type]  # any iterable of names
    assert f.late == frozenset({"h"}) and f.drop == frozenset({"g"})
    assert Faults(late=True).late is True and Faults().late is False and Faults().drop == frozenset()
    assert Faults().honour == frozenset({OrderingLayer.RUNTIME, OrderingLayer.DEVICE, OrderingLayer.CALLER})
    h = rnnir.Builder("x").slot("h")
    assert Faults(late=True).is_late(h) and Faults(late={"h"}).is_late(h)
    assert not Faults().is_late(h) and not Faults(late={"g"}).is_late(h) and not Faults(late=frozenset()).is_late(h)
    with pytest.raises(SimulationError, match=r"\['nope'\]"):
        Simulator(returned_at("runtime"), Faults(late={"nope"}))
    Simulator(returned_at("runtime"), Faults(late={"h"}, drop={"h"}))  # names it has: accepted


def test_default_faults_are_none():
    assert _values(Simulator(returned_at("runtime")), "hn") == KEPT
    assert _values(Simulator(returned_at("runtime"), None), "hn") == KEPT
    sim = Simulator(returned_at("runtime"))
    sim.run(XS[0])
    assert sim.events == [] and sim.calls == 1


def test_reset_discards_a_pending_late_store():
    b = rnnir.Builder("no_wait")
    h = b.slot("h", "float32", (1, 1, 1))
    hn = _cell(b, b.load(h))
    b.store(hn, h)
    b.ret(b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value"))
    sim = Simulator(b.build(), Faults(late=True))
    sim.run(XS[0])
    assert sim.state == {"h": np.zeros((1, 1, 1), np.float32)} or _scalar(sim.state["h"]) == 0.0  # not landed yet
    sim.reset()
    assert sim.state == {}
    assert _scalar(sim.run(XS[2])["hn"]) == 2.0  # from zero: the pending 1 never landed
    assert not sim.events_of("landed-next-call")


# -- state, memory and events ---------------------------------------------------------------------


def test_state_is_a_copy_and_memory_is_the_storage():
    sim = Simulator(returned_at("runtime"))
    sim.run(XS[0])
    snap = sim.state
    assert list(snap) == ["h"] and _scalar(snap["h"]) == 1.0
    snap["h"][...] = 7
    assert _scalar(sim.memory("h")) == 1.0
    sim.memory("h")[...] = 4  # writing the storage is what the next call starts from
    assert _scalar(sim.run(XS[1])["hn"]) == 2.0
    assert _scalar(sim.state["h"]) == 2.0


def test_dropped_and_token_stores_are_recorded_call_by_call():
    b = rnnir.Builder("tok")
    h = b.slot("h", "float32", (1, 1, 1))
    g = b.slot("g", "float32", (1, 1, 1))
    hn = _cell(b, b.load(h))
    tok = b.store(hn, h)
    b.store(tok, g)  # a store of a token to a slot: nothing to write
    b.store(tok, b.output("o", "float32", (1, 1, 1)), "value")
    sim = Simulator(b.build(), Faults(drop={"h"}))
    outs = [sim.run(f) for f in XS]
    assert all(o["o"] is NO_TENSOR for o in outs)
    assert [(e.call, e.detail) for e in sim.events_of("dropped-store")] == [(k, "store to slot 'h' never lands") for k in range(3)]
    assert [(e.call, e.detail) for e in sim.events_of("no-tensor")] == [
        (k, d) for k in range(3) for d in ("store to slot 'g' reads a token, not a tensor", "output 'o' receives a token, not a tensor")
    ]
    assert _scalar(sim.state["h"]) == 0.0 and "g" not in sim.state  # g was never written nor loaded


def test_a_dropped_store_to_an_output_that_is_a_slots_storage_never_lands():
    b = rnnir.Builder("reuse")
    out = b.output("hn", "float32", (1, 1, 1))
    h = b.slot("h", "float32", (1, 1, 1), alias_of=out)
    b.store(_cell(b, b.load(h)), out, "value")
    sim = Simulator(b.build(), Faults(drop={"h"}))
    assert _values(sim, "hn") == [0.0, 0.0, 0.0]
    assert [e.detail for e in sim.events_of("dropped-store")] == ["store to 'hn' (slot 'h''s storage) never lands"] * 3
    kept = Simulator(b.build())
    assert _values(kept, "hn") == KEPT and kept.memory("h") is kept.run(XS[0])["hn"]


def test_token_and_no_tensor_print_as_what_they_are():
    assert repr(Token("store_1")) == "<token of store_1>"
    assert repr(NO_TENSOR) == "NO_TENSOR"
    assert type(NO_TENSOR)() is NO_TENSOR  # one sentinel: `is NO_TENSOR` is how callers test for it


def test_run_calls_copies_each_output_as_it_was_at_return():
    b = rnnir.Builder("reuse")
    out = b.output("hn", "float32", (1, 1, 1))
    h = b.slot("h", "float32", (1, 1, 1), alias_of=out)
    b.store(_cell(b, b.load(h)), out, "value")
    got = run_calls(b.build(), XS)
    assert [_scalar(o["hn"]) for o in got] == KEPT  # the buffer itself would read 2.25 three times
    lost = run_calls(b.build(), XS, Faults(drop={"h"}))
    assert [_scalar(o["hn"]) for o in lost] == [0.0, 0.0, 0.0]
    assert run_calls(seen_after_store("token", ordered=True, load="view"), XS, Faults(late=True))[2]["seen"].ravel().tolist() == [2.25]


# -- initial values --------------------------------------------------------------------------------


def _accumulate(init: object = "zeros", shape: tuple | None = (2,), dtype: str = "float32") -> rnnir.Program:
    b = rnnir.Builder("acc")
    h = b.slot("h", dtype, shape, init)  # type: ignore[arg-type]
    s = b.compute("Add", [b.load(h), b.input("x", dtype, (2,))])
    b.store(s, h)
    b.store(s, b.output("s", dtype, (2,)), "value")
    return b.build()


def test_a_slots_initial_value_zeros_constant_fed_or_caller():
    one = {"x": np.ones(2, np.float32)}
    assert Simulator(_accumulate()).run(one)["s"].tolist() == [1.0, 1.0]
    zeros = Simulator(_accumulate(dtype="int64")).run({"x": np.ones(2, np.int64)})["s"]
    assert zeros.dtype == np.int64 and zeros.tolist() == [1, 1]
    init = np.array([3.0, 5.0], np.float32)
    sim = Simulator(_accumulate(init))
    assert sim.run(one)["s"].tolist() == [4.0, 6.0] and init.tolist() == [3.0, 5.0]  # the program's constant is not written
    assert Simulator(_accumulate(init)).run(one)["s"].tolist() == [4.0, 6.0]
    fed = np.array([10.0, 20.0], np.float32)
    sim = Simulator(_accumulate(init))
    assert sim.run({**one, "h": fed})["s"].tolist() == [11.0, 21.0]  # a fed initial value wins over the constant
    assert fed.tolist() == [10.0, 20.0]  # and is copied, not written
    assert sim.run({**one, "h": fed})["s"].tolist() == [12.0, 22.0]  # only at the first call: then the slot is kept
    with pytest.raises(SimulationError, match="initialised by the caller"):
        Simulator(_accumulate("caller")).run(one)
    assert Simulator(_accumulate("caller")).run({**one, "h": fed})["s"].tolist() == [11.0, 21.0]
    for shape in (None, ("N",), (2, None)):
        with pytest.raises(SimulationError, match="feed its initial value as 'h'"):
            Simulator(_accumulate(shape=shape)).run(one)  # type: ignore[arg-type]
    assert Simulator(_accumulate(shape=("N",))).run({**one, "h": np.zeros(2, np.float32)})["s"].tolist() == [1.0, 1.0]


def test_a_slot_whose_value_changes_shape_is_replaced_and_one_that_keeps_it_written_in_place():
    b = rnnir.Builder("grow")
    h = b.slot("h", "float32", ("N",))
    view = b.load(h, "view")
    grown = b.compute("Concat", [view, b.input("x", "float32", (1,))], attributes={"axis": 0})
    b.store(grown, h)
    b.store(grown, b.output("s", "float32", ("N",)), "value")
    sim = Simulator(b.build())
    got = [sim.run({"x": np.array([v], np.float32), **({"h": np.zeros(0, np.float32)} if v == 1 else {})})["s"].tolist() for v in (1, 2, 3)]
    assert got == [[1.0], [1.0, 2.0], [1.0, 2.0, 3.0]]
    held = sim.memory("h")
    sim2 = Simulator(returned_at("runtime"))
    sim2.run(XS[0])
    storage = sim2.memory("h")
    sim2.run(XS[1])
    assert sim2.memory("h") is storage and _scalar(storage) == 0.5  # same shape: written in place
    assert held.tolist() == [1.0, 2.0, 3.0]


# -- If branches and poisoned values ---------------------------------------------------------------


def _in_branch(v: rnnir.Value, branch: str) -> None:
    node = v.producer
    node.provenance = dataclasses.replace(node.provenance, branch=(branch,))


def branching() -> rnnir.Program:
    """out = If(c, then: Gather(t, i) (fails for i out of range), else: Neg(t))."""
    b = rnnir.Builder("branches")
    t = b.input("t", "float32", (3,))
    c = b.input("c", "bool", ())
    i = b.input("i", "int64", ())
    picked = b.compute("Gather", [t, i])
    _in_branch(picked, "then_branch")
    neg = b.compute("Neg", [t])
    _in_branch(neg, "else_branch")
    twice = b.compute("Add", [picked, picked])  # a branch node reading a failed value: poisoned too
    _in_branch(twice, "then_branch")
    then_value = b.compute("Identity", [twice])
    _in_branch(then_value, "then_branch")
    out = b.if_(c, [then_value], [b.compute("ReduceSum", [neg], attributes={"keepdims": 0})])
    b.store(b.compute("Identity", [out]), b.output("out", "float32", None), "value")  # a main-graph reader of the If
    return b.build()


def test_an_if_picks_its_branch_and_a_failure_in_the_branch_not_taken_is_harmless():
    t = np.array([1.0, 2.0, 4.0], np.float32)
    assert float(Simulator(branching()).run({"t": t, "c": np.array(True), "i": np.array(2)})["out"]) == 8.0
    assert float(Simulator(branching()).run({"t": t, "c": np.array(False), "i": np.array(2)})["out"]) == -7.0
    assert float(Simulator(branching()).run({"t": t, "c": np.array([False, True]), "i": np.array(9)})["out"]) == -7.0
    with pytest.raises(SimulationError, match="If branch that failed"):
        Simulator(branching()).run({"t": t, "c": np.array(True), "i": np.array(9)})


def test_an_if_whose_condition_failed_is_a_clear_error_and_so_is_a_failure_outside_a_branch():
    b = rnnir.Builder("cond")
    t = b.input("t", "float32", (3,))
    cond = b.compute("Gather", [b.input("flags", "bool", (2,)), b.input("i", "int64", ())])
    _in_branch(cond, "then_branch")
    out = b.if_(cond, [t], [b.compute("Neg", [t])])
    b.store(out, b.output("out", "float32", (3,)), "value")
    feeds = {"t": np.ones(3, np.float32), "flags": np.array([True, False])}
    assert Simulator(b.build()).run({**feeds, "i": np.array(1)})["out"].tolist() == [-1.0, -1.0, -1.0]
    with pytest.raises(SimulationError, match="its condition failed"):
        Simulator(b.build()).run({**feeds, "i": np.array(5)})
    b = rnnir.Builder("main")
    t = b.input("t", "float32", (3,))
    b.store(b.compute("Gather", [t, b.input("i", "int64", ())]), b.output("out", "float32", ()), "value")
    with pytest.raises(SimulationError, match=r"\(Gather\) failed"):
        Simulator(b.build()).run({"t": np.ones(3, np.float32), "i": np.array(7)})


def test_a_recurrence_kind_the_reference_cannot_run_is_refused_up_front():
    from rnnir.semantics import reference

    assert reference.supports("GRU") and reference.supports("LSTM")


# -- the numpy op table against onnx.reference ----------------------------------------------------

_A = np.array([[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]], np.float32)
_B = np.array([[0.5, 4.0, -0.5], [2.0, -0.25, 8.0]], np.float32)
#: (op, inputs, attributes): every entry of the simulator's numpy table, the shapes that tell its arguments apart
_OP_CASES: list[tuple[str, list[np.ndarray | None], dict]] = [
    ("Identity", [_A], {}),
    ("Add", [_A, _B], {}),
    ("Sub", [_A, _B], {}),
    ("Mul", [_A, _B], {}),
    ("Div", [_A, _B], {}),
    ("Neg", [_A], {}),
    ("Tanh", [_A], {}),
    ("Sigmoid", [_A], {}),
    ("Relu", [_A], {}),
    ("MatMul", [_A, _B.T.copy()], {}),
    ("MatMul", [_B.T.copy(), _A], {}),
    ("Concat", [_A, _B], {"axis": 1}),
    ("Concat", [_A, _B], {"axis": 0}),
    ("Concat", [_A, _B], {}),
    ("Gather", [_A, np.array([2, 0], np.int64)], {"axis": 1}),
    ("Gather", [_A, np.array([1], np.int64)], {}),
    ("Squeeze", [_A[None, :, None]], {}),
    ("Squeeze", [_A[None, :, None], np.array([0], np.int64)], {}),
    ("Squeeze", [_A[None, :, None], np.array([-2, 0], np.int64)], {}),
    ("Squeeze", [_A[None, :, None], np.array([2], np.int64)], {}),
    ("Unsqueeze", [_A, np.array([0], np.int64)], {}),
    ("Unsqueeze", [_A, np.array([-1], np.int64)], {}),
    ("Unsqueeze", [_A, np.array([3, 0], np.int64)], {}),
    ("Unsqueeze", [_A, np.array([1, -1], np.int64)], {}),
]


def _reference(op: str, ins: list, attrs: dict, opset: int) -> np.ndarray:
    names = [f"in{k}" for k in range(len(ins))]
    node = helper.make_node(op, names, ["out"], **attrs)
    return ReferenceEvaluator(node, opsets={"": opset}).run(None, dict(zip(names, ins)))[0]


def test_every_op_of_the_numpy_table_computes_what_onnx_reference_does():
    for op, ins, attrs in _OP_CASES:
        b = rnnir.Builder(op)
        vals = [b.const(f"c{k}", x) for k, x in enumerate(ins)]
        y = b.compute(op, vals, attributes=dict(attrs))
        b.store(y, b.output("y", None, None), "value")
        got = Simulator(b.build()).run({})["y"]
        want = _reference(op, ins, attrs or ({"axis": 0} if op == "Concat" else {}), 21)
        assert got.shape == want.shape and np.allclose(got, want, rtol=1e-6), (op, attrs, got, want)


def test_squeeze_and_unsqueeze_read_their_axes_from_the_attribute_before_opset_13():
    for op, x, axes, shape in (("Squeeze", _A[None, :, None], [2], (1, 2, 3)), ("Unsqueeze", _A, [0, -1], (1, 2, 3, 1))):
        b = rnnir.Builder(op)
        y = b.compute(op, [b.const("x", x)], attributes={"axes": axes})
        b.store(y, b.output("y", None, None), "value")
        got = Simulator(b.build()).run({})["y"]
        assert got.shape == shape and np.array_equal(got.reshape(_A.shape), _A)


def test_concat_skips_missing_operands_and_identity_copies():
    b = rnnir.Builder("concat")
    x = b.input("x", "float32", (2,))
    b.store(b.compute("Concat", [x, None, x], attributes={"axis": 0}), b.output("y", None, None), "value")
    ident = b.compute("Identity", [x])
    b.store(ident, b.output("z", None, None), "value")
    feed = np.array([1.0, 2.0], np.float32)
    out = Simulator(b.build()).run({"x": feed})
    assert out["y"].tolist() == [1.0, 2.0, 1.0, 2.0]
    out["z"][...] = 0
    assert feed.tolist() == [1.0, 2.0]


# -- schedules, storage identity, stores of values from outside ----------------------------------------


def reader_after_store() -> rnnir.Program:
    """A VIEW load read by an Identity the program lists after the slot store (``h_prev``: the state before the call?)."""
    b = rnnir.Builder("reader_after")
    h = b.slot("h", "float32", (1, 1, 1))
    v = b.load(h, "view")
    hn = _cell(b, v)
    b.store(hn, h)
    prev = b.compute("Identity", [v], name="previous_state")
    b.store(prev, b.output("h_prev", "float32", (1, 1, 1)), "value")
    b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value")
    return b.build()


def test_the_schedule_decides_where_a_slot_store_runs_among_independent_nodes():
    # program order: the store runs before the reader of the view, which sees the new state
    assert _values(Simulator(reader_after_store()), "h_prev") == KEPT
    assert _values(Simulator(reader_after_store(), Faults(schedule="stores-first")), "h_prev") == KEPT
    # stores last: the reader runs first and sees the state the call started from
    assert _values(Simulator(reader_after_store(), Faults(schedule="stores-last")), "h_prev") == [0.0, 1.0, 0.5]
    for schedule in ("program", "stores-first", "stores-last"):
        assert _values(Simulator(reader_after_store(), Faults(schedule=schedule)), "hn") == KEPT


def test_a_slot_aliasing_another_shares_its_storage_and_an_alias_cycle_still_resolves():
    b = rnnir.Builder("alias")
    h = b.slot("h", "float32", (1, 1, 1))
    g = b.slot("g", "float32", (1, 1, 1), alias_of=h)
    hn = _cell(b, b.load(g))
    b.store(hn, h)
    b.store(hn, b.output("hn", "float32", (1, 1, 1)), "value")
    prog = b.build()
    sim = Simulator(prog)
    assert _values(sim, "hn") == KEPT  # g reads what h was written: one storage
    assert sim.memory("g") is sim.memory("h")
    assert {k: _scalar(v) for k, v in sim.state.items()} == {"h": 2.25, "g": 2.25}
    h.alias_of = g  # a cycle (no valid program has one): the walk stops instead of looping
    assert _scalar(Simulator(prog).run(XS[0])["hn"]) == 1.0


def test_a_slot_written_but_never_loaded_and_values_stored_straight_from_outside():
    b = rnnir.Builder("outside")
    g = b.slot("g", None, (2,))
    x = b.input("x", "float32", (2,))
    b.store(x, g)
    b.store(x, b.output("echo", "float32", (2,)), "value")
    b.store(b.const("k", np.array([5, 6], np.int64)), b.output("k_out", "int64", (2,)), "value")
    sim = Simulator(b.build())
    out = sim.run({"x": np.array([1.0, 2.0], np.float32)})
    assert out["echo"].tolist() == [1.0, 2.0] and out["k_out"].tolist() == [5, 6]
    assert sim.state["g"].tolist() == [1.0, 2.0]
    # a slot that has no dtype starts from float32 zeros
    b = rnnir.Builder("untyped")
    h = b.slot("h", None, (2,))
    b.store(b.load(h), b.output("h0", None, (2,)), "value")
    first = Simulator(b.build()).run()["h0"]
    assert first.dtype == np.float32 and first.tolist() == [0.0, 0.0]


def test_a_late_store_to_a_slot_nobody_loaded_makes_its_storage_at_once():
    b = rnnir.Builder("late_unloaded")
    g = b.slot("g", "float32", (2,))
    r = b.store(b.input("x", "float32", (2,)), g, "alias")
    b.store(b.compute("Identity", [r]), b.output("seen", "float32", (2,)), "value")
    sim = Simulator(b.build(), Faults(late=True))
    assert sim.run({"x": np.array([3.0, 4.0], np.float32)})["seen"].tolist() == [0.0, 0.0]  # storage, not yet written
    assert sim.state["g"].tolist() == [3.0, 4.0]  # the Return waited for it


def test_the_result_of_a_store_to_an_output_is_that_outputs_buffer():
    b = rnnir.Builder("reuse_alias")
    out = b.output("hn", "float32", (1, 1, 1))
    h = b.slot("h", "float32", (1, 1, 1), alias_of=out)
    r = b.store(_cell(b, b.load(h)), out, "alias")
    b.store(r, b.output("again", "float32", (1, 1, 1)), "value")
    sim = Simulator(b.build())
    got = sim.run(XS[0])
    assert got["again"] is sim.memory("h") and got["hn"] is sim.memory("h")
    # the value result of a store of a token is no tensor: a reader of it is refused
    b = rnnir.Builder("token_value")
    h = b.slot("h", "float32", (1, 1, 1))
    tok = b.store(_cell(b, b.load(h)), h)
    r = b.store(tok, b.output("o", "float32", (1, 1, 1)), "value")
    b.store(b.compute("Identity", [r]), b.output("p", "float32", (1, 1, 1)), "value")
    with pytest.raises(SimulationError, match="token, not a tensor"):
        Simulator(b.build()).run(XS[0])


def test_an_op_of_another_domain_is_never_taken_for_the_standard_op_of_that_name():
    for op in ("Relu", "Softsign"):
        b = rnnir.Builder("custom")
        b.store(b.compute(op, [b.input("x", "float32", (2,))], domain="com.example"), b.output("y", None, None), "value")
        with pytest.raises(SimulationError, match="onnx.reference cannot run"):
            Simulator(b.build()).run({"x": np.ones(2, np.float32)})


def test_an_op_outside_the_table_with_two_inputs_runs_through_onnx_reference_call_after_call():
    b = rnnir.Builder("pow")
    b.store(b.compute("Pow", [b.input("x", "float32", (2,)), b.const("e", np.array([3.0, 0.5], np.float32))]), b.output("y", None, None), "value")
    sim = Simulator(b.build())
    assert sim.run({"x": np.array([2.0, 9.0], np.float32)})["y"].tolist() == [8.0, 3.0]
    assert sim.run({"x": np.array([-1.0, 4.0], np.float32)})["y"].tolist() == [-1.0, 2.0]


def test_an_error_inside_a_branch_that_is_the_simulators_own_is_not_taken_for_a_failed_branch():
    b = rnnir.Builder("branch_custom")
    t = b.input("t", "float32", (2,))
    bad = b.compute("Softsign", [t], domain="com.example")
    _in_branch(bad, "then_branch")
    out = b.if_(b.input("c", "bool", ()), [bad], [t])
    b.store(b.compute("Identity", [out]), b.output("out", "float32", (2,)), "value")
    with pytest.raises(SimulationError, match="onnx.reference cannot run"):
        Simulator(b.build()).run({"t": np.ones(2, np.float32), "c": np.array(False)})


def test_a_failed_branch_value_read_outside_the_branch_names_what_failed():
    t = np.array([1.0, 2.0, 4.0], np.float32)
    with pytest.raises(SimulationError, match=r"If branch that failed: .*index"):
        Simulator(branching()).run({"t": t, "c": np.array(True), "i": np.array(9)})


# -- values the lowering leaves off the state path ---------------------------------------------------


def _off_path_model(extra_contrib: bool) -> object:
    """The seed recurrence of x2 = x * 2 (computed off the state path); optionally an unrelated contrib output."""
    from onnx import TensorProto, numpy_helper

    nodes = [helper.make_node("Mul", ["x", "two"], ["x2"]),
             helper.make_node("RNN", ["x2", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1, activations=["Affine"],
                              activation_alpha=[1.0], activation_beta=[0.0])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 1]), helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, 1, 1])]
    if extra_contrib:
        nodes.append(helper.make_node("FastGelu", ["x"], ["g"], domain="com.microsoft"))
        outputs.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 1, 1]))
    graph = helper.make_graph(
        nodes, "offpath",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 1, 1])],
        outputs,
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R"),
         numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    imports = [helper.make_opsetid("", 14)] + ([helper.make_opsetid("com.microsoft", 1)] if extra_contrib else [])
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = 8
    return m


def test_a_value_computed_off_the_state_path_comes_from_onnx_reference_over_the_source_model():
    # x doubled: 2, 0, 4 -> h = 2, 1, 4.5
    for contrib in (False, True):  # an op onnx.reference cannot run, that the off-path value does not need, is left out
        sim = Simulator(rnnir.load(_off_path_model(contrib)))
        assert [_scalar(sim.run(f)["hn"]) for f in XS] == [2.0, 1.0, 4.5], contrib


def test_a_reader_of_a_stores_value_lands_it_for_the_view_readers_after_it():
    b = rnnir.Builder("value_lands")
    h = b.slot("h", "float32", (1, 1, 1))
    v = b.load(h, "view")
    r = b.store(_cell(b, v), h, "value")
    b.store(b.compute("Identity", [r]), b.output("hn", "float32", (1, 1, 1)), "value")
    b.store(b.compute("Identity", [v]), b.output("seen", "float32", (1, 1, 1)), "value")  # listed after the value's reader
    sim = Simulator(b.build(), Faults(late=True))
    assert _values(sim, "seen") == KEPT  # the view shows the write the value's reader waited for


def test_a_constant_initial_value_takes_the_slots_dtype_and_only_a_constant_kind_uses_its_value():
    from rnnir.ir import SlotInit

    prog = _accumulate(np.array([3, 5], np.int64))  # integers for a float32 slot
    got = Simulator(prog).run({"x": np.ones(2, np.float32)})["s"]
    assert got.dtype == np.float32 and got.tolist() == [4.0, 6.0]
    prog.slot("h").init = SlotInit("zeros", np.array([7.0, 8.0], np.float32))  # a stray value: the kind decides
    assert Simulator(prog).run({"x": np.ones(2, np.float32)})["s"].tolist() == [1.0, 1.0]


def test_an_if_with_two_outputs_yields_each_from_the_branch_it_picks():
    b = rnnir.Builder("if2")
    t = b.input("t", "float32", (2,))
    c = b.input("c", "bool", ())
    neg = b.compute("Neg", [t])
    twice = b.compute("Add", [t, t])
    first, second = b.if_(c, [t, neg], [twice, b.compute("Relu", [neg])])
    b.store(first, b.output("first", "float32", (2,)), "value")
    b.store(second, b.output("second", "float32", (2,)), "value")
    feed = np.array([1.0, -2.0], np.float32)
    out = Simulator(b.build()).run({"t": feed, "c": np.array(True)})
    assert out["first"].tolist() == [1.0, -2.0] and out["second"].tolist() == [-1.0, 2.0]
    out = Simulator(b.build()).run({"t": feed, "c": np.array(False)})
    assert out["first"].tolist() == [2.0, -4.0] and out["second"].tolist() == [0.0, 2.0]


def test_an_off_path_value_made_inside_an_if_keeps_the_nodes_its_branches_read():
    from onnx import TensorProto

    m = _off_path_model(False)
    g = m.graph
    (mul,) = [n for n in g.node if n.op_type == "Mul"]
    mul.output[0] = "x3"
    then_b = helper.make_graph([helper.make_node("Identity", ["x3"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 1, 1])])
    else_b = helper.make_graph([helper.make_node("Neg", ["x3"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 1, 1])])
    g.node.insert(1, helper.make_node("If", ["yes"], ["x2"], then_branch=then_b, else_branch=else_b))
    g.initializer.append(helper.make_tensor("yes", TensorProto.BOOL, [], [True]))
    sim = Simulator(rnnir.load(m))
    assert [_scalar(sim.run(f)["hn"]) for f in XS] == [2.0, 1.0, 4.5]
