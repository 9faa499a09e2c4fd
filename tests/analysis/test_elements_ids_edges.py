"""The element tracer's ids and the index tensors it reads, at their edges (rnnir.analysis.elements).

Every element of a source gets its own id, blocks handed out one after the other; the negative ids say "a
constant" and "computed by an op that changes values" and name no source.  An index tensor too large for the IR
to keep is read from the model only when it is what ONNX allows an index to be: integers.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.analysis import elements
from tests.analysis.test_elements_slices import WINDOWS, cache, ints, windows_of
from tests.analysis.test_elements_windows import BIG, gather_shift_model, verdict


def test_every_id_names_its_own_source_and_position_and_the_negative_ids_name_none():
    ids = elements._Ids(None)
    blocks = [ids.block(("slot", "a"), (2, 3), slot="a"), ids.block(("value", "v"), (4,)), ids.block(("slot", "b"), (1, 1, 2), slot="b")]
    assert ids.block(("slot", "a"), (2, 3), slot="a") is blocks[0]  # a source asked again keeps its ids
    handed = [(b, pos) for b in blocks for pos in range(int(np.prod(b.shape)))]
    assert ids.next == len(handed) == 12
    for i, (b, pos) in enumerate(handed):
        assert ids.owner(i) == (b, pos)
    for nothing in (elements.CONSTANT, elements.UNKNOWN, -7, ids.next, ids.next + 5):
        assert ids.owner(nothing) is None, nothing


def test_a_large_index_of_floats_is_no_index_and_proves_nothing():
    # the newest-frames shift of test_elements_windows with its index stored as floats: onnxruntime refuses the
    # model (ONNX's Gather takes int32/int64 indices), so rnnir must not read those floats as a shift and verify it
    m = gather_shift_model(np.arange(1, BIG + 1))
    index = next(t for t in m.graph.initializer if t.name == "index")
    index.CopyFrom(numpy_helper.from_array(np.arange(1, BIG + 1).astype(np.float32), "index"))
    with pytest.raises(Exception, match="INVALID_GRAPH|InvalidGraph|Type"):
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert verdict(m)[0] != "verified"


def test_a_new_frame_taken_by_a_gather_out_of_range_is_no_new_frame():
    # cache[1, 6]'s two windows (test_elements_slices) fed Gather(new, [k], axis=1) instead of the new frame: index 0
    # is the new frame itself; index 5 of a one-frame value fails when run (onnxruntime refuses it), so it is no
    # frame at all -- never verified as one
    def taken(k: int) -> str:
        body = ["  %g = Gather<axis=1>(%new, %k) : float32[1,1]"] + [line.replace("%new)", "%g)") for line in WINDOWS]
        return cache(body, extra=ints("k", [k]))

    assert windows_of(taken(0)) == (("verified",), ((0, 2), (2, 4)))
    assert windows_of(taken(5))[0] != ("verified",)
    g = helper.make_graph([helper.make_node("Gather", ["x", "k"], ["y"], axis=1)], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], initializer=[numpy_helper.from_array(np.array([5], np.int64), "k")])
    sess = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="out of bounds|indices"):
        sess.run(None, {"x": np.ones((1, 1), np.float32)})
