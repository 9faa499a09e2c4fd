"""What `passes.cost` reports (mutation survivors of rnnir/passes/cost.py): bytes per store and per slot, which
counts are exact, where a slot's storage lives, and what a lowered model writes off the state path. Expected
numbers are itemsize x elements, worked out by hand beside each assertion."""

from __future__ import annotations

import json

from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from rnnir.ir import TensorType
from tests.support.recurrent_op_models import H, I, T, model, vi, weights


def traffic():
    b = rnnir.Builder("traffic")
    h = b.slot("h", "float16", (2, 3), address="mem:h")  # 6 x 2 bytes = 12
    g = b.slot("g", "float32", ("B", 4))  # B counts 1: 4 x 4 = 16, not exact
    u = b.slot("u", None, None)  # unknown dtype and shape: 0 bytes, listed as unknown
    o = b.output("o", "float64", (5,))  # 5 x 8 = 40
    a = b.slot("a", "int8", (7,), alias_of=o)  # lives in output o's buffer: 7 bytes
    s = b.slot("s", "int32", (3,), alias_of=h)  # shares h's storage: 12 bytes
    hv = b.load(h)
    b.load(s)
    gv = b.load(g)
    uv = b.load(u)
    b.store(b.compute("Neg", [hv], types=[TensorType("float16", (2, 3))]), h)
    b.store(gv, g, "value")
    b.store(uv, u)
    b.store(b.input("x", "float64", (5,)), o, "alias")
    return b.build(), (h, g, u, o, a, s)


def test_bytes_results_and_exactness_of_every_store():
    prog, _ = traffic()
    rep = passes.cost(prog)
    by_dest = {st.dest: st for st in rep.stores}
    assert sorted(by_dest) == ["out:o", "slot:g", "slot:h", "slot:u"]
    assert (by_dest["slot:h"].result, by_dest["slot:h"].bytes, by_dest["slot:h"].exact, by_dest["slot:h"].symbolic_dims) == ("token", 12, True, ())
    assert (by_dest["slot:g"].result, by_dest["slot:g"].bytes, by_dest["slot:g"].exact, by_dest["slot:g"].symbolic_dims) == ("value", 16, False, ("B",))
    assert (by_dest["slot:u"].result, by_dest["slot:u"].bytes, by_dest["slot:u"].exact) == ("token", 0, False)
    assert (by_dest["out:o"].result, by_dest["out:o"].bytes, by_dest["out:o"].exact) == ("alias", 40, True)
    assert {st.node for st in rep.stores} == {n.id for n in prog.stores}
    # slots: 12 + 16 + 0; outputs: 40; one VALUE store is the only true copy
    assert (rep.slot_bytes, rep.output_bytes, rep.copies) == (28, 40, 1)
    assert rep.symbolic_dims == ("B",)
    assert rep.unknown == ("slot:u",)  # the store and the slot are one tensor: listed once
    assert not rep.exact


def test_each_slot_lifetime_and_storage():
    prog, (h, g, u, o, a, s) = traffic()
    rep = passes.cost(prog)
    life = {sl.slot: sl for sl in rep.slots}
    assert [sl.slot for sl in rep.slots] == [sl.name for sl in prog.slots]
    pos = {n.id: i for i, n in enumerate(prog.nodes)}
    store_h = next(st for st in prog.stores if st.dest is h)
    store_o = next(st for st in prog.stores if st.dest is o)
    load_h = next(n for n in prog.nodes if getattr(n, "slot", None) is h)
    load_s = next(n for n in prog.nodes if getattr(n, "slot", None) is s)
    assert (life["h"].bytes, life["h"].storage, life["h"].across_calls) == (12, "mem:h", True)
    assert (life["h"].load, life["h"].store, life["h"].span) == (pos[load_h.id], pos[store_h.id], pos[store_h.id] - pos[load_h.id])
    # s shares h's storage: the store into h writes it, so it lives across calls in h's memory
    assert (life["s"].bytes, life["s"].storage, life["s"].across_calls) == (12, "mem:h", True)
    assert (life["s"].load, life["s"].store) == (pos[load_s.id], pos[store_h.id])
    # a lives in output o: never loaded, written by the store into o
    assert (life["a"].bytes, life["a"].storage, life["a"].across_calls, life["a"].load) == (7, "out:o", True, None)
    assert (life["a"].store, life["a"].span) == (pos[store_o.id], None)
    assert (life["g"].bytes, life["g"].symbolic_dims) == (16, ("B",))
    assert (life["u"].bytes, life["u"].symbolic_dims) == (0, ())
    as_json = json.loads(json.dumps(rep.to_json()))
    assert as_json["slots"][0] == {
        "slot": "h", "bytes": 12, "load": pos[load_h.id], "store": pos[store_h.id], "span": pos[store_h.id] - pos[load_h.id],
        "across_calls": True, "storage": "mem:h", "symbolic_dims": [],
    }
    assert as_json["bytes_per_call"] == {"slots": 28, "outputs": 40}
    assert (as_json["copies"], as_json["exact"], as_json["symbolic_dims"], as_json["unknown"]) == (1, False, ["B"], ["slot:u"])


def test_the_first_load_and_the_last_store_bound_a_slot_lifetime():
    b = rnnir.Builder("twice")
    h = b.slot("h", "float32", (1, 1, H))
    first = b.load(h, name="first")
    neg = b.compute("Neg", [first])
    second = b.load(h, name="second")
    b.store(b.compute("Add", [neg, second]), h)
    prog = b.build()
    pos = {n.id: i for i, n in enumerate(prog.nodes)}
    loads = [pos[n.id] for n in prog.nodes if getattr(n, "slot", None) is h and n not in prog.stores]
    (life,) = passes.cost(prog).slots
    assert life.load == min(loads) and life.store == pos[prog.stores[0].id] and life.bytes == 4 * H


def test_a_value_store_whose_destination_type_is_unknown_counts_the_value():
    b = rnnir.Builder("loose")
    o = b.output("o", None, None)
    b.store(b.input("x", "int16", (3, 2)), o, "value")  # the output declares nothing: the value's int16[3,2] = 12 bytes
    rep = passes.cost(b.build())
    assert (rep.output_bytes, rep.copies, rep.unknown, rep.exact) == (12, 1, (), True)
    assert rep.stores[0].to_json() == {"node": rep.stores[0].node, "dest": "out:o", "result": "value", "bytes": 12, "exact": True, "symbolic_dims": []}


def test_a_lowered_model_writes_its_outputs_off_the_state_path_too():
    # GRU state h0 -> hn, plus z = Neg(x), an output no state reaches: float32[T, 1, I] = 5 x 3 x 4 = 60 bytes a call
    m = model(
        [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["", "hn"], hidden_size=H), helper.make_node("Neg", ["x"], ["z"])],
        [vi("x", [T, 1, I]), vi("h0", [1, 1, H])],
        [vi("hn", [1, 1, H]), vi("z", [T, 1, I])],
        weights("GRU"),
    )
    rep = passes.cost(rnnir.load(m))
    off = [st for st in rep.stores if st.node == "(off the state path)"]
    assert [(st.dest, st.result, st.bytes, st.exact) for st in off] == [("out:z", "value", 60, True)]
    assert rep.slot_bytes == 4 * H and rep.output_bytes == 4 * H + 60
    assert rep.exact


def test_an_off_path_output_of_unknown_or_symbolic_size_is_flagged():
    m = model(
        [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["", "hn"], hidden_size=H), helper.make_node("Shape", ["x"], ["n"])],
        [vi("x", ["T", 1, I]), vi("h0", [1, 1, H])],
        [vi("hn", [1, 1, H]), helper.make_tensor_value_info("n", TensorProto.INT64, None)],
        weights("GRU"),
    )
    rep = passes.cost(rnnir.load(m))
    (off,) = [st for st in rep.stores if st.node == "(off the state path)"]
    assert (off.dest, off.bytes, off.exact) == ("out:n", 0, False)
    assert "out:n" in rep.unknown and not rep.exact
    assert rep.output_bytes == 4 * H  # the unknown output adds nothing


def test_an_off_path_output_with_a_symbolic_dim_counts_it_as_one_and_is_not_exact():
    m = model(
        [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["", "hn"], hidden_size=H), helper.make_node("Neg", ["x"], ["z"])],
        [vi("x", ["T", 1, I]), vi("h0", [1, 1, H])],
        [vi("hn", [1, 1, H]), vi("z", ["T", 1, I])],
        weights("GRU"),
    )
    rep = passes.cost(rnnir.load(m))
    (off,) = [st for st in rep.stores if st.node == "(off the state path)"]
    assert (off.dest, off.bytes, off.symbolic_dims, off.exact) == ("out:z", 1 * 1 * I * 4, ("T",), False)
    assert rep.output_bytes == 4 * H + I * 4 and "T" in rep.symbolic_dims


def test_sizes_rnnir_cannot_know_count_zero_and_are_listed_once_each():
    b = rnnir.Builder("unknowns")
    nodtype = b.slot("nodtype", None, (2,))  # a shape without a dtype: no size (not float64 by default)
    b.slot("unread", None, None)  # never loaded or stored: listed as a slot
    b.slot("later", "float32", ("N", 2))  # symbolic only in a slot nobody stores: still listed
    o = b.output("o", None, None)
    b.store(b.load(nodtype), nodtype)
    b.store(b.input("x", None, None), o)  # neither the output nor the value declares a size
    rep = passes.cost(b.build())
    assert sorted((st.dest, st.bytes, st.exact) for st in rep.stores) == [("out:o", 0, False), ("slot:nodtype", 0, False)]
    assert sorted(rep.unknown) == ["out:o", "slot:nodtype", "slot:unread"]  # each once
    assert rep.unknown[-1] == "slot:unread"  # stores first, then the slots nobody stores
    assert (rep.slot_bytes, rep.output_bytes) == (0, 0)
    assert rep.symbolic_dims == ("N",)
    from rnnir.passes.cost import tensor_bytes

    assert tensor_bytes(TensorType("float32", (3, "T", None))) == (12, ("T", "?"))
    assert tensor_bytes(TensorType("opaque", (3,))) == (None, ())  # a dtype numpy does not know (the IR text can carry one)
    assert tensor_bytes(TensorType("bfloat16", (3,))) == (6, ())  # two bytes each
    assert tensor_bytes(TensorType(None, (3,))) == (None, ())
    assert tensor_bytes(TensorType("int8", None)) == (None, ())


def test_a_destination_missing_its_dtype_or_its_shape_takes_the_size_of_the_value():
    b = rnnir.Builder("half-declared")
    shape_only = b.output("shape_only", None, (100,))
    dtype_only = b.output("dtype_only", "float64", None)
    b.store(b.input("a", "int16", (3,)), shape_only)  # the value's int16[3] = 6 bytes, not 100 elements of anything
    b.store(b.input("c", "float32", (2, "T")), dtype_only)  # the value's float32[2, T] = 8 bytes with T = 1
    rep = passes.cost(b.build())
    assert sorted((st.dest, st.bytes, st.symbolic_dims, st.exact) for st in rep.stores) == [("out:dtype_only", 8, ("T",), False), ("out:shape_only", 6, (), True)]
    assert (rep.output_bytes, rep.symbolic_dims, rep.unknown) == (14, ("T",), ())


def test_symbolic_dims_of_stores_are_listed_once_in_the_order_met():
    b = rnnir.Builder("dims")
    o1 = b.output("o1", "float32", ("T", "B"))
    o2 = b.output("o2", "float32", ("B", "T", "K"))
    b.store(b.input("p", "float32", ("T", "B")), o1)
    b.store(b.input("q", "float32", ("B", "T", "K")), o2)
    prog = b.build()
    rep = passes.cost(prog)
    first = next(st for st in prog.stores).dest.name  # the order the stores are met in
    assert rep.symbolic_dims == (("T", "B", "K") if first == "o1" else ("B", "T", "K"))
    assert rep.output_bytes == 8  # both count their symbolic dims as 1: 4 + 4
