"""The samples as models onnxruntime runs, shared by the tests that run them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

import rnnir

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def exported_ir_sample(name: str, seed: int = 7) -> onnx.ModelProto:
    """An IR-text sample (``samples/<name>.rnnir``) exported to ONNX with random weights.

    IR text elides weights (they parse as zeros, which keep a zero state at zero forever and would make every
    comparison vacuous); the store structure rides along in the export's ``rnnir.ir`` metadata, which
    onnxruntime ignores and the lowering reads back."""
    program = rnnir.load(str(SAMPLES / f"{name}.rnnir"))
    rng = np.random.default_rng(seed)
    for v in program.externals.values():
        if v.const is not None and np.asarray(v.const).dtype.kind == "f":
            v.const = (rng.standard_normal(np.shape(v.const)) * 0.5).astype(np.float32)
    return rnnir.export(program)


def runnable_sample(name: str) -> str | bytes:
    """The sample's ``.onnx`` path, or its IR text exported as :func:`exported_ir_sample` does (serialised)."""
    path = SAMPLES / f"{name}.onnx"
    return str(path) if path.exists() else exported_ir_sample(name).SerializeToString()
