"""Bounds the cell recogniser keeps (``rnnir.lower.cells.ops``) and how a check by execution scores a cell
(``rnnir.lower.cells.execute.relative_error``), each on hand-checkable numbers."""

from __future__ import annotations

import numpy as np
from onnx import helper

from rnnir.lower.cells.execute import relative_error
from rnnir.lower.cells.net import Net
from rnnir.lower.scope import ModelIndex
from tests.lower.cells.loop_models import tf_loop


def _r_through_identities(n: int) -> np.ndarray | None:
    """The body's carried R as Net folds it, when the body hands R back through n Identity ops."""
    model, _ = tf_loop()
    loop = model.graph.node[0]
    body = loop.attribute[0].g
    prev = "R"
    for j in range(n):
        body.node.append(helper.make_node("Identity", [prev], [f"r{j}"]))
        prev = f"r{j}"
    body.output[4].name = prev
    index = ModelIndex(model, "m")
    net = Net(index)
    return net.const(net.key(index.root.children[(id(loop), "body")], "R"))


def test_a_carried_weight_is_followed_back_through_at_most_4095_identity_ops():
    """The walk from the body's yield back to its input takes at most MAX_RUN_NODES (4,096) names: 4,095 Identity
    ops and the input itself. One more, and the weight is a run-time value (no false constant, only a missed one)."""
    model, consts = tf_loop()
    np.testing.assert_array_equal(_r_through_identities(4095), consts["R0"])
    assert _r_through_identities(4096) is None


def test_the_error_of_a_cell_is_relative_to_the_reference_cells_scale():
    """|got - want| / max(1, max |want|): the reference (want) sets the scale, never the model's own output, so a
    model whose output blows up is not excused by its own size."""
    cases = [
        (([3.0],), ([1.0],), 2.0),  # scale 1
        (([0.5],), ([4.0],), 0.875),  # scale 4: 3.5 / 4
        (([10.0, 0.0],), ([0.0, 0.0],), 10.0),  # the model blows up: the reference's scale is 1
        (([1.0, 2.0], [5.0]), ([1.0, 2.0], [3.0]), 2.0 / 3.0),  # the worst of two outputs
        (([1.0, 2.0],), ([1.0],), float("inf")),  # sizes differ
    ]
    got = [relative_error([np.array(g) for g in gs], [np.array(w) for w in ws]) for gs, ws, _ in cases]
    np.testing.assert_allclose(got, [want for _, _, want in cases])
