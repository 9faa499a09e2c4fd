"""Baselines, pyproject.toml and ``rnnir.noqa`` metadata: strict types, bounded sizes, and every way JSON or TOML can
fail (deep nesting, a 5,000-digit integer) a clear error naming the file (issue 26)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import onnx
import pytest

from rnnir import cli, passes
from rnnir.lint.baseline import MAX_BASELINE_COUNT, Baseline, BaselineError, Fingerprint
from rnnir.lint.config import ConfigError, load_config
from rnnir.onnxio.metadata import META_NOQA, read_noqa, write_noqa

REPO = Path(__file__).resolve().parents[2]
SD002 = REPO / "samples" / "sd002_hc_swap.onnx"  # one SD002, on slot "state"


def _baseline(tmp_path: Path, entries: list[dict], version: object = 1) -> Path:
    path = tmp_path / "base.json"
    path.write_text(json.dumps({"version": version, "tool": "rnnir", "about": "", "findings": entries}))
    return path


def _entry(fp: Fingerprint, count: int, digest: str | None = None) -> dict:
    return {"model": fp.model, "code": fp.code, "slot": fp.slot, "where": list(fp.where), "count": count,
            "fingerprint": fp.entry_digest(count) if digest is None else digest}


FP = Fingerprint("m.onnx", "SD002", "h0", ("lstm/Y_h",))
DEEP_JSON = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit
DIGITS = "9" * 5000  # past Python's 4,300-digit limit on int(str)


def test_raising_a_count_by_hand_is_refused_and_lowering_it_is_not(tmp_path):
    written = _entry(FP, 1)  # what --write-baseline writes for one finding
    with pytest.raises(BaselineError, match=r"entry 1 \(m.onnx: SD002 \(slot h0\) at lstm/Y_h\) does not match its fingerprint: .*never raised"):
        Baseline.load(_baseline(tmp_path, [{**written, "count": 1000}]))
    three = _entry(FP, 3)
    with pytest.raises(BaselineError, match="does not match its fingerprint"):
        Baseline.load(_baseline(tmp_path, [{**three, "count": 4}]))
    for count in (3, 2, 1):  # the near misses: as written, and lowered by hand
        assert Baseline.load(_baseline(tmp_path, [{**three, "count": count}])).accepted[FP] == count


def test_a_count_1_entry_keeps_the_digest_it_always_had(tmp_path):
    # baselines written before counts were digested stay valid: count 1 is the plain fingerprint digest
    text = json.dumps([1, FP.model, FP.code, FP.slot, list(FP.where)], ensure_ascii=False)
    import hashlib

    assert _entry(FP, 1)["fingerprint"] == hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "doc_edit,message",
    [
        (lambda e: ([e], True), "baseline version True is not supported"),
        (lambda e: ([e], 1.0), "baseline version 1.0 is not supported"),
        (lambda e: ([{**e, "count": True}], 1), "count must be a whole number of at least 1, not True"),
        (lambda e: ([{**e, "count": 2.0}], 1), "count must be a whole number of at least 1, not 2.0"),
        (lambda e: ([{**e, "count": MAX_BASELINE_COUNT + 1}], 1), f"count {MAX_BASELINE_COUNT + 1} is over the limit of {MAX_BASELINE_COUNT}"),
    ],
    ids=["version-true", "version-float", "count-true", "count-float", "count-huge"],
)
def test_types_are_strict_bool_is_no_number(tmp_path, doc_edit, message):
    entries, version = doc_edit(_entry(FP, 1))
    with pytest.raises(BaselineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Baseline.load(_baseline(tmp_path, entries, version))


@pytest.mark.parametrize(
    "text,message",
    [
        (DEEP_JSON, "not a baseline file: JSON nested too deeply to read"),
        ('{"version": ' + DIGITS + "}", "not a baseline file: unreadable JSON value: Exceeds the limit (4300 digits)"),
        ("\xff\xfe", "cannot read the baseline: not UTF-8"),
    ],
    ids=["deep", "5000-digits", "not-utf8"],
)
def test_json_that_python_cannot_read_is_a_baseline_error_naming_the_file(tmp_path, capsys, text, message):
    path = tmp_path / "base.json"
    path.write_bytes(text.encode("latin1"))
    code = cli.main(["lint", str(SD002), "--no-config", "--baseline", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and f"rnnir: error: {path}: {message}" in err and "internal error" not in err


@pytest.mark.parametrize(
    "text,message",
    [
        ("[tool.rnnir]\nselect = " + "[" * 10_000 + "]" * 10_000 + "\n", "not valid TOML: arrays or tables nested too deeply to read"),
        ("[tool.rnnir]\nstrict = " + DIGITS + "\n", "not valid TOML: Exceeds the limit (4300 digits)"),
        ("[tool.rnnir]\nselect = [\"SD\"]\n\xff\n", "not valid TOML: not UTF-8"),
    ],
    ids=["deep", "5000-digits", "not-utf8"],
)
def test_a_pyproject_python_cannot_read_is_a_config_error_naming_the_file(tmp_path, capsys, text, message):
    path = tmp_path / "pyproject.toml"
    path.write_bytes(text.encode("latin1"))
    with pytest.raises(ConfigError, match=rf"^{path}: {message.replace('(', r'[(]').replace(')', r'[)]')}"):
        load_config(path)
    (tmp_path / "m.onnx").write_bytes(SD002.read_bytes())
    code = cli.main(["lint", str(tmp_path / "m.onnx")])  # found by discovery: the same error, exit 2
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "internal error" not in err


def _with_noqa(*values: str) -> onnx.ModelProto:
    model = onnx.load(str(SD002))
    for v in values:
        model.metadata_props.add(key=META_NOQA, value=v)
    return model


@pytest.mark.parametrize(
    "value,message",
    [
        (DEEP_JSON, "is not valid JSON (JSON nested too deeply to read)"),
        ("[" + DIGITS + "]", "is not valid JSON (unreadable JSON value: Exceeds the limit (4300 digits)"),
        ("[1e999]", "must be a JSON list of rule codes"),
    ],
    ids=["deep", "5000-digits", "number"],
)
def test_noqa_metadata_python_cannot_read_is_a_model_error_naming_the_model(tmp_path, capsys, value, message):
    path = tmp_path / "m.onnx"
    onnx.save(_with_noqa(value), path)
    code = cli.main(["lint", str(path), "--no-config"])
    out, err = capsys.readouterr()
    assert code == 2 and f"{path}: error: metadata_props 'rnnir.noqa' {message}" in out and "internal error" not in out + err


def test_two_noqa_entries_are_merged_by_readers_and_the_writer_leaves_one(tmp_path, capsys):
    model = _with_noqa('["SD002:state"]', '["SD009"]')
    assert read_noqa(model) == ["SD002:state", "SD009"]
    found = passes.verify(_lowered(model, tmp_path)).diagnostics
    # the first copy suppresses the SD002, the second is read too: its SD009 suppresses nothing, so RN100 says so
    assert [(d.code, d.message.split(" in ")[0]) for d in found] == [("RN100", "suppression 'SD009'")]
    write_noqa(model, [*read_noqa(model), "SD006"])
    assert [p.value for p in model.metadata_props if p.key == META_NOQA] == ['["SD002:state", "SD006", "SD009"]']
    # through the command: fix --suppress keeps what both copies said, in one entry
    path = tmp_path / "two.onnx"
    onnx.save(_with_noqa('["SD002:state"]', '["SD009"]'), path)
    assert cli.main(["fix", str(path), "--suppress", "SD006", "--in-place"]) == 0
    capsys.readouterr()
    assert [p.value for p in onnx.load(str(path)).metadata_props if p.key == META_NOQA] == ['["SD002:state", "SD006", "SD009"]']


def _lowered(model: onnx.ModelProto, tmp_path: Path):
    import rnnir

    path = tmp_path / "lowered.onnx"
    onnx.save(model, path)
    return rnnir.load(path)


def test_30000_noqa_entries_are_matched_in_linear_time(tmp_path):
    def seconds(n: int) -> float:
        entries = [f"SD002:node{i}" for i in range(n)] + [f"RN100:other{i}" for i in range(n)]
        program = _lowered(_with_noqa(json.dumps(entries)), tmp_path)
        t0 = time.perf_counter()
        result = passes.verify(program)
        took = time.perf_counter() - t0
        assert sum(d.code == "RN100" for d in result.diagnostics) == n  # every SD002:nodeK is unused, and said so
        return took

    small, large = seconds(7500), seconds(30000)
    assert large < 4 * small * 2.5 + 1.0  # 4x the entries, about 4x the time (it was 16x: 26.6 s at 30,000)


def test_deep_rnnir_pairs_metadata_is_a_model_error(tmp_path):
    import rnnir

    model = onnx.load(str(REPO / "samples" / "gru_fanout.onnx"))
    model.metadata_props.add(key="rnnir.pairs", value=DEEP_JSON)
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(rnnir.ModelError, match=r"m.onnx: metadata 'rnnir.pairs' is not valid: JSON nested too deeply to read"):
        rnnir.load(tmp_path / "m.onnx")
