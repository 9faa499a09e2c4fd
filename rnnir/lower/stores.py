"""Lowering's store-placement stage: how each final state reaches its slot and each output its buffer.

Three sources decide, strongest first: the store structure ``rnnir fix`` passes in (its edited stores),
the structure an rnnir export recorded as IR text in the model's ``rnnir.ir`` metadata (chains,
aliasing, ordering that ONNX cannot say), and otherwise the exit policy (``fanout`` by default). The
stores a structure does not mention get the default fan-out. A Return waits for every store.
"""

from __future__ import annotations

from rnnir.errors import ModelError
from rnnir.ir.attributes import LoadKind, OrderingLayer, Provenance, StoreResult
from rnnir.ir.nodes import Output, Return, Slot, Store, Value
from rnnir.ir.structure import StoreStructure, read_structure
from rnnir.lower.policy import ExitPolicy, Policy
from rnnir.lower.values import ValueBuilder
from rnnir.onnxio.metadata import META_IR, META_PROGRAM_V0
from rnnir.onnxio.metadata import read as metadata
from rnnir.onnxio.source import ModelSource


def recorded_structure(src: ModelSource) -> StoreStructure | None:
    """The store structure an rnnir export recorded as IR text (``rnnir.ir``), if the model has one."""
    meta = metadata(src.model)
    if META_PROGRAM_V0 in meta:
        raise ModelError(
            f"metadata {META_PROGRAM_V0!r} (the JSON store structure rnnir 0.1 wrote) is no longer read; export the "
            f"program again with rnnir.export, which records it as IR text in {META_IR!r}",
            model=src.label,
        )
    text = meta.get(META_IR)
    return None if text is None else read_structure(text, src.label, META_IR)


def place_stores(builder: ValueBuilder, policy: Policy, structure: StoreStructure | None) -> None:
    """Add the stores of every graph output and every slot, and the Return that waits for them."""
    prog = builder.program
    root = builder.index.root
    results: list[Value | None] = []
    known_slots: set[str] = set()
    known_outputs: set[str] = set()
    if structure is not None:
        results = _stores_from_structure(builder, structure)
        known_slots, known_outputs = set(structure.slots), set(structure.outputs)
    out_by_name = {o.name: o for o in prog.outputs}
    pair_out = {p.output: p for p in builder.state.pairs if p.output is not None}
    for vi in builder.index.model.graph.output:
        value = builder.operand(root, vi.name)
        if value is None:
            continue
        pair = pair_out.get(vi.name)
        out = out_by_name[vi.name]
        if pair is None:
            if value.producer is not None and vi.name not in known_outputs:
                results.append(_store(builder, value, out, StoreResult.VALUE))
            continue
        slot = pair.slot
        if slot is None or slot.name in known_slots:  # the recorded IR text says how this slot is written
            continue
        if policy.exit is ExitPolicy.FANOUT or structure is not None:  # a slot exposed after the export: the default
            results.append(_store(builder, value, slot, StoreResult.TOKEN))
            if vi.name not in known_outputs:
                results.append(_store(builder, value, out, StoreResult.VALUE))
        elif policy.exit is ExitPolicy.CHAIN:
            r = _store(builder, value, slot, policy.chain_result)
            results.append(r)
            results.append(_store(builder, r, out, StoreResult.VALUE))
        else:  # reuse-single-store: the output store is taken for the slot's store
            results.append(_store(builder, value, out, StoreResult.VALUE))
            slot.alias_of = out
    layer = structure.layer if structure is not None else OrderingLayer.RUNTIME
    prov = Provenance(node="return") if structure is not None else Provenance(node="onnxruntime call")
    prog.add(Return(inputs=results, layer=layer, provenance=prov))


def _store(builder: ValueBuilder, value: Value, dest: Slot | Output, result: StoreResult) -> Value:
    out = Value(name=builder.fresh_name(f"store.{dest.name}", builder.index.root), type=dest.type, kind=result.value)
    builder.program.add(Store(inputs=[value], outputs=[out], dest=dest, result=result, provenance=Provenance(value=dest.name)))
    return out


def _stores_from_structure(builder: ValueBuilder, spec: StoreStructure) -> list[Value | None]:
    """Rebuild the recorded stores (chain, aliasing, ordering); returns the values the Return waits for."""
    prog = builder.program
    root = builder.index.root
    by_id: dict[str, Value] = {}
    dests: dict[str, Slot | Output] = {f"slot:{s.name}": s for s in prog.slots}
    dests.update({f"out:{o.name}": o for o in prog.outputs})
    try:
        for name, facts in spec.slots.items():
            slot = builder.state.input_slots.get(name)
            if slot is None:
                raise KeyError(f"slot {name!r}")
            if facts.alias_of:
                slot.alias_of = dests[facts.alias_of]
            if facts.address:
                slot.address = facts.address
            if facts.view_load:
                for ld in prog.loads_of(slot):
                    ld.kind = LoadKind.VIEW
        for st in spec.stores:
            value = by_id[st.reads] if st.reads_store else builder.operand(root, st.reads)
            if value is None:
                raise KeyError(f"value {st.reads!r}")
            by_id[st.id] = _store(builder, value, dests[st.dest], st.result)
        waits: list[Value | None] = [by_id[w] for w in spec.waits]
        for a, b in spec.order:
            before, after = by_id[a].producer, by_id[b].producer
            assert before is not None and after is not None  # a store's result has its store as producer
            prog.add_order(before, after)
    except KeyError as exc:
        raise ModelError(f"metadata {META_IR!r} names {exc.args[0]}, which the graph does not have", model=builder.index.label) from None
    return waits
