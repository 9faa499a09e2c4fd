"""Lowering's first stage: declare the state — the program's outputs, the state pairs and a slot for each.

Pairs come from :func:`rnnir.lower.pairing.find_pairs`; without a declaration, a state-named input that
feeds a recurrent initial state but that no output returns is paired with nothing (so SD007 can say so).
The ``constant`` entry policy adds a slot for each recurrent op that starts from a constant and whose
final state is a graph output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rnnir.ir.attributes import Provenance, SlotInit
from rnnir.ir.core import Program
from rnnir.ir.nodes import Output, Slot
from rnnir.ir.optraits import OpTrait, ops_with
from rnnir.ir.pairs import PairSource, StatePair
from rnnir.ir.recurrence import RecurrenceKind, kind_for_op
from rnnir.lower.dataflow import Dataflow
from rnnir.lower.pairing import find_pairs, looks_like_state
from rnnir.lower.recognise import Key
from rnnir.lower.scope import Definition, ModelIndex
from rnnir.lower.tensors import constant_tensor, small_array, tensor_type_of
from rnnir.onnxio.metadata import META_SLOTS
from rnnir.onnxio.metadata import read as metadata
from rnnir.onnxio.proto import EXTERNAL, tensor_to_array
from rnnir.onnxio.source import ModelSource

if TYPE_CHECKING:
    import onnx

LAYOUT_OPS = ops_with(OpTrait.LAYOUT)


def key_of(d: Definition) -> Key:
    """A definition's identity across scopes: lowering's value key (the same as rnnir.lower.recognise's)."""
    return (id(d.scope), d.name)


def recurrence_kind(node: onnx.NodeProto) -> RecurrenceKind:
    """The registered kind of a node the model index listed as recurrent."""
    kind = kind_for_op(node.op_type, node.domain)
    assert kind is not None, f"{node.op_type} is not a recurrent op"  # the index lists registered ops only
    return kind


@dataclass(frozen=True)
class DeclaredState:
    """The state as declared: its pairs (each with its slot), and which definitions a slot stands for.

    ``input_slots`` maps a paired graph input to its slot; ``constant_slots`` the key of a constant that the
    ``constant`` entry policy made a slot; ``state_fed_inputs`` lists the main-graph inputs that reach a
    recurrent initial state through layout-only ops (paired or not).
    """

    pairs: tuple[StatePair, ...]
    input_slots: Mapping[str, Slot]
    constant_slots: Mapping[Key, Slot]
    state_fed_inputs: tuple[str, ...]

    def loaded_slot(self, d: Definition) -> Slot | None:
        """The slot a definition is loaded from, when it is a paired input or a constant made a slot."""
        slot = self.constant_slots.get(key_of(d))
        if slot is not None:
            return slot
        return self.input_slots.get(d.name) if d.kind == "input" else None

    @property
    def paired_outputs(self) -> set[str]:
        return {p.output for p in self.pairs if p.output is not None}


def declare_state(
    src: ModelSource, index: ModelIndex, program: Program, declared: Mapping[str, str | None] | None, *, constant_entries: bool
) -> DeclaredState:
    """Add the graph's outputs and a slot per state pair to ``program``; the pairs become ``program.state_pairs``."""
    model = src.model
    root = index.root
    flow = Dataflow(index)  # its parts are walked when asked for, each once
    pairs = find_pairs(model, label=src.label, declared=declared, model_path=src.path, dataflow=lambda: flow)
    fed = _inputs_reaching_initial_state(index, flow)
    if not declared:  # a declaration is the caller's whole contract
        pairs += _unreturned_state_inputs(pairs, fed)
    for vi in model.graph.output:
        program.add_output(Output(vi.name, index.tensor_type(vi)))
    input_slots: dict[str, Slot] = {}
    recorded = _recorded_inits(model)
    for k, p in enumerate(pairs):
        d = root.resolve(p.input)
        init = recorded.get(p.input, SlotInit("zeros"))
        if d.tensor is not None:
            arr = small_array(d.tensor)
            if arr is not None:
                init = SlotInit("constant", arr)
        slot = Slot(name=p.input, type=index.tensor_type(root.inputs.get(p.input)), init=init, provenance=Provenance(value=p.input))
        program.add_slot(slot)
        pairs[k] = StatePair(p.input, p.output, p.source, p.reason, slot=slot)  # replace(p, slot=slot), without its introspection
        input_slots[p.input] = slot
    constant_slots: dict[Key, Slot] = {}
    if constant_entries:
        pairs += _constant_entries(index, program, {vi.name for vi in model.graph.output}, pairs, constant_slots)
    program.state_pairs = pairs
    return DeclaredState(tuple(pairs), input_slots, constant_slots, tuple(fed))


def _recorded_inits(model: onnx.ModelProto) -> dict[str, SlotInit]:
    """The slots' initial values an rnnir export recorded (``rnnir.slots``): a graph input cannot say whether the
    caller feeds it or it starts from zeros or a constant, so without them a round trip would turn every one into
    zeros.  An entry rnnir cannot read is passed over (the default, zeros, is what a model without it gets)."""
    raw = metadata(model).get(META_SLOTS)
    if raw is None:
        return {}
    import numpy as np  # only for a model an rnnir export wrote: rnnir lint imports no numpy otherwise

    try:
        entries = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    inits: dict[str, SlotInit] = {}
    for name, entry in entries.items() if isinstance(entries, dict) else ():
        kind = entry.get("init") if isinstance(entry, dict) else None
        if kind in ("zeros", "caller"):
            inits[name] = SlotInit(kind)
        elif kind == "constant" and "value" in entry:
            try:
                arr = np.asarray(entry["value"], dtype=np.dtype(entry.get("value_dtype", "float32"))).reshape(entry.get("value_shape", [-1]))
            except (TypeError, ValueError):
                continue
            inits[name] = SlotInit("constant", arr)
    return inits


def _unreturned_state_inputs(pairs: list[StatePair], state_fed_inputs: list[str]) -> list[StatePair]:
    """State-named graph inputs that feed a recurrent op's initial state but no output returns."""
    paired = {p.input for p in pairs}
    out: list[StatePair] = []
    for name in state_fed_inputs:
        if name not in paired and looks_like_state(name):
            out.append(StatePair(name, None, PairSource.NAME, f"{name!r} is named like state and feeds a recurrent initial state, but no output matches it"))
            paired.add(name)
    return out


def _inputs_reaching_initial_state(index: ModelIndex, flow: Dataflow) -> list[str]:
    """Main-graph inputs that reach a recurrent op's initial state through layout-only ops."""
    found: dict[str, None] = {}  # in first-found order; a dict, not a list: 1,000 recurrent ops find as many inputs
    for scope, node in index.recurrent:
        kind = recurrence_kind(node)
        for port in (i for i in (kind.input_index(p) for p in kind.entries) if i is not None):
            if port < len(node.input) and node.input[port]:
                found.update(dict.fromkeys(flow.sources_of(scope, node.input[port])))
    return [n for n in found if n in index.root.inputs]


def _constant_entries(index: ModelIndex, program: Program, out_names: set[str], pairs: list[StatePair], made: dict[Key, Slot]) -> list[StatePair]:
    """Constant-entry policy: slots for recurrent ops that start from a constant and return their final state.

    Each slot is added to ``program`` and to ``made`` (by the constant's key); returns the new pairs.
    """
    new_pairs: list[StatePair] = []
    paired_out = {p.output for p in pairs}
    for scope, node in index.recurrent:
        kind = recurrence_kind(node)
        for state in kind.states:
            port, final = kind.input_index(state.entry), kind.output_index(state.exit)
            if port is None or final is None:
                continue
            if port >= len(node.input) or not node.input[port] or final >= len(node.output):
                continue
            d = scope.resolve(node.input[port])
            if d.kind not in ("initializer",) and not (d.kind == "node" and d.node is not None and d.node.op_type == "Constant"):
                continue
            ret = node.output[final]
            if ret not in out_names or ret in paired_out:
                continue
            t = d.tensor if d.tensor is not None else constant_tensor(d.node) if d.node is not None else None
            if t is None:
                continue
            arr = tensor_to_array(t) if t.data_location != EXTERNAL else None
            if arr is None:
                continue
            slot = Slot(name=d.name, type=tensor_type_of(t), init=SlotInit("constant", arr), provenance=Provenance(value=d.name))
            program.add_slot(slot)
            reason = f"constant initial state of {index.node_name(node)!r} made a slot (entry=constant)"
            new_pairs.append(StatePair(d.name, ret, PairSource.CONSTANT, reason, slot=slot))
            made[key_of(d)] = slot
    return new_pairs
