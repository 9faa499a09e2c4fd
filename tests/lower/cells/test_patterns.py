"""The cell kinds the plain-op recogniser knows are the patterns listed in ``rnnir.lower.cells.kinds.PATTERNS``: a
kind registered there is checked on its anchor ops, one left out is never looked for (issue 24: a cell kind whose
semantics the reference knows is one module and one line)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import rnnir
from rnnir.lower.cells import kinds
from rnnir.lower.cells.lstm import LstmPattern
from rnnir.lower.cells.rnn import RnnPattern
from rnnir.semantics import reference

GRU_CELL = Path(__file__).resolve().parents[2] / "data" / "torch_cells" / "gru_cell.ts.onnx"


class _Spy:
    """A registered kind that records the nodes it is asked about and confirms none."""

    kind = "SPY"
    anchor_ops = frozenset({"Tanh"})

    def __init__(self) -> None:
        self.asked: list[str] = []

    def match(self, rec, node, scope, k):  # noqa: ANN001, ANN201 - the CellPattern protocol's signature
        self.asked.append(node.op_type)
        return None

    def verify(self, rec, feeds, w, h_out, c_out, H):  # noqa: ANN001, ANN201, N803
        return math.inf


def test_every_registered_kind_is_one_the_reference_runs():
    assert [p.kind for p in kinds.PATTERNS] == ["LSTM", "GRU", "RNN"]  # the order anchors are claimed in
    assert all(reference.supports(p.kind) for p in kinds.PATTERNS)


def test_a_registered_kind_is_asked_about_its_anchor_ops_only(monkeypatch: pytest.MonkeyPatch):
    spy = _Spy()
    monkeypatch.setattr(kinds, "PATTERNS", (spy, *kinds.PATTERNS))  # first: an anchor a kind confirmed is not asked again
    prog = rnnir.load(str(GRU_CELL))
    assert [r.kind for r in prog.recurrents] == ["GRU"]
    assert spy.asked and set(spy.asked) == {"Tanh"}


def test_a_kind_left_out_of_the_registry_is_never_found(monkeypatch: pytest.MonkeyPatch):
    # near miss of the above: the same GRU cell with GRU's pattern left out is no recurrence at all (the RNN check
    # does not take its candidate n = tanh(...) for an RNN: the reset gate multiplies two run-time values)
    monkeypatch.setattr(kinds, "PATTERNS", (LstmPattern(), RnnPattern()))
    prog = rnnir.load(str(GRU_CELL))
    assert prog.recurrents == []
