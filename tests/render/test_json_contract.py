"""`rnnir lint --format json` against a JSON Schema made from docs/json-schema.md, and the two kept in step.

docs/rnnir-lint.schema.json is the doc's tables written as a JSON Schema (every object lists exactly the documented
keys, ``additionalProperties: false``).  Every JSON document the command writes here is validated with it: every
sample (``samples/*.onnx`` and ``*.rnnir``) in one run and each on its own, a file that fails beside them, and the
options that add keys (``--cost``, ``--baseline``).  The doc's own example validates too, and the doc's tables name
exactly the schema's keys (parsed from the Markdown, so neither can drift alone).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from rnnir import cli
from tests.cli.test_run_json_schema import documented_types

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "json-schema.md"
SCHEMA_FILE = ROOT / "docs" / "rnnir-lint.schema.json"
SAMPLES = sorted((ROOT / "samples").glob("*.onnx")) + sorted((ROOT / "samples").glob("*.rnnir"))
LINT_SECTION_END = "## `rnnir run --format json`"


def _validator_of(path: Path):
    """A validator of the schema file at ``path``, after checking the schema itself is valid."""
    schema = json.loads(path.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture(scope="module")
def validator():
    return _validator_of(SCHEMA_FILE)


def _valid(validator, doc: dict) -> None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:8])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("lintjson")
    for p in SAMPLES:
        shutil.copy(p, d / p.name)
    (d / "zz_junk.onnx").write_bytes(b"not a model")
    return d


def _lint(capsys, monkeypatch, folder: Path, *argv: str) -> tuple[int, dict]:
    monkeypatch.chdir(folder)
    code = cli.main(["lint", "--no-config", "--format", "json", *argv])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def test_every_sample_in_one_run_with_a_failed_file_validates(validator, folder, capsys, monkeypatch):
    code, doc = _lint(capsys, monkeypatch, folder, ".", "--cost")
    _valid(validator, doc)
    assert code == 2 and doc["summary"]["failed"] == 1
    assert len(doc["files"]) == len(SAMPLES) + 1
    assert any(f["cost"] is not None for f in doc["files"])  # --cost's key is there, and validated


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_each_sample_on_its_own_validates(validator, folder, capsys, monkeypatch, sample):
    _, doc = _lint(capsys, monkeypatch, folder, sample.name)
    _valid(validator, doc)


@pytest.mark.realmodel
@pytest.mark.parametrize("getter", ["fsmn_vad_path", "gtcrn_path"])
def test_the_cache_windows_of_real_models_validate(validator, capsys, monkeypatch, getter):
    """Sliding-window caches write `window` exit kinds and `windows` objects (a Slice's cut, packed segments)."""
    from tests.support import realmodels as rm

    try:
        model = getattr(rm, getter)()
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"real model unavailable: {exc}")
    _, doc = _lint(capsys, monkeypatch, model.parent, model.name)
    _valid(validator, doc)
    windows = [w for p in doc["files"][0]["state_pairs"] for sl in p["slices"] for w in sl.get("windows", {}).values()]
    assert windows and all(w["kind"] == "window" for w in windows)


def test_a_baselined_run_validates(validator, folder, capsys, monkeypatch):
    names = ["sd002_hc_swap.onnx", "sd001_no_state_output.onnx"]
    monkeypatch.chdir(folder)
    assert cli.main(["lint", "--no-config", "--write-baseline", "base.json", *names]) in (0, 1)
    capsys.readouterr()
    _, doc = _lint(capsys, monkeypatch, folder, "--baseline", "base.json", *names, "gru_fanout.onnx")
    _valid(validator, doc)
    assert doc["summary"]["baselined"] > 0 and "baseline_stale" in doc["summary"]


def test_the_schema_rejects_an_undocumented_key_and_a_missing_one(validator, folder, capsys, monkeypatch):
    """The near miss: the schema can fail (an extra key anywhere, a required key gone)."""
    _, doc = _lint(capsys, monkeypatch, folder, "sd002_hc_swap.onnx")
    extra = json.loads(json.dumps(doc))
    extra["files"][0]["diagnostics"][0]["column"] = 1
    assert list(validator.iter_errors(extra))
    missing = json.loads(json.dumps(doc))
    del missing["files"][0]["verdicts"]["slices"][0]["verdict"]
    assert list(validator.iter_errors(missing))


def test_the_docs_example_validates(validator):
    text = DOC.read_text()
    block = re.search(r"```json\n(.*?)```", text, re.S)
    assert block is not None
    _valid(validator, json.loads(block.group(1)))


# -- the Markdown tables and the schema name the same keys ------------------------------------------


def _doc_tables() -> dict[str, set[str]]:
    """Heading of the lint section -> the keys in its table's first column (several per cell: `a`, `b`)."""
    text = DOC.read_text()
    text = text[: text.index(LINT_SECTION_END)]
    tables: dict[str, set[str]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            continue
        if line.startswith("| `"):
            tables.setdefault(heading, set()).update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return tables


def _schema_keys() -> dict[str, set[str]]:
    s = json.loads(SCHEMA_FILE.read_text())
    files = s["properties"]["files"]["items"]
    return {
        "Top level": set(s["properties"]),
        "`files[]`": set(files["properties"]),
        "`diagnostics[]`": set(s["$defs"]["diagnostic"]["properties"]),
        "`verdicts`": set(s["$defs"]["verdicts"]["properties"]),
        "`summary`": set(s["properties"]["summary"]["properties"]),
    }


def test_the_docs_tables_and_the_schema_name_the_same_keys():
    assert _doc_tables() == _schema_keys()


def test_the_state_pair_keys_the_doc_lists_inline_are_the_schemas():
    row = next(line for line in DOC.read_text().splitlines() if line.startswith("| `state_pairs` |"))
    # "`input`, `output` (...), `source` (...), `reason`, `slices` (per slice: `slice` label, `entry` and `exit` ports
    # `{node, op, port, direction, branch[, step]}`, `exit_kind` ...: `final`, ...), and `plain_recurrence` ..."
    meaning = row.split("|")[3]
    top = re.findall(r"(?:— |, |and )`(\w+)`", re.sub(r"\([^()]*(?:\([^()]*\)[^()]*)*\)", "", meaning))
    s = json.loads(SCHEMA_FILE.read_text())["$defs"]
    assert set(top) == set(s["state_pair"]["properties"])
    ports = re.search(r"`\{([^}]*)\}`", meaning)
    assert ports is not None
    assert set(re.findall(r"\w+", ports.group(1))) == set(s["port"]["properties"])
    kinds = re.search(r"`exit_kind`[^:]*:(.*?)\)", meaning)
    assert kinds is not None
    slices = s["state_pair"]["properties"]["slices"]["items"]
    assert set(re.findall(r"`(\w+)`", kinds.group(1))) == set(slices["properties"]["exit_kind"]["additionalProperties"]["enum"])


# -- rnnir run --format json ------------------------------------------------------------------------

RUN_SCHEMA_FILE = ROOT / "docs" / "rnnir-run.schema.json"


@pytest.fixture(scope="module")
def run_validator():
    return _validator_of(RUN_SCHEMA_FILE)


@pytest.mark.parametrize(
    "flags",
    [
        ["--calls", "40", "--chunk", "2", "--drop", "10", "--reconnect", "20", "--burst", "25:3", "--long", "50", "--streams", "3"],
        ["--calls", "6", "--chunk", "2"],  # no streaming check asked: the optional objects are null
    ],
    ids=["every-check", "none"],
)
def test_every_run_output_validates(run_validator, tmp_path, flags):
    out = tmp_path / "run.json"
    assert cli.main(["run", str(ROOT / "samples" / "gru_fanout.onnx"), *flags, "--format", "json", "--output", str(out)]) == 0
    _valid(run_validator, json.loads(out.read_text()))


def test_the_run_docs_tables_and_the_run_schema_agree_on_keys_and_types():
    schema = json.loads(RUN_SCHEMA_FILE.read_text())
    defs = {"": schema, **schema["$defs"]}
    doc = documented_types(DOC.read_text())
    doc.pop("streaming.long.slots.SLOT")  # one table under one heading with burst_health's: one definition in the schema
    assert set(doc) == set(defs)
    for path, keys in doc.items():
        props = defs[path]["properties"]
        got = {k: set(p["type"]) if isinstance(p["type"], list) else {p["type"]} for k, p in props.items()}
        assert got == keys, path
