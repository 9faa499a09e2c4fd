"""The `rnnir` command line end to end: formats, exit codes, configuration, workers, bad input.

Models are built here with onnx.helper: an LSTM whose final states fan out to
the slots and the outputs (clean), and the same LSTM handing the caller's
``h0`` straight back as ``hn`` (the state is never written back: SD001).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from onnx import helper

from rnnir import cli
from rnnir.cli import common as cli_common
from rnnir.cli import lint as cli_lint
from tests.support import onnx_models as om

REPO = Path(__file__).resolve().parents[2]
SARIF_SCHEMA = REPO / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json"  # OASIS's official schema, shipped


# -- models -----------------------------------------------------------------------------------


def clean_lstm():
    return om.lstm_h0c0()


def state_handed_back_lstm():
    """hn = Identity(h0): the caller's state comes straight back, the LSTM's Y_h is dropped."""
    H = 4
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["Y", "lstm_hn", "cn"], hidden_size=H, name="lstm"),
        helper.make_node("Identity", ["h0"], ["hn"], name="hand_back"),
    ]
    return om.model(
        nodes,
        [om.vi("x", ["T", 1, 3]), om.vi("h0", [1, 1, H]), om.vi("c0", [1, 1, H])],
        [om.vi("Y", ["T", 1, 1, H]), om.vi("hn", [1, 1, H]), om.vi("cn", [1, 1, H])],
        om.lstm_weights(H=H),
    )


def odd_names_lstm():
    """Same clean LSTM, but the state names follow no convention: only --pair can pair them."""
    return om.lstm_h0c0(names=("alpha", "beta", "gamma", "delta"))


def save(model, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def models(tmp_path, monkeypatch):
    """A working folder holding clean.onnx and broken.onnx, used as the cwd (no pyproject.toml above it)."""
    monkeypatch.chdir(tmp_path)
    save(clean_lstm(), tmp_path / "clean.onnx")
    save(state_handed_back_lstm(), tmp_path / "broken.onnx")
    return tmp_path


def run_main(capsys, *argv):
    code = cli.main(["lint", "--no-config", *argv] if argv and argv[0] not in cli_commands() else list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_commands():
    return ("lint", "show", "rules", "explain", "cost", "run", "--version")


def run_subprocess(*argv, cwd=None, env_extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("RNNIR_DEBUG", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "rnnir.cli", *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


# -- exit codes and formats -------------------------------------------------------------------


def finding_codes(fmt: str, out: str) -> list[str]:
    """The rule codes reported in ``out``, read back from each format independently."""
    if fmt == "text":
        return re.findall(r"^\S+: (?:\S+: )?([A-Z]+\d+) \[", out, re.M)  # path: [node: ]CODE [severity]
    if fmt == "json":
        return [d["code"] for f in json.loads(out)["files"] for d in f["diagnostics"]]
    if fmt == "sarif":
        return [r["ruleId"] for r in json.loads(out)["runs"][0]["results"]]
    return re.findall(r"^::\w+ file=[^,]*,line=1,title=([A-Z]+\d+) ", out, re.M)


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_clean_model_exits_0_in_every_format(models, capsys, fmt):
    code, out, err = run_main(capsys, "clean.onnx", "--format", fmt)
    assert code == 0, out + err
    assert "SD001" not in finding_codes(fmt, out)
    assert err == ""


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_state_handed_back_exits_1_and_names_SD001_in_every_format(models, capsys, fmt):
    code, out, err = run_main(capsys, "broken.onnx", "--format", fmt)
    assert code == 1, out + err
    assert "SD001" in finding_codes(fmt, out)
    assert err == ""


def test_text_groups_pairs_findings_hint_and_summary_per_model(models, capsys):
    code, out, _ = run_main(capsys, "clean.onnx", "broken.onnx", "-v")  # verbose: the per-model layout
    assert code == 1
    blocks = out.split("\n\n")
    clean = next(b for b in blocks if b.startswith("clean.onnx"))
    broken = next(b for b in blocks if b.startswith("broken.onnx"))
    assert "pair h0 -> hn (name:" in clean and "no findings" in clean
    finding = next(line for line in broken.splitlines() if "SD001" in line)
    assert finding.strip().startswith("broken.onnx: SD001 [error] ")
    assert "    hint: " in broken
    assert out.rstrip().splitlines()[-1] == "1 error, 0 warnings in 2 files; 3 of 4 state slices verified"  # broken.onnx: h0 violated, c0 verified


def test_json_has_the_documented_schema(models, capsys):
    code, out, _ = run_main(capsys, "clean.onnx", "broken.onnx", "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert doc["version"] == 1
    assert [f["path"] for f in doc["files"]] == ["clean.onnx", "broken.onnx"]
    for f in doc["files"]:
        assert set(f) == {"path", "config", "state_pairs", "suggested_pairs", "diagnostics", "verdicts", "error", "suppressed", "baselined"}
        assert f["error"] is None
    pair = doc["files"][0]["state_pairs"][0]
    assert {"input", "output", "source", "reason", "slices"} <= set(pair)
    diag = next(d for d in doc["files"][1]["diagnostics"] if d["code"] == "SD001")
    assert {"code", "name", "severity", "message", "locations", "hint"} <= set(diag)
    assert diag["severity"] == "error"
    assert doc["summary"]["files"] == 2 and doc["summary"]["failed"] == 0
    assert doc["summary"]["errors"] >= 1 and doc["summary"]["by_code"]["SD001"] >= 1
    assert doc["summary"]["exit_code"] == 1


@pytest.mark.parametrize("content", [b"", b"\x08\x07\x12\x04abc", os.urandom(4096)], ids=["empty", "truncated", "random"])
def test_unreadable_model_exits_2_with_one_line_and_no_traceback(models, content):
    (models / "bad.onnx").write_bytes(content)
    proc = run_subprocess("lint", "--no-config", "bad.onnx", cwd=models)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    # said once: in the text report (stdout), not again on stderr
    assert proc.stderr == "" and proc.stdout.count("bad.onnx") == 1 and proc.stdout.startswith("bad.onnx: error: "), proc.stdout
    proc = run_subprocess("lint", "--no-config", "bad.onnx", "--format", "json", cwd=models)  # a JSON report: one line on stderr
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("rnnir: error: bad.onnx: "), proc.stderr


def test_truncated_copy_of_a_real_model_exits_2(models, capsys):
    data = (models / "clean.onnx").read_bytes()
    (models / "cut.onnx").write_bytes(data[: len(data) // 2])
    code, out, err = run_main(capsys, "cut.onnx", "--format", "json")
    assert code == 2
    assert err.startswith("rnnir: error: cut.onnx: ") and err.count("\n") == 1


def test_unreadable_file_among_good_ones_exits_2_and_the_others_are_still_linted(models, capsys):
    (models / "junk.onnx").write_bytes(b"not onnx at all")
    code, out, err = run_main(capsys, "broken.onnx", "junk.onnx", "clean.onnx", "--format", "json")
    doc = json.loads(out)
    assert code == 2  # a model that was never checked outranks findings in the others
    by_path = {f["path"]: f for f in doc["files"]}
    assert by_path["junk.onnx"]["error"]["type"] == "ModelError"
    assert by_path["junk.onnx"]["error"]["message"]
    assert any(d["code"] == "SD001" for d in by_path["broken.onnx"]["diagnostics"])
    assert by_path["clean.onnx"]["error"] is None
    assert doc["summary"]["failed"] == 1 and doc["summary"]["exit_code"] == 2
    assert err.startswith("rnnir: error: junk.onnx: ")


def test_missing_file_exits_2(models, capsys):
    code, out, err = run_main(capsys, "nowhere.onnx")
    assert code == 2
    assert err == "" and out.count("nowhere.onnx: error: no such file") == 1  # once, in the report (issue 23)
    code, out, err = run_main(capsys, "nowhere.onnx", "-q")  # the report shows only the summary: stderr says why
    assert code == 2 and "rnnir: error: nowhere.onnx: no such file" in err and "nowhere" not in out


@pytest.mark.parametrize(
    "argv",
    [
        ["lint", "clean.onnx", "--format", "xml"],
        ["lint"],
        ["lint", "--no-config", "clean.onnx", "--select", "ZZ9"],
        ["lint", "--no-config", "clean.onnx", "--ignore", "SD999"],
        ["lint", "--no-config", "clean.onnx", "--pair", "h0"],
        ["frobnicate"],
    ],
    ids=["bad-format", "no-path", "unknown-select", "unknown-ignore", "malformed-pair", "unknown-command"],
)
def test_bad_arguments_exit_2(models, capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert "error" in err and "Traceback" not in err


def test_unknown_selector_lists_the_known_codes(models, capsys):
    code, _, err = run_main(capsys, "clean.onnx", "--select", "ZZ9")
    assert code == 2
    assert "'ZZ9'" in err and "SD001" in err


# -- selecting rules, declaring pairs ---------------------------------------------------------


def test_ignore_SD001_makes_the_broken_model_pass(models, capsys):
    code, out, _ = run_main(capsys, "broken.onnx", "--ignore", "SD001", "--format", "json")
    assert code == 0
    assert all(d["code"] != "SD001" for d in json.loads(out)["files"][0]["diagnostics"])


def test_select_by_prefix_keeps_only_that_family(models, capsys):
    code, out, _ = run_main(capsys, "broken.onnx", "--select", "OR,AL", "--format", "json")
    codes = {d["code"] for d in json.loads(out)["files"][0]["diagnostics"]}
    assert "SD001" not in codes and all(c[:2] in ("OR", "AL") for c in codes)
    code, out, _ = run_main(capsys, "broken.onnx", "--select", "SD", "--format", "json")
    assert code == 1
    assert "SD001" in {d["code"] for d in json.loads(out)["files"][0]["diagnostics"]}


def test_pair_flags_declare_the_callers_contract(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    save(odd_names_lstm(), tmp_path / "odd.onnx")
    code, out, _ = run_main(capsys, "odd.onnx", "--pair", "alpha=gamma", "--pair", "beta=delta", "--format", "json")
    pairs = json.loads(out)["files"][0]["state_pairs"]
    assert code == 0
    assert {(p["input"], p["output"], p["source"]) for p in pairs} == {("alpha", "gamma", "declared"), ("beta", "delta", "declared")}


def test_pair_naming_an_unknown_input_is_a_file_error(models, capsys):
    code, out, err = run_main(capsys, "clean.onnx", "--pair", "nope=hn", "--format", "json")
    assert code == 2
    assert json.loads(out)["files"][0]["error"]["type"] == "PairingError"
    assert err.startswith("rnnir: error: clean.onnx: ")


# -- files and folders ------------------------------------------------------------------------


def test_folders_are_searched_recursively_in_sorted_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for rel in ["m/b/z.onnx", "m/a.onnx", "m/b/y.onnx", "m/.hidden/skip.onnx"]:
        save(clean_lstm(), tmp_path / rel)
    (tmp_path / "m" / "notes.txt").write_text("not a model")
    code, out, _ = run_main(capsys, "m", "--format", "json")
    assert code == 0
    paths = [Path(f["path"]).as_posix() for f in json.loads(out)["files"]]
    assert paths == ["m/a.onnx", "m/b/y.onnx", "m/b/z.onnx"]


def test_a_model_named_twice_is_linted_once(models, capsys):
    _, out, _ = run_main(capsys, "clean.onnx", ".", "./clean.onnx", "--format", "json")
    paths = [os.path.normpath(f["path"]) for f in json.loads(out)["files"]]
    assert sorted(paths) == ["broken.onnx", "clean.onnx"]


def test_folder_without_models_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    code, out, err = run_main(capsys, "empty")
    assert code == 2
    assert "empty: error: no .onnx or .rnnir files" in out and err == ""


# -- configuration ----------------------------------------------------------------------------


def write_pyproject(folder: Path, body: str) -> None:
    (folder / "pyproject.toml").write_text(textwrap.dedent(body))


def lint_with_config(capsys, *argv):
    code = cli.main(["lint", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else None), err


def test_config_ignore_is_read_from_pyproject_found_upward(models, monkeypatch, capsys):
    write_pyproject(models, '[tool.rnnir]\nignore = ["SD001"]\n')
    (models / "sub").mkdir()
    monkeypatch.chdir(models / "sub")
    code, doc, _ = lint_with_config(capsys, "../broken.onnx")
    assert code == 0
    assert all(d["code"] != "SD001" for d in doc["files"][0]["diagnostics"])


def test_command_line_ignore_replaces_the_config_ignore(models, capsys):
    write_pyproject(models, '[tool.rnnir]\nignore = ["SD001"]\n')
    code, doc, _ = lint_with_config(capsys, "broken.onnx", "--ignore", "SD006")
    assert code == 1
    assert any(d["code"] == "SD001" for d in doc["files"][0]["diagnostics"])


def test_no_config_skips_the_pyproject(models, capsys):
    write_pyproject(models, '[tool.rnnir]\nignore = ["SD001"]\n')
    code, _, _ = lint_with_config(capsys, "broken.onnx", "--no-config")
    assert code == 1


def test_explicit_config_file(models, capsys):
    (models / "other.toml").write_text('[tool.rnnir]\nselect = ["OR"]\n')
    code, doc, _ = lint_with_config(capsys, "broken.onnx", "--config", "other.toml")
    assert code == 0
    assert all(d["code"].startswith("OR") for d in doc["files"][0]["diagnostics"])


def test_config_pairs_and_flag_pairs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    save(odd_names_lstm(), tmp_path / "odd.onnx")
    write_pyproject(tmp_path, '[tool.rnnir]\npairs = {alpha = "gamma", beta = "delta"}\n')
    code, doc, _ = lint_with_config(capsys, "odd.onnx")
    assert code == 0
    assert {p["input"] for p in doc["files"][0]["state_pairs"]} == {"alpha", "beta"}
    code, doc, _ = lint_with_config(capsys, "odd.onnx", "--pair", "alpha=gamma")
    assert [p["input"] for p in doc["files"][0]["state_pairs"] if p["source"] == "declared"] == ["alpha"]


def test_per_file_ignores_apply_only_to_matching_models(models, capsys):
    save(state_handed_back_lstm(), models / "legacy" / "old.onnx")
    write_pyproject(models, '[tool.rnnir.per-file-ignores]\n"legacy/*.onnx" = ["SD001"]\n')
    code, doc, _ = lint_with_config(capsys, "legacy", "broken.onnx")
    by_path = {Path(f["path"]).as_posix(): f for f in doc["files"]}
    assert code == 1
    assert all(d["code"] != "SD001" for d in by_path["legacy/old.onnx"]["diagnostics"])
    assert any(d["code"] == "SD001" for d in by_path["broken.onnx"]["diagnostics"])


@pytest.mark.parametrize(
    "body",
    ['[tool.rnnir]\nselct = ["SD"]\n', "[tool.rnnir\n", '[tool.rnnir]\nignore = ["XX1"]\n', '[tool.rnnir]\npairs = ["h0"]\n'],
    ids=["unknown-key", "bad-toml", "unknown-code", "bad-pairs"],
)
def test_bad_config_exits_2_naming_the_file(models, capsys, body):
    write_pyproject(models, body)
    code, doc, err = lint_with_config(capsys, "clean.onnx")
    assert code == 2
    assert "pyproject.toml" in err and "Traceback" not in err


# -- workers and progress ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_jobs_2_output_is_identical_to_serial(tmp_path, monkeypatch, capsys, fmt):
    monkeypatch.chdir(tmp_path)
    for i in range(6):
        save(clean_lstm() if i % 2 else state_handed_back_lstm(), tmp_path / "many" / f"m{i}.onnx")
    (tmp_path / "many" / "m9.onnx").write_bytes(b"garbage")
    serial = run_main(capsys, "many", "--format", fmt)
    parallel = run_main(capsys, "many", "--format", fmt, "--jobs", "2")
    assert serial[0] == parallel[0] == 2
    assert serial[1] == parallel[1]
    assert serial[2] == parallel[2]


def test_piped_output_shows_no_progress(models):
    proc = run_subprocess("lint", "--no-config", "clean.onnx", "clean.onnx", ".", cwd=models)
    assert proc.returncode == 1
    assert proc.stderr == ""


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_progress_appears_when_stderr_is_a_terminal(models):
    import pty

    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "rnnir.cli", "lint", "--no-config", "clean.onnx", "broken.onnx"], cwd=models, env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out, _ = proc.communicate(timeout=300)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    assert proc.returncode == 1
    assert b"[2/2] broken.onnx" in drawn
    assert b"[1/2]" not in out and b"\x1b" not in out  # stdout stays clean for the report


def test_progress_is_drawn_on_a_terminal_and_cleared():
    class Tty:
        def __init__(self):
            self.text = ""

        def isatty(self):
            return True

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    tty = Tty()
    progress = cli_lint.Progress(2, tty)
    progress.step("a.onnx")
    progress.step("b.onnx")
    progress.close()
    assert "[1/2] a.onnx" in tty.text and "[2/2] b.onnx" in tty.text
    assert tty.text.endswith("\r\x1b[K")


def test_lint_does_not_import_onnxruntime(models):
    code = textwrap.dedent(
        """
        import sys
        from rnnir.cli import main
        rc = main(["lint", "--no-config", "clean.onnx", "broken.onnx", "--cost", "--format", "json"])
        print("RC", rc, "onnxruntime" in sys.modules, "rnnir.runtime" in sys.modules, "rnnir.testing" in sys.modules)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=models, env=env, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "RC 1 False False False", proc.stdout + proc.stderr


# -- SARIF and GitHub -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SARIF_SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_sarif_validates_against_the_official_schema(models, capsys, sarif_validator):
    (models / "junk.onnx").write_bytes(b"junk")
    code, out, _ = run_main(capsys, ".", "--format", "sarif")
    doc = json.loads(out)
    errors = sorted(sarif_validator.iter_errors(doc), key=str)
    assert not errors, "\n".join(e.message for e in errors[:5])
    assert code == 2
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "rnnir"
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert "SD001" in rule_ids
    result = next(r for r in run["results"] if r["ruleId"] == "SD001")
    assert rule_ids[result["ruleIndex"]] == "SD001"
    phys = result["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": "broken.onnx", "uriBaseId": "%SRCROOT%", "index": phys["artifactLocation"]["index"]}
    assert phys["region"] == {"startLine": 1}
    assert result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"].startswith("graph")
    assert result["partialFingerprints"]
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    note = invocation["toolExecutionNotifications"][0]
    assert note["level"] == "error" and "junk.onnx" in note["message"]["text"]


def test_sarif_of_a_clean_run_validates_and_reports_success(models, capsys, sarif_validator):
    code, out, _ = run_main(capsys, "clean.onnx", "--format", "sarif")
    doc = json.loads(out)
    assert not list(sarif_validator.iter_errors(doc))
    assert code == 0
    assert doc["runs"][0]["results"] == []
    assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is True


def test_sarif_rules_carry_the_explain_text(models, capsys):
    from rnnir.passes import explain

    _, out, _ = run_main(capsys, "clean.onnx", "--format", "sarif")
    rules = {r["id"]: r for r in json.loads(out)["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["SD002"]["help"]["text"] == explain("SD002")


def test_sarif_fingerprints_are_stable_across_runs_and_cwd_spelling(models, capsys):
    _, first, _ = run_main(capsys, "broken.onnx", "--format", "sarif")
    _, second, _ = run_main(capsys, "./broken.onnx", "--format", "sarif")
    fp = lambda text: [r["partialFingerprints"] for r in json.loads(text)["runs"][0]["results"]]  # noqa: E731
    assert fp(first) == fp(second) and fp(first)


def test_github_annotations_point_at_the_file(models, capsys):
    code, out, _ = run_main(capsys, "broken.onnx", "--format", "github")
    line = next(line for line in out.splitlines() if "SD001" in line)
    assert code == 1
    assert line.startswith("::error file=broken.onnx,line=1,title=SD001 ")
    head, _, message = line.partition("::")[2].partition("::")
    assert message and "\n" not in message


# -- other commands ---------------------------------------------------------------------------


def test_explain_prints_the_rule_docstring_exactly(capsys):
    from rnnir.passes import explain

    assert cli.main(["explain", "SD005"]) == 0  # a rule without an automatic fix: the heading, the docstring and nothing else
    out = capsys.readouterr().out
    doc = explain("SD005")
    head, _, body = out.partition("\n\n")
    assert head.startswith("SD005 ") and body == (doc if doc.endswith("\n") else doc + "\n")
    assert cli.main(["explain", "SD002"]) == 0  # a rule with one: the docstring, then the fix (tests/cli/test_fix.py)
    out = capsys.readouterr().out
    doc = explain("SD002")
    assert out.partition("\n\n")[2].startswith(doc if doc.endswith("\n") else doc + "\n")


def test_explain_accepts_lowercase(capsys):
    assert cli.main(["explain", "sd002"]) == 0
    assert capsys.readouterr().out


def test_explain_unknown_code_exits_2_listing_the_known_ones(capsys):
    assert cli.main(["explain", "XX999"]) == 2
    err = capsys.readouterr().err
    assert "unknown rule code 'XX999'" in err and "SD001" in err and "OR001" in err


def test_rules_prints_one_line_per_rule(capsys):
    from rnnir import passes

    assert cli.main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(passes.RULES)
    sd001 = next(line for line in lines if line.startswith("SD001 "))
    rule = passes.RULES["SD001"]
    assert rule.name in sd001 and rule.severity.value in sd001 and rule.summary in sd001


def test_rules_as_json(capsys):
    from rnnir import passes

    assert cli.main(["rules", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in doc["rules"]] == sorted(passes.RULES)
    assert set(doc["rules"][0]) == {"code", "name", "severity", "summary"}


@pytest.mark.parametrize("fmt,start", [("text", "state journey of @"), ("dot", "digraph "), ("mermaid", "flowchart LR")])
def test_show_prints_the_program(models, capsys, fmt, start):
    assert cli.main(["show", "--no-config", "clean.onnx", "--format", fmt]) == 0
    assert capsys.readouterr().out.startswith(start)


def test_show_full_text_is_the_ir_text(models, capsys):
    import rnnir

    assert cli.main(["show", "--no-config", "clean.onnx", "--full"]) == 0
    assert capsys.readouterr().out == str(rnnir.load("clean.onnx")) + "\n"


def test_show_json_lists_the_pairs(models, capsys):
    assert cli.main(["show", "--no-config", "clean.onnx", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(p["input"], p["output"]) for p in doc["state_pairs"]] == [("h0", "hn"), ("c0", "cn")]


def test_show_chain_policy_draws_the_chain(models, capsys):
    assert cli.main(["show", "--no-config", "clean.onnx", "--lower-exit", "chain"]) == 0
    # the journey: the output store reads the slot store's result, not the final state
    assert "  store → output hn\n    <- store → slot h0: store result\n" in capsys.readouterr().out
    assert cli.main(["show", "--no-config", "clean.onnx", "--lower-exit", "chain", "--full"]) == 0
    assert "(%store.h0)" in capsys.readouterr().out


def test_show_unreadable_model_exits_2(models, capsys):
    (models / "junk.onnx").write_bytes(b"junk")
    assert cli.main(["show", "--no-config", "junk.onnx"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnnir: error: junk.onnx: ") and err.count("\n") == 1


def test_cost_command_and_lint_cost_agree(models, capsys):
    assert cli.main(["cost", "--no-config", "clean.onnx", "--format", "json"]) == 0
    cost = json.loads(capsys.readouterr().out)["files"][0]["cost"]
    assert isinstance(cost, dict) and cost
    assert cli.main(["lint", "--no-config", "clean.onnx", "--cost", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["cost"] == cost
    assert cli.main(["cost", "--no-config", "clean.onnx"]) == 0
    assert capsys.readouterr().out.startswith("clean.onnx\n  ")


def test_output_file(models, capsys):
    assert run_main(capsys, "clean.onnx", "--format", "json", "--output", "report.json")[0] == 0
    assert json.loads((models / "report.json").read_text())["files"][0]["path"] == "clean.onnx"
    assert capsys.readouterr().out == ""


def test_version(capsys):
    import rnnir

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rnnir {rnnir.__version__}"


def test_internal_error_is_one_line_without_traceback(models, capsys, monkeypatch):
    def broken_backend():
        raise RuntimeError("boom")

    monkeypatch.setattr(cli_common, "passes_backend", broken_backend)
    assert cli.main(["rules"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnnir: internal error: RuntimeError: boom") and "report" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_internal_error_in_one_model_keeps_linting_the_others(models, capsys, monkeypatch):
    from rnnir import passes

    real_verify = passes.verify

    def flaky_verify(program, **kw):
        if program.name == "boom":
            raise KeyError("pass bug")
        return real_verify(program, **kw)

    monkeypatch.setattr(passes, "verify", flaky_verify)
    boom = clean_lstm()
    boom.graph.name = "boom"
    save(boom, models / "boom.onnx")
    code, out, err = run_main(capsys, "boom.onnx", "clean.onnx", "--format", "json")
    doc = json.loads(out)
    assert code == 2
    assert doc["files"][0]["error"]["type"] == "InternalError"
    assert doc["files"][1]["error"] is None
    assert "Traceback" not in err


def test_python_dash_m_rnnir_cli_runs(models):
    proc = run_subprocess("lint", "--no-config", "broken.onnx", "--format", "github", cwd=models)
    assert proc.returncode == 1
    assert "::error file=broken.onnx,line=1,title=SD001" in proc.stdout


# -- the bundled samples, end to end ----------------------------------------------------------

SAMPLES = REPO / "samples"
needs_samples = pytest.mark.skipif(not any(SAMPLES.glob("*.onnx")), reason="samples/ not generated")


@needs_samples
def test_lint_samples_reports_each_samples_expected_findings(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code = cli.main(["lint", "--no-config", "samples", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1  # the broken samples have error-level findings; every sample could be read
    assert doc["summary"]["failed"] == 0
    for f in doc["files"]:
        expected = json.loads(Path(f["path"]).with_suffix(".expected.json").read_text())
        got = sorted((d["code"], d["severity"]) for d in f["diagnostics"])
        assert got == sorted((x["code"], x["severity"]) for x in expected["findings"]), f["path"]
        assert {p["input"]: p["output"] for p in f["state_pairs"]} == expected["pairs"], f["path"]
        for label, verdict in expected.get("verdicts", {}).items():
            assert {s["slice"]: s["verdict"] for s in f["verdicts"]["slices"]}[label] == verdict, f["path"]


@needs_samples
def test_lint_samples_as_sarif_validates(monkeypatch, capsys, sarif_validator):
    monkeypatch.chdir(REPO)
    assert cli.main(["lint", "--no-config", "samples", "--format", "sarif"]) == 1
    doc = json.loads(capsys.readouterr().out)
    errors = sorted(sarif_validator.iter_errors(doc), key=str)
    assert not errors, "\n".join(e.message for e in errors[:5])
    assert {r["ruleId"] for r in doc["runs"][0]["results"]} >= {"SD001", "SD002", "AL001", "OR001", "OR002"}


@needs_samples
def test_correct_samples_exit_0(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    stems = [p.name[: -len(".expected.json")] for p in sorted(SAMPLES.glob("*.expected.json")) if json.loads(p.read_text())["correct"]]
    models = [SAMPLES / f"{stem}{suffix}" for stem in stems for suffix in (".onnx", ".rnnir")]
    correct = [str(m.relative_to(REPO)) for m in models if m.exists()]
    assert len(correct) == len(stems)
    assert correct
    assert cli.main(["lint", "--no-config", *correct]) == 0, capsys.readouterr().out


# -- rnnir run --------------------------------------------------------------------------------


class FakeReport:
    def __init__(self, status):
        self.status = status

    def to_json(self):
        return {"version": 1, "status": self.status}


class FakeStreaming:
    def __init__(self, ok):
        self.ok = ok
        self.checked = False

    def to_json(self):
        return {"ok": self.ok}


@pytest.mark.parametrize("status,code", [("pass", 0), ("fail", 1), ("inconclusive", 0), ("no-state", 0)])
def test_run_exit_code_follows_the_report_status(models, capsys, monkeypatch, status, code):
    testing = pytest.importorskip("rnnir.check.multicall")
    seen = {}

    def fake_check(model, stream=None, chunk_sizes=(1,), **kw):
        seen.update(kw, model=model)
        return FakeReport(status)

    monkeypatch.setattr(testing, "check_multicall", fake_check)
    monkeypatch.setattr(testing, "report_to_text", lambda r: f"verdict {r.status}\n")
    streaming = pytest.importorskip("rnnir.check.streaming")
    monkeypatch.setattr(streaming, "check_streaming", lambda *a, **kw: FakeStreaming(True))
    monkeypatch.setattr(streaming, "streaming_to_text", lambda r, persistence: "streaming pass\n")
    assert cli.main(["run", "--no-config", "clean.onnx", "--calls", "7", "--chunk", "3", "--pair", "h0=hn"]) == code
    assert capsys.readouterr().out == f"verdict {status}\nstreaming pass\n"
    assert callable(seen.pop("progress"))
    session = seen.pop("model")  # one session (quiet onnxruntime log, the declared pairs) runs both checks
    assert (session.label, [(s.input, s.output) for s in session.slots]) == ("clean.onnx", [("h0", "hn")])
    assert seen == {"calls": 7, "chunk": 3, "input_shapes": {}, "input_values": {}}


def test_run_with_a_bad_policy_runs_the_lowered_program(models, capsys, monkeypatch):
    testing = pytest.importorskip("rnnir.check.multicall")
    import rnnir

    seen = {}
    monkeypatch.setattr(testing, "check_multicall", lambda model, **kw: seen.update(model=model) or FakeReport("fail"))
    assert cli.main(["run", "--no-config", "clean.onnx", "--lower-exit", "chain", "--format", "json"]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    # onnxruntime runs the model's graph, where no chain exists: the run says it cannot show the policy's bug
    assert "--lower-exit chain changes the program rnnir analyses, not the graph onnxruntime runs" in captured.err
    assert {k: doc[k] for k in ("version", "status")} == {"version": 1, "status": "fail"}
    assert doc["streaming"]["state_bytes"] > 0  # the streaming part always rides along
    program = seen["model"].program  # the session runs the program lowered with the chain policy
    assert isinstance(program, rnnir.Program)
    assert any(isinstance(st.value.producer, rnnir.Store) for st in program.stores)  # lowered with the chain: a store reads a store


def test_run_on_a_real_model_reports_json_consistent_with_its_exit_code(models, capsys):
    pytest.importorskip("rnnir.testing")
    code = cli.main(["run", "--no-config", "clean.onnx", "--calls", "4", "--chunk", "2", "--format", "json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert "changes the program rnnir analyses" not in captured.err  # the default lowering: nothing to warn about
    assert code == (1 if doc["status"] == "fail" else 0)
    assert [(p["input"], p["output"]) for p in doc["pairs"]] == [("h0", "hn"), ("c0", "cn")]


@pytest.mark.parametrize("argv", [["run", "junk.onnx"], ["run", "clean.onnx", "--calls", "0"]], ids=["unreadable", "zero-calls"])
def test_run_bad_input_exits_2_in_one_line(models, capsys, argv):
    pytest.importorskip("rnnir.testing")
    (models / "junk.onnx").write_bytes(b"junk")
    assert cli.main([*argv[:1], "--no-config", *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnnir: error: ") and err.count("\n") == 1


TORCH = REPO / "tests" / "data" / "torch"


@pytest.mark.skipif(not any(TORCH.glob("*.onnx")), reason="committed PyTorch exports missing")
def test_pytorch_exports_lint_clean_with_only_bidirectional_warnings(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code = cli.main(["lint", "--no-config", str(TORCH.relative_to(REPO)), "--format", "json", "--jobs", "2"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["summary"]["failed"] == 0 and doc["summary"]["errors"] == 0
    for f in doc["files"]:
        expected = {"SD006"} if "bilstm" in f["path"] else set()
        assert {d["code"] for d in f["diagnostics"]} == expected, f["path"]


# -- Ruff's habits: concise default, --statistics, --quiet, --exit-zero, --output-format ---------------------


def test_default_text_is_concise_and_verbose_adds_pairs(models, capsys):
    code, out, _ = run_main(capsys, "clean.onnx", "broken.onnx")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("broken.onnx: ") and " SD001 [error] " in lines[0]
    assert lines[1].startswith("  hint: ")
    assert "clean.onnx" not in out and "pair " not in out  # nothing for a clean model, no slice map
    assert lines[-1] == "1 error, 0 warnings in 2 files; 3 of 4 state slices verified"
    _, verbose, _ = run_main(capsys, "clean.onnx", "broken.onnx", "-v")
    assert "clean.onnx\n  pair h0 -> hn" in verbose and "no findings" in verbose


def test_statistics_quiet_and_exit_zero(models, capsys):
    code, out, _ = run_main(capsys, "clean.onnx", "broken.onnx", "broken.onnx", "--statistics")
    assert code == 1
    assert out.splitlines()[0].split() == ["1", "SD001", "[error]", "slot-never-written"]  # broken.onnx named twice: linted once
    code, out, _ = run_main(capsys, "clean.onnx", "broken.onnx", "-q")
    assert code == 1 and out == "1 error, 0 warnings in 2 files; 3 of 4 state slices verified\n"
    code, _, _ = run_main(capsys, "broken.onnx", "--exit-zero")
    assert code == 0
    code, _, _ = run_main(capsys, "missing.onnx", "--exit-zero")
    assert code == 2  # --exit-zero never hides that the tool failed


def test_output_format_is_the_same_option_as_format(models, capsys):
    code, out, _ = run_main(capsys, "broken.onnx", "--output-format", "json")
    assert code == 1 and json.loads(out)["summary"]["errors"] == 1


def test_select_all_extend_select_and_a_command_line_select_beats_the_configured_ignore(models, capsys):
    (models / "pyproject.toml").write_text('[tool.rnnir]\nselect = ["OR"]\nignore = ["SD001"]\n')
    code, out, _ = run_cli(capsys, "lint", "broken.onnx")
    assert code == 0  # configured: only OR rules, and SD001 ignored
    code, out, _ = run_cli(capsys, "lint", "broken.onnx", "--extend-select", "SD001")
    assert code == 0  # extended, but the configured ignore still applies
    code, out, _ = run_cli(capsys, "lint", "broken.onnx", "--select", "SD001")
    assert code == 1 and " SD001 [error] " in out  # the command line overrides the configured ignore
    code, out, _ = run_cli(capsys, "lint", "broken.onnx", "--select", "ALL")
    assert code == 1 and " SD001 [error] " in out
    code, _, err = run_cli(capsys, "lint", "broken.onnx", "--extend-select", "XX9")
    assert code == 2 and "--extend-select" in err


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- IR text (.rnnir) as a model ----------------------------------------------------------------------


def test_ir_text_is_linted_as_written_and_found_in_folders(tmp_path, monkeypatch, capsys):
    """A `.rnnir` file is a program: linted as written, found in folders beside `.onnx` models."""
    text = (REPO / "samples" / "al001_chain.rnnir").read_text(encoding="utf-8")
    (tmp_path / "chain.rnnir").write_text(text, encoding="utf-8")
    fanout = text.replace("%store.hn = store<out:hn, value>(%store.h0)", "%store.hn = store<out:hn, value>(%hn)")
    fanout = fanout.replace("store<@h0, alias>", "store<@h0, token>")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "fanout.rnnir").write_text(fanout, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lint", "--no-config", ".", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    found = {f["path"]: [d["code"] for d in f["diagnostics"]] for f in doc["files"]}
    assert found == {"chain.rnnir": ["AL001"], os.path.join("sub", "fanout.rnnir"): []}


def test_ir_text_that_does_not_parse_names_its_line_and_the_others_are_linted(tmp_path, capsys):
    bad = tmp_path / "bad.rnnir"
    bad.write_text("program @x {\n  slot @h : float32[1] init=zeros\n  bogus line\n}\n", encoding="utf-8")
    binary = tmp_path / "binary.rnnir"
    binary.write_bytes(b"\xff\xfe\x00")
    two = tmp_path / "two.rnnir"
    two.write_text("program @a {\n}\nprogram @b {\n}\n", encoding="utf-8")
    good = REPO / "samples" / "al001_chain.rnnir"
    assert cli.main(["lint", "--no-config", str(bad), str(binary), str(two), str(good)]) == 2
    out = capsys.readouterr().out
    assert f"{bad}: error: line 3: expected '(' at column 9: 'bogus line'" in out
    assert f"{binary}: error: not IR text: not UTF-8" in out
    assert f"{two}: error: not one IR program: the file has 2 programs" in out
    assert "AL001 [error]" in out  # the good file is still reported
    assert "Traceback" not in out


@pytest.mark.parametrize("argv", [["run"], ["fix", "-o", "out.onnx"]], ids=["run", "fix"])
def test_running_or_fixing_ir_text_says_it_has_no_onnx_graph(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    assert cli.main([argv[0], str(REPO / "samples" / "al001_chain.rnnir"), *argv[1:]]) == 2
    assert "is IR text (a program, no ONNX graph to run or edit)" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_declared_pairs_do_not_apply_to_ir_text():
    import rnnir

    with pytest.raises(rnnir.PairingError, match="IR text declares its own state pairs"):
        rnnir.load(REPO / "samples" / "al001_chain.rnnir", pairs={"h0": "hn"})
