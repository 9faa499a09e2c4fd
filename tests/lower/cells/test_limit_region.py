"""The bound on where constant initial states are looked for, pinned at its exact limit (mutation survivor of
rnnir/lower/cells.py's _OUTPUT_VALUES): the 1024 values nearest the outputs. Its own file, so that it is the
file's fastest test (a constant's mutant runs the fastest test of each covering file).

The model is built here with onnx.helper; the count is worked out by hand in the test from the model's values.
"""

from __future__ import annotations

import numpy as np
import onnx

from tests.support.cell_graphs import H, N
from tests.support.cell_graphs import model as _model
from tests.support.cell_graphs import scan as _scan


def _zeros_behind_a_wide_sum(others: int) -> onnx.ModelProto:
    """y = Sum(i_0, ..., i_(others-1), x * z) with z zeros [2, H]: the zeros a model starts from, read by a product."""
    nodes = [N("Mul", ["x", "z"], ["p"], name="use"), N("Sum", [*(f"i{j}" for j in range(others)), "p"], ["y"], name="sum")]
    inputs = {**{f"i{j}": [2, H] for j in range(others)}, "x": [2, H]}
    return _model(nodes, inputs, ["y"], {"z": np.zeros((2, H), np.float32)})


def test_zeros_among_the_1024_values_nearest_the_outputs_are_a_state_and_the_1025th_are_not():
    # breadth first from the output y: y, then Sum's inputs i_0 .. i_(others-1) and p, then Mul's x and z:
    # z is value number others + 4. 1020 others: the 1024th, looked at; 1021 others: the 1025th, never reached
    scan, index = _scan(_zeros_behind_a_wide_sum(1020), [])
    assert scan.is_zero_start(index.root, "z")
    scan, index = _scan(_zeros_behind_a_wide_sum(1021), [])
    assert not scan.is_zero_start(index.root, "z")
