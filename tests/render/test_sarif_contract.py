"""SARIF output: valid SARIF 2.1.0, equal field by field to a committed snapshot, and objects with exactly their keys.

The run lints four samples in a folder (two with findings, one clean, one written as IR text), a file that is not a
model, and a sample outside the working directory (an absolute URI).  Volatile fields are normalised before the
comparison: the tool version, the working directory's URI, the temporary folder in absolute URIs; each rule's long
texts are checked against ``rnnir explain`` (their source) and replaced by a marker, so editing a rule's prose does
not rewrite the snapshot while every structural field and every finding's message does.

Regenerate after an intended change: ``RNNIR_UPDATE_SNAPSHOTS=1 python -m pytest tests/render/test_sarif_contract.py``
and review the diff of tests/data/snapshots/lint.sarif.json.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rnnir import cli
from rnnir.passes import explain

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "lint.sarif.json"
#: OASIS's official schema, shipped in tests/data (tests/data/schemas/README.md)
SARIF_SCHEMA = ROOT / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json"
LINTED = ["sd002_hc_swap.onnx", "sd001_no_state_output.onnx", "gru_fanout.onnx", "al001_chain.rnnir"]
RULE_TEXTS = ("shortDescription", "fullDescription", "help")

ARTIFACT_KEYS = {"location", "properties"}  # properties only when the model was analysed
LOCATION_KEYS = {"uri", "uriBaseId"}  # uriBaseId only below the working directory
RESULT_KEYS = {"ruleId", "ruleIndex", "level", "message", "locations", "partialFingerprints", "properties"}
RULE_KEYS = {"id", "name", "shortDescription", "fullDescription", "help", "defaultConfiguration"}


@pytest.fixture(scope="module")
def sarif(tmp_path_factory) -> tuple[dict, Path, int]:
    base = tmp_path_factory.mktemp("sarif")
    work, outside = base / "work", base / "outside"
    work.mkdir()
    outside.mkdir()
    for name in LINTED:
        shutil.copy(ROOT / "samples" / name, work / name)
    (work / "junk.onnx").write_bytes(b"junk")
    shutil.copy(ROOT / "samples" / "sd003_first_step.onnx", outside / "far.onnx")
    old = os.getcwd()
    os.chdir(work)
    try:
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(["lint", "--no-config", "--format", "sarif", *LINTED, "junk.onnx", str(outside / "far.onnx")])
    finally:
        os.chdir(old)
    return json.loads(buf.getvalue()), base, code


def _normalised(doc: dict, base: Path) -> dict:
    doc = json.loads(json.dumps(doc))
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    driver["version"] = driver["semanticVersion"] = "<version>"
    for rule in driver["rules"]:
        for key in RULE_TEXTS:
            if key in rule:
                rule[key] = {"text": "<rule text>"}
    run["originalUriBaseIds"]["%SRCROOT%"]["uri"] = "<cwd>/"
    for res in run["results"]:  # a fingerprint hashes the file's URI: an absolute one names the temporary folder
        if res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("file://"):
            res["partialFingerprints"] = {k: "<hash of an absolute URI>" for k in res["partialFingerprints"]}
    text = json.dumps(doc).replace(base.resolve().as_uri(), "file:///<tmp>")
    return json.loads(text)


def test_sarif_validates_against_the_official_schema(sarif):
    jsonschema = pytest.importorskip("jsonschema")
    doc, _, _ = sarif
    errors = list(jsonschema.Draft7Validator(json.loads(SARIF_SCHEMA.read_text())).iter_errors(doc))
    assert not errors, [e.message for e in errors[:5]]


def test_sarif_equals_the_committed_snapshot_field_by_field(sarif):
    doc, base, code = sarif
    got = _normalised(doc, base)
    if os.environ.get("RNNIR_UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(json.dumps(got, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert code == 2  # a file failed: the exit code says so whatever else was found
    diffs: list[str] = []

    def compare(a, b, path):  # field by field, so a failure names the field
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if k not in a or k not in b:
                    diffs.append(f"{path}/{k}: {'missing' if k not in a else 'unexpected'}")
                else:
                    compare(a[k], b[k], f"{path}/{k}")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                diffs.append(f"{path}: {len(a)} items, expected {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                compare(x, y, f"{path}/{i}")
        elif a != b:
            diffs.append(f"{path}: {a!r} != expected {b!r}")

    compare(got, expected, "")
    assert not diffs, "\n".join(diffs[:20])


def test_the_rule_texts_left_out_of_the_snapshot_are_the_rules_own(sarif):
    doc, _, _ = sarif
    for rule in doc["runs"][0]["tool"]["driver"]["rules"]:
        assert rule["help"]["text"] == explain(rule["id"])
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]


def test_sarif_objects_have_exactly_their_keys(sarif):
    doc, _, _ = sarif
    assert set(doc) == {"$schema", "version", "runs"}
    run = doc["runs"][0]
    assert set(run) == {"tool", "originalUriBaseIds", "artifacts", "invocations", "results", "columnKind"}
    arts = run["artifacts"]
    assert len(arts) == len(LINTED) + 2
    by_uri = {a["location"]["uri"]: a for a in arts}
    for name in LINTED:  # analysed, below the working directory
        a = by_uri[name]
        assert set(a) == ARTIFACT_KEYS and set(a["properties"]) == {"rnnirVerdicts"}
        assert set(a["location"]) == LOCATION_KEYS
    assert set(by_uri["junk.onnx"]) == {"location"}  # failed: no verdicts to carry
    far = next(a for a in arts if a["location"]["uri"].startswith("file://"))
    assert set(far) == ARTIFACT_KEYS and set(far["location"]) == {"uri"}  # absolute: no base id
    for res in run["results"]:
        assert set(res) == RESULT_KEYS
        for loc in res["locations"]:
            phys = loc["physicalLocation"]
            assert set(phys) == {"artifactLocation", "region"}
            assert set(phys["artifactLocation"]) - {"uriBaseId"} == {"uri", "index"}
            assert phys["artifactLocation"]["uri"] == arts[phys["artifactLocation"]["index"]]["location"]["uri"]
    for rule in run["tool"]["driver"]["rules"]:
        assert set(rule) == RULE_KEYS
