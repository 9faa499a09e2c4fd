"""ONNX → IR lowering: safe reading, scope-aware def-use, state pairing, policies."""

from __future__ import annotations

from rnnir.lower.build import LAYOUT_OPS, EntryPolicy, ExitPolicy, Policy, lower
from rnnir.lower.pairing import find_pairs, triton_pairs
from rnnir.onnxio.source import ModelSource, read_model

__all__ = ["LAYOUT_OPS", "EntryPolicy", "ExitPolicy", "ModelSource", "Policy", "find_pairs", "lower", "read_model", "triton_pairs"]
