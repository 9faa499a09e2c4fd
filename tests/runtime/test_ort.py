"""rnnir.runtime.ort, the one module that uses onnxruntime's private API: on the onnxruntime versions rnnir is
tested with, every private name it uses must exist (an upgrade that drops one fails here, loudly, instead of
every session and pool silently falling back to the slower documented layer), and both layers must bind, run
and read back the same numbers (a one-op sum: hand-checkable)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rnnir.runtime.ort import PRIVATE_API, NativeBinding, PublicBinding, make_binding, missing_private_api

F = TensorProto.FLOAT
ORT_VERSION = tuple(int(p) for p in ort.__version__.split(".")[:2])
# the private layer has these names from onnxruntime 1.10 on; the newest version checked by hand is 1.32
TESTED = (1, 10) <= ORT_VERSION


def add_model() -> ort.InferenceSession:
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"])],
        "add",
        [helper.make_tensor_value_info("a", F, [2]), helper.make_tensor_value_info("b", F, [2])],
        [helper.make_tensor_value_info("c", F, [2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.skipif(not TESTED, reason=f"onnxruntime {ort.__version__} predates the private layer rnnir binds through")
def test_every_private_name_the_native_layer_uses_exists_in_this_onnxruntime():
    missing = missing_private_api(add_model())
    assert not missing, (
        f"onnxruntime {ort.__version__} lacks {missing}: rnnir.runtime.ort.NativeBinding no longer works and every "
        "StatefulSession and SessionPool falls back to the documented IOBinding API (slower); update rnnir/runtime/ort.py"
    )
    assert type(make_binding(add_model())) is NativeBinding


def test_a_session_without_the_private_layer_falls_back_to_the_documented_api():
    class Wrapped:
        """An InferenceSession seen without its private ``_sess``, as a future onnxruntime might have it."""

        def __init__(self, sess: ort.InferenceSession) -> None:
            self._inner = sess

        def __getattr__(self, name: str):
            if name == "_sess":
                raise AttributeError(name)
            return getattr(self._inner, name)

    sess = Wrapped(add_model())
    assert "InferenceSession._sess.run_with_iobinding" in missing_private_api(sess)  # type: ignore[arg-type]
    b = make_binding(sess)  # type: ignore[arg-type]
    assert type(b) is PublicBinding
    b.bind_array("a", np.array([1, 2], np.float32))
    b.bind_array("b", np.array([10, 20], np.float32))
    b.bind_output("c")
    b.run()
    assert b.outputs()[0].numpy().tolist() == [11.0, 22.0]


def test_the_private_names_are_listed_once_each():
    assert len(set(PRIVATE_API)) == len(PRIVATE_API) and PRIVATE_API


@pytest.mark.parametrize("native", [True, False], ids=["native", "public"])
def test_both_layers_bind_run_and_write_into_a_bound_buffer(native):
    sess = add_model()
    b = make_binding(sess, native)
    assert b.kind == ("native" if native else "public")
    out = np.zeros(2, np.float32)
    held = b.wrap(out)  # onnxruntime writes into ``out`` itself
    b.bind_value("a", b.upload(np.array([1, 2], np.float32)))
    b.bind_array("b", np.array([10, 20], np.float32))
    b.bind_output_into("c", held)
    b.run()
    assert out.tolist() == [11.0, 22.0]
    fed = np.array([100, 200], np.float32)
    b.raw_binder()("b", fed)
    b.runner()()
    assert out.tolist() == [101.0, 202.0]
