"""Ordering rules at the edges of their scope (mutation survivors of passes/ordering.py): which slots OR001 looks at,
the two reasons it gives, which nodes count as readers of a VIEW load for OR002 and how many. Programs built with
rnnir.Builder; every expected count is read off the program by hand."""

from __future__ import annotations

import re

import numpy as np

import rnnir
from rnnir import passes

H, I, T = 4, 3, 5


def cell(load="copy"):
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H))
    x = b.input("x", "float32", (T, 1, I))
    h0 = b.load(h, load, name="h0")
    rng = np.random.default_rng(1)
    w = b.const("W", rng.standard_normal((1, H, I)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, H, H)).astype(np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=h0, hidden_size=H, name="rnn", outputs=["Y", "hn"])
    return b, h, h0, hn


def found(prog, code):
    return [d for d in passes.run(prog) if d.code == code]


# -- OR001 -----------------------------------------------------------------------------------------


def test_a_return_ordered_by_nobody_says_nothing_orders_the_calls():
    b, h, _, hn = cell()
    s = b.store(hn, h, name="s")
    b.ret(s, layer="none")
    (d,) = found(b.build(), "OR001")
    assert "nothing orders call k+1 after call k" in d.message and "does not wait" not in d.message
    assert d.hint.startswith("order the calls")
    assert [loc.value for loc in d.locations][0] == "s"


def test_an_ordered_return_that_does_not_wait_says_so():
    b, h, _, hn = cell()
    s = b.store(hn, h, name="s")
    out = b.store(hn, b.output("hn_out"), "value", name="o")
    b.ret(out, layer="caller")
    (d,) = found(b.build(), "OR001")
    assert "does not wait for it" in d.message and "nothing orders" not in d.message
    assert d.hint == "make the Return wait for the store into 'h' (add its result to the Return's waits)"
    assert [loc.value for loc in d.locations] == ["s", None]  # the store, then the Return (no result)
    assert s.name == "s"


def test_a_slot_that_is_stored_but_never_loaded_is_not_OR001():
    b, h, _, hn = cell()
    g = b.slot("g", "float32", (1, 1, H))  # written every call, read by nobody
    s = b.store(hn, h)
    b.store(hn, g)
    b.ret(s)
    assert found(b.build(), "OR001") == []


def test_a_slot_that_is_loaded_but_never_stored_is_not_OR001():
    b, h, _, hn = cell()
    g = b.slot("g", "float32", (1, 1, H))
    b.store(b.load(g), b.output("g_echo"), "value")
    s = b.store(hn, h)
    b.ret(s)
    assert found(b.build(), "OR001") == []


# -- OR002 -----------------------------------------------------------------------------------------


def readers_in(d):
    return int(re.search(r"not ordered after (\d+) reader\(s\)", d.message).group(1))


def test_readers_of_a_view_load_include_the_users_of_views_of_it():
    # h0 (VIEW) -> Reshape -> Identity -> output store: all three read the slot's memory; the RNN reads it too, but
    # the slot store reads the RNN's hn, so the RNN is ordered before it
    b, h, h0, hn = cell("view")
    v = b.compute("Identity", [b.compute("Reshape", [h0, b.const("shape", np.array([1, 1, H], np.int64))])])
    b.store(v, b.output("h_prev"), "value")
    b.store(hn, h)
    (d,) = found(b.build(), "OR002")
    assert readers_in(d) == 3  # Reshape, Identity, the store into output 'h_prev'
    assert "the store into output 'h_prev'" in d.message


def test_a_computed_value_of_a_view_load_is_no_view_of_it():
    # Add makes new memory: its user does not read the slot
    b, h, h0, hn = cell("view")
    a = b.compute("Add", [h0, b.const("one", np.ones((1, 1, H), np.float32))])
    b.store(a, b.output("h_plus"), "value")
    b.store(hn, h)
    (d,) = found(b.build(), "OR002")
    assert readers_in(d) == 1  # Add (the RNN runs before the store of its hn)


def test_a_gather_indexed_by_a_view_load_reads_it_but_its_result_is_no_view_of_it():
    # an int slot 'pos' (VIEW) indexes a table: Gather reads pos, the store of the gathered row does not
    b = rnnir.Builder("lookup")
    pos = b.slot("pos", "int64", (1,))
    p = b.load(pos, "view")
    row = b.compute("Gather", [b.const("table", np.zeros((8, H), np.float32)), p])
    b.store(row, b.output("row"), "value")
    b.store(b.compute("Add", [p, b.const("one", np.ones(1, np.int64))]), pos)
    (d,) = found(b.build(), "OR002")
    assert readers_in(d) == 1 and "Gather" in d.message


def test_a_racing_reader_without_a_first_output_is_located_by_its_node():
    # the RNN reads the VIEW load, its Y is not produced, and the slot is written with something it does not feed
    b, h, h0, hn = cell("view")
    rnn = hn.producer
    b.program.set_output(rnn, 0, None)
    b.store(b.input("h_new", "float32", (1, 1, H)), h)
    b.store(hn, b.output("hn"), "value")
    (d,) = found(b.build(), "OR002")
    assert [(loc.node, loc.value) for loc in d.locations][1] == (rnn.id, None)


def test_a_view_op_that_takes_the_load_as_its_second_input_is_no_view_of_it():
    # Gather(table, indices=h0 as ints): the result is a view of the table, not of the slot
    b, h, h0, hn = cell("view")
    idx = b.compute("Cast", [h0], attributes={"to": 7})
    g = b.compute("Gather", [b.const("table", np.zeros((8, H), np.float32)), idx])
    b.store(g, b.output("looked_up"), "value")
    b.store(hn, h)
    (d,) = found(b.build(), "OR002")
    assert readers_in(d) == 1  # Cast (no view op): neither Gather nor its user read the slot's memory


def test_four_readers_are_all_named():
    check_named_readers(4, ellipsis=False)


def test_five_readers_name_four_and_an_ellipsis():
    check_named_readers(5, ellipsis=True)


def check_named_readers(echoes, ellipsis):
    b, h, h0, hn = cell("view")
    for k in range(echoes):
        b.store(h0, b.output(f"echo{k}"), "value")
    b.store(hn, h)
    (d,) = found(b.build(), "OR002")
    assert readers_in(d) == echoes
    assert ("…" in d.message) is ellipsis
    assert d.message.count("the store into output") == min(echoes, 4)


def test_a_store_that_writes_back_the_loaded_value_is_not_its_own_racing_reader():
    b = rnnir.Builder("echo")
    h = b.slot("h", "float32", (1, 1, H))
    b.store(b.load(h, "view"), h)  # a passthrough (SD001's business), not a write-after-read hazard with itself
    assert found(b.build(), "OR002") == []
