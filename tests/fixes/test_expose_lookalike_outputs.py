"""``rnnir.fix(expose_state=True)`` on a GRU whose final state is NOT returned as it is, though an output looks like
it is (named ``hn``, or an Identity nearby): the exposed state must be the GRU's own final state, so the fixed model
streamed in chunks computes what the original computes on the whole sequence (onnxruntime)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir.runtime import StatefulSession
from tests.fixes.test_expose_names_and_defaults import _ort, _strip

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _gru(extra: list[onnx.NodeProto], out: str, inits: list[onnx.TensorProto] = ()) -> onnx.ModelProto:  # type: ignore[assignment]
    m = onnx.load(str(SAMPLES / "sd010_gru_no_initial_state.onnx"))
    g = m.graph
    g.node[0].output[1] = "gru_hn"
    g.node.extend(extra)
    g.initializer.extend(inits)
    g.output[1].name = out
    onnx.checker.check_model(m, full_check=True)
    return m


def test_an_output_that_only_looks_like_the_final_state_is_not_paired() -> None:
    const = numpy_helper.from_array(np.full((1, 1, 4), 0.5, np.float32), "half")
    rows = [
        # hn = Relu(final state): returned, but not as it is
        ("relu", _gru([helper.make_node("Relu", ["gru_hn"], ["hn"], name="relu")], "hn")),
        # hn = Identity(final state) is no graph output; the output is Relu(hn)
        ("inner identity", _gru([helper.make_node("Identity", ["gru_hn"], ["hn"], name="ident"),
                                 helper.make_node("Relu", ["hn"], ["hn_relu"], name="relu")], "hn_relu")),
        # hn = Identity(a constant) is a graph output next to the final state
        ("identity of another value", _gru([helper.make_node("Identity", ["half"], ["hn"], name="ident")], "hn", [const])),
    ]
    x = np.random.default_rng(43).standard_normal((6, 1, 3)).astype(np.float32)
    whole = _ort(onnx.load(str(SAMPLES / "sd010_gru_no_initial_state.onnx"))).run(["y"], {"x": x})[0]
    for what, model in rows:
        result = rnnir.fix(model, expose_state=True)
        assert [e.before for e in result.edits][:1] == ["initial state absent (zeros), final state not returned"], what
        pairs = {p.input: p.output for p in rnnir.load(_strip(result.model)).state_pairs}
        (state_out,) = pairs.values()
        assert state_out not in {"hn", "hn_relu"}, what
        producer = next(n for n in result.model.graph.node if state_out in n.output)
        assert (producer.op_type, list(producer.input)) == ("Identity", ["gru_hn"]), what
        session = StatefulSession(result.model)
        chunked = np.concatenate([session.run({"x": x[k : k + 2]})["y"] for k in (0, 2, 4)])
        np.testing.assert_allclose(chunked, whole, atol=1e-6, err_msg=what)


def test_packed_state_when_only_the_input_name_state_is_taken() -> None:
    """A value is already called ``state`` (``stateN`` is free): the packed pair takes fresh names, both of them."""
    path = SAMPLES / "sd010_gru_no_initial_state.onnx"
    taken = onnx.load(str(path))
    g = taken.graph
    g.node.extend([helper.make_node("Relu", ["y"], ["state"], name="relu"), helper.make_node("Identity", ["state"], ["y2"], name="ident")])
    g.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["T", 1, 1, 4]))
    result = rnnir.fix(taken, expose_state=True, packed=True)
    assert [e.target for e in result.edits] == ["graph input 'rnn_state' / output 'rnn_stateN'"]
    assert {p.key: p.value for p in result.model.metadata_props}["rnnir.pairs"] == '{"rnn_state": "rnn_stateN"}'
    x = np.random.default_rng(64).standard_normal((6, 1, 3)).astype(np.float32)
    whole = _ort(taken).run(["y2"], {"x": x})[0]
    session = StatefulSession(result.model)
    chunked = np.concatenate([session.run({"x": x[k : k + 2]})["y2"] for k in (0, 2, 4)])
    np.testing.assert_allclose(chunked, whole, atol=1e-6)
