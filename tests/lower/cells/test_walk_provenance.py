"""A recognised cell names the nodes it was recognised from: its anchor and the affine part the walk crossed back
from each gate to x and the state (the matmuls, the bias adds, the gate split), so a finding can point at them."""

from __future__ import annotations

import rnnir
from tests.support import cell_models as cm

AFFINE = ("Gemm", "MatMul", "Add", "Split", "Slice")


def test_the_affine_part_of_every_cell_kind_is_among_the_nodes_it_was_recognised_from():
    got, want = {}, {}
    for kind, (model, exp) in {
        "RNN": cm.rnn_cell(),
        "RNN matmul": cm.rnn_cell(proj="matmul"),
        "GRU": cm.gru_cell(),
        "LSTM": cm.lstm_cell(proj="matmul", split="slice"),
    }.items():
        pairs = {exp.h_in: "hn", **({exp.c_in: "cn"} if exp.c_in else {})}
        (r,) = rnnir.load(model, pairs=pairs).recurrents
        got[kind] = {n.name for n in model.graph.node if n.op_type in AFFINE} - set(r.recognised_from)
        want[kind] = set()
        if kind.startswith("RNN"):  # an RNN cell is nothing but its affine part and its activation
            got[kind] |= set(r.recognised_from) ^ {n.name for n in model.graph.node if n.name != "out_hn"}
    assert got == want
