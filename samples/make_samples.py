"""Regenerate every sample model of this folder: ``python samples/make_samples.py``.

Each sample is ``<name>.onnx`` plus ``<name>.expected.json``::

    {"description": "...",
     "pairs": {"<state input>": "<state output or null>"},
     "findings": [{"code": "SD002", "severity": "error"}],
     "correct": true | false}

``pairs`` is what ``rnnir.load(path)`` must find with the default policies;
``findings`` is every error/warning finding ``passes.run`` must return (as a
multiset of (code, severity)); correct samples list none.  One sample,
``sd010_constant_init``, also has ``entry_constant`` (the pairs and findings with
``rnnir.load(path, entry="constant")``).

Samples whose store structure cannot be written in plain ONNX (a chain, an
aliased slot, a missing wait, an in-place load) are IR text (``<name>.rnnir``,
:func:`ir_sample`): the GRU/LSTM graph lowered with those stores and printed.

Everything is deterministic: fixed seeds, fixed names, no timestamps, so a
rerun rewrites byte-identical files.  Models use opset 17 and IR version 8,
hidden sizes 1..16, batch 1 unless a sample needs more.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
HERE = Path(__file__).resolve().parent
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


# ---------------------------------------------------------------------------- building


class Graph:
    """A graph under construction: nodes, initializers, typed inputs and outputs."""

    def __init__(self, name: str, prefix: str = "") -> None:
        self.name = name
        self.prefix = prefix  # node-name prefix, so names stay unique across If branches
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._n = 0

    def init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def const(self, name: str, arr: Any, dtype: Any = np.int64) -> str:
        """A Constant node (usable inside If branches, where the lowering reads it as a constant)."""
        t = numpy_helper.from_array(np.asarray(arr, dtype=dtype), name)
        self.nodes.append(helper.make_node("Constant", [], [name], name=self.prefix + name, value=t))
        return name

    def node(self, op: str, ins: list[str], outs: list[str], name: str | None = None, **attrs: Any) -> list[str]:
        self._n += 1
        nm = self.prefix + (name or f"{op.lower()}_{self._n}")
        self.nodes.append(helper.make_node(op, ins, outs, name=nm, **attrs))
        return outs

    def input(self, name: str, elem: int, shape: list[Any]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def output(self, name: str, elem: int, shape: list[Any]) -> str:
        self.outputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def proto(self) -> onnx.GraphProto:
        return helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, initializer=self.inits)


def model_of(g: Graph, doc: str, meta: dict[str, Any] | None = None) -> onnx.ModelProto:
    m = helper.make_model(g.proto(), opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rnnir-samples")
    m.ir_version = IR_VERSION
    m.doc_string = doc
    for key, value in (meta or {}).items():
        p = m.metadata_props.add()
        p.key = key
        p.value = value if isinstance(value, str) else json.dumps(value)
    return m


def ir_sample(g: Graph, doc: str, pairs: dict[str, str], spec: dict[str, Any]) -> str:
    """A store structure plain ONNX cannot express, as the IR text of the graph lowered with those stores.

    ``spec`` lists the stores (``reads`` ``value:NAME`` or ``store:ID``), the slots' storage facts, the Return
    and the order edges; the sample file is the program's IR text (``.rnnir``), which rnnir reads as it is."""
    from rnnir.ir import OrderingLayer, StoreResult
    from rnnir.ir.structure import SlotFacts, StoreFact, StoreStructure
    from rnnir.ir.text import print_program
    from rnnir.lower import Policy, lower, read_model

    model = model_of(g, doc)
    onnx.checker.check_model(model, full_check=True)
    stores = [
        StoreFact(st["id"], st["dest"], st["reads"].split(":", 1)[1], st["reads"].startswith("store:"), StoreResult(st["result"]))
        for st in spec["stores"]
    ]
    slots = {n: SlotFacts(view_load=f.get("load") == "view", alias_of=f.get("alias_of"), address=f.get("address")) for n, f in spec.get("slots", {}).items()}
    for name in pairs:
        slots.setdefault(name, SlotFacts())
    structure = StoreStructure(
        slots=slots,
        outputs=[o.name for o in model.graph.output],
        stores=stores,
        waits=list(spec["return"]["waits"]),
        layer=OrderingLayer(spec["return"]["layer"]),
        order=[(a, b) for a, b in spec.get("order", [])],
    )
    return print_program(lower(read_model(model, label=g.name), pairs, Policy(), structure=structure)) + "\n"


def weights(g: Graph, kind: str, stem: str, n_in: int, hidden: int, rng: np.random.Generator, dirs: int = 1, scale: float = 0.5) -> tuple[str, str, str]:
    """Initializers W, R, B of an ONNX ``kind`` op (random, float32)."""
    k = GATES[kind]
    w = (rng.standard_normal((dirs, k * hidden, n_in)) * scale).astype(np.float32)
    r = (rng.standard_normal((dirs, k * hidden, hidden)) * scale).astype(np.float32)
    b = (rng.standard_normal((dirs, 2 * k * hidden)) * scale * 0.2).astype(np.float32)
    return g.init(f"{stem}_W", w), g.init(f"{stem}_R", r), g.init(f"{stem}_B", b)


def scalar_rnn(g: Graph, r: float, x: str, h0: str, y: str, hn: str) -> None:
    """``h_t = r·h_{t-1} + x_t`` as an ONNX RNN (hidden 1, W = 1, R = r, B = 0, Affine(1, 0))."""
    g.init("W", np.ones((1, 1, 1), np.float32))
    g.init("R", np.full((1, 1, 1), r, np.float32))
    g.init("B", np.zeros((1, 2), np.float32))
    g.node("RNN", [x, "W", "R", "B", "", h0], [y, hn], name="rnn", hidden_size=1, activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])


# ---------------------------------------------------------------------------- samples

SAMPLES: list[Callable[[], tuple[onnx.ModelProto, dict[str, Any]]]] = []


def sample(fn: Callable[[], tuple[onnx.ModelProto, dict[str, Any]]]) -> Callable[[], tuple[onnx.ModelProto, dict[str, Any]]]:
    SAMPLES.append(fn)
    return fn


def expect(description: str, pairs: dict[str, str | None], findings: list[tuple[str, str]] = (), correct: bool | None = None, **extra: Any) -> dict[str, Any]:
    """``correct`` defaults to "no error or warning expected"; a sample whose bug only an info hints at says False."""
    findings = list(findings)
    if correct is None:
        correct = not any(sev == "error" or sev == "warning" for _, sev in findings)
    out = {
        "description": description,
        "pairs": pairs,
        "findings": [{"code": c, "severity": s} for c, s in findings],
        "correct": correct,
    }
    out.update(extra)
    return out


# -- correct -----------------------------------------------------------------------------


@sample
def rnn_linear_fanout():
    g = Graph("rnn_linear_fanout")
    g.input("x", FLOAT, ["T", 1, 1])
    g.input("h0", FLOAT, [1, 1, 1])
    scalar_rnn(g, 2.0, "x", "h0", "y", "hn")
    g.output("y", FLOAT, ["T", 1, 1, 1])
    g.output("hn", FLOAT, [1, 1, 1])
    d = "Linear recurrence h_t = 2*h_{t-1} + x_t (ONNX RNN, Affine(1,0)); hn = Y_h fans out to the slot and the output. Persistence and re-initialisation diverge from call 2 on."
    return model_of(g, d), expect(d, {"h0": "hn"})


@sample
def rnn_half_decay():
    g = Graph("rnn_half_decay")
    g.input("x", FLOAT, ["T", 1, 1])
    g.input("h0", FLOAT, [1, 1, 1])
    scalar_rnn(g, 0.5, "x", "h0", "y", "hn")
    g.output("y", FLOAT, ["T", 1, 1, 1])
    g.output("hn", FLOAT, [1, 1, 1])
    d = "h_t = 0.5*h_{t-1} + x_t (ONNX RNN, Affine(1,0)). x = [1, 0, 2], h0 = 0 gives 1, 0.5, 2.25; three one-step calls give 2.25 with persistence and 2 with re-initialisation."
    return model_of(g, d), expect(d, {"h0": "hn"})


@sample
def gru_fanout():
    rng = np.random.default_rng(101)
    g = Graph("gru_fanout")
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, 4])
    w, r, b = weights(g, "GRU", "gru", 3, 4, rng)
    g.node("GRU", ["x", w, r, b, "", "h0"], ["y", "hn"], name="gru", hidden_size=4, linear_before_reset=1)
    g.output("y", FLOAT, ["T", 1, 1, 4])
    g.output("hn", FLOAT, [1, 1, 4])
    d = "One GRU (hidden 4, linear_before_reset=1 as PyTorch exports it): h0 -> initial_h, Y_h -> hn."
    return model_of(g, d), expect(d, {"h0": "hn"})


@sample
def lstm_fanout():
    rng = np.random.default_rng(102)
    g = Graph("lstm_fanout")
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, 5])
    g.input("c0", FLOAT, [1, 1, 5])
    w, r, b = weights(g, "LSTM", "lstm", 3, 5, rng)
    g.node("LSTM", ["x", w, r, b, "", "h0", "c0"], ["y", "hn", "cn"], name="lstm", hidden_size=5)
    g.output("y", FLOAT, ["T", 1, 1, 5])
    g.output("hn", FLOAT, [1, 1, 5])
    g.output("cn", FLOAT, [1, 1, 5])
    d = "One LSTM (hidden 5): h0/c0 -> initial_h/initial_c, Y_h/Y_c -> hn/cn, the PyTorch export shape."
    return model_of(g, d), expect(d, {"h0": "hn", "c0": "cn"})


def _stacked_gru(name: str, seed: int, swap: bool) -> tuple[onnx.ModelProto, str]:
    rng = np.random.default_rng(seed)
    g = Graph(name)
    H = 4
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [2, 1, H])
    g.init("s0", np.array([0], np.int64))
    g.init("s1", np.array([1], np.int64))
    g.init("s2", np.array([2], np.int64))
    g.init("ax0", np.array([0], np.int64))
    g.init("ax1", np.array([1], np.int64))
    g.node("Slice", ["h0", "s0", "s1", "ax0"], ["h0_l0"], name="slice_l0")
    g.node("Slice", ["h0", "s1", "s2", "ax0"], ["h0_l1"], name="slice_l1")
    w0, r0, b0 = weights(g, "GRU", "gru_l0", 3, H, rng)
    w1, r1, b1 = weights(g, "GRU", "gru_l1", H, H, rng)
    g.node("GRU", ["x", w0, r0, b0, "", "h0_l0"], ["Y_l0", "hn_l0"], name="gru_l0", hidden_size=H)
    g.node("Squeeze", ["Y_l0", "ax1"], ["x_l1"], name="squeeze_l0")
    g.node("GRU", ["x_l1", w1, r1, b1, "", "h0_l1"], ["Y_l1", "hn_l1"], name="gru_l1", hidden_size=H)
    g.node("Squeeze", ["Y_l1", "ax1"], ["y"], name="squeeze_l1")
    parts = ["hn_l1", "hn_l0"] if swap else ["hn_l0", "hn_l1"]
    g.node("Concat", parts, ["hn"], name="concat_hn", axis=0)
    g.output("y", FLOAT, ["T", 1, H])
    g.output("hn", FLOAT, [2, 1, H])
    return g, H


@sample
def gru_stacked_2layer():
    g, _ = _stacked_gru("gru_stacked_2layer", 103, swap=False)
    d = "Two stacked GRUs sharing one state h0[2,B,H]: Slice h0[0:1] -> layer 0, h0[1:2] -> layer 1; hn = Concat(Y_h layer 0, Y_h layer 1)."
    return model_of(g, d), expect(d, {"h0": "hn"})


def _lstm_branch(prefix: str, stem: str, H: int, cond_name: str) -> Graph:
    """An If branch: state[0] -> initial_h, state[1] -> initial_c, its own LSTM, yields (y, Concat(Y_h, Y_c))."""
    b = Graph(f"{prefix}branch", prefix=prefix)
    i0 = b.const(f"{prefix}i0", 0)
    i1 = b.const(f"{prefix}i1", 1)
    ax = b.const(f"{prefix}ax0", [0])
    b.node("Gather", ["state", i0], [f"{prefix}h_sq"], name="gather_h", axis=0)
    b.node("Gather", ["state", i1], [f"{prefix}c_sq"], name="gather_c", axis=0)
    b.node("Unsqueeze", [f"{prefix}h_sq", ax], [f"{prefix}h"], name="unsqueeze_h")
    b.node("Unsqueeze", [f"{prefix}c_sq", ax], [f"{prefix}c"], name="unsqueeze_c")
    b.node(
        "LSTM",
        ["x", f"{stem}_W", f"{stem}_R", f"{stem}_B", "", f"{prefix}h", f"{prefix}c"],
        [f"{prefix}Y", f"{prefix}Y_h", f"{prefix}Y_c"],
        name="lstm",
        hidden_size=H,
    )
    ax1 = b.const(f"{prefix}ax1", [1])
    b.node("Squeeze", [f"{prefix}Y", ax1], [f"{prefix}out"], name="squeeze_y")
    return b


def _packed_if(name: str, seed: int, swap_else: bool) -> Graph:
    rng = np.random.default_rng(seed)
    H, I = 4, 2
    g = Graph(name)
    g.input("x", FLOAT, ["T", 1, I])
    g.input("state", FLOAT, [2, 1, H])
    g.input("sr", INT64, [])
    weights(g, "LSTM", "lstm16k", I, H, rng)
    weights(g, "LSTM", "lstm8k", I, H, rng)
    g.init("sr16k", np.array(16000, np.int64))
    g.node("Equal", ["sr", "sr16k"], ["is16k"], name="sr_is_16k")
    branches = {}
    for prefix, stem, swap in (("then_", "lstm16k", False), ("else_", "lstm8k", swap_else)):
        b = _lstm_branch(prefix, stem, H, "is16k")
        parts = [f"{prefix}Y_c", f"{prefix}Y_h"] if swap else [f"{prefix}Y_h", f"{prefix}Y_c"]
        b.node("Concat", parts, [f"{prefix}stateN"], name="concat_state", axis=0)
        b.output(f"{prefix}out", FLOAT, ["T", 1, H])
        b.output(f"{prefix}stateN", FLOAT, [2, 1, H])
        branches[prefix] = b.proto()
    g.node("If", ["is16k"], ["output", "stateN"], name="if_sr", then_branch=branches["then_"], else_branch=branches["else_"])
    g.output("output", FLOAT, ["T", 1, H])
    g.output("stateN", FLOAT, [2, 1, H])
    return g


@sample
def lstm_packed_if():
    g = _packed_if("lstm_packed_if", 104, swap_else=False)
    d = (
        "silero-vad shape: packed state[2,B,H] (state[0]=h, state[1]=c), If(sr == 16000) chooses one of two LSTMs with "
        "their own weights; each branch Gathers state[0]/state[1], Unsqueezes them into initial_h/initial_c and yields "
        "stateN = Concat(Y_h, Y_c)."
    )
    return model_of(g, d), expect(d, {"state": "stateN"})


@sample
def lstm_unrolled_cell():
    rng = np.random.default_rng(105)
    H, I = 3, 2
    g = Graph("lstm_unrolled_cell")
    g.input("x", FLOAT, [1, I])
    g.input("state", FLOAT, [2, 1, H])
    g.init("Wx", (rng.standard_normal((I, 4 * H)) * 0.5).astype(np.float32))
    g.init("Wh", (rng.standard_normal((H, 4 * H)) * 0.5).astype(np.float32))
    g.init("bias", (rng.standard_normal((4 * H,)) * 0.1).astype(np.float32))
    g.init("i0", np.array(0, np.int64))
    g.init("i1", np.array(1, np.int64))
    g.init("ax0", np.array([0], np.int64))
    g.node("Gather", ["state", "i0"], ["h"], name="gather_h", axis=0)
    g.node("Gather", ["state", "i1"], ["c"], name="gather_c", axis=0)
    g.node("MatMul", ["x", "Wx"], ["gx"], name="matmul_x")
    g.node("Gemm", ["h", "Wh", "bias"], ["gh"], name="gemm_h")
    g.node("Add", ["gx", "gh"], ["gates"], name="add_gates")
    g.node("Split", ["gates"], ["gi", "gf", "gg", "go"], name="split_gates", axis=1)  # four equal parts (opset 17)
    g.node("Sigmoid", ["gi"], ["i"], name="sigmoid_i")
    g.node("Sigmoid", ["gf"], ["f"], name="sigmoid_f")
    g.node("Tanh", ["gg"], ["gc"], name="tanh_g")
    g.node("Sigmoid", ["go"], ["o"], name="sigmoid_o")
    g.node("Mul", ["f", "c"], ["fc"], name="mul_fc")
    g.node("Mul", ["i", "gc"], ["ig"], name="mul_ig")
    g.node("Add", ["fc", "ig"], ["c_new"], name="add_c")
    g.node("Tanh", ["c_new"], ["tc"], name="tanh_c")
    g.node("Mul", ["o", "tc"], ["y"], name="mul_h")
    g.node("Unsqueeze", ["y", "ax0"], ["h_new_u"], name="unsqueeze_h")
    g.node("Unsqueeze", ["c_new", "ax0"], ["c_new_u"], name="unsqueeze_c")
    g.node("Concat", ["h_new_u", "c_new_u"], ["stateN"], name="concat_state", axis=0)
    g.output("y", FLOAT, [1, H])
    g.output("stateN", FLOAT, [2, 1, H])
    d = (
        "One LSTM step written as plain ops (MatMul, Gemm, Add, Split, Sigmoid, Tanh, Mul), no LSTM node; gate order "
        "i, f, g, o; h and c packed in state[2,1,H] and written back as Concat(h', c')."
    )
    # recognised as an LSTM cell and confirmed by execution: state[0] -> initial_h/Y_h, state[1] -> initial_c/Y_c
    return model_of(g, d), expect(d, {"state": "stateN"}, [], verdicts={"state[0]": "verified", "state[1]": "verified"})


@sample
def sd010_constant_init():
    rng = np.random.default_rng(106)
    H = 3
    g = Graph("sd010_constant_init")
    g.input("x", FLOAT, ["T", 1, 2])
    w, r, b = weights(g, "RNN", "rnn", 2, H, rng)
    g.init("h_init", np.full((1, 1, H), 0.25, np.float32))
    g.node("RNN", ["x", w, r, b, "", "h_init"], ["y", "h_final"], name="rnn", hidden_size=H)
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("h_final", FLOAT, [1, 1, H])
    d = (
        "A tanh RNN whose initial_h is a constant initializer (h_init = 0.25) and whose Y_h is a graph output. "
        "No state input, so no pairs by default; with the entry=constant policy h_init becomes a slot initialised "
        "with the constant and written back from h_final. By default the RNN starts from the same constant on every "
        "call while returning its final state: SD010 (state not exposed)."
    )
    return model_of(g, d), expect(d, {}, [("SD010", "warning")], entry_constant={"pairs": {"h_init": "h_final"}, "findings": []})


@sample
def gru_reset_branch():
    rng = np.random.default_rng(107)
    H, I = 4, 3
    g = Graph("gru_reset_branch")
    g.input("x", FLOAT, ["T", 1, I])
    g.input("state", FLOAT, [1, 1, H])
    g.input("reset", TensorProto.BOOL, [])
    weights(g, "GRU", "gru", I, H, rng)
    branches = {}
    for prefix in ("then_", "else_"):
        b = Graph(f"{prefix}branch", prefix=prefix)
        if prefix == "then_":
            shape = b.const(f"{prefix}zshape", [1, 1, H])
            b.node("ConstantOfShape", [shape], [f"{prefix}h0"], name="zeros", value=numpy_helper.from_array(np.zeros(1, np.float32)))
            init = f"{prefix}h0"
        else:
            init = "state"
        b.node("GRU", ["x", "gru_W", "gru_R", "gru_B", "", init], [f"{prefix}Y", f"{prefix}stateN"], name="gru", hidden_size=H)
        ax1 = b.const(f"{prefix}ax1", [1])
        b.node("Squeeze", [f"{prefix}Y", ax1], [f"{prefix}y"], name="squeeze_y")
        b.output(f"{prefix}y", FLOAT, ["T", 1, H])
        b.output(f"{prefix}stateN", FLOAT, [1, 1, H])
        branches[prefix] = b.proto()
    g.node("If", ["reset"], ["y", "stateN"], name="if_reset", then_branch=branches["then_"], else_branch=branches["else_"])
    g.output("y", FLOAT, ["T", 1, H])
    g.output("stateN", FLOAT, [1, 1, H])
    d = (
        "Explicit reset: If(reset) runs the GRU from zeros (ConstantOfShape) in the then branch and from the caller's "
        "state in the else branch; both branches write stateN = Y_h. Starting from zeros is the caller's request here, "
        "not an ignored state: no SD001/SD003/SD007."
    )
    return model_of(g, d), expect(d, {"state": "stateN"})


@sample
def gru_pairs_metadata():
    rng = np.random.default_rng(108)
    g = Graph("gru_pairs_metadata")
    g.input("x", FLOAT, ["T", 1, 2])
    g.input("memory", FLOAT, [1, 1, 3])
    w, r, b = weights(g, "GRU", "gru", 2, 3, rng)
    g.node("GRU", ["x", w, r, b, "", "memory"], ["y", "memory_updated"], name="gru", hidden_size=3)
    g.output("y", FLOAT, ["T", 1, 1, 3])
    g.output("memory_updated", FLOAT, [1, 1, 3])
    d = (
        "Names that no convention pairs ('memory' -> 'memory_updated'): the pair comes from the rnnir.pairs metadata. "
        "Without it 'memory' would look like an unreturned state (SD001)."
    )
    return model_of(g, d, {"rnnir.pairs": {"memory": "memory_updated"}}), expect(d, {"memory": "memory_updated"})


def _gru_with_norm(name: str, seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph(name)
    H = 4
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("state", FLOAT, [1, 1, H])
    w, r, b = weights(g, "GRU", "gru", 3, H, rng)
    g.node("GRU", ["x", w, r, b, "", "state"], ["y", "stateN"], name="gru", hidden_size=H)
    g.node("ReduceL2", ["state"], ["state_norm"], name="state_norm", keepdims=0)
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("stateN", FLOAT, [1, 1, H])
    g.output("state_norm", FLOAT, [])
    return g


def _fanout_program(slot: str, final: str, outputs: list[str], **slots: Any) -> dict[str, Any]:
    stores = [{"id": f"st_{slot}", "reads": f"value:{final}", "dest": f"slot:{slot}", "result": "token"}]
    stores += [{"id": f"out_{o}", "reads": f"value:{o}", "dest": f"out:{o}", "result": "value"} for o in outputs]
    return {"slots": {slot: slots} if slots else {}, "stores": stores, "return": {"layer": "runtime", "waits": [s["id"] for s in stores]}}


@sample
def gru_view_load_ordered():
    g = _gru_with_norm("gru_view_load_ordered", 109)
    prog = _fanout_program("state", "stateN", ["y", "stateN", "state_norm"], load="view")
    prog["order"] = [["out_state_norm", "st_state"]]
    d = (
        "The fixed form of or002_view_war: the slot is loaded in place (view) and also read by ReduceL2 -> state_norm, "
        "but an ordering edge puts the state_norm store (and so its ReduceL2) before the slot store."
    )
    return ir_sample(g, d, {"state": "stateN"}, prog), expect(d, {"state": "stateN"})


# -- broken: one (or two) per rule -------------------------------------------------------


@sample
def sd001_state_passthrough():
    rng = np.random.default_rng(201)
    H = 3
    g = Graph("sd001_state_passthrough")
    g.input("x", FLOAT, ["T", 1, 2])
    g.input("state", FLOAT, [2, 1, H])
    w, r, b = weights(g, "LSTM", "lstm", 2, H, rng)
    g.init("i0", np.array(0, np.int64))
    g.init("i1", np.array(1, np.int64))
    g.init("ax0", np.array([0], np.int64))
    g.node("Gather", ["state", "i0"], ["h_sq"], name="gather_h", axis=0)
    g.node("Gather", ["state", "i1"], ["c_sq"], name="gather_c", axis=0)
    g.node("Unsqueeze", ["h_sq", "ax0"], ["h"], name="unsqueeze_h")
    g.node("Unsqueeze", ["c_sq", "ax0"], ["c"], name="unsqueeze_c")
    g.node("LSTM", ["x", w, r, b, "", "h", "c"], ["y"], name="lstm", hidden_size=H)
    g.node("Identity", ["state"], ["stateN"], name="state_passthrough")
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("stateN", FLOAT, [2, 1, H])
    d = "Packed LSTM state handed straight back (stateN = Identity(state)); the LSTM's final state goes nowhere but y: every call restarts from the same state."
    return model_of(g, d), expect(d, {"state": "stateN"}, [("SD001", "error")])


@sample
def sd001_no_state_output():
    rng = np.random.default_rng(202)
    g = Graph("sd001_no_state_output")
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, 4])
    w, r, b = weights(g, "GRU", "gru", 3, 4, rng)
    g.node("GRU", ["x", w, r, b, "", "h0"], ["y"], name="gru", hidden_size=4)
    g.output("y", FLOAT, ["T", 1, 1, 4])
    d = "h0 feeds the GRU's initial_h but no output returns the final state: the slot is read and never written."
    return model_of(g, d), expect(d, {"h0": None}, [("SD001", "error")])


@sample
def sd002_hc_swap():
    rng = np.random.default_rng(203)
    H = 3
    g = Graph("sd002_hc_swap")
    g.input("x", FLOAT, ["T", 1, 2])
    g.input("state", FLOAT, [2, 1, H])
    w, r, b = weights(g, "LSTM", "lstm", 2, H, rng)
    g.init("s0", np.array([0], np.int64))
    g.init("s1", np.array([1], np.int64))
    g.init("s2", np.array([2], np.int64))
    g.node("Slice", ["state", "s0", "s1"], ["h"], name="slice_h")
    g.node("Slice", ["state", "s1", "s2"], ["c"], name="slice_c")
    g.node("LSTM", ["x", w, r, b, "", "h", "c"], ["y", "Y_h", "Y_c"], name="lstm", hidden_size=H)
    g.node("Concat", ["Y_c", "Y_h"], ["stateN"], name="concat_state_swapped", axis=0)
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("stateN", FLOAT, [2, 1, H])
    d = "Packed LSTM state read as state[0]=h, state[1]=c but written back as Concat(Y_c, Y_h): h and c swap at every call."
    return model_of(g, d), expect(d, {"state": "stateN"}, [("SD002", "error")])


@sample
def sd002_hc_swap_if_branch():
    g = _packed_if("sd002_hc_swap_if_branch", 204, swap_else=True)
    d = "lstm_packed_if with the 8 kHz (else) branch writing stateN = Concat(Y_c, Y_h): the swap shows only when sr != 16000."
    return model_of(g, d), expect(d, {"state": "stateN"}, [("SD002", "error")])


@sample
def sd002_layer_swap():
    g, _ = _stacked_gru("sd002_layer_swap", 205, swap=True)
    d = "gru_stacked_2layer with hn = Concat(Y_h layer 1, Y_h layer 0): each layer resumes from the other layer's state."
    return model_of(g, d), expect(d, {"h0": "hn"}, [("SD002", "error")])


@sample
def sd003_first_step():
    rng = np.random.default_rng(206)
    g = Graph("sd003_first_step")
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, 4])
    w, r, b = weights(g, "GRU", "gru", 3, 4, rng)
    g.init("t0", np.array(0, np.int64))
    g.node("GRU", ["x", w, r, b, "", "h0"], ["y"], name="gru", hidden_size=4)
    g.node("Gather", ["y", "t0"], ["hn"], name="first_step", axis=0)
    g.output("y", FLOAT, ["T", 1, 1, 4])
    g.output("hn", FLOAT, [1, 1, 4])
    d = "hn = Y[0], the first time step of a forward GRU, instead of Y_h: the next call resumes from the wrong step."
    return model_of(g, d), expect(d, {"h0": "hn"}, [("SD003", "error")])


@sample
def sd003_other_op():
    rng = np.random.default_rng(207)
    g = Graph("sd003_other_op")
    H = 4
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, H])
    w0, r0, b0 = weights(g, "GRU", "gru_a", 3, H, rng)
    w1, r1, b1 = weights(g, "GRU", "gru_b", H, H, rng)
    g.init("ax1", np.array([1], np.int64))
    g.node("GRU", ["x", w0, r0, b0, "", "h0"], ["Y_a"], name="gru_a", hidden_size=H)
    g.node("Squeeze", ["Y_a", "ax1"], ["x_b"], name="squeeze_a")
    g.node("GRU", ["x_b", w1, r1, b1], ["Y_b", "hn"], name="gru_b", hidden_size=H)
    g.node("Squeeze", ["Y_b", "ax1"], ["y"], name="squeeze_b")
    g.output("y", FLOAT, ["T", 1, H])
    g.output("hn", FLOAT, [1, 1, H])
    d = "h0 feeds gru_a, but hn is the final state of gru_b, which starts from zeros and never reads the slot."
    return model_of(g, d), expect(d, {"h0": "hn"}, [("SD003", "error")])


def _gru_program_model(name: str, seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph(name)
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, 4])
    w, r, b = weights(g, "GRU", "gru", 3, 4, rng)
    g.node("GRU", ["x", w, r, b, "", "h0"], ["y", "hn"], name="gru", hidden_size=4)
    g.output("y", FLOAT, ["T", 1, 1, 4])
    g.output("hn", FLOAT, [1, 1, 4])
    return g


@sample
def sd004_double_store():
    g = _gru_program_model("sd004_double_store", 208)
    prog = {
        "stores": [
            {"id": "st_h0_a", "reads": "value:hn", "dest": "slot:h0", "result": "token"},
            {"id": "st_h0_b", "reads": "value:hn", "dest": "slot:h0", "result": "token"},
            {"id": "out_y", "reads": "value:y", "dest": "out:y", "result": "value"},
            {"id": "out_hn", "reads": "value:hn", "dest": "out:hn", "result": "value"},
        ],
        "return": {"layer": "runtime", "waits": ["st_h0_a", "st_h0_b", "out_y", "out_hn"]},
    }
    d = "The program records two stores of the final state into slot h0 in one call (unordered, so the slot's value depends on which lands last)."
    return ir_sample(g, d, {"h0": "hn"}, prog), expect(d, {"h0": "hn"}, [("SD004", "error")])


@sample
def sd005_fp16_state():
    rng = np.random.default_rng(209)
    g = Graph("sd005_fp16_state")
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, 4])
    w, r, b = weights(g, "GRU", "gru", 3, 4, rng)
    g.node("GRU", ["x", w, r, b, "", "h0"], ["y", "Y_h"], name="gru", hidden_size=4)
    g.node("Cast", ["Y_h"], ["hn"], name="cast_fp16", to=TensorProto.FLOAT16)
    g.output("y", FLOAT, ["T", 1, 1, 4])
    g.output("hn", TensorProto.FLOAT16, [1, 1, 4])
    d = "hn = Cast(Y_h, to=FLOAT16) while h0 is float32: the slot and the state it is fed from disagree in dtype."
    return model_of(g, d), expect(d, {"h0": "hn"}, [("SD005", "error")])


@sample
def sd006_bilstm():
    rng = np.random.default_rng(210)
    H = 3
    g = Graph("sd006_bilstm")
    g.input("x", FLOAT, ["T", 1, 2])
    g.input("h0", FLOAT, [2, 1, H])
    g.input("c0", FLOAT, [2, 1, H])
    w, r, b = weights(g, "LSTM", "lstm", 2, H, rng, dirs=2)
    g.node("LSTM", ["x", w, r, b, "", "h0", "c0"], ["y", "hn", "cn"], name="bilstm", hidden_size=H, direction="bidirectional")
    g.output("y", FLOAT, ["T", 2, 1, H])
    g.output("hn", FLOAT, [2, 1, H])
    g.output("cn", FLOAT, [2, 1, H])
    d = (
        "Bidirectional LSTM whose h/c are carried across calls: the reverse direction's final state is the state at "
        "the start of the chunk, so streaming it is rarely what was meant. Warning per persisted slot (h0, c0)."
    )
    return model_of(g, d), expect(d, {"h0": "hn", "c0": "cn"}, [("SD006", "warning"), ("SD006", "warning")])


@sample
def rn100_unused_suppression():
    rng = np.random.default_rng(240)
    H = 3
    g = Graph("rn100_unused_suppression")
    g.input("x", FLOAT, ["T", 1, 2])
    g.input("h0", FLOAT, [2, 1, H])
    g.input("c0", FLOAT, [2, 1, H])
    w, r, b = weights(g, "LSTM", "lstm", 2, H, rng, dirs=2)
    g.node("LSTM", ["x", w, r, b, "", "h0", "c0"], ["y", "hn", "cn"], name="bilstm", hidden_size=H, direction="bidirectional")
    g.output("y", FLOAT, ["T", 2, 1, H])
    g.output("hn", FLOAT, [2, 1, H])
    g.output("cn", FLOAT, [2, 1, H])
    d = (
        "The bidirectional LSTM of sd006_bilstm, its streamed reverse state accepted in the model itself: metadata "
        "rnnir.noqa = [\"SD002\", \"SD006\"] suppresses both SD006 warnings; the SD002 entry matches no finding (RN100)."
    )
    return model_of(g, d, {"rnnir.noqa": ["SD002", "SD006"]}), expect(d, {"h0": "hn", "c0": "cn"}, [("RN100", "warning")])


@sample
def sd007_zero_init():
    rng = np.random.default_rng(211)
    H = 4
    g = Graph("sd007_zero_init")
    g.input("x", FLOAT, ["T", 1, 3])
    g.input("h0", FLOAT, [1, 1, H])
    w, r, b = weights(g, "GRU", "gru", 3, H, rng)
    g.init("zshape", np.array([1, 1, H], np.int64))
    g.node("ConstantOfShape", ["zshape"], ["h_zero"], name="zeros", value=numpy_helper.from_array(np.zeros(1, np.float32)))
    g.node("GRU", ["x", w, r, b, "", "h_zero"], ["y", "hn"], name="gru", hidden_size=H)
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("hn", FLOAT, [1, 1, H])
    d = "The GRU starts from ConstantOfShape zeros instead of h0; hn is still returned, so the caller's state is ignored."
    return model_of(g, d), expect(d, {"h0": "hn"}, [("SD007", "error")])


@sample
def sd008_last_step_seqlens():
    rng = np.random.default_rng(212)
    H = 4
    g = Graph("sd008_last_step_seqlens")
    g.input("x", FLOAT, ["T", 2, 3])
    g.input("seq_lens", TensorProto.INT32, [2])
    g.input("h0", FLOAT, [1, 2, H])
    w, r, b = weights(g, "GRU", "gru", 3, H, rng)
    g.init("st", np.array([-1], np.int64))
    g.init("en", np.array([np.iinfo(np.int64).max], np.int64))
    g.init("ax0", np.array([0], np.int64))
    g.node("GRU", ["x", w, r, b, "seq_lens", "h0"], ["y"], name="gru", hidden_size=H)
    g.node("Slice", ["y", "st", "en", "ax0"], ["y_last"], name="last_step")
    g.node("Squeeze", ["y_last", "ax0"], ["hn"], name="squeeze_last")
    g.output("y", FLOAT, ["T", 1, 2, H])
    g.output("hn", FLOAT, [1, 2, H])
    d = "hn = Squeeze(Slice(Y, -1:)), the last time step, while the GRU has sequence_lens: a shorter sequence's state is the zero padding of Y, not its final state."
    return model_of(g, d), expect(d, {"h0": "hn"}, [("SD008", "error")])


@sample
def sd009_projected_state():
    rng = np.random.default_rng(213)
    H = 3
    g = Graph("sd009_projected_state")
    g.input("x", FLOAT, ["T", 1, 2])
    g.input("h0", FLOAT, [1, 1, H])
    w, r, b = weights(g, "GRU", "gru", 2, H, rng)
    g.init("proj", (rng.standard_normal((H, H)) * 0.5).astype(np.float32))
    g.node("GRU", ["x", w, r, b, "", "h0"], ["y", "h_last"], name="gru", hidden_size=H)
    g.node("MatMul", ["h_last", "proj"], ["hn"], name="project")
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("hn", FLOAT, [1, 1, H])
    d = (
        "The GRU reads h0, but what is written back is its final state multiplied by a projection matrix (MatMul "
        "'project'): rnnir cannot tell whether that is the state the next call needs, so the slice is unverified (SD009 "
        "info). onnxruntime shows the state is in fact wrong: unverified is not a pass."
    )
    return model_of(g, d), expect(d, {"h0": "hn"}, [("SD009", "info")], correct=False, verdicts={"h0": "unverified"})


@sample
def sd010_gru_no_initial_state():
    rng = np.random.default_rng(214)
    H = 4
    g = Graph("sd010_gru_no_initial_state")
    g.input("x", FLOAT, ["T", 1, 3])
    w, r, b = weights(g, "GRU", "gru", 3, H, rng)
    g.node("GRU", ["x", w, r, b], ["y", "hn"], name="gru", hidden_size=H)
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("hn", FLOAT, [1, 1, H])
    d = (
        "The classic streaming export bug: the GRU has no initial_h (zeros on every call) but its final state hn is "
        "returned, so the model looks streaming and forgets everything between calls (SD010)."
    )
    return model_of(g, d), expect(d, {}, [("SD010", "warning")])


@sample
def al001_chain():
    g = _gru_program_model("al001_chain", 213)
    prog = {
        "stores": [
            {"id": "st_h0", "reads": "value:hn", "dest": "slot:h0", "result": "alias"},
            {"id": "out_hn", "reads": "store:st_h0", "dest": "out:hn", "result": "value"},
            {"id": "out_y", "reads": "value:y", "dest": "out:y", "result": "value"},
        ],
        "return": {"layer": "runtime", "waits": ["st_h0", "out_hn", "out_y"]},
    }
    d = "Chain: the store of hn into slot h0 returns an alias of the slot, and the output store reads that alias instead of the final state."
    return ir_sample(g, d, {"h0": "hn"}, prog), expect(d, {"h0": "hn"}, [("AL001", "error")])


@sample
def al002_output_alias():
    g = _gru_program_model("al002_output_alias", 214)
    prog = {
        "slots": {"h0": {"alias_of": "out:hn"}},
        "stores": [
            {"id": "out_y", "reads": "value:y", "dest": "out:y", "result": "value"},
            {"id": "out_hn", "reads": "value:hn", "dest": "out:hn", "result": "value"},
        ],
        "return": {"layer": "runtime", "waits": ["out_y", "out_hn"]},
    }
    d = "Slot h0 lives in the output buffer hn (alias_of out:hn, no slot store): the caller's hn changes under it at the next call."
    return ir_sample(g, d, {"h0": "hn"}, prog), expect(d, {"h0": "hn"}, [("AL002", "error")])


@sample
def al003_shared_address():
    rng = np.random.default_rng(215)
    H = 3
    g = Graph("al003_shared_address")
    g.input("x", FLOAT, ["T", 1, 2])
    g.input("h0", FLOAT, [1, 1, H])
    g.input("c0", FLOAT, [1, 1, H])
    w, r, b = weights(g, "LSTM", "lstm", 2, H, rng)
    g.node("LSTM", ["x", w, r, b, "", "h0", "c0"], ["y", "hn", "cn"], name="lstm", hidden_size=H)
    g.output("y", FLOAT, ["T", 1, 1, H])
    g.output("hn", FLOAT, [1, 1, H])
    g.output("cn", FLOAT, [1, 1, H])
    stores = [
        {"id": "st_h0", "reads": "value:hn", "dest": "slot:h0", "result": "token"},
        {"id": "st_c0", "reads": "value:cn", "dest": "slot:c0", "result": "token"},
    ] + [{"id": f"out_{o}", "reads": f"value:{o}", "dest": f"out:{o}", "result": "value"} for o in ("y", "hn", "cn")]
    prog = {
        "slots": {"h0": {"address": "mem:state0"}, "c0": {"address": "mem:state0"}},
        "stores": stores,
        "return": {"layer": "runtime", "waits": [s["id"] for s in stores]},
    }
    d = "Slots h0 and c0 are given the same storage address (mem:state0) with no alias declared: writing one overwrites the other."
    return ir_sample(g, d, {"h0": "hn", "c0": "cn"}, prog), expect(d, {"h0": "hn", "c0": "cn"}, [("AL003", "error")])


@sample
def or001_return_no_wait():
    g = _gru_program_model("or001_return_no_wait", 216)
    prog = _fanout_program("h0", "hn", ["y", "hn"])
    prog["return"] = {"layer": "device", "waits": ["out_y", "out_hn"]}
    d = "The call's Return (a device event) waits for the output stores only, not for the store into slot h0: the next call may read stale state."
    return ir_sample(g, d, {"h0": "hn"}, prog), expect(d, {"h0": "hn"}, [("OR001", "error")])


@sample
def or002_view_war():
    g = _gru_with_norm("or002_view_war", 217)
    prog = _fanout_program("state", "stateN", ["y", "stateN", "state_norm"], load="view")
    d = (
        "The slot is loaded in place (view) and read both by the GRU and by ReduceL2 -> state_norm; nothing orders the "
        "ReduceL2 before the slot store, so it may read the new state (write-after-read)."
    )
    return ir_sample(g, d, {"state": "stateN"}, prog), expect(d, {"state": "stateN"}, [("OR002", "error")])


# ---------------------------------------------------------------------------- writing


def build_all() -> dict[str, tuple[onnx.ModelProto | str, dict[str, Any]]]:
    """Every sample: an ONNX model, or IR text (a ``str``) for store structures ONNX cannot express."""
    out: dict[str, tuple[onnx.ModelProto | str, dict[str, Any]]] = {}
    for fn in SAMPLES:
        model, exp = fn()
        if isinstance(model, onnx.ModelProto):
            onnx.checker.check_model(model, full_check=True)
        out[fn.__name__] = (model, exp)
    return out


README_HEAD = """# samples

Small ONNX models and IR programs, correct and deliberately broken, each with
the findings it must produce. **Generated**: edit `make_samples.py` and rerun
`python samples/make_samples.py` (it rewrites every `.onnx`, every `.rnnir`, every
`.expected.json` and this README, byte for byte the same on every run;
`tests/samples/test_samples.py` fails when a committed file is stale).

Every model uses opset 17 / IR version 8, passes
`onnx.checker.check_model(full_check=True)` and runs in onnxruntime. Shapes
are `x[T, B, I]`, states `[num_directions or layers or h/c, B, H]`, B = 1
unless said otherwise, H between 1 and 5.

`<name>.expected.json`:

```json
{"description": "...",
 "pairs": {"<state input>": "<state output or null>"},
 "findings": [{"code": "SD002", "severity": "error"}],
 "correct": false}
```

- `pairs` is what `rnnir.load(path)` finds with the default policies
  (`sd010_constant_init` also has `entry_constant`: pairs and findings with
  `rnnir.load(path, entry="constant")`);
- `findings` is every finding `passes.run(program)` must return (infos
  included), compared as a multiset of (code, severity); findings are per
  slot, so a rule that hits two slots is listed twice;
- `verdicts` (when present) is the verdict `passes.verify(program)` must give
  each state slice: `verified`, `violated` or `unverified`;
- `correct` is true exactly when no error or warning is expected.

Store structures plain ONNX cannot express (a chain, a slot aliased to an
output, shared addresses, a `Return` that does not wait, an in-place load) are
IR programs, `<name>.rnnir`, in the text format of `rnnir/ir/text.py`: rnnir
reads them as written (`rnnir lint x.rnnir`, `rnnir.load("x.rnnir")`); they
have no ONNX graph to run. An exported program with such stores carries the
same text in its `rnnir.ir` metadata. `rnnir.pairs` metadata is written where
names alone would not pair (`gru_pairs_metadata`).

Names: a broken sample starts with the lower-cased code of the rule it breaks.
"""


def _md(text: str) -> str:
    return text.replace("|", "/")


def readme(samples: dict[str, tuple[onnx.ModelProto | str, dict[str, Any]]]) -> str:
    head = "| sample | what it shows | pairs | expected findings |\n| --- | --- | --- | --- |\n"
    rows: dict[bool, list[str]] = {True: [], False: []}
    for name in sorted(samples):
        exp = samples[name][1]
        pairs = ", ".join(f"`{i}` → `{o}`" if o else f"`{i}` → none" for i, o in exp["pairs"].items()) or "none"
        found = ", ".join(f"{f['code']} {f['severity']}" for f in exp["findings"]) or "none"
        rows[exp["correct"]].append(f"| `{name}` | {_md(exp['description'])} | {pairs} | {found} |")
    return (
        README_HEAD
        + "\n## Correct\n\n" + head + "\n".join(rows[True])
        + "\n\n## Broken\n\n" + head + "\n".join(rows[False]) + "\n"
    )


def write_all(folder: Path = HERE) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    samples = build_all()
    for name, (model, exp) in samples.items():
        if isinstance(model, str):
            (folder / f"{name}.rnnir").write_text(model, encoding="utf-8")
        else:
            (folder / f"{name}.onnx").write_bytes(model.SerializeToString(deterministic=True))
        (folder / f"{name}.expected.json").write_text(json.dumps(exp, indent=2) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(readme(samples), encoding="utf-8")
    return list(samples)


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else HERE
    names = write_all(folder)
    print(f"wrote {len(names)} samples to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
