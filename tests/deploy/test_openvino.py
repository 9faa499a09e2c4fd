"""``rnnir deploy openvino``: the stateful OpenVINO model against onnxruntime's hand loop, and every refusal.

The oracle is onnxruntime: rnnir feeds the state back by hand (StatefulSession), OpenVINO keeps it in its
variables; the check runs both on the same calls and fails above the tolerance.  To show the check can fail,
one test builds the stateful model from a deliberately wrong pair (OpenVINO accepts it without a word) and
the check must catch it.  Skipped with a message when OpenVINO is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rnnir.cli import main
from tests.support import realmodels as rm
from tests.support.deploy_models import SAMPLES, TORCH, real_model

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install 'rnnir[openvino]'): rnnir deploy openvino cannot run")



def deploy(model: str, out: Path, *extra: str) -> int:
    return main(["deploy", "openvino", model, "-o", str(out), "--no-config", "--format", "json", *extra])


def report(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_silero_openvino_16k_f32(tmp_path, capsys, silero_dir):
    assert deploy(str(silero_dir / "silero_vad_openvino_16k.onnx"), tmp_path / "vad.xml", "--calls", "50") == 0
    doc = report(capsys)
    assert doc["status"] == "pass" and doc["calls"] == 50
    assert doc["inference_precision"] == "f32" and doc["tolerance"] == 1e-5
    assert doc["pairs"] == {"state": "stateN"}
    (out,) = doc["outputs"]
    assert out["output"] == "output" and out["max_abs_diff"] <= 1e-5
    assert doc["reset_state"]["max_abs_diff"] == 0.0
    assert (tmp_path / "vad.xml").is_file() and (tmp_path / "vad.bin").is_file()
    # the saved model is stateful: its variable is the state, and state/stateN are no longer inputs/outputs
    model = ov.Core().read_model(str(tmp_path / "vad.xml"))
    assert not any("state" in p.get_names() for p in model.inputs)
    assert not any("stateN" in p.get_names() for p in model.outputs)
    assert len(model.get_variables()) == 1


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
def test_pytorch_lstm_export(tmp_path, capsys, kind):
    assert deploy(str(TORCH / f"lstm_stream.{kind}.onnx"), tmp_path / "lstm.xml", "--calls", "20", "--chunk", "4") == 0
    doc = report(capsys)
    assert doc["status"] == "pass" and doc["calls"] == 20
    assert doc["pairs"] == {"h0": "hn", "c0": "cn"}
    assert [o["output"] for o in doc["outputs"]] == ["y"] and doc["outputs"][0]["max_abs_diff"] <= 1e-5


def test_fsmn_vad_verified_caches(tmp_path, capsys):
    model = real_model(rm.fsmn_vad_path)
    assert deploy(model, tmp_path / "fsmn.xml", "--shape", "speech=1,10,400", "--calls", "20") == 0
    doc = report(capsys)
    assert doc["status"] == "pass" and doc["outputs"][0]["output"] == "logits"
    assert doc["outputs"][0]["max_abs_diff"] <= 1e-5


def test_a_wrong_pair_fails_the_check(tmp_path):
    """OpenVINO builds a stateful model from a swapped pair without a word; the check must catch it.

    lstm_fanout's h0/c0 -> hn/cn made stateful as h0 <- cn, c0 <- hn (same shapes, so OpenVINO accepts it),
    checked against onnxruntime's loop with the right pairs."""
    import dataclasses

    from rnnir.deploy import plan_deployment
    from rnnir.deploy.inputs import InputFlags
    from rnnir.deploy.openvino import check_stateful, convert, make_stateful, save, stream_feeds

    model = SAMPLES / "lstm_fanout.onnx"
    plan = plan_deployment(model)
    assert plan.pairs == {"h0": "hn", "c0": "cn"}
    h, c = plan.states
    swapped = dataclasses.replace(plan, states=(dataclasses.replace(h, output="cn"), dataclasses.replace(c, output="hn")))
    feeds, session = stream_feeds(plan, InputFlags(), 10, 4)
    converted = convert(model)
    make_stateful(converted, swapped, {"h0": (1, 1, 5), "c0": (1, 1, 5)})
    wrong = check_stateful(save(converted, tmp_path / "wrong.xml"), plan, feeds, session)
    assert not wrong.ok and wrong.outputs[0].max_abs_diff > 1e-3
    assert "fail" in wrong.text()
    # near-miss: the same steps with the right pairs pass
    converted = convert(model)
    make_stateful(converted, plan, {"h0": (1, 1, 5), "c0": (1, 1, 5)})
    right = check_stateful(save(converted, tmp_path / "right.xml"), plan, feeds, session)
    assert right.ok and right.outputs[0].max_abs_diff <= 1e-5


def test_default_precision_is_reported(tmp_path, capsys, silero_dir):
    assert deploy(str(silero_dir / "silero_vad_openvino_16k.onnx"), tmp_path / "vad.xml", "--calls", "10", "--precision", "default") == 0
    doc = report(capsys)
    assert doc["inference_precision"] in ("f32", "bf16", "f16")  # the CPU's own choice, said as it is
    assert doc["tolerance"] == (1e-5 if doc["inference_precision"] == "f32" else 1e-2)


def test_stream_from_a_file_and_a_context(tmp_path, capsys, silero_dir):
    """The stream flags are rnnir run's: 10 calls of 512 new samples from a .npy file (a leading call axis), with the 64 samples of
    context silero's wrapper keeps prepended (the model's input is 576 wide)."""
    audio = (0.1 * np.random.default_rng(3).standard_normal((10, 1, 512))).astype(np.float32)
    np.save(tmp_path / "audio.npy", audio)
    rc = deploy(str(silero_dir / "silero_vad_openvino_16k.onnx"), tmp_path / "vad.xml", "--input", f"input={tmp_path / 'audio.npy'}", "--context", "input=64", "--calls", "100")
    assert rc == 0
    doc = report(capsys)
    assert doc["calls"] == 10 and doc["status"] == "pass"


def test_silero_vad_does_not_convert(tmp_path, capsys, silero_dir):
    """silero_vad.onnx is verified (deploy triton takes it) but OpenVINO cannot convert it: said, exit 2."""
    assert deploy(str(silero_dir / "silero_vad.onnx"), tmp_path / "x.xml", "--value", "sr=16000") == 2
    err = capsys.readouterr().err
    assert "OpenVINO cannot convert the model: Conv producing 'If_0_then_branch__Inline_0__/decoder/decoder/2/Conv_output_0'" in err


def test_conversion_failure_names_the_op(tmp_path, capsys, silero_dir):
    """silero_vad_16k_op15.onnx: a Conv whose input rank OpenVINO cannot infer; one clear line, exit 2."""
    rc = deploy(str(silero_dir / "silero_vad_16k_op15.onnx"), tmp_path / "x.xml", "--pair", "state=stateN", "--allow-unverified")
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = [ln for ln in err if ln.startswith("rnnir: error:")]
    assert len(line) == 1
    assert "OpenVINO cannot convert the model: Conv producing '/model/decoder/decoder/2/Conv_output_0'" in line[0]
    assert "rank has to be known" in line[0] and "Traceback" not in "\n".join(err)
    assert not (tmp_path / "x.xml").exists()


def test_hc_swap_is_refused(tmp_path, capsys):
    assert deploy(str(SAMPLES / "sd002_hc_swap.onnx"), tmp_path / "x.xml") == 1
    assert "SD002" in capsys.readouterr().out
    assert not (tmp_path / "x.xml").exists()


def test_unverified_guess_is_refused(tmp_path, capsys):
    assert deploy(str(SAMPLES / "sd009_projected_state.onnx"), tmp_path / "x.xml", "--allow-unverified") == 1
    assert "--pair h0=hn" in capsys.readouterr().out
    assert not (tmp_path / "x.xml").exists()


def test_output_must_be_an_xml_file(tmp_path, capsys, silero_dir):
    assert deploy(str(silero_dir / "silero_vad_openvino_16k.onnx"), tmp_path / "vad.onnx") == 2
    assert "NAME.xml" in capsys.readouterr().err
