"""Shared fixtures: real models nobody here wrote (silero-vad wheel, PyTorch exports)."""

from __future__ import annotations

import pytest

from tests.support import realmodels


@pytest.fixture(scope="session")
def silero_dir():
    try:
        return realmodels.silero_vad_dir()
    except realmodels.RealModelUnavailable as exc:  # no registry reachable: say so, do not fail
        pytest.skip(f"silero-vad wheel unavailable: {exc}")
