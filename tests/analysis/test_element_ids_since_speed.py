"""Element ids through every layout op the element tracer follows (rnnir.analysis.elements, moved off numpy by the
lint-speed change), against onnx.reference as the oracle: run the same graph with the cache holding its own flat
positions (c = 0, 1, 2, ...), and every output holds the ids of the cache elements it is made of.  Defaults taken
from the op's schema (Gather's and ScatterElements' axis 0, Reshape's allowzero 0) are among the cases."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rnnir
from rnnir.analysis import elements
from tests.support.onnx_models import model, vi

SHAPE = (2, 3, 4)


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def _layout_model():
    """c [2, 3, 4] (paired with c_new = Identity(c)) through one op per output; every output is c's elements only."""
    n = helper.make_node
    nodes = [
        n("Identity", ["c"], ["c_new"]),
        n("Gather", ["c", "rows10"], ["gather_default_axis"]),  # axis 0 from the schema
        n("Gather", ["c", "last"], ["gather_neg"], axis=2),
        n("Reshape", ["c", "keep_first"], ["reshape_zero"]),  # 0 copies the dim (allowzero 0 from the schema)
        n("Reshape", ["c", "shape_0_4_3"], ["reshape_zero_mid"]),
        n("Unsqueeze", ["c", "axes_0_m1"], ["unsq"]),
        n("Squeeze", ["unsq", "axes_0"], ["sq"]),
        n("Slice", ["c", "s0", "s1"], ["row0"]),  # c[0:1]
        n("Expand", ["row0", "to_3_1_1"], ["expanded"]),  # [3, 3, 4]
        n("Gather", ["c", "one"], ["row1"], axis=0),  # [3, 4]
        n("Gather", ["row1", "two_rows"], ["upd_nd"], axis=0),  # [2, 4]
        n("ScatterND", ["c", "nd_idx", "upd_nd"], ["scatter_nd"]),
        n("ScatterElements", ["c", "el_idx", "row0"], ["scatter_el_default_axis"]),  # axis 0 from the schema
        n("Gather", ["c", "rows10"], ["swapped"]),
        n("Where", ["cond", "c", "swapped"], ["where"]),
        n("Add", ["c", "zero"], ["plus_zero"]),
        n("Add", ["zero", "c"], ["zero_plus"]),
        n("Mul", ["c", "one_f"], ["times_one"]),
        n("Sub", ["c", "zero"], ["minus_zero"]),
        n("Slice", ["c", "neg_start", "neg_end", "axis2", "neg_step"], ["reversed_time"]),
        n("Split", ["c", "sizes_1_3"], ["split_a", "split_b"], axis=2),
        n("Split", ["c"], ["half_a", "half_b"], axis=0),  # equal parts
        n("Concat", ["c", "c"], ["concat_last"], axis=-1),
        n("Transpose", ["c"], ["transposed"]),
        n("Transpose", ["c"], ["permuted"], perm=[1, 0, 2]),
    ]
    inits = [
        _i64("rows10", [1, 0]), _i64("last", [-1]), _i64("keep_first", [0, -1]), _i64("shape_0_4_3", [0, 4, 3]),
        _i64("axes_0_m1", [0, -1]), _i64("axes_0", [0]), _i64("s0", [0]), _i64("s1", [1]), _i64("to_3_1_1", [3, 1, 1]),
        numpy_helper.from_array(np.array(1, np.int64), "one"), _i64("two_rows", [2, 0]),
        _i64("nd_idx", [[1, 0], [-2, 2]]),  # rows c[1, 0] and c[0, 2] (negative: from the end)
        _i64("el_idx", [[[1, 0, 1, -1], [0, 1, 1, 0], [1, 1, 0, 0]]]),
        numpy_helper.from_array(np.array([[True, False, True, False]] * 3), "cond"),
        numpy_helper.from_array(np.zeros((1,), np.float32), "zero"), numpy_helper.from_array(np.ones((1, 1), np.float32), "one_f"),
        _i64("neg_start", [-1]), _i64("neg_end", [-1000]), _i64("axis2", [2]), _i64("neg_step", [-2]),
        _i64("sizes_1_3", [1, 3]),
    ]
    names = [o for node in nodes[1:] for o in node.output if o not in ("unsq", "row0", "row1", "upd_nd", "swapped")]
    outs = [vi("c_new", list(SHAPE)), *(vi(o, None) for o in names)]
    m = model(nodes, [vi("c", list(SHAPE))], outs, inits)
    return m, names


def test_every_layout_op_moves_the_ids_onnx_reference_moves_the_values():
    m, names = _layout_model()
    expected = dict(zip(names, ReferenceEvaluator(m).run(names, {"c": np.arange(24, dtype=np.float32).reshape(SHAPE)})))
    prog = rnnir.load(m, pairs={"c": "c_new"})
    ids = elements._Ids(prog)
    checked = []
    for name in names:
        (store,) = prog.stores_to(prog.output(name))
        got = ids.ids(store.inputs[0])
        base = ids.by_source[("slot", "c")].base
        want = expected[name]
        assert got.shape == tuple(want.shape), name
        assert [i - base for i in got.flat] == [int(x) for x in want.ravel()], name
        checked.append(name)
    assert checked == names and len(names) == 21
