"""ONNX → IR: build the part of the graph that state flows through, as a sequence of stages.

Each stage is a function in its own module, taking and returning typed values:

1. declare the state (:mod:`.state`): outputs, pairs and their slots → :class:`DeclaredState`;
2. recognise recurrences written as plain ops (:mod:`.recognise`) → ``Recognised``;
3. plan what to build (:mod:`.plan`): the definitions that carry state, in order → :class:`BuildPlan`;
4. build them (:mod:`.values`): values, recurrent ops and recognised sites → a :class:`ValueBuilder`
   holding the value registry;
5. place the stores (:mod:`.stores`): recorded structure, ``structure=`` override or the exit policy.

What is derived from the result (the slice maps, the pairs only the dataflow suggests) is no part of the
program: :mod:`rnnir.analysis` computes it when asked.

Only values that depend on a state input or on a recurrent op's results become IR nodes; everything
else a state-path node reads becomes an external value (with its constant when it is a small constant,
which the slice analysis needs for Gather indices, Slice bounds and the like).
"""

from __future__ import annotations

from collections.abc import Mapping

from rnnir.ir.core import Program
from rnnir.ir.structure import StoreStructure
from rnnir.lower.cells.results import CellCandidate
from rnnir.lower.plan import plan_build
from rnnir.lower.policy import EntryPolicy, ExitPolicy, Policy
from rnnir.lower.recognise import Recognised, recognise
from rnnir.lower.scope import ModelIndex
from rnnir.lower.state import LAYOUT_OPS, DeclaredState, declare_state
from rnnir.lower.stores import place_stores, recorded_structure
from rnnir.lower.values import build_values
from rnnir.onnxio.source import ModelSource

__all__ = ["LAYOUT_OPS", "EntryPolicy", "ExitPolicy", "Policy", "lower", "recognise_recurrences"]


def lower(
    src: ModelSource, pairs: Mapping[str, str | None] | None = None, policy: Policy | None = None, *, structure: StoreStructure | None = None
) -> Program:
    """``src`` as a Program; ``structure`` (``rnnir fix``'s edited stores) replaces the IR text the model records."""
    policy = policy or Policy()
    index = ModelIndex(src.model, src.label, src.take_main_nodes())
    program = Program(src.model.graph.name or (src.path.stem if src.path else "model"))
    program.source = src
    state = declare_state(src, index, program, pairs, constant_entries=policy.entry is EntryPolicy.CONSTANT)
    recognised = recognise_recurrences(index, state, program)
    plan = plan_build(index, state, recognised)
    builder = build_values(program, index, state, recognised, plan, policy.load)
    place_stores(builder, policy, structure if structure is not None else recorded_structure(src))
    return program


def recognise_recurrences(index: ModelIndex, state: DeclaredState, program: Program) -> Recognised:
    """Cells, unrolled loops and Loops in the cone of the state inputs (:mod:`rnnir.lower.recognise`).

    Their look-alikes become ``program.recurrence_candidates``. Recognition is an addition to lowering: a
    model it cannot cope with is lowered without it, and a candidate says so.
    """
    root = index.root
    # no paired state input is no reason to stop: a cell starting from zeros is still a recurrence (SD010)
    sources = [(root, p.input) for p in state.pairs if p.input in root.inputs]
    try:
        recognised = recognise(index, sources, state.paired_outputs)
    except (ValueError, IndexError, TypeError, KeyError, ArithmeticError) as exc:
        recognised = Recognised(candidates=[CellCandidate("recurrence", "model", f"recognising recurrences written as plain ops failed: {exc}")])
    program.recurrence_candidates = list(recognised.candidates)
    return recognised
