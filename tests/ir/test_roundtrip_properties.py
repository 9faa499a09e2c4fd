"""Round trips at their boundaries, as properties over generated programs (Hypothesis).

Programs are built with :class:`rnnir.Builder` from drawn ingredients: slots with every init (zeros, caller, a
constant of a size around :data:`rnnir.irtext.ELIDED_FLOATS`), every load kind (copy, view), RNN/GRU/LSTM nodes,
constants of sizes around the elision and limit constants (float and int), nested ``If``, stores into a slot
with and without an output.  For each program:

* IR text: ``print(parse(print(p))) == print(p)``; what is printed in full parses back as itself (a float constant
  of exactly ``ELIDED_FLOATS`` elements is the boundary: printed in full, read back as its values, never zeros);
  findings and slice verdicts are equal before and after.
* export: ``load(export(p))`` lowers back to the same structure: slots (type, init, address, alias), load kinds,
  store results, pairs (a slot without an output included), and the same verdicts.  On every sample
  (``samples/*.onnx``) too: ``lowered -> export -> lowered`` keeps slots, pairs, loads, stores and verdicts.

The oracle of the round trip is the first program itself, and for the constants the arrays the test drew.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import rnnir  # noqa: E402
from rnnir import passes  # noqa: E402
from rnnir.ir import LoadKind, Program, Slot, Store, Value  # noqa: E402
from rnnir.ir.builder import Builder  # noqa: E402
from rnnir.ir.text import ELIDED_FLOATS, MAX_PRINTED_ELEMENTS, parse_program, print_program  # noqa: E402

EXAMPLES = int(os.environ.get("RNNIR_PROPERTY_EXAMPLES", "25"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.onnx"))

#: sizes either side of every constant that decides how a constant prints
FLOAT_SIZES = st.sampled_from([1, ELIDED_FLOATS - 1, ELIDED_FLOATS, ELIDED_FLOATS + 1])
INT_SIZES = st.sampled_from([1, ELIDED_FLOATS, ELIDED_FLOATS + 1, MAX_PRINTED_ELEMENTS - 1, MAX_PRINTED_ELEMENTS, MAX_PRINTED_ELEMENTS + 1])


def _verdicts(prog: Program) -> tuple[list[tuple[str, str, str]], list[tuple[str, str | None, str, str]]]:
    """Findings (code, severity, slot) and slice verdicts, sorted: what must not change across a round trip."""
    v = passes.verify(prog, noqa=False)
    found = sorted((d.code, d.severity.value, d.slot or "") for d in v.diagnostics)
    slices = sorted((s.input, _exported_output(prog, s.input, s.output), s.slice, s.verdict.value) for s in v.slices)
    return found, slices


def _exported_output(prog: Program, slot: str, output: str | None) -> str | None:
    """The output a pair has once exported: a slot written back that no graph output returns is exported with the
    output ``<slot>_out`` (export's rule), so a built program's ``h -> <nothing>`` comes back as ``h -> h_out``."""
    if output is not None or not any(st.dest is not None and st.dest.name == slot for st in prog.stores):
        return output
    return f"{slot}_out"


def _values(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    """Distinct non-zero values: read back as zeros (or any other elements) they cannot pass for themselves."""
    if dtype.startswith("float"):
        return (rng.integers(1, 1000, n) / 8.0).astype(dtype)  # exact in float32: a round trip must give them back
    return rng.integers(1, 1 << 20, n).astype(dtype)


@st.composite
def programs(draw: st.DrawFn, onnx_valid: bool = False) -> tuple[Program, dict[str, np.ndarray]]:
    """A valid program and the constants it holds by name (what a reader must get back when they print in full);
    ``onnx_valid``: no array-valued attribute (ONNX has none on its ops; the IR text prints one like a constant)."""
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    hidden = draw(st.sampled_from([2, 4]))
    kind = draw(st.sampled_from(["RNN", "GRU", "LSTM"]))
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    b = Builder(draw(st.sampled_from(["cell", "net.v2"])))
    consts: dict[str, np.ndarray] = {}

    def const(name: str, arr: np.ndarray):
        consts[name] = arr
        return b.const(name, arr)

    init = draw(st.sampled_from(["zeros", "caller", "constant"]))
    h_init: str | np.ndarray = init
    if init == "constant":
        h_init = _values(rng, hidden, "float32").reshape(1, 1, hidden)
    h = b.slot("h", "float32", (1, 1, hidden), init=h_init)
    h0 = b.load(h, draw(st.sampled_from(["copy", "view"])))
    x = b.input("x", "float32", ("T", 1, 3))
    W = const("W", _values(rng, gates * hidden * 3, "float32").reshape(1, gates * hidden, 3))
    R = const("R", _values(rng, gates * hidden * hidden, "float32").reshape(1, gates * hidden, hidden))
    extra: dict[str, object] = {}
    c_slot: Slot | None = None
    if kind == "LSTM":
        c_slot = b.slot("c", "float32", (1, 1, hidden), init=draw(st.sampled_from(["zeros", "caller"])))
        extra["initial_c"] = b.load(c_slot, draw(st.sampled_from(["copy", "view"])))
    outs = b.recurrent(kind, x, W, R, initial_h=h0, hidden_size=hidden, name="rec", **extra)
    hn = outs[1]

    # constants at the elision boundaries, used by the graph so they are printed
    nf = draw(FLOAT_SIZES)
    fc = const("fconst", _values(rng, nf, draw(st.sampled_from(["float32", "float64"]))))
    ni = draw(INT_SIZES)
    ic = const("iconst", _values(rng, ni, draw(st.sampled_from(["int64", "int32"]))))
    side = b.compute("Add", [fc, fc], name="side_f")
    side_i = b.compute("Neg", [ic], name="side_i")
    if not onnx_valid:
        attr_arr = _values(rng, draw(FLOAT_SIZES), "float32")
        consts["attr:value"] = attr_arr
        b.compute("Identity", [side], attributes={"value": attr_arr}, name="attr_holder")

    # nested If: the written-back value chosen by one or two conditions
    depth = draw(st.integers(0, 2))
    written = hn
    for level in range(depth):
        cond = b.input(f"cond{level}", "bool", ())
        alt = b.compute("Identity", [h0], name=f"keep{level}")
        written = b.if_(cond, [written], [alt], name=f"if{level}")
    # the store structure ONNX cannot say (IR text and export metadata must): the slot store's result, a chain
    # (the output store reads that result: AL001), an explicit order edge, the Return's layer
    result = draw(st.sampled_from(["token", "alias", "value"]))
    slot_store = b.store(written, h, result)
    waits = [slot_store]
    if draw(st.booleans()):  # the caller also sees the new state (else: the slot has no output of its own)
        chained = result != "token" and draw(st.booleans())
        out_store = b.store(slot_store if chained else written, b.output("h_out", "float32", (1, 1, hidden)), "value")
        waits.append(out_store)
        if not chained and draw(st.booleans()):
            b.order(out_store, slot_store)
    if c_slot is not None and draw(st.booleans()):
        b.store(outs[2], c_slot)
    waits.append(b.store(side_i, b.output("side", "int64" if ic.type.dtype == "int64" else "int32", (ni,)), "value"))
    if c_slot is not None:
        waits += [st_.outputs[0] for st_ in b.program.stores_to(c_slot)]
    if draw(st.booleans()):  # else build() makes a Return by the runtime waiting for every store
        b.ret(*waits[: draw(st.integers(1, len(waits)))], layer=draw(st.sampled_from(["runtime", "caller", "device", "none"])))
    return b.build(), consts


def _parsed_const(prog: Program, name: str) -> np.ndarray | None:
    if name == "attr:value":
        node = next(n for n in prog.nodes if getattr(n, "provenance", None) and n.provenance.node == "attr_holder")
        v = node.attributes.get("value")  # type: ignore[attr-defined]
        return None if v is None else np.asarray(v)
    ext = prog.externals.get(name)
    return None if ext is None or ext.const is None else np.asarray(ext.const)


def _printed_in_full(arr: np.ndarray) -> bool:
    if arr.dtype.kind in "fc":
        return arr.size <= ELIDED_FLOATS
    return arr.size <= MAX_PRINTED_ELEMENTS


@PROPERTY
@given(programs())
def test_ir_text_round_trip_is_a_fixed_point_and_keeps_constants_and_verdicts(drawn):
    prog, consts = drawn
    text = print_program(prog)
    again = parse_program(text)
    assert print_program(again) == text
    assert _verdicts(again) == _verdicts(prog)
    for name, arr in consts.items():
        got = _parsed_const(again, name)
        if _printed_in_full(arr):
            assert got is not None, f"{name} ({arr.size} x {arr.dtype}) was not printed"
            np.testing.assert_array_equal(got.ravel(), arr.ravel(), err_msg=f"{name}: {arr.size} x {arr.dtype} did not read back as itself")
            assert got.dtype == arr.dtype and got.shape == arr.shape
        elif got is not None:  # elided: its type survives, its values are not promised
            assert got.dtype == arr.dtype and got.shape == arr.shape


def test_a_float_constant_of_exactly_the_elision_size_reads_back_as_itself():
    """The boundary named outright (the property draws it too): ELIDED_FLOATS elements print in full, one more does not."""
    for n, full in ((ELIDED_FLOATS, True), (ELIDED_FLOATS + 1, False)):
        b = Builder("edge")
        arr = np.arange(1, n + 1, dtype=np.float32) / 4
        out = b.output("y", "float32", (n,))
        b.store(b.compute("Neg", [b.const("k", arr)]), out, "value")
        again = parse_program(print_program(b.build()))
        got = np.asarray(again.externals["k"].const)
        if full:
            np.testing.assert_array_equal(got, arr)
        else:
            assert f"dense<float32[{n}] ...>" in print_program(again)
            np.testing.assert_array_equal(got, np.zeros(n, np.float32))


# -- export ----------------------------------------------------------------------------------------


def _structure(prog: Program) -> dict[str, object]:
    """What export promises to keep: slots, pairs, load kinds, store destinations and results, the Return's layer."""
    return {
        "slots": sorted(
            (s.name, s.type.dtype, s.type.shape, s.init.kind, None if s.init.value is None else np.asarray(s.init.value).tolist(), s.address,
             None if s.alias_of is None else s.alias_of.name)
            for s in prog.slots
        ),
        "pairs": sorted((p.input, _exported_output(prog, p.input, p.output)) for p in prog.state_pairs),
        "loads": sorted((ld.slot.name if ld.slot else "", ld.kind.value) for ld in prog.loads),
        "stores": sorted((st.dest.name if st.dest else "", type(st.dest).__name__, st.result.value) for st in prog.stores),
        "returns": [(r.layer.value, sorted(_dest(w) for w in r.waits)) for r in prog.returns],
        "chains": sorted((st.dest.name if st.dest else "", _dest(st.value)) for st in prog.stores if st.value is not None and isinstance(st.value.producer, Store)),
        "orders": sorted((_dest(prog.node(u).outputs[0]), _dest(prog.node(v).outputs[0])) for u, v, d in prog.graph.edges(data=True) if d.get("kind") == "order"),
    }


def _dest(v: Value | None) -> str:
    """A store's result by what it stores into (value names differ between a built program and its reload)."""
    p = None if v is None else v.producer
    return f"store->{p.dest.name}" if isinstance(p, Store) and p.dest is not None else (v.name if v is not None else "")


@PROPERTY
@given(programs(onnx_valid=True))
def test_export_then_load_keeps_the_structure_metadata_and_verdicts(drawn):
    prog, _ = drawn
    again = rnnir.load(rnnir.export(prog))
    assert _structure(again) == _structure(prog)
    assert _verdicts(again) == _verdicts(prog)


def test_export_keeps_a_view_load_and_a_slot_without_an_output():
    """Named outright: the two pieces of metadata the issue saw dropped."""
    b = Builder("meta")
    h = b.slot("h", "float32", (1, 1, 2))
    g = b.slot("g", "float32", (1, 1, 2))  # read, never written: no output of its own
    x = b.input("x", "float32", (1, 1, 2))
    hv = b.load(h, "view")
    gv = b.load(g, "copy")
    s = b.compute("Add", [hv, b.compute("Add", [gv, x])])
    b.store(s, h)
    prog = b.build()
    again = rnnir.load(rnnir.export(prog))
    assert sorted((ld.slot.name, ld.kind) for ld in again.loads) == [("g", LoadKind.COPY), ("h", LoadKind.VIEW)]
    assert {p.input: p.output for p in prog.state_pairs} == {"h": None, "g": None}  # built: no output returns h
    assert {p.input: p.output for p in again.state_pairs} == {"h": "h_out", "g": None}  # exported: h as h_out
    assert _verdicts(again) == _verdicts(prog)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_lowered_exported_and_lowered_again_is_the_same_program(path):
    prog = rnnir.load(path)
    again = rnnir.load(rnnir.export(prog))
    assert _structure(again) == _structure(prog)
    assert _verdicts(again) == _verdicts(prog)
    twice = rnnir.load(rnnir.export(again))  # and the second export is the first one's fixed point
    assert _structure(twice) == _structure(again)


@pytest.mark.parametrize(
    "raw",
    ["{not json", "[1, 2]", '{"h": 5}', '{"h": {"init": "constant", "value": [1, 2], "value_shape": [3]}}', '{"h": {"init": "sometimes"}}'],
    ids=["not-json", "a-list", "not-an-object", "value-of-the-wrong-size", "unknown-init"],
)
def test_unreadable_slot_metadata_leaves_the_default_init(raw):
    """rnnir.slots is rnnir's own record: an entry it cannot read changes nothing (zeros, as without it), never a traceback."""
    from rnnir.onnxio.metadata import META_SLOTS
    from rnnir.onnxio.metadata import write as write_meta

    b = Builder("meta")
    h = b.slot("h", "float32", (1, 1, 2), init="caller")
    b.store(b.compute("Neg", [b.load(h)]), h)
    model = rnnir.export(b.build())
    write_meta(model, META_SLOTS, raw)
    (slot,) = rnnir.load(model).slots
    assert slot.init.kind == "zeros"


@pytest.mark.parametrize("extra", [-1, 0, 1], ids=["below", "at", "above"])
def test_a_constant_initial_state_at_the_inline_limit_survives_export(extra):
    """exporter._INLINE_INIT: a slot's constant initial value up to that many elements is recorded inline in
    rnnir.slots and reloads as itself; one element more is not recorded (the reload must still work)."""
    from rnnir.exporter import _INLINE_INIT

    n = _INLINE_INIT + extra
    init = (np.arange(n, dtype=np.float32) % 97 + 1).reshape(1, 1, n)
    b = Builder("big")
    h = b.slot("h", "float32", (1, 1, n), init=init)
    b.store(b.compute("Neg", [b.load(h)]), h)
    (slot,) = rnnir.load(rnnir.export(b.build())).slots
    if extra <= 0:
        assert slot.init.kind == "constant"
        np.testing.assert_array_equal(slot.init.value, init)
    else:
        assert slot.init.kind in ("constant", "zeros")


def _nested_if_model(inner_else: str) -> onnx.ModelProto:
    """h -> If(c1){ If(c2){ GRU(x, h).Y_h } else { <inner_else> } } else { GRU(x, h).Y_h } -> hn: an If in an If
    branch, each branch with its own GRU reading the outer graph's h, x and weights (ONNX's scoping)."""
    from onnx import TensorProto, helper, numpy_helper

    F, H, I = TensorProto.FLOAT, 2, 3
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 3 * H, I)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((1, 3 * H, H)).astype(np.float32), "R")]

    def gru_branch(name: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node("GRU", ["x", "W", "R", "", "", "h"], [f"{name}_Y", f"{name}_hn"], hidden_size=H, name=f"{name}_gru")],
                                 name, [], [helper.make_tensor_value_info(f"{name}_hn", F, [1, 1, H])])

    if inner_else == "held":  # the inner else hands the state back unchanged: a hold on that path
        inner_else_g = helper.make_graph([helper.make_node("Identity", ["h"], ["held"], name="hold")], "inner_else", [],
                                         [helper.make_tensor_value_info("held", F, [1, 1, H])])
    else:
        inner_else_g = gru_branch("inner_else")
    inner = helper.make_node("If", ["c2"], ["inner_out"], name="inner_if", then_branch=gru_branch("inner_then"), else_branch=inner_else_g)
    outer_then = helper.make_graph([inner], "outer_then", [], [helper.make_tensor_value_info("inner_out", F, [1, 1, H])])
    outer = helper.make_node("If", ["c1"], ["hn"], name="outer_if", then_branch=outer_then, else_branch=gru_branch("outer_else"))
    ins = [helper.make_tensor_value_info("x", F, [4, 1, I]), helper.make_tensor_value_info("h", F, [1, 1, H]),
           helper.make_tensor_value_info("c1", TensorProto.BOOL, []), helper.make_tensor_value_info("c2", TensorProto.BOOL, [])]
    model = helper.make_model(helper.make_graph([outer], "nested_if", ins, [helper.make_tensor_value_info("hn", F, [1, 1, H])], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("inner_else", ["gru", "held"])
def test_a_nested_if_round_trips_through_ir_text_and_export(inner_else):
    prog = rnnir.load(_nested_if_model(inner_else), pairs={"h": "hn"})
    text = print_program(prog)
    assert "'branch': ('outer_if.then_branch', 'inner_if.then_branch')" in text  # really nested: a node two Ifs deep
    again = parse_program(text)
    assert print_program(again) == text
    assert _verdicts(again) == _verdicts(prog)
    exported = rnnir.load(rnnir.export(prog))
    assert _structure(exported) == _structure(prog)
    assert _verdicts(exported) == _verdicts(prog)
