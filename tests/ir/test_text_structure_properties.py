"""IR text keeps every field it writes, as a property over generated programs (Hypothesis).

test_roundtrip_properties.py checks ``print(parse(print(p))) == print(p)``: a fixed point, which a printer that
drops a field *and* a reader that never sees it pass together.  Here the oracle is the generated program itself,
read field by field from the objects, never from the text: ``parse(print(p))`` must hold the same slots (type with
layout and quantization, init and its constant, address, alias, provenance), outputs, used values and their
constants, declared and suggested pairs, nodes (ids, operands with holes, result types, provenance with branch
paths, every attribute of loads, stores, returns, recurrences and computes, regions of nested ``If``) and ordering
edges, minus exactly what the format documents it leaves out: float constants over ``ELIDED_FLOATS`` elements read
back as zeros of their type, constants over ``MAX_PRINTED_ELEMENTS`` and ``bytes`` attributes are not written.
Sizes are drawn around both constants; names around what needs quoting.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rnnir.ir import Program  # noqa: E402
from rnnir.ir.attributes import LoadKind, OrderingLayer, Provenance, QuantParams, SlotInit, StoreResult, TensorType  # noqa: E402
from rnnir.ir.nodes import Compute, LoadSlot, Node, Output, Recurrent, Region, Return, Slot, Store, Value  # noqa: E402
from rnnir.ir.pairs import PairSource, StatePair  # noqa: E402
from rnnir.ir.recurrence import Recognition  # noqa: E402
from rnnir.ir.text import ELIDED_FLOATS, MAX_PRINTED_ELEMENTS, parse_program, print_program  # noqa: E402

EXAMPLES = int(os.environ.get("RNNIR_PROPERTY_EXAMPLES", "15"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)

#: names a reader takes as they are, and names it must get back from a JSON string (spaces, '::', a digit first,
#: a '//' that is no comment, a quote)
NAMES = st.sampled_from(["h", "net.v2", "_x9", "onnx::LSTM_94", "9lives", "a b", "h//0", 'say "hi"', "état"])
DIMS = st.sampled_from([1, 3, 0, None, "T", "batch size", "n.k", "?x"])
FLOAT_SIZES = [1, ELIDED_FLOATS - 1, ELIDED_FLOATS, ELIDED_FLOATS + 1]
#: over MAX_PRINTED_ELEMENTS: not written.  Exactly MAX_PRINTED_ELEMENTS (written in full, a 30 kB line) is
#: test_printer_limits.py's: drawn here it made the property too slow for the mutation tool to run it
INT_SIZES = [1, ELIDED_FLOATS + 1, MAX_PRINTED_ELEMENTS + 1]


def _array(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    """Distinct non-zero values, exact in every dtype drawn: zeros or any other array cannot pass for them."""
    if dtype == "bool":
        return np.arange(n) % 3 != 0
    if dtype.startswith("float"):
        return ((rng.permutation(n) + 1) / 8.0).astype(dtype)
    return (rng.permutation(n) + 1).astype(dtype)


@st.composite
def tensor_types(draw: st.DrawFn) -> TensorType:
    dtype = draw(st.sampled_from(["float32", "int64", "bool", None]))
    shape = None if draw(st.integers(0, 5)) == 0 else tuple(draw(st.lists(DIMS, max_size=3)))
    layout = draw(st.sampled_from([None, "NCHW", 'a "b"']))
    quant = None
    if draw(st.booleans()):
        quant = QuantParams(scale=tuple(draw(st.lists(st.sampled_from([0.5, 0.125, 2.0]), min_size=1, max_size=2))),
                            zero_point=(draw(st.integers(-3, 3)),), axis=draw(st.sampled_from([None, 0, 1])))
    return TensorType(dtype=dtype, shape=shape, layout=layout, quant=quant)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """A program that uses every item and node kind of the format, with drawn names, types, sizes and attributes."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    names = iter(dict.fromkeys([*draw(st.lists(NAMES, min_size=4, max_size=4, unique=True)), "n0", "n1", "n2", "n3"]))
    p = Program(draw(NAMES))

    # slots: every init, a constant around the elision size, an address of its own, aliases of both kinds, a loc
    slots: list[Slot] = []
    for k in range(draw(st.integers(1, 3))):
        init_kind = draw(st.sampled_from(["zeros", "caller", "constant"]))
        value = None
        if init_kind == "constant":
            value = _array(rng, draw(st.sampled_from(FLOAT_SIZES)), draw(st.sampled_from(["float32", "float64", "int32"])))
        name = next(names)
        slot = Slot(name=name, type=draw(tensor_types()), init=SlotInit(init_kind, value),
                    address=draw(st.sampled_from(["", f"buf:{k}", "shared place"])),
                    provenance=Provenance(value=draw(st.sampled_from([name, None, f"graph input {k}"]))))
        slots.append(p.add_slot(slot))
    outputs = [p.add_output(Output(name=f"out {k}" if k else "y", type=draw(tensor_types()))) for k in range(2)]
    for slot in slots[1:]:
        slot.alias_of = draw(st.sampled_from([None, slots[0], outputs[0]]))

    # values from outside: inputs and constants of sizes around both limits, one unused (never printed)
    x = p.external(draw(NAMES) + "_in", draw(tensor_types()))
    consts = [
        p.external(f"cf{k}", None, _array(rng, draw(st.sampled_from(FLOAT_SIZES)), draw(st.sampled_from(["float32", "float64"]))))
        for k in range(2)
    ]
    consts.append(p.external("ci", None, _array(rng, draw(st.sampled_from(INT_SIZES)), draw(st.sampled_from(["int64", "int32", "bool"])))))
    p.external("unused", TensorType("float32", (2,)))

    def add(node: Node) -> Node:
        return p.add(node)

    # loads of every kind, with and without a loc of their own
    loads = [add(LoadSlot(outputs=[Value(name=f"ld{k}")], slot=s, kind=draw(st.sampled_from(list(LoadKind))),
                          provenance=Provenance(value=draw(st.sampled_from([f"ld{k}", s.name])))))
             for k, s in enumerate(slots)]
    h0 = loads[0].outputs[0]

    # a recurrence with drawn fields (zero-valued ones are defaults and stay unwritten)
    kind = draw(st.sampled_from(["RNN", "GRU", "LSTM"]))
    fields: dict[str, Any] = {
        "direction": draw(st.sampled_from(["forward", "reverse", "bidirectional"])),
        "hidden_size": draw(st.sampled_from([1, 4])),
        "layout": draw(st.sampled_from([0, 1])),
        "activations": draw(st.sampled_from([None, ("Tanh",), ("Sigmoid", "Tanh", "Tanh")])),
        "activation_alpha": draw(st.sampled_from([None, (0.5,), (1.0, 2.0)])),
        "activation_beta": draw(st.sampled_from([None, (0.25,)])),
        "clip": draw(st.sampled_from([None, 3.0, 0.5])),
        "linear_before_reset": draw(st.sampled_from([0, 1])) if kind == "GRU" else 0,
        "input_forget": draw(st.sampled_from([0, 1])) if kind == "LSTM" else 0,
    }
    recognition = draw(st.sampled_from(list(Recognition)))
    n_out = 3 if kind == "LSTM" else 2
    rec_outs: list[Value | None] = [Value(name=f"r{k}", type=draw(tensor_types())) for k in range(n_out)]
    if draw(st.booleans()):
        rec_outs[0] = None  # a hole in the results: `_`
    rec_ins: list[Value | None] = [x, consts[0], consts[1], None, None, h0]
    rec = add(Recurrent(kind=kind, inputs=rec_ins, outputs=rec_outs, recognition=recognition,
                        recognised_from=tuple(draw(st.lists(st.sampled_from(["Mul_1", "a b"]), max_size=2))) if recognition is not Recognition.OP else (),
                        provenance=Provenance(node=draw(st.sampled_from([None, "rec", "onnx::GRU_3"]))), **fields))
    hn = rec.outputs[1]
    assert hn is not None

    # computes: a domain, every attribute kind (small and over-the-limit arrays, bytes), several and untyped results
    attrs: dict[str, Any] = {
        "axis": draw(st.integers(-2, 2)),
        "alpha": 0.5,
        "mode": draw(st.sampled_from(["constant", "it's", "a=b"])),
        "perm": draw(st.sampled_from([(1, 0), [2, 0, 1]])),
        "scalar": draw(st.sampled_from([np.float32(1.5), np.int64(-7)])),
        "pads": (np.int64(1), np.int64(2)),
        "names": [np.str_("a"), "b"],
        "value": _array(rng, draw(st.sampled_from(FLOAT_SIZES + INT_SIZES)), draw(st.sampled_from(["float32", "int64"]))),
        "blob": b"\x00\x01",
        "a key": 1,
    }
    n_results = draw(st.integers(1, 3))
    typed = draw(st.sampled_from(["all", "some", "none"]))
    results = [Value(name=f"c{k}", type=draw(tensor_types()) if typed == "all" or (typed == "some" and k == 0) else TensorType())
               for k in range(n_results)]
    domain = draw(st.sampled_from(["", "com.microsoft", "ai.onnx.ml"]))
    comp = add(Compute(op=draw(st.sampled_from(["Split", "My Op"])), domain=domain, attributes=attrs,
                       inputs=[hn, consts[2], None], outputs=[*results[:1], None, *results[1:]],
                       provenance=Provenance(node=draw(st.sampled_from([None, "split"])), value=draw(st.sampled_from([None, "c0", "other"])),
                                             branch=tuple(draw(st.lists(st.sampled_from(["if0.then_branch", "x.else_branch"]), max_size=2))))))
    c0 = comp.outputs[0]
    assert c0 is not None

    # nested If: an If whose branch yields another If's result, each with its regions
    written = hn
    for level in range(draw(st.integers(0, 2))):
        cond = p.external(f"cond{level}", TensorType("bool", ()))
        alt = add(Compute(op="Identity", inputs=[h0], outputs=[Value(name=f"keep{level}")],
                          provenance=Provenance(branch=tuple(f"if{j}.else_branch" for j in range(level + 1)))))
        out_v = Value(name=f"if{level}_out", type=TensorType("float32", (1, 1, fields["hidden_size"])))
        node = add(Compute(op="If", inputs=[cond, written, alt.outputs[0]], outputs=[out_v], provenance=Provenance(node=f"if{level}")))
        node.regions = {"then_branch": Region("then_branch", (f"if{level}.then_branch",), yields=[written]),
                        "else_branch": Region("else_branch", (f"if{level}.else_branch", "deep"), yields=[alt.outputs[0]])}
        written = out_v

    # stores of every result into a slot and into an output, a Return with a drawn layer, ordering edges
    stores: list[Store] = []
    for k, dest in enumerate([slots[0], *draw(st.lists(st.sampled_from([*slots, *outputs]), max_size=2, unique_by=id))]):
        src = written if k == 0 else draw(st.sampled_from([c0, written, *(s.outputs[0] for s in stores)]))
        result = draw(st.sampled_from(list(StoreResult)))
        stores.append(add(Store(inputs=[src], outputs=[Value(name=f"s{k}", kind=result.value)], dest=dest, result=result,
                                provenance=Provenance(value=dest.name))))
    ret = add(Return(inputs=[s.outputs[0] for s in stores], layer=draw(st.sampled_from(list(OrderingLayer))),
                     provenance=Provenance(value=draw(st.sampled_from([None, "the end"])))))
    if draw(st.booleans()):
        p.add_order(loads[-1], stores[0])  # by results
    if draw(st.booleans()):
        p.add_order(comp, ret)  # to a node without results: by its id
    if draw(st.booleans()):
        p.add_order(loads[0], comp)

    # pairs: declared (with and without an output, any source, reasons needing escapes) and suggested
    p.state_pairs = [StatePair(slots[0].name, draw(st.sampled_from([None, outputs[0].name, outputs[1].name])),
                               draw(st.sampled_from(list(PairSource))), draw(st.sampled_from(["", 'the "caller"', "a // b"])), slot=slots[0])]
    p.suggested_pairs = [StatePair(draw(st.sampled_from(["ghost in", slots[-1].name])), draw(st.sampled_from([None, "gone", outputs[1].name])),
                                   PairSource.DATAFLOW, "maybe")] if draw(st.booleans()) else []
    return p


# -- what a program holds, read from its objects ---------------------------------------------------------


def _array_fields(arr: Any) -> tuple[str, tuple[int, ...], list[Any] | None]:
    """An array as dtype, shape and values; values None where the format writes none (elided: zeros)."""
    a = np.asarray(arr)
    elided = a.dtype.kind in "fc" and a.size > ELIDED_FLOATS
    return str(a.dtype), a.shape, None if elided else a.ravel().tolist()


def _expected_array(arr: Any) -> Any:
    a = np.asarray(arr)
    if a.size > MAX_PRINTED_ELEMENTS:
        return None
    return _array_fields(a)


def _got_array(arr: Any) -> Any:
    if arr is None:
        return None
    dtype, shape, values = _array_fields(arr)
    if values is None:  # elided: read back as zeros of its type, exactly
        assert not np.asarray(arr).any(), "an elided constant reads back as zeros"
    return dtype, shape, values


def _type(t: TensorType) -> tuple[Any, ...]:
    q = None if t.quant is None else (tuple(t.quant.scale), tuple(t.quant.zero_point), t.quant.axis)
    return t.dtype, t.shape, t.layout, q


def _name(v: Value | None) -> str | None:
    return None if v is None else v.name


def _plain(v: Any) -> Any:
    """An attribute value as the format promises to give it back: numpy scalars as Python numbers, lists as
    written (a tuple stays a tuple)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (tuple, list)):
        return type(v)(_plain(x) for x in v)
    return v


def _node(n: Node, got: bool) -> tuple[Any, ...]:
    results = list(n.results())
    # the reader names a node's provenance value by its first result when the text gives none
    value = n.provenance.value if got else n.provenance.value or (results[0].name if results else None)
    common = (type(n).__name__, n.id, [_name(v) for v in n.inputs], [_name(v) for v in n.outputs],
              n.provenance.node, value, tuple(n.provenance.branch))
    if isinstance(n, LoadSlot):
        assert n.slot is not None
        return (*common, n.slot.name, n.kind, [_type(v.type) for v in results] if got else [_type(n.slot.type)] * len(results))
    if isinstance(n, Store):
        assert n.dest is not None
        return (*common, type(n.dest).__name__, n.dest.name, n.result, [v.kind for v in results])
    if isinstance(n, Return):
        return (*common, n.layer)
    typed = any(v.type.dtype or v.type.shape is not None for v in results)
    types = [_type(v.type) if typed else None for v in results]
    if isinstance(n, Recurrent):
        fields = tuple(getattr(n, f) for f in ("kind", "direction", "hidden_size", "layout", "activations", "activation_alpha",
                                               "activation_beta", "clip", "linear_before_reset", "input_forget"))
        return (*common, types, fields, n.recognition, tuple(n.recognised_from))
    assert isinstance(n, Compute)
    if got:
        attrs = {k: _got_array(v) if isinstance(v, np.ndarray) else v for k, v in n.attributes.items()}
    else:
        attrs = {k: _expected_array(v) if isinstance(v, np.ndarray) else _plain(v) for k, v in n.attributes.items()
                 if not isinstance(v, bytes) and not (isinstance(v, np.ndarray) and v.size > MAX_PRINTED_ELEMENTS)}
    regions = {r: (tuple(reg.path), [_name(v) for v in reg.yields]) for r, reg in n.regions.items()}
    return (*common, types, n.op, n.domain, attrs, regions)


def _holds(prog: Program, got: bool) -> dict[str, Any]:
    """Everything the format writes, read from the objects (``got``: the program read back)."""
    used = [v for v in prog.externals.values() if v.uses]
    return {
        "name": prog.name,
        "slots": [(s.name, _type(s.type), s.init.kind,
                   (_got_array(s.init.value) if got else _expected_array(s.init.value)) if s.init.value is not None else None,
                   s.address, None if s.alias_of is None else (type(s.alias_of).__name__, s.alias_of.name),
                   s.provenance.value if got else s.provenance.value or s.name) for s in prog.slots],
        "outputs": [(o.name, _type(o.type)) for o in prog.outputs],
        "values": [(v.name, _type(v.type), None if v.const is None else (_got_array(v.const) if got else _expected_array(v.const)))
                   for v in used],
        "pairs": [(q.input, q.output, q.source, q.reason, None if q.slot is None else q.slot.name) for q in prog.state_pairs],
        "suggested": [(q.input, q.output, q.source, q.reason) for q in prog.suggested_pairs],
        "nodes": [_node(n, got) for n in prog.nodes],
        "orders": sorted((u, v) for u, v, d in prog.graph.edges(data=True) if d.get("kind") == "order"),
        "edges": sorted((u, v) for u, v in prog.graph.edges()),
    }


@PROPERTY
@given(programs())
def test_ir_text_gives_back_every_field_it_writes(prog):
    text = print_program(prog)
    again = parse_program(text)
    got, want = _holds(again, got=True), _holds(prog, got=False)
    for key in want:
        assert got[key] == want[key], f"{key} changed across print -> parse\n{text}"
    assert print_program(again) == text
    assert "unused" not in text and "blob" not in text  # what the format leaves out is left out
