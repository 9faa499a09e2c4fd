"""Suppressions stored in the model (metadata ``rnnir.noqa``, the model's ``# noqa``) and RN100 for unused ones.

The model: an LSTM that hands ``h0`` straight back as ``hn`` (SD001 on slot ``h0``, located at the store of
value ``hn``), built in tests/cli/test_cli.py.  Every case runs the real command.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import onnx
import pytest

import rnnir
from rnnir import cli, passes
from rnnir.onnxio.metadata import META_NOQA, read_noqa, write_noqa
from tests.cli.test_cli import REPO, clean_lstm, run_subprocess, save, state_handed_back_lstm

SD001 = "slot 'h0' is written back with its own live-in value on every call path (the state is handed straight back): the recurrence never advances across calls"


def broken(tmp_path: Path, noqa: list[str] | None, name: str = "broken.onnx", raw: str | None = None) -> Path:
    model = state_handed_back_lstm()
    if noqa is not None:
        write_noqa(model, noqa)
    if raw is not None:
        model.metadata_props.add(key=META_NOQA, value=raw)
    return save(model, tmp_path / name)


def lint(capsys, *argv):
    code = cli.main(["lint", "--no-config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("entry", ["SD001", "sd001", "SD001:h0", "SD001:hn", "SD001:store1"])
def test_an_entry_naming_the_code_or_its_slot_value_or_node_suppresses_the_finding(cwd, capsys, entry):
    broken(cwd, [entry])
    code, out, err = lint(capsys, "broken.onnx")
    assert code == 0, out
    assert out == "0 errors, 0 warnings in 1 file (1 suppressed); 1 of 2 state slices verified\n"


def test_near_miss_an_entry_for_another_node_suppresses_nothing_and_is_reported_unused(cwd):
    broken(cwd, ["SD001:c0"])
    proc = run_subprocess("lint", "--no-config", "broken.onnx", cwd=cwd)
    assert proc.returncode == 1
    assert proc.stdout == textwrap.dedent(
        f"""\
        broken.onnx: hand_back: SD001 [error] {SD001}
          hint: write the recurrent op's final state into 'h0', not the loaded value
        broken.onnx: RN100 [warning] suppression 'SD001:c0' in metadata_props 'rnnir.noqa' matches no SD001 finding naming 'c0'
          hint: remove it: rnnir fix MODEL --unsuppress 'SD001:c0' --in-place

        1 error, 1 warning in 1 file; 1 of 2 state slices verified
        """
    )


def test_the_sample_shows_a_used_and_an_unused_entry():
    proc = run_subprocess("lint", "--no-config", "samples/rn100_unused_suppression.onnx", "samples/sd006_bilstm.onnx", "--statistics", cwd=REPO)
    assert proc.returncode == 0
    # the two SD006 warnings of the same model are suppressed in the first and reported in the second
    assert proc.stdout == "2  SD006  [warning]  reverse-state-persisted\n1  RN100  [warning]  unused-suppression\n0 errors, 3 warnings in 2 files (2 suppressed); 4 of 8 state slices verified\n"


def test_unknown_codes_and_clean_models(cwd, capsys):
    save(clean_lstm(), cwd / "clean.onnx")
    model = onnx.load(str(cwd / "clean.onnx"))
    write_noqa(model, ["XX1", "SD002"])
    onnx.save(model, str(cwd / "clean.onnx"))
    code, out, _ = lint(capsys, "clean.onnx", "--format", "json")
    messages = [d["message"] for d in json.loads(out)["files"][0]["diagnostics"]]
    assert code == 0
    assert messages == [
        "suppression 'SD002' in metadata_props 'rnnir.noqa' matches no SD002 finding",
        "suppression 'XX1' in metadata_props 'rnnir.noqa' names 'XX1', which is not a rule code",
    ]


def test_rn100_is_a_rule_like_any_other(cwd, capsys):
    broken(cwd, ["SD001", "SD002"])
    assert "RN100" in lint(capsys, "broken.onnx")[1]
    assert "RN100" not in lint(capsys, "broken.onnx", "--ignore", "RN100")[1]
    assert "RN100" not in lint(capsys, "broken.onnx", "--select", "SD")[1]
    assert lint(capsys, "broken.onnx", "--select", "RN100")[1].startswith("broken.onnx: RN100 [warning]")
    broken(cwd, ["SD001", "SD002", "RN100"])  # an RN100 entry silences RN100 (and is never itself unused)
    assert lint(capsys, "broken.onnx")[1] == "0 errors, 0 warnings in 1 file (2 suppressed); 1 of 2 state slices verified\n"


def test_an_entry_is_judged_against_every_rule_not_only_the_selected_ones(cwd, capsys):
    broken(cwd, ["SD001"])
    code, out, _ = lint(capsys, "broken.onnx", "--select", "RN100,OR")
    assert code == 0 and "RN100" not in out  # SD001 did not run as a selected rule, but its finding is there


def test_statistics_and_exit_code_leave_suppressed_findings_out_like_ruff(cwd, capsys):
    broken(cwd, ["SD001"])
    broken(cwd, None, name="other.onnx")
    code, out, _ = lint(capsys, "broken.onnx", "other.onnx", "--statistics")
    assert code == 1
    assert out == "1  SD001  [error]  slot-never-written\n1 error, 0 warnings in 2 files (1 suppressed); 2 of 4 state slices verified\n"


@pytest.mark.parametrize(
    "raw, why",
    [("SD001", "is not valid JSON"), ('{"SD001": 1}', "must be a JSON list"), ('["SD001", 3]', "must be a JSON list"), ('[""]', "must be a JSON list")],
)
def test_a_malformed_suppression_list_is_the_models_error(cwd, capsys, raw, why):
    broken(cwd, None, raw=raw)
    code, out, err = lint(capsys, "broken.onnx", "--format", "json")
    assert code == 2
    assert err.startswith("rnnir: error: broken.onnx: metadata_props 'rnnir.noqa' ") and why in err and "Traceback" not in err


def test_library_honours_the_suppressions_unless_told_not_to(cwd):
    program = rnnir.load(str(broken(cwd, ["SD001"])))
    assert passes.run(program) == []
    assert [d.code for d in passes.run(program, noqa=False)] == ["SD001"]
    verification = passes.verify(program)
    assert verification.diagnostics == [] and [d.code for d in verification.suppressed] == ["SD001"]
    assert verification.to_json()["violated"] == 1  # the verdict still sees the bug: suppression only hides the report


# -- rnnir fix --suppress / --unsuppress ---------------------------------------------------------


def test_fix_suppress_adds_entries_and_unsuppress_removes_them(cwd):
    broken(cwd, None)
    proc = run_subprocess("fix", "--no-config", "broken.onnx", "--suppress", "sd001:h0", "--suppress", "SD006", "-o", "quiet.onnx", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "wrote quiet.onnx: suppresses SD001:h0, SD006\n"
    assert read_noqa(onnx.load(str(cwd / "quiet.onnx"))) == ["SD001:h0", "SD006"]
    assert read_noqa(onnx.load(str(cwd / "broken.onnx"))) == []  # -o leaves the original alone
    lint_proc = run_subprocess("lint", "--no-config", "quiet.onnx", "--statistics", cwd=cwd)
    assert lint_proc.stdout.startswith("1  RN100  [warning]  unused-suppression\n0 errors, 1 warning in 1 file (1 suppressed)")
    proc = run_subprocess("fix", "--no-config", "quiet.onnx", "--unsuppress", "SD006", "--in-place", cwd=cwd)
    assert proc.returncode == 0 and proc.stdout == "wrote quiet.onnx: suppresses SD001:h0\n"
    assert run_subprocess("lint", "--no-config", "quiet.onnx", cwd=cwd).returncode == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--suppress", "XX1", "--in-place"], "'XX1' is not a rule code"),
        (["--unsuppress", "SD002", "--in-place"], "the model's rnnir.noqa holds ['SD001']"),
        (["--suppress", "SD002", "--diff"], "edit only the suppression list"),
    ],
)
def test_fix_suppress_errors(cwd, argv, message):
    broken(cwd, ["SD001"])
    before = (cwd / "broken.onnx").read_bytes()
    proc = run_subprocess("fix", "--no-config", "broken.onnx", *argv, cwd=cwd)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert (cwd / "broken.onnx").read_bytes() == before


def test_docs_python_one_liner_adds_a_suppression(cwd):
    text = (REPO / "docs" / "ci.md").read_text()
    start = text.index("from rnnir.onnxio.metadata import read_noqa, write_noqa")
    snippet = text[start : text.index("```", start)].replace('"model.onnx"', '"broken.onnx"')
    broken(cwd, ["SD006"])
    exec(compile("import onnx\n" + snippet, "docs/ci.md", "exec"), {})
    assert read_noqa(onnx.load(str(cwd / "broken.onnx"))) == ["SD006", "SD009"]


# -- rnnir lint --add-noqa (Ruff's flag) ------------------------------------------------------------


def test_add_noqa_suppresses_every_current_finding_by_slot_and_is_idempotent(cwd):
    broken(cwd, None)
    (cwd / "bilstm.onnx").write_bytes((REPO / "samples" / "sd006_bilstm.onnx").read_bytes())
    save(clean_lstm(), cwd / "clean.onnx")
    clean_before = (cwd / "clean.onnx").read_bytes()
    proc = run_subprocess("lint", "--no-config", ".", "--add-noqa", cwd=cwd)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr == "Added 3 suppressions to 2 models.\n"
    assert read_noqa(onnx.load(str(cwd / "broken.onnx"))) == ["SD001:h0"]
    assert read_noqa(onnx.load(str(cwd / "bilstm.onnx"))) == ["SD006:c0", "SD006:h0"]
    assert (cwd / "clean.onnx").read_bytes() == clean_before  # nothing to suppress: not rewritten
    after = run_subprocess("lint", "--no-config", ".", cwd=cwd)
    assert after.returncode == 0 and after.stdout.startswith("0 errors, 0 warnings in 3 files (3 suppressed)")
    again = run_subprocess("lint", "--no-config", ".", "--add-noqa", cwd=cwd)
    assert again.returncode == 0 and again.stderr == "Added 0 suppressions to 0 models.\n"


def test_near_miss_add_noqa_never_suppresses_an_unused_suppression(cwd, capsys):
    broken(cwd, ["SD001", "SD002"])  # RN100 for SD002: the cure is removing the entry, not suppressing RN100
    assert cli.main(["lint", "--no-config", "broken.onnx", "--add-noqa"]) == 0
    assert capsys.readouterr().err == "Added 0 suppressions to 0 models.\n"
    assert read_noqa(onnx.load(str(cwd / "broken.onnx"))) == ["SD001", "SD002"]


def test_add_noqa_refuses_ir_text_and_goes_on(cwd, capsys):
    broken(cwd, None)
    (cwd / "chain.rnnir").write_text((REPO / "samples" / "al001_chain.rnnir").read_text())
    assert cli.main(["lint", "--no-config", ".", "--add-noqa"]) == 2
    err = capsys.readouterr().err
    assert "rnnir: error: chain.rnnir: cannot add suppressions: IR text has no metadata to hold suppressions" in err
    assert err.endswith("Added 1 suppression to 1 model.\n")
    assert read_noqa(onnx.load(str(cwd / "broken.onnx"))) == ["SD001:h0"]


@pytest.mark.parametrize("entry", ["SD002", "SD002:state"])
def test_lint_fix_leaves_a_suppressed_rule_alone_like_ruff_leaves_noqa_lines(cwd, capsys, entry):
    model = onnx.load(str(REPO / "samples" / "sd002_hc_swap.onnx"))
    write_noqa(model, [entry])
    onnx.save(model, str(cwd / "swap.onnx"))
    before = (cwd / "swap.onnx").read_bytes()
    assert cli.main(["lint", "--no-config", "swap.onnx", "--fix"]) == 0
    assert (cwd / "swap.onnx").read_bytes() == before
    # near miss: a suppression of another rule does not stop the SD002 fix
    write_noqa(model, ["SD006"])
    onnx.save(model, str(cwd / "swap.onnx"))
    capsys.readouterr()
    cli.main(["lint", "--no-config", "swap.onnx", "--fix"])
    assert "fixed: SD002" in capsys.readouterr().err
