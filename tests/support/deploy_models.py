"""What the deploy tests share: the models they deploy and a skip when a real model cannot be fetched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import realmodels as rm

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
TORCH = rm.torch_models_dir()


def real_model(getter, *args) -> str:
    """``getter(*args)`` as a path string, or a skip saying why the real model is unavailable."""
    try:
        return str(getter(*args))
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"real model unavailable: {exc}")
