"""The pictures ``rnnir show`` draws, checked against the program itself on every sample.

The program's own nodes, slots, outputs and graph edges are the oracle: the journey has a box for every slot,
slot load, recurrence and store, and an output box exactly for the outputs a store writes; a read arrow from each
load's slot, a write arrow from each store to its destination; no arrow to or from a box it does not draw; and
value arrows only where a value really travels (the arrow's source box reaches its target through the graph).
The full picture has a box per node, slot and output and an arrow per graph edge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rnnir
from rnnir.ir import digraph
from rnnir.ir.nodes import LoadSlot, Recurrent, Store
from rnnir.render.journey import ArrowKind, BoxKind, full_picture, journey, journey_text, short_branch

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture(scope="module")
def programs() -> list[rnnir.Program]:
    paths = sorted(SAMPLES.glob("*.onnx")) + sorted(SAMPLES.glob("*.rnnir"))
    return [rnnir.load(p) for p in paths]


def _dest_key(store: Store) -> str:
    assert store.dest is not None
    return ("slot:" if store.to_slot else "out:") + store.dest.name


def test_the_journey_draws_what_the_program_holds_and_nothing_else(programs):
    seen_kinds: set[BoxKind] = set()
    for program in programs:
        pic = journey(program)
        keys = [b.key for b in pic.boxes]
        assert len(keys) == len(set(keys)), program.name
        kind_of = {b.key: b.kind for b in pic.boxes}
        seen_kinds |= set(kind_of.values())
        loads = [n for n in program.nodes if isinstance(n, LoadSlot)]
        stores = [n for n in program.nodes if isinstance(n, Store)]
        want_boxes = {f"slot:{s.name}": BoxKind.SLOT for s in program.slots}
        want_boxes |= {n.id: BoxKind.LOAD for n in loads} | {n.id: BoxKind.STORE for n in stores}
        want_boxes |= {n.id: BoxKind.RECURRENT for n in program.nodes if isinstance(n, Recurrent)}
        want_boxes |= {_dest_key(st): BoxKind.OUTPUT for st in stores if st.dest is not None and not st.to_slot}
        junctions = {k: v for k, v in kind_of.items() if k.startswith("value:")}
        assert {k: v for k, v in kind_of.items() if k not in junctions} == want_boxes, program.name
        assert all(kind is BoxKind.COMPUTE for kind in junctions.values())
        # every arrow joins two drawn boxes
        assert all(a.source in kind_of and a.target in kind_of for a in pic.arrows), program.name
        reads = sorted((a.source, a.target) for a in pic.arrows if a.kind is ArrowKind.READ)
        assert reads == sorted((f"slot:{n.slot.name}", n.id) for n in loads if n.slot is not None), program.name
        writes = sorted((a.source, a.target, a.label) for a in pic.arrows if a.kind is ArrowKind.WRITE)
        want = [(st.id, _dest_key(st), "read by the next call" if st.to_slot else "") for st in stores if st.dest is not None]
        assert writes == sorted(want), program.name
        # a value arrow leaves a box whose node reaches the target's node through the program's graph
        graph = program.graph
        for a in pic.arrows:
            if a.kind in (ArrowKind.DATA, ArrowKind.CHANGED) and not a.source.startswith("value:"):
                targets = [a.target] if not a.target.startswith("value:") else [
                    b.target for b in pic.arrows if b.source == a.target
                ]
                assert all(digraph.has_path(graph, a.source, t) for t in targets), (program.name, a)
    assert seen_kinds >= {BoxKind.SLOT, BoxKind.LOAD, BoxKind.RECURRENT, BoxKind.STORE, BoxKind.OUTPUT, BoxKind.COMPUTE}


def test_the_full_picture_is_every_node_and_every_edge(programs):
    for program in programs:
        pic = full_picture(program)
        keys = [b.key for b in pic.boxes]
        assert keys == [f"slot:{s.name}" for s in program.slots] + [f"out:{o.name}" for o in program.outputs] + [n.id for n in program.nodes]
        edges = sorted((a.source, a.target, a.kind) for a in pic.arrows if a.kind in (ArrowKind.DATA, ArrowKind.ORDER))
        want = sorted((u, v, ArrowKind.DATA if d.get("kind") == "data" else ArrowKind.ORDER) for u, v, d in program.graph.edges(data=True))
        assert edges == want, program.name
        assert all(a.source in keys and a.target in keys for a in pic.arrows), program.name
        # a read arrow into each load from its slot, a write arrow from each store to its destination, as in the journey
        journey_arrows = journey(program).arrows
        for kind in (ArrowKind.READ, ArrowKind.WRITE):
            assert sorted((a.source, a.target) for a in pic.arrows if a.kind is kind) == sorted(
                (a.source, a.target) for a in journey_arrows if a.kind is kind
            ), (program.name, kind)
        for box, node in zip(pic.boxes[len(program.slots) + len(program.outputs) :], program.nodes):
            first = box.label.split("\n", 1)[0]
            assert first.startswith("store") if isinstance(node, Store) else first == node.opname, (program.name, box)


def test_journey_text_lists_each_box_with_the_arrows_into_it(programs):
    for program in programs[:6]:
        pic = journey(program)
        lines = journey_text(program).split("\n")
        box_lines = [line for line in lines if line.startswith("  ") and not line.startswith(("    ", "  pair ", "  no state pairs"))]
        assert box_lines == ["  " + b.label.replace("\n", "; ") for b in pic.boxes], program.name
        assert sum(1 for line in lines if line.startswith("    <- ")) == len(pic.arrows)


def test_short_branch_keeps_the_last_path_part_of_each_branch():
    assert short_branch(("If_0.else_branch", "x/decoder/If_1.then_branch")) == "If_0.else › If_1.then"
    assert short_branch(("a/b/c/If_2.then_branch",)) == "If_2.then"
    assert short_branch(()) == ""


def _cell_fed_through(ops_into_h: list[str], ops_into_x: list[str]) -> rnnir.Program:
    """A slot loaded once, fed into an RNN's initial_h through ``ops_into_h`` and into its X through ``ops_into_x``."""
    import numpy as np

    b = rnnir.Builder("chain")
    h = b.slot("h", "float32", (1, 1, 1))
    loaded = b.load(h)
    into_h, into_x = loaded, loaded
    for op in ops_into_h:
        into_h = b.compute(op, [into_h])
    for op in ops_into_x:
        into_x = b.compute(op, [into_x])
    W = b.const("W", np.ones((1, 1, 1), np.float32))
    R = b.const("R", np.full((1, 1, 1), 0.5, np.float32))
    _, hn = b.recurrent("RNN", into_x, W, R, initial_h=into_h, hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    b.store(hn, h)
    return b.build()


def _arrow_into_the_cell(program: rnnir.Program) -> str:
    (rec,) = program.recurrents
    (load,) = [n for n in program.nodes if isinstance(n, LoadSlot)]
    (arrow,) = [a for a in journey(program).arrows if (a.source, a.target) == (load.id, rec.id)]
    assert arrow.kind is ArrowKind.CHANGED
    return arrow.label


def test_an_arrow_names_every_op_on_every_way_between_its_boxes_up_to_its_limits():
    # seven value-changing ops in a row: the first six named and "+1 more"; four of the changing ones, sorted, and "…"
    label = _arrow_into_the_cell(_cell_fed_through(["Relu", "Abs", "Neg", "Exp", "Sigmoid", "Tanh", "Sqrt"], []))
    assert label.split("\n")[-2:] == ["via Relu, Abs, Neg, Exp, Sigmoid, Tanh, +1 more", "value changed by Abs, Exp, Neg, Relu …"]
    # at the limits nothing is left out: six ops (X's way first, then initial_h's new ones), four changing ones
    label = _arrow_into_the_cell(_cell_fed_through(["Relu", "Abs", "Neg", "Exp"], ["Relu", "Abs", "Identity", "Squeeze"]))
    assert label.split("\n")[-2:] == ["via Relu, Abs, Identity, Squeeze, Neg, Exp", "value changed by Abs, Exp, Neg, Relu"]
    # five changing ones: four named and "…"
    label = _arrow_into_the_cell(_cell_fed_through(["Relu", "Abs", "Neg", "Exp", "Sigmoid"], []))
    assert label.split("\n")[-1] == "value changed by Abs, Exp, Neg, Relu …"
    # two ports reached from one load by different ways: one arrow, both ways' ops
    label = _arrow_into_the_cell(_cell_fed_through(["Relu"], ["Abs"]))
    assert label.split("\n")[-2:] == ["via Abs, Relu", "value changed by Abs, Relu"]


def test_a_final_state_fed_on_into_another_recurrence_is_labelled_by_its_ports():
    """Y_h of a stateful RNN is also the next RNN's input sequence: the arrow between them is "Y_h → X" (the slice
    names label only a slot's way in and out); the arrow into its own slot store says which slot it becomes."""
    import numpy as np

    b = rnnir.Builder("stacked")
    W = b.const("W", np.ones((1, 1, 1), np.float32))
    R = b.const("R", np.full((1, 1, 1), 0.5, np.float32))
    x = b.input("x", "float32", (1, 1, 1))
    cells = []
    for name in ("h1", "h2"):
        slot = b.slot(name, "float32", (1, 1, 1))
        _, hn = b.recurrent("RNN", x, W, R, initial_h=b.load(slot), hidden_size=1, activations=["Affine"], activation_alpha=[1.0],
                            activation_beta=[0.0], name=f"rnn_{name}")
        b.store(hn, slot)
        cells.append(hn)
        x = hn  # the next layer reads this one's final state
    program = b.build()
    first, second = program.recurrents
    labels = {(a.source, a.target): a.label for a in journey(program).arrows}
    assert labels[(first.id, second.id)] == "Y_h → X"
    store_h1 = next(n for n in program.nodes if isinstance(n, Store) and n.dest is not None and n.dest.name == "h1")
    assert labels[(first.id, store_h1.id)] == "Y_h → h1"


def test_the_journey_draws_an_ordering_only_between_two_boxes_it_draws():
    """An ordering edge to or from a compute node (not drawn) is left out; one between two stores is drawn."""
    import numpy as np

    b = rnnir.Builder("ordered")
    h = b.slot("h", "float32", (1, 1, 1))
    loaded = b.load(h)
    W = b.const("W", np.ones((1, 1, 1), np.float32))
    R = b.const("R", np.full((1, 1, 1), 0.5, np.float32))
    _, hn = b.recurrent("RNN", b.input("x", "float32", (1, 1, 1)), W, R, initial_h=loaded, hidden_size=1, activations=["Affine"],
                        activation_alpha=[1.0], activation_beta=[0.0])
    norm = b.compute("Abs", [loaded])
    slot_store = b.store(hn, h)
    out_store = b.store(norm, b.output("norm", "float32", (1, 1, 1)), "value")
    b.order(norm, slot_store)  # compute -> store: the compute node is not a box
    b.order(slot_store, b.compute("Neg", [b.input("z", "float32", (1, 1, 1))]))  # store -> compute: neither drawn
    b.order(slot_store, out_store)  # store -> store: both are boxes
    program = b.build()
    orders = [(a.source, a.target, a.label) for a in journey(program).arrows if a.kind is ArrowKind.ORDER]
    assert orders == [(slot_store.producer.id, out_store.producer.id, "runs first")]
