"""What ops mean to the cell recogniser: the op roles it walks by, its bounds, and small helpers on value keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rnnir.ir.optraits import OpTrait, ops_with

if TYPE_CHECKING:
    import onnx

Key = tuple[int, str]  # (id of the defining scope, value name): one ONNX value, scope-exact

#: layout-only ops a state view may pass through: one data input (not Concat) whose elements it keeps or
#: selects without repeating them (not Expand), with constant parameters
VIEW_OPS = ops_with(OpTrait.LAYOUT) - {"Concat", "Expand"}
#: ops whose parameters (inputs after the first) must be constants for the op to be a view/affine
PARAM_OPS = frozenset({"Gather", "Slice", "Split", "Squeeze", "Unsqueeze", "Reshape", "Expand"})
LINEAR_OPS = frozenset({"Add", "Sub", "Neg", "Identity", "Cast", "CastLike", "Concat", "Transpose", "Flatten"})
BLEND_OPS = frozenset({"Add", "Sub", "Mul", "Neg"})
GATE_ACTS = ("Sigmoid", "HardSigmoid")  # a gate squashes to [0, 1]; HardSigmoid is legacy Keras' recurrent_activation
CANDIDATE_ACTS = ("Tanh", "Relu")
ANY_ACTS = ("Sigmoid", "HardSigmoid", "Tanh", "Relu")
MAX_PROBES = 8192  # unit-vector runs per cell: input + hidden size
MAX_RUN_NODES = 4096  # nodes one execution may evaluate before it is considered runaway
MAX_STATE_INPUTS = 4  # h, c, and a stacked layer's input or two
MAX_AFFINE = 512  # values a gate's affine part may span: a cell's is tens; a residual stack's would be the whole model
TOL = 1e-4
#: a constant initial state is looked for only this close to the graph's outputs (node hops back, values visited)
OUTPUT_DEPTH = 24
OUTPUT_VALUES = 1024
#: ops through which a zero initial state reaches the cell that reads it, and where it meets run-time data
STATE_READS = frozenset({"Mul", "MatMul", "Gemm", "Concat"})
#: how exporters write a zero initial state (torch.zeros, zeros_like): besides an initializer, the only producers of one
ZERO_MAKERS = frozenset({"ConstantOfShape", "Constant", "Expand", "Tile"})


def scan_inputs(node: onnx.NodeProto) -> int:
    """How many of a Scan body's inputs are scanned (the rest, first, are its carried state)."""
    for a in node.attribute:
        if a.name == "num_scan_inputs":
            return int(a.i)
    return 0


def carry_layout(node: onnx.NodeProto) -> tuple[int, int, int, int, int] | None:
    """How a Loop or Scan carries values: (number carried, first carried node input, first carried body input,
    first carried body output, first carried node output). None for any other node."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Loop":  # inputs (M, cond, v...), body (iter, cond, v...) -> (cond, v..., scans...)
        return max(0, len(node.input) - 2), 2, 2, 1, 0
    if node.op_type == "Scan":  # inputs (states..., scanned...), body (states..., elements...) -> (states..., scans...)
        n_scan = next((int(a.i) for a in node.attribute if a.name == "num_scan_inputs"), 0)
        return max(0, len(node.input) - n_scan), 0, 0, 0, 0
    return None


def pick(a: Key | None, b: Key | None, first: Callable[[Key], bool], second: Callable[[Key], bool]) -> tuple[Key | None, Key | None]:
    """(a, b) or (b, a), whichever satisfies (first, second); (None, None) otherwise."""
    if a is not None and b is not None:
        if first(a) and second(b):
            return a, b
        if first(b) and second(a):
            return b, a
    return None, None
