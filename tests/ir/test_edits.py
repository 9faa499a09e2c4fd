"""The IR cannot go stale (issue 23): its containers are immutable and every edit goes through the Program,
whose version alone keys the cached analyses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import rnnir
from rnnir import passes
from rnnir.analysis.facts import Analysis, analyses
from rnnir.errors import IRError
from rnnir.ir import ImmutableIRError, Value
from rnnir.ir.text import parse_program, print_program

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _fanout():
    prog = rnnir.load(SAMPLES / "gru_fanout.onnx")
    (rec,) = prog.recurrents
    (store,) = prog.stores_to(prog.slot("h0"))
    return prog, rec, store


def _codes(prog):
    return sorted(d.code for d in passes.run(prog))


def test_the_in_place_edit_of_issue_23_raises_and_leaves_the_program_as_it_was():
    prog, rec, store = _fanout()
    assert _codes(prog) == []  # the analyses are now cached
    before, version = print_program(prog), prog.version
    with pytest.raises(TypeError, match=r"immutable.*set_input"):
        store.inputs[0] = rec.outputs[0]
    with pytest.raises(ImmutableIRError):
        store.inputs.append(rec.outputs[0])
    with pytest.raises(IRError, match="set_input"):
        store.inputs = (rec.outputs[0],)
    assert print_program(prog) == before and prog.version == version and _codes(prog) == []


def test_storing_the_sequence_output_through_the_program_gives_sd003_at_once_and_after_reparsing():
    prog, rec, store = _fanout()
    assert _codes(prog) == []  # cache the slice maps of the right program first
    y = rec.port("Y")
    prog.set_input(store, 0, y)
    assert store.value is y and (store, 0) in y.uses and all(n is not store for n, _ in rec.port("Y_h").uses if n is store)
    assert _codes(prog) == ["SD003"]
    # the independent oracle: the same program printed and parsed again, with nothing cached
    assert _codes(parse_program(print_program(prog))) == ["SD003"]


def test_setting_the_final_state_back_is_clean_again():
    prog, rec, store = _fanout()
    hn = store.value
    prog.set_input(store, 0, rec.port("Y"))
    assert _codes(prog) == ["SD003"]
    prog.set_input(store, 0, hn)
    assert _codes(prog) == [] and _codes(parse_program(print_program(prog))) == []


def test_set_input_keeps_use_lists_and_data_edges():
    prog, rec, store = _fanout()
    hn, y = store.value, rec.port("Y")
    n_uses = len(hn.uses)
    prog.set_input(store, 0, y)
    assert len(hn.uses) == n_uses - 1 and [u for u in y.uses if u[0] is store] == [(store, 0)]
    # the store still reads from the GRU (through Y): the data edge stays; a store reading an external drops it
    assert prog.graph.has_edge(rec.id, store.id)
    x = prog.externals["x"]
    prog.set_input(store, 0, x)
    assert not prog.graph.has_edge(rec.id, store.id) and (store, 0) in x.uses and not any(n is store for n, _ in y.uses)


def test_replace_all_uses_with_moves_every_reader():
    prog, rec, store = _fanout()
    hn, y = rec.port("Y_h"), rec.port("Y")
    readers = sorted(n.id for n, _ in hn.uses)
    assert len(readers) == 2  # the slot store and the output store
    prog.replace_all_uses_with(hn, y)
    assert hn.uses == () and sorted(n.id for n, _ in y.uses if n.id in readers) == readers


def test_edits_that_would_break_the_program_are_refused():
    prog, rec, store = _fanout()
    version = prog.version
    with pytest.raises(IRError, match="cycle"):
        prog.set_input(rec, 0, store.outputs[0])  # the GRU would read what its own store returns
    with pytest.raises(IRError, match="neither produced here nor an external"):
        prog.set_input(store, 0, Value("stray"))
    with pytest.raises(IRError, match="no operand 3"):
        prog.set_input(store, 3, rec.port("Y"))
    with pytest.raises(IRError, match="still read by"):
        prog.set_output(rec, 1, None)  # Y_h feeds the stores
    other, _, other_store = _fanout()
    with pytest.raises(IRError, match="not a node of program"):
        prog.set_input(other_store, 0, rec.port("Y"))
    assert prog.version == version and other.version > 0


def test_every_kind_of_edit_moves_the_version_and_drops_cached_analyses():
    prog, rec, store = _fanout()
    calls = []

    class Counted(Analysis):
        def __init__(self, program, facts):
            super().__init__(program, facts)
            calls.append(program.version)
            self.n = len(calls)

    edits = [
        lambda: prog.set_input(store, 0, rec.port("Y")),
        lambda: setattr(prog.slot("h0"), "address", "elsewhere"),
        lambda: setattr(rec, "hidden_size", 5),
        lambda: setattr(rec.port("Y"), "type", rnnir.TensorType("float16")),
        lambda: setattr(prog, "state_pairs", [dataclasses.replace(prog.state_pairs[0], output="y")]),
        lambda: setattr(prog, "state_pairs", ()),
        lambda: prog.add_order(prog.loads[0], store),
        lambda: prog.graph.add_node("stray"),
        lambda: prog.graph.add_edge(rec.id, "stray"),  # both ends already in the graph
        lambda: prog.graph.add_edge("stray", "stray2"),  # the second end new
        lambda: prog.graph.add_edge("stray3", rec.id),  # the first end new
        lambda: prog.graph.remove_edge(rec.id, "stray"),
    ]
    facts = analyses(prog)
    assert facts.get(Counted).n == 1 and facts.get(Counted).n == 1  # cached while nothing changes
    for i, edit in enumerate(edits, start=2):
        edit()
        assert facts.get(Counted).n == i and analyses(prog) is facts, edit


def test_the_containers_are_read_only():
    prog, rec, store = _fanout()
    with pytest.raises(TypeError):
        prog.externals["x"] = rec.port("Y")  # type: ignore[index]
    with pytest.raises(TypeError, match="immutable"):
        prog.slots.append(prog.slot("h0"))  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        prog.state_pairs[0] = prog.state_pairs[0]  # type: ignore[index]
    with pytest.raises(TypeError):
        rec.port("Y").uses[0] = (store, 0)  # type: ignore[index]
    b = rnnir.Builder("cat")
    x = b.input("x", "float32", (1, 2))
    (y,) = [b.compute("Concat", [x, x], attributes={"axis": 0})]
    with pytest.raises(TypeError):
        y.producer.attributes["axis"] = 1  # type: ignore[index, union-attr]
    assert dict(y.producer.attributes) == {"axis": 0}  # type: ignore[union-attr]


def test_building_a_node_before_adding_it_still_takes_lists():
    b = rnnir.Builder("b")
    h = b.slot("h", "float32", (1, 1, 2))
    h0 = b.load(h)
    b.store(b.compute("Neg", [h0]), h)
    prog = b.build()
    (neg,) = [n for n in prog.nodes if isinstance(n, rnnir.Compute)]
    assert neg.inputs == (h0,) and isinstance(neg.inputs, tuple)
