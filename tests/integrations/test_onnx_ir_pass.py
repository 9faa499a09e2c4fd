"""rnnir's verification as an onnx-ir pass, run inside ``onnx_ir.passes.PassManager`` next to onnx-ir's own passes.

Oracles: ``rnnir lint`` on the same file (the pass must report exactly what the linter reports), the model's
serialised bytes before and after (the pass must not change them), and onnx-ir's own contract checks (the
base class raises when a pass declared in place returns another model).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rnnir
from rnnir import passes

ir = pytest.importorskip("onnx_ir", reason="onnx-ir is not installed (pip install 'rnnir[onnx-ir]'): the pass cannot run")
from onnx_ir.passes.common import RemoveUnusedNodesPass  # noqa: E402

from rnnir.integrations.onnx_ir import StateVerificationError, StateVerificationResult, VerifyStatePass  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def codes(diagnostics) -> list[str]:
    return sorted(d.code for d in diagnostics)


def test_pipeline_reports_what_lint_reports_on_the_swap():
    model = ir.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    verify = VerifyStatePass()
    result = ir.passes.PassManager([RemoveUnusedNodesPass(), verify])(model)
    assert result.model is model and result.modified is False
    expected = codes(passes.verify(rnnir.load(SAMPLES / "sd002_hc_swap.onnx")).diagnostics)
    assert "SD002" in expected
    assert verify.last_result is not None and codes(verify.last_result.diagnostics) == expected
    assert not verify.last_result.ok


def test_strict_raises_inside_the_pipeline():
    model = ir.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    manager = ir.passes.PassManager([RemoveUnusedNodesPass(), VerifyStatePass(strict=True)])
    with pytest.raises(ir.passes.PassError) as info:
        manager(model)
    cause = info.value
    while cause is not None and not isinstance(cause, StateVerificationError):
        cause = cause.__cause__
    assert isinstance(cause, StateVerificationError)
    assert [d.code for d in cause.result.errors] == ["SD002"]
    assert "SD002" in str(cause)


def test_strict_passes_a_clean_model():
    """Near-miss of the swap: the same LSTM written back right goes through strict, unchanged."""
    model = ir.load(str(SAMPLES / "lstm_fanout.onnx"))
    before = ir.to_proto(model).SerializeToString()
    verify = VerifyStatePass(strict=True)
    result = ir.passes.PassManager([RemoveUnusedNodesPass(), verify])(model)
    assert result.modified is False
    assert ir.to_proto(result.model).SerializeToString() == before
    assert verify.last_result is not None and verify.last_result.ok and verify.last_result.diagnostics == []
    assert all(s.verdict is passes.Verdict.VERIFIED for s in verify.last_result.verification.slices)


def test_called_alone_returns_the_result_with_findings():
    model = ir.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    before = ir.to_proto(model).SerializeToString()
    result = VerifyStatePass()(model)
    assert isinstance(result, StateVerificationResult) and isinstance(result, ir.passes.PassResult)
    assert result.model is model and result.modified is False
    assert [d.code for d in result.errors] == ["SD002"]
    assert ir.to_proto(model).SerializeToString() == before


def test_declares_a_side_effect_only_pass():
    verify = VerifyStatePass()
    assert verify.in_place is True and verify.changes_input is False and verify.destructive is False
    # functionalize() wraps it in a clone: the findings still come back, on a copy
    model = ir.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    result = ir.passes.functionalize(verify)(model)
    assert result.model is not model and verify.last_result is not None and not verify.last_result.ok


def test_declared_pairs_and_selection():
    """pairs=/select= behave as --pair/--select: declaring the swap's pair keeps SD002; ignoring it clears it."""
    model = ir.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    assert codes(VerifyStatePass(pairs={"state": "stateN"})(model).diagnostics) == ["SD002"]
    assert VerifyStatePass(ignore=["SD002"], strict=True)(model).ok
