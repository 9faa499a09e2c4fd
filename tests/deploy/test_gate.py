"""The gate every deploy path goes through (:func:`rnnir.deploy.plan_deployment`): what is refused, what is
let through, and what each refusal tells the user to type.  Needs neither tritonclient nor OpenVINO.

Oracles: rnnir lint's own verdicts on the same models (the swap sample is SD002 by construction; the projected
state sample is SD009: its state goes through a projection rnnir does not follow; FSMN-VAD's caches are verified
sliding windows), and the flags printed, which must be the pairs the model really has.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rnnir.cli import main
from rnnir.deploy import DeployRefused, plan_deployment
from tests.support import realmodels as rm
from tests.support.deploy_models import SAMPLES, TORCH, real_model


def deploy(model: str, repo: Path, *extra: str) -> int:
    return main(["deploy", "triton", model, "-o", str(repo), "--no-config", *extra])


def test_plan_of_a_verified_model():
    plan = plan_deployment(SAMPLES / "lstm_fanout.onnx")
    assert plan.pairs == {"h0": "hn", "c0": "cn"}
    assert [s.shape for s in plan.states] == [(1, 1, 5), (1, 1, 5)] and all(s.verified for s in plan.states)
    assert [t.name for t in plan.inputs] == ["x"] and [t.name for t in plan.outputs] == ["y"]


def test_plan_refuses_the_swap_with_every_reason():
    with pytest.raises(DeployRefused) as info:
        plan_deployment(SAMPLES / "sd002_hc_swap.onnx", allow_unverified=True)
    (refusal,) = info.value.refusals  # one finding naming both slices: said once
    assert refusal.subject == "pair state -> stateN" and refusal.reason.startswith("SD002 (state[0], state[1])")


def test_an_unverified_guess_is_refused_even_when_allowed(tmp_path, capsys):
    assert deploy(str(SAMPLES / "sd009_projected_state.onnx"), tmp_path, "--allow-unverified") == 1
    out = capsys.readouterr().out
    assert "deploy refused" in out and "only a guess" in out and "--pair h0=hn" in out
    assert list(tmp_path.iterdir()) == []


def test_unverified_is_refused_without_the_flag(tmp_path, capsys):
    assert deploy(str(SAMPLES / "sd009_projected_state.onnx"), tmp_path, "--pair", "h0=hn") == 1
    out = capsys.readouterr().out
    assert "SD009" in out and "--allow-unverified" in out
    assert list(tmp_path.iterdir()) == []


def test_fsmn_vad_caches_named_by_convention_and_verified_deploy_without_flags(tmp_path):
    """Near-miss of the guess: FSMN's in_cacheK -> out_cacheK come from names too, but rnnir verified every slice
    (sliding windows of the newest 19 frames), so nothing has to be declared or allowed."""
    plan = plan_deployment(real_model(rm.fsmn_vad_path))
    assert plan.pairs == {f"in_cache{k}": f"out_cache{k}" for k in range(4)}
    assert all(s.verified for s in plan.states)
    assert deploy(real_model(rm.fsmn_vad_path), tmp_path) == 0


def test_hc_swap_is_refused(tmp_path, capsys):
    assert deploy(str(SAMPLES / "sd002_hc_swap.onnx"), tmp_path) == 1
    out = capsys.readouterr().out
    assert "SD002" in out and "state[0], state[1]" in out
    assert list(tmp_path.iterdir()) == []
    # --allow-unverified never lets a violated pair through
    assert deploy(str(SAMPLES / "sd002_hc_swap.onnx"), tmp_path, "--allow-unverified", "--pair", "state=stateN") == 1
    assert list(tmp_path.iterdir()) == []


def test_no_pairs_is_refused_with_the_flag_to_give(tmp_path, capsys):
    assert deploy(str(TORCH / "gru_encoder_stateless.ts.onnx"), tmp_path) == 1
    out = capsys.readouterr().out
    assert "no state pair" in out and "--pair" in out


def test_bad_control_is_a_usage_error(tmp_path, capsys):
    assert deploy(str(SAMPLES / "lstm_fanout.onnx"), tmp_path, "--control", "stop") == 2
    assert "known controls are start, ready, end, corrid" in capsys.readouterr().err


def test_deploy_imports_no_tritonclient_or_openvino(tmp_path):
    """`rnnir deploy triton` writes the config itself: neither tritonclient nor OpenVINO is imported."""
    import subprocess

    code = (
        "import sys; from rnnir.cli import main; "
        f"rc = main(['deploy', 'triton', {str(SAMPLES / 'lstm_fanout.onnx')!r}, '-o', {str(tmp_path)!r}, '--no-config']); "
        "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('tritonclient', 'openvino', 'onnx_ir')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stderr


def test_triton_reader_takes_entries_with_an_initial_state_block(tmp_path):
    """A state entry with a nested ``initial_state: { ... }`` (Triton's documented form) is read; before, the
    nested braces hid the whole entry from rnnir's reader, so a served model lost its declared pairs."""
    from rnnir.lower import triton_pairs

    (tmp_path / "config.pbtxt").write_text(
        'sequence_batching { state [ { input_name: "h0" output_name: "hn" data_type: TYPE_FP32 dims: [ 1, 4 ]\n'
        '  initial_state: { data_type: TYPE_FP32 dims: [ 1, 4 ] zero_data: true name: "z" } },\n'
        '  { initial_state: { zero_data: true } output_name: "cn" input_name: "c0" } ] }\n'
    )
    assert triton_pairs(tmp_path / "model.onnx") == {"h0": "hn", "c0": "cn"}


def test_openvino_missing_is_one_clear_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    rc = main(["deploy", "openvino", str(SAMPLES / "lstm_fanout.onnx"), "-o", str(tmp_path / "m.xml"), "--no-config"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "pip install 'rnnir[openvino]'" in err and "Traceback" not in err


def test_ir_text_is_not_deployable(tmp_path, capsys):
    assert deploy(str(SAMPLES / "gru_view_load_ordered.rnnir"), tmp_path) == 2
    assert "IR text has no ONNX graph to deploy" in capsys.readouterr().err


def test_lowering_policies_do_not_apply(tmp_path, capsys):
    assert deploy(str(SAMPLES / "lstm_fanout.onnx"), tmp_path, "--lower-entry", "constant") == 2
    assert "deploy serves the model as it is" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
