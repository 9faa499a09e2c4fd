"""A Loop body's step number as tf2onnx writes it (a carried counter that starts at 0 and is handed back + 1), and the
step's input it indexes (``Gather(seq, t)`` on axis 0, ``seq`` from outside the body): what ``Recogniser.step_number``
accepts, what ``outer_step`` takes for the step's input, and what the lowered recurrence reads as its sequence.

Each table row is a loop built by hand (tests/lower/cells/loop_models.py) whose counter is right or bent in exactly
one way; the oracle is the row's own arithmetic: a counter that starts at 1, counts by 2, subtracts, never counts, or
counts ``iter`` instead of itself does not equal the iteration number (the step it indexes is another one).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.lower.cells.cone import Recogniser
from rnnir.lower.cells.walk import outer_step
from rnnir.lower.scope import ModelIndex, Scope
from tests.lower.cells.loop_models import STEPS, H, I, model_of, tf_loop, vi


def _recogniser(model) -> tuple[Recogniser, Scope]:
    index = ModelIndex(model, "m")
    rec = Recogniser(index, [(index.root, "h0")])
    loop = next(n for n in model.graph.node if n.op_type in ("Loop", "Scan"))
    return rec, index.root.children[(id(loop), "body")]


#: (tf_loop keywords, body value, is it the step number)
STEP_NUMBERS = [
    ({}, "t", True),
    ({}, "iter", True),  # the body's first input is the iteration number by definition
    ({"counter": "identity"}, "t", True),  # t + 1 handed back through an Identity
    ({"counter": "swapped"}, "t", True),  # Add(1, t): the same increment
    ({"counter": "custom_identity"}, "t", False),  # an Identity of another domain may compute anything
    ({"counter": "sub"}, "t", False),  # t - 1
    ({"counter": "custom_add"}, "t", False),  # an Add of another domain
    ({"counter": "same"}, "t", False),  # handed back unchanged: always 0, the step number only once
    ({"counter": "iter"}, "t", False),
    ({"counter": "outer"}, "t", False),  # outer t + 1, the same every step  # iter + 1: one ahead of the iteration number, and not t's own increment
    ({"start": 1}, "t", False),
    ({"start": [0, 0]}, "t", False),  # not one number
    ({"start": None}, "t", False),  # starts at a run-time value
    ({"step": 2}, "t", False),
    ({"step": [1, 1]}, "t", False),
    ({"step": None}, "t", False),  # counts by a run-time value
    ({}, "cond_in", False),
    ({}, "h", False),  # a carried float that starts at the caller's state
    ({}, "R", False),  # a carried weight handed back unchanged
    ({}, "x_t", False),  # not a body input at all
]


def test_a_carried_counter_is_the_step_number_only_when_it_starts_at_0_and_adds_1_each_step():
    got = []
    for kw, name, _ in STEP_NUMBERS:
        rec, body = _recogniser(tf_loop(**kw)[0])  # type: ignore[arg-type]
        got.append((kw, name, rec.step_number(body, name)))
    assert got == [(kw, name, want) for kw, name, want in STEP_NUMBERS]


def _root_gather() -> object:
    """Gather(x_seq, 0) in the main graph, no Loop around it."""
    g = helper.make_graph(
        [helper.make_node("Gather", ["x_seq", "zero"], ["x_t"], axis=0, name="g")],
        "root",
        [vi("x_seq", TensorProto.FLOAT, [STEPS, 1, I]), vi("h0", TensorProto.FLOAT, [1, H])],
        [vi("x_t", TensorProto.FLOAT, [1, I])],
        [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")],
    )
    return model_of(g)


def _scan_gather() -> object:
    """A Scan body reading Gather(seq, s) with s its first carried value: a Scan has no iteration number input."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["x_seq", "s"], ["x_t"], axis=0, name="g"), helper.make_node("Identity", ["s"], ["s_out"], name="s_id")],
        "scan_body",
        [vi("s", TensorProto.INT64, []), vi("e", TensorProto.FLOAT, [1])],
        [vi("s_out", TensorProto.INT64, []), vi("x_t", TensorProto.FLOAT, [1, I])],
    )
    scan = helper.make_node("Scan", ["s0", "es"], ["sN", "xs"], body=body, num_scan_inputs=1, name="scan")
    g = helper.make_graph(
        [scan],
        "scan",
        [vi("x_seq", TensorProto.FLOAT, [STEPS, 1, I]), vi("h0", TensorProto.FLOAT, [1, H]), vi("es", TensorProto.FLOAT, [STEPS, 1])],
        [vi("xs", TensorProto.FLOAT, [STEPS, 1, I])],
        [numpy_helper.from_array(np.array(0, dtype=np.int64), "s0")],
    )
    return model_of(g)


def test_the_steps_input_is_gather_on_axis_0_of_an_outer_sequence_at_the_step_number():
    rows = [
        (tf_loop()[0], "x_t", True),
        (tf_loop(gather_axis=1)[0], "x_t", False),  # step t of another axis
        (tf_loop(start=1)[0], "x_t", False),  # x[t + 1]
        (tf_loop(gather="custom")[0], "x_t", False),
        (tf_loop(gather="slice")[0], "x_t3", False),  # the same elements, but not the Gather this rule knows
        (tf_loop()[0], "h", False),  # a body input: no node
        (tf_loop()[0], "xw", False),  # a MatMul
        (tf_loop(counter="swapped")[0], "t_next", False),  # Add(step, t): t is its second input, but it is no Gather
        (_root_gather(), "x_t", False),  # no Loop
        (_scan_gather(), "x_t", False),  # a Scan body: its first input is state, not an iteration number
    ]
    got = []
    for model, name, _ in rows:
        index = ModelIndex(model, "m")  # type: ignore[arg-type]
        rec = Recogniser(index, [(index.root, "h0")])
        owner = next((n for n in model.graph.node if n.op_type in ("Loop", "Scan")), None)  # type: ignore[attr-defined]
        scope = index.root if owner is None else index.root.children[(id(owner), "body")]
        got.append(outer_step(rec, rec.net.key(scope, name)))
    assert got == [want for _, _, want in rows]


def test_the_lowered_loop_reads_the_outer_sequence_only_through_a_counter_that_is_the_step_number():
    """The recurrence's X is the whole sequence x_seq when the body reads x[t] at the step number; with a counter
    one ahead or counting by two it reads other steps, so X stays the Loop's own (no sequence to simulate)."""
    got = {}
    for kw in ({}, {"counter": "identity"}, {"start": 1}, {"step": 2}, {"counter": "same"}, {"seq_from_state": True}):
        prog = rnnir.load(tf_loop(**kw)[0], pairs={"h0": "hN"})  # type: ignore[arg-type]
        (r,) = prog.recurrents
        assert (r.kind, r.recognition.value) == ("RNN", "loop")
        x = r.port("X")
        got[str(kw)] = x is not None and x.name == "x_seq"
    # a sequence computed from the state (a stacked layer's input) is in the state cone: x[t] is still the step's
    # input, not a state the walk must cross
    assert got == {
        "{}": True,
        "{'counter': 'identity'}": True,
        "{'start': 1}": False,
        "{'step': 2}": False,
        "{'counter': 'same'}": False,
        "{'seq_from_state': True}": True,
    }
