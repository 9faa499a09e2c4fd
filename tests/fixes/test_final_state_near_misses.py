"""The shared final-state fix (SD003, SD008, SD001 handed back) on a near miss beyond the samples: the value written
back is a different step in each If branch, which rnnir does not rewrite; refused with its reason, model untouched."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

import rnnir
from tests.fixes.test_planner_near_misses import _codes, _load


def _step_by_if_branch() -> onnx.ModelProto:
    """sd003_first_step with hn = If(flag) { y[0] } else { y[1] }: a step, but not the same one in both branches."""
    model = _load("sd003_first_step")
    g = model.graph
    g.node.remove(next(n for n in g.node if n.name == "first_step"))
    g.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "t1"))

    def branch(name: str, step: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{name}_hn", onnx.TensorProto.FLOAT, [1, 1, 4])
        return helper.make_graph([helper.make_node("Gather", ["y", step], [f"{name}_hn"], name=f"{name}_step", axis=0)], name, [], [out])

    g.node.append(helper.make_node("If", ["flag"], ["hn"], name="pick", then_branch=branch("then", "t0"), else_branch=branch("else", "t1")))
    g.input.append(helper.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []))
    return model


def test_final_state_near_misses_are_refused_with_their_reason() -> None:
    cases = [
        (_step_by_if_branch(), "SD003", "h0", "the value written back differs by If branch; rnnir does not rewrite branches here"),
    ]
    for model, code, slot, reason in cases:
        onnx.checker.check_model(model, full_check=True)
        assert _codes(model) == [code], reason
        result = rnnir.fix(model)
        assert result.edits == [] and result.model.graph == model.graph, reason
        assert [str(e) for e in result.skipped] == [f"{code} [no fix] {code} on slot {slot!r}: {reason}"]
