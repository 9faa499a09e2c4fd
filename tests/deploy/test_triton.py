"""``rnnir deploy triton``: the config.pbtxt parsed by Triton's own ``model_config`` protobuf (tritonclient ships
it), every state entry checked field by field against what the model declares, and every refusal.

Oracles: Triton's protobuf (the file must parse as a ``ModelConfig``), the models' declared shapes (written
here by hand from ``tests/realmodels.py``'s ground truth), onnxruntime (the deployed model.onnx computes
what the original does), and rnnir's own Triton reader (``rnnir.lower.triton_pairs``) reading the pairs back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

from rnnir.cli import main
from tests.support import realmodels as rm
from tests.support.deploy_models import SAMPLES, TORCH, real_model

model_config_pb2 = pytest.importorskip(
    "tritonclient.grpc.model_config_pb2", reason="tritonclient[grpc] is not installed (pip install 'rnnir[deploy-test]'): the config cannot be checked against Triton's protobuf"
)
text_format = pytest.importorskip("google.protobuf.text_format")



def parse_config(path: Path):
    config = model_config_pb2.ModelConfig()
    text_format.Parse(path.read_text(encoding="utf-8"), config)  # raises on any field Triton does not know
    return config


def deploy(model: str, repo: Path, *extra: str, capsys=None) -> int:
    return main(["deploy", "triton", model, "-o", str(repo), "--no-config", *extra])


def states(config) -> dict[str, tuple]:
    fp = model_config_pb2.DataType.Name
    out = {}
    for s in config.sequence_batching.state:
        assert len(s.initial_state) == 1
        init = s.initial_state[0]
        assert init.WhichOneof("state_data") == "zero_data"
        out[s.input_name] = (s.output_name, fp(s.data_type), list(s.dims), fp(init.data_type), list(init.dims))
    return out


def gru_batch_first(path: Path) -> str:
    """A GRU with layout=1: every tensor, state included, has the batch at axis 0 (Triton can batch it)."""
    rng = np.random.default_rng(0)
    hidden, inp = 3, 2
    w = oh.make_tensor("W", TensorProto.FLOAT, [1, 3 * hidden, inp], rng.standard_normal(3 * hidden * inp).astype(np.float32).tolist())
    r = oh.make_tensor("R", TensorProto.FLOAT, [1, 3 * hidden, hidden], rng.standard_normal(3 * hidden * hidden).astype(np.float32).tolist())
    node = oh.make_node("GRU", ["x", "W", "R", "", "", "h"], ["y", "h_out"], hidden_size=hidden, layout=1, name="gru")
    graph = oh.make_graph(
        [node], "gru_batch_first",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "T", inp]), oh.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", 1, hidden])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "T", 1, hidden]), oh.make_tensor_value_info("h_out", TensorProto.FLOAT, ["batch", 1, hidden])],
        [w, r],
    )
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), str(path))
    return str(path)


def test_silero_vad_state_entry(tmp_path, silero_dir):
    assert deploy(str(silero_dir / "silero_vad.onnx"), tmp_path) == 0
    config = parse_config(tmp_path / "silero_vad" / "config.pbtxt")
    assert config.name == "silero_vad" and config.backend == "onnxruntime"
    assert config.max_batch_size == 0  # state [2, B, 128]: the batch is not at axis 0, Triton cannot batch it
    # state [2, B, 128] float32 -> stateN; zeros of [2, 1, 128] start each sequence
    assert states(config) == {"state": ("stateN", "TYPE_FP32", [2, -1, 128], "TYPE_FP32", [2, 1, 128])}
    inputs = {i.name: i for i in config.input}
    assert sorted(inputs) == ["input", "sr"]  # the state input is Triton's, not the client's
    assert list(inputs["sr"].dims) == [1] and inputs["sr"].HasField("reshape") and list(inputs["sr"].reshape.shape) == []
    assert [o.name for o in config.output] == ["output"]
    assert (tmp_path / "silero_vad" / "1" / "model.onnx").is_file()


def test_silero_openvino_static_state(tmp_path, silero_dir):
    assert deploy(str(silero_dir / "silero_vad_openvino_16k.onnx"), tmp_path, "--name", "vad") == 0
    config = parse_config(tmp_path / "vad" / "config.pbtxt")
    assert config.name == "vad"
    assert states(config) == {"state": ("stateN", "TYPE_FP32", [2, 1, 128], "TYPE_FP32", [2, 1, 128])}


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
def test_pytorch_lstm_export(tmp_path, kind):
    model = TORCH / f"lstm_stream.{kind}.onnx"
    assert deploy(str(model), tmp_path, "--name", "lstm") == 0
    config = parse_config(tmp_path / "lstm" / "config.pbtxt")
    batch = -1 if kind == "ts" else 1  # ts: [1, B, 16]; dynamo: static [1, 1, 16]
    one = ("TYPE_FP32", [1, batch, 16], "TYPE_FP32", [1, 1, 16])
    assert states(config) == {"h0": ("hn", *one), "c0": ("cn", *one)}
    # the written model computes what the original does (dynamo: its external weights were inlined)
    import onnxruntime as ort

    deployed = tmp_path / "lstm" / "1" / "model.onnx"
    assert not list((tmp_path / "lstm" / "1").glob("*.data"))
    feed = {"x": np.random.default_rng(1).standard_normal((4, 1, 8)).astype(np.float32),
            "h0": np.full((1, 1, 16), 0.3, np.float32), "c0": np.full((1, 1, 16), -0.2, np.float32)}
    a = ort.InferenceSession(str(model)).run(None, feed)
    b = ort.InferenceSession(str(deployed)).run(None, feed)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_rnnir_reads_the_pairs_back(tmp_path):
    """rnnir's own Triton reader finds the written pairs beside the deployed model (source 'triton')."""
    from rnnir.lower import triton_pairs

    assert deploy(str(TORCH / "lstm_stream.ts.onnx"), tmp_path, "--name", "lstm") == 0
    assert triton_pairs(tmp_path / "lstm" / "1" / "model.onnx") == {"h0": "hn", "c0": "cn"}


def test_batch_first_model_leaves_the_batch_axis_out(tmp_path):
    model = gru_batch_first(tmp_path / "gru_bf.onnx")
    assert deploy(model, tmp_path / "repo", "--max-batch-size", "4") == 0
    config = parse_config(tmp_path / "repo" / "gru_bf" / "config.pbtxt")
    assert config.max_batch_size == 4
    assert states(config) == {"h": ("h_out", "TYPE_FP32", [1, 3], "TYPE_FP32", [1, 3])}  # [batch, 1, 3] less the batch
    assert [list(i.dims) for i in config.input] == [[-1, 2]]
    assert [list(o.dims) for o in config.output] == [[-1, 1, 3]]


def test_max_batch_size_zero_keeps_every_axis(tmp_path):
    """Near-miss of the batch-first case: asked not to batch, the batch axis stays in the dims."""
    model = gru_batch_first(tmp_path / "gru_bf.onnx")
    assert deploy(model, tmp_path / "repo", "--max-batch-size", "0") == 0
    config = parse_config(tmp_path / "repo" / "gru_bf" / "config.pbtxt")
    assert config.max_batch_size == 0
    assert states(config) == {"h": ("h_out", "TYPE_FP32", [-1, 1, 3], "TYPE_FP32", [1, 1, 3])}


def test_fsmn_vad_verified_caches(tmp_path, capsys):
    """FSMN-VAD's four sliding-window caches are verified: deployed with no flag, each cache a state."""
    model = real_model(rm.fsmn_vad_path)
    assert deploy(model, tmp_path, "--name", "fsmn") == 0
    config = parse_config(tmp_path / "fsmn" / "config.pbtxt")
    cache = ("TYPE_FP32", [1, 128, 19, 1], "TYPE_FP32", [1, 128, 19, 1])
    assert states(config) == {f"in_cache{k}": (f"out_cache{k}", *cache) for k in range(4)}
    assert "NOT verified by rnnir" not in (tmp_path / "fsmn" / "config.pbtxt").read_text()
    assert "is not verified" not in capsys.readouterr().err


def test_declared_and_allowed_unverified_pair_is_said(tmp_path, capsys):
    """What rnnir cannot verify goes through only when declared AND allowed, and the config says so."""
    assert deploy(str(SAMPLES / "sd009_projected_state.onnx"), tmp_path, "--name", "proj", "--allow-unverified", "--pair", "h0=hn") == 0
    assert set(states(parse_config(tmp_path / "proj" / "config.pbtxt"))) == {"h0"}
    assert "NOT verified by rnnir" in (tmp_path / "proj" / "config.pbtxt").read_text()
    assert "is not verified" in capsys.readouterr().err


def test_clean_sample_is_not_refused(tmp_path):
    """Near-miss of the swap: the same LSTM with h and c written back right."""
    assert deploy(str(SAMPLES / "lstm_fanout.onnx"), tmp_path) == 0
    assert states(parse_config(tmp_path / "lstm_fanout" / "config.pbtxt")) == {
        "h0": ("hn", "TYPE_FP32", [1, 1, 5], "TYPE_FP32", [1, 1, 5]),
        "c0": ("cn", "TYPE_FP32", [1, 1, 5], "TYPE_FP32", [1, 1, 5]),
    }


def test_control_inputs(tmp_path):
    import onnxruntime as ort

    assert deploy(str(SAMPLES / "lstm_fanout.onnx"), tmp_path, "--control", "start,ready", "--control", "corrid") == 0
    config = parse_config(tmp_path / "lstm_fanout" / "config.pbtxt")
    kinds = {c.name: [model_config_pb2.ModelSequenceBatching.Control.Kind.Name(k.kind) for k in c.control] for c in config.sequence_batching.control_input}
    assert kinds == {"START": ["CONTROL_SEQUENCE_START"], "READY": ["CONTROL_SEQUENCE_READY"], "CORRID": ["CONTROL_SEQUENCE_CORRID"]}
    start = next(c for c in config.sequence_batching.control_input if c.name == "START").control[0]
    assert list(start.int32_false_true) == [0, 1]
    # the onnxruntime backend wants every config input in the model: added, and ignored by the graph
    deployed = tmp_path / "lstm_fanout" / "1" / "model.onnx"
    session = ort.InferenceSession(str(deployed))
    assert {"START", "READY", "CORRID"} <= {i.name for i in session.get_inputs()}
    feed = {"x": np.ones((2, 1, 3), np.float32), "h0": np.zeros((1, 1, 5), np.float32), "c0": np.zeros((1, 1, 5), np.float32)}
    controls = {"START": np.ones([1], np.int32), "READY": np.ones([1], np.int32), "CORRID": np.array([7], np.uint64)}
    original = ort.InferenceSession(str(SAMPLES / "lstm_fanout.onnx")).run(None, feed)
    for x, y in zip(original, session.run(None, {**feed, **controls}), strict=True):
        np.testing.assert_array_equal(x, y)


def test_existing_config_is_not_overwritten(tmp_path, capsys):
    assert deploy(str(SAMPLES / "lstm_fanout.onnx"), tmp_path) == 0
    before = (tmp_path / "lstm_fanout" / "config.pbtxt").read_text()
    assert deploy(str(SAMPLES / "lstm_fanout.onnx"), tmp_path, "--control", "start") == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "lstm_fanout" / "config.pbtxt").read_text() == before
    assert deploy(str(SAMPLES / "lstm_fanout.onnx"), tmp_path, "--control", "start", "--force") == 0
    assert "START" in (tmp_path / "lstm_fanout" / "config.pbtxt").read_text()


def test_names_with_quotes_and_backslashes_survive(tmp_path):
    """Tensor names come from the model: quoted as protobuf string literals, they parse back unchanged."""
    model = onnx.load(str(SAMPLES / "lstm_fanout.onnx"))
    renamed = {"h0": 'h"0\\x', "hn": 'hn"'}
    for node in model.graph.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
    for vi in [*model.graph.input, *model.graph.output]:
        vi.name = renamed.get(vi.name, vi.name)
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert deploy(str(tmp_path / "m.onnx"), tmp_path / "repo", "--pair", 'h"0\\x=hn"', "--pair", "c0=cn") == 0
    config = parse_config(tmp_path / "repo" / "m" / "config.pbtxt")
    assert [(s.input_name, s.output_name) for s in config.sequence_batching.state] == [('h"0\\x', 'hn"'), ("c0", "cn")]
