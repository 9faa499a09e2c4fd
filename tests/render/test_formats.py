"""Renderers and configuration in isolation: hand-built results, no model, no passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rnnir.lint.config import Config, ConfigError, load_config, parse_pair
from rnnir.passes.diagnostics import Diagnostic, Location, Rule, Severity
from rnnir.render import (
    FileResult,
    LintResult,
    render,
    render_cost_text,
    render_github,
    render_json,
    render_sarif,
    render_text,
)

RULES = {
    "SD001": Rule("SD001", "state-not-written-back", Severity.ERROR, "a slot is read but never written back", "SD001: first paragraph\ncontinues.\n\nBad: ..."),
    "SD006": Rule("SD006", "bidirectional-state-persisted", Severity.WARNING, "reverse state persisted", "SD006 doc"),
}


def sd001(message="slot 'h0' is live-on-entry but never written back", branch=()):
    return Diagnostic(
        "SD001",
        "state-not-written-back",
        Severity.ERROR,
        message,
        (Location(node="recurrent0", onnx_node="lstm", value="hn", branch=branch),),
        "store Y_h into the slot",
        slot="h0",
    )


def sd006():
    return Diagnostic("SD006", "bidirectional-state-persisted", Severity.WARNING, "reverse direction persisted", (Location(onnx_node="bilstm"),), "persist only the forward direction", slot="h0")


def result(files, tmp_path, **kw):
    return LintResult(files=files, rules=RULES, version="9.9.9", cwd=tmp_path, **kw)


def test_exit_code_is_2_when_any_file_failed_even_with_findings(tmp_path):
    r = result([FileResult("a.onnx", diagnostics=[sd001()]), FileResult("b.onnx", error={"type": "ModelError", "message": "bad"})], tmp_path)
    assert r.exit_code == 2


def test_exit_code_ignores_warnings(tmp_path):
    assert result([FileResult("a.onnx", diagnostics=[sd006()])], tmp_path).exit_code == 0
    assert result([FileResult("a.onnx", diagnostics=[sd006(), sd001()])], tmp_path).exit_code == 1


def test_concise_text_is_one_line_per_finding_with_its_hint_and_nothing_for_clean_files(tmp_path):
    d = sd001(branch=("sr_if.then_branch",))
    text = render_text(result([FileResult("a.onnx", diagnostics=[d, sd006()]), FileResult("b.onnx")], tmp_path))
    node = d.locations[0].onnx_node or d.locations[0].value
    assert text.splitlines()[0] == f"a.onnx: {node}: SD001 [error] slot 'h0' is live-on-entry but never written back (in sr_if.then_branch)"
    assert text.splitlines()[1] == "  hint: store Y_h into the slot"
    assert "b.onnx" not in text and "pair" not in text and "no findings" not in text
    assert text.endswith("\n\n1 error, 1 warning in 2 files\n")
    assert render_text(result([FileResult("b.onnx")], tmp_path)) == "0 errors, 0 warnings in 1 file\n"  # clean: the summary only


def test_text_shows_branch_hint_and_pluralised_summary(tmp_path):
    d = sd001(branch=("sr_if.then_branch",))
    text = render_text(result([FileResult("a.onnx", diagnostics=[d, sd006()]), FileResult("b.onnx")], tmp_path, verbose=True))
    assert "  a.onnx: SD001 [error] slot 'h0' is live-on-entry but never written back\n    in If branch: sr_if.then_branch\n    hint: store Y_h into the slot\n" in text
    assert "  a.onnx: SD006 [warning] reverse direction persisted\n" in text
    assert text.endswith("\n1 error, 1 warning in 2 files\n")


def test_text_summary_counts_failed_files(tmp_path):
    text = render_text(result([FileResult("b.onnx", error={"type": "ModelError", "message": "file is empty"})], tmp_path, verbose=True))
    assert "  b.onnx: error: file is empty\n" in text
    concise = render_text(result([FileResult("b.onnx", error={"type": "ModelError", "message": "file is empty"})], tmp_path))
    assert concise.startswith("b.onnx: error: file is empty\n")
    assert text.endswith("0 errors, 0 warnings in 1 file; 1 could not be analysed\n")


def test_json_cost_key_only_when_asked(tmp_path):
    files = [FileResult("a.onnx", cost={"copies": 1})]
    assert "cost" not in json.loads(render_json(result(files, tmp_path)))["files"][0]
    assert json.loads(render_json(result(files, tmp_path, with_cost=True)))["files"][0]["cost"] == {"copies": 1}


def test_github_escapes_data_and_properties():
    d = sd001(message="100% wrong,\r\nsee: here")
    out = render_github(LintResult([FileResult("dir,x/a:b.onnx", diagnostics=[d])], RULES, "1", cwd=Path("/nonexistent-cwd")))
    line = out.splitlines()[0]
    assert line.startswith("::error file=dir%2Cx/a%3Ab.onnx,line=1,title=SD001 state-not-written-back::")
    assert line.endswith("::100%25 wrong,%0D%0Asee: here%0Ahint: store Y_h into the slot")


def test_github_uses_warning_and_notice_commands(tmp_path):
    info = Diagnostic("SD003", "x", Severity.INFO, "m", hint="h")
    out = render_github(result([FileResult("a.onnx", diagnostics=[sd006(), info])], tmp_path))
    assert out.splitlines()[0].startswith("::warning file=a.onnx,")
    assert out.splitlines()[1].startswith("::notice file=a.onnx,")


def sarif_result(doc):
    return doc["runs"][0]["results"]


def test_sarif_fingerprint_ignores_the_message_but_not_the_slot(tmp_path):
    def fp(d):
        return sarif_result(json.loads(render_sarif(result([FileResult("a.onnx", diagnostics=[d])], tmp_path))))[0]["partialFingerprints"]

    assert fp(sd001("one wording")) == fp(sd001("another wording"))
    other_slot = Diagnostic(**{**sd001().__dict__, "slot": "c0"})
    assert fp(other_slot) != fp(sd001())


def test_sarif_file_outside_cwd_gets_an_absolute_uri(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    path = str(elsewhere / "m.onnx")
    doc = json.loads(render_sarif(LintResult([FileResult(path, diagnostics=[sd001()])], RULES, "1", cwd=cwd)))
    loc = sarif_result(doc)[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc["uri"] == Path(path).as_uri() and "uriBaseId" not in loc


def test_sarif_rule_metadata(tmp_path):
    doc = json.loads(render_sarif(result([], tmp_path)))
    rule = doc["runs"][0]["tool"]["driver"]["rules"][0]
    assert rule["id"] == "SD001" and rule["name"] == "state-not-written-back"
    assert rule["fullDescription"]["text"] == "SD001: first paragraph continues."
    assert rule["help"]["text"] == RULES["SD001"].doc
    assert rule["defaultConfiguration"]["level"] == "error"
    assert doc["runs"][0]["tool"]["driver"]["rules"][1]["defaultConfiguration"]["level"] == "warning"


def test_sarif_logical_locations_name_graph_node_value(tmp_path):
    d = sd001(branch=("sr_if.then_branch",))
    doc = json.loads(render_sarif(result([FileResult("a.onnx", diagnostics=[d, sd006()])], tmp_path)))
    value_loc = sarif_result(doc)[0]["locations"][0]["logicalLocations"][0]
    assert value_loc == {"fullyQualifiedName": "graph/sr_if.then_branch/lstm/hn", "name": "hn", "kind": "variable"}
    node_loc = sarif_result(doc)[1]["locations"][0]["logicalLocations"][0]
    assert node_loc == {"fullyQualifiedName": "graph/bilstm", "name": "bilstm", "kind": "function"}


def test_every_format_renders_the_same_findings(tmp_path):
    r = result([FileResult("a.onnx", diagnostics=[sd001(), sd006()])], tmp_path)
    assert render(r, "text").count("SD0") == 2
    assert [d["code"] for d in json.loads(render(r, "json"))["files"][0]["diagnostics"]] == ["SD001", "SD006"]
    assert [x["ruleId"] for x in sarif_result(json.loads(render(r, "sarif")))] == ["SD001", "SD006"]
    assert [line.split("title=")[1][:5] for line in render(r, "github").splitlines()[:2]] == ["SD001", "SD006"]


def test_cost_text_renders_records_as_a_table():
    lines = render_cost_text({"copies": 2, "slots": [{"slot": "h0", "bytes": 16}, {"slot": "state_long", "bytes": 1024}]})
    assert lines == ["copies: 2", "slots:", "  slot        bytes", "  h0          16", "  state_long  1024"]


# -- configuration ----------------------------------------------------------------------------


def test_parse_pair():
    assert parse_pair("h0=hn") == ("h0", "hn")
    assert parse_pair(" h0 = ") == ("h0", None)
    with pytest.raises(ConfigError):
        parse_pair("h0")


def test_per_file_ignore_globs(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.rnnir.per-file-ignores]\n"legacy/*.onnx" = ["SD006"]\n"vad.onnx" = ["sd001"]\n"**/bi_*.onnx" = ["SD006", "AL001"]\n'
    )
    config = load_config(tmp_path / "pyproject.toml")
    assert config.ignores_for(tmp_path / "legacy" / "deep" / "x.onnx") == ("SD006",)
    assert config.ignores_for(tmp_path / "models" / "vad.onnx") == ("SD001",)
    assert config.ignores_for(tmp_path / "bi_lstm.onnx") == ("SD006", "AL001")
    assert config.ignores_for(tmp_path / "other.onnx") == ()


def test_empty_config_ignores_nothing(tmp_path):
    assert Config().ignores_for(tmp_path / "a.onnx") == ()


@pytest.mark.parametrize(
    "body,needle",
    [
        ('[tool.rnnir]\nentry = "sideways"\n', "entry"),
        ('[tool.rnnir]\nselect = [1]\n', "select"),
        ('[tool.rnnir.per-file-ignores]\n"x" = "SD001"\n', "per-file-ignores"),
    ],
)
def test_config_errors_name_the_key(tmp_path, body, needle):
    (tmp_path / "pyproject.toml").write_text(body)
    with pytest.raises(ConfigError, match=needle):
        load_config(tmp_path / "pyproject.toml")
