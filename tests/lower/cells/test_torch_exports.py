"""PyTorch exports of cells, unrolled loops, a scripted Loop and a Scan (tests/data/torch_cells, made by
tests/data/make_torch_cells.py): every state slice verified on a recognised recurrence, planted swaps caught.

Expected recurrences come from how each model was built (its README): nn.LSTMCell/GRUCell/RNNCell one step,
stacked GRU cells, a Python loop unrolled by the exporter, torch.jit.script loops exported as ONNX Loop, and
torch's scan exported as ONNX Scan. PyTorch's GRUCell applies the reset gate after the recurrent matmul
(ONNX linear_before_reset=1); the ``reset_before`` model applies it before. Swapping h and c (or two layers)
on the way out is SD002 by the rule catalogue.
"""

from __future__ import annotations

import os
import pathlib

import onnx
import pytest
from onnx import helper

import rnnir
from rnnir import passes

pytestmark = pytest.mark.realmodel

CELLS = pathlib.Path(os.environ.get("RNNIR_TORCH_CELLS", pathlib.Path(__file__).parents[2] / "data" / "torch_cells"))

# file stem -> (recurrences as (kind, recognition), state pairs)
EXPECTED = {
    "gru_cell": ([("GRU", "cell")], {"h0": "hn"}),
    "gru_cell_nobias": ([("GRU", "cell")], {"h0": "hn"}),
    "gru_cell_reset_before": ([("GRU", "cell")], {"h0": "hn"}),
    "gru_cell_stacked": ([("GRU", "cell"), ("GRU", "cell")], {"h0": "hn"}),
    "lstm_cell": ([("LSTM", "cell")], {"h0": "hn", "c0": "cn"}),
    "lstm_cell_keras": ([("LSTM", "cell")], {"h0": "hn", "c0": "cn"}),
    "lstm_cell_packed": ([("LSTM", "cell")], {"state": "stateN"}),
    "lstm_cell_unrolled": ([("LSTM", "unrolled")], {"h0": "hn", "c0": "cn"}),
    "lstm_cell_loop": ([("LSTM", "loop")], {"h0": "hn", "c0": "cn"}),  # the Loop stands for its body's one-step LSTM node
    "lstm_hand_loop": ([("LSTM", "loop")], {"h0": "hn", "c0": "cn"}),
    "lstm_cell_scan": ([("LSTM", "loop")], {"h0": "hn", "c0": "cn"}),
    "rnn_cell": ([("RNN", "cell")], {"h0": "hn"}),
    "rnn_cell_stacked": ([("RNN", "cell"), ("RNN", "cell")], {"h0": "hn"}),  # the second layer reads the first one's new state
}


def _files() -> list[str]:
    if not CELLS.is_dir():
        return []
    return sorted(p.name for p in CELLS.glob("*.onnx"))


FILES = _files()
needs_cells = pytest.mark.skipif(not FILES, reason=f"no PyTorch cell exports in {CELLS} (tests/data/make_torch_cells.py makes them)")


def _stem(name: str) -> str:
    return name.split(".")[0]


@needs_cells
def test_every_export_has_an_expectation():
    assert {_stem(f) for f in FILES} == set(EXPECTED)


@needs_cells
@pytest.mark.parametrize("name", FILES or ["none"])
def test_export_is_recognised_and_every_slice_verified(name):
    prog = rnnir.load(CELLS / name)
    kinds, pairs = EXPECTED[_stem(name)]
    assert sorted((r.kind, r.recognition.value) for r in prog.recurrents) == sorted(kinds)
    assert {p.input: p.output for p in prog.state_pairs} == pairs
    v = passes.verify(prog)
    assert v.diagnostics == [] and v.slices, v.diagnostics
    assert all(s.verdict.value == "verified" for s in v.slices), [(s.slice, s.verdict, s.reason) for s in v.slices]
    recognised = {r.id for r in prog.recurrents if r.recognition.value != "op"}
    for pair in prog.state_pairs:
        for sm in pair.slices:
            assert {e.node_id for e in sm.entry} <= recognised and {e.node_id for e in sm.exit} <= recognised


@needs_cells
@pytest.mark.parametrize("name", [f for f in FILES if _stem(f).startswith("gru_cell")] or ["none"])
def test_pytorch_gru_resets_after_the_matmul_unless_written_otherwise(name):
    prog = rnnir.load(CELLS / name)
    assert {r.linear_before_reset for r in prog.recurrents} == ({0} if "reset_before" in name else {1})


def _swap_outputs(m: onnx.ModelProto, a: str, b: str) -> onnx.ModelProto:
    for node in m.graph.node:  # the values keep flowing inside the graph under their old role; only the outputs swap
        node.output[:] = [f"{o}__orig" if o in (a, b) else o for o in node.output]
        node.input[:] = [f"{i}__orig" if i in (a, b) else i for i in node.input]
    m.graph.node.extend([helper.make_node("Identity", [f"{b}__orig"], [a]), helper.make_node("Identity", [f"{a}__orig"], [b])])
    return m


def _swap_concat(m: onnx.ModelProto, out: str) -> onnx.ModelProto:
    node = next(n for n in m.graph.node if out in n.output)
    assert node.op_type == "Concat" and len(node.input) == 2
    node.input[0], node.input[1] = node.input[1], node.input[0]
    return m


_MUTANTS = [(f, "h/c") for f in FILES if EXPECTED.get(_stem(f), ([], {}))[1] == {"h0": "hn", "c0": "cn"}]
_MUTANTS += [(f, "packed") for f in FILES if _stem(f) in ("lstm_cell_packed", "gru_cell_stacked")]


@needs_cells
@pytest.mark.parametrize(("name", "how"), _MUTANTS or [("none", "none")])
def test_swapped_state_on_the_way_out_is_sd002(name, how):
    m = onnx.load(CELLS / name)
    if how == "h/c":
        m = _swap_outputs(m, "hn", "cn")
    else:
        m = _swap_concat(m, "stateN" if "packed" in name else "hn")
    codes = {(d.code, d.severity.value) for d in passes.run(rnnir.load(m))}
    assert codes == {("SD002", "error")}
