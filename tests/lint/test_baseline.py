"""``rnnir lint --write-baseline FILE`` / ``--baseline FILE``: adopting rnnir in CI with existing findings.

Models: ``broken.onnx`` hands ``h0`` straight back (SD001 on slot h0, stored from value ``hn``); the
samples sd002_hc_swap (SD002) and sd006_bilstm (two SD006 warnings) bring other findings.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from rnnir import cli
from rnnir.lint.baseline import MAX_BASELINE_BYTES, MAX_BASELINE_COUNT, Baseline, BaselineError, Fingerprint, fingerprint
from rnnir.passes import Diagnostic, Location, Severity
from tests.cli.test_cli import REPO, clean_lstm, run_subprocess, save, state_handed_back_lstm

SAMPLES = REPO / "samples"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save(state_handed_back_lstm(), tmp_path / "models" / "broken.onnx")
    save(clean_lstm(), tmp_path / "models" / "clean.onnx")
    shutil.copy(SAMPLES / "sd006_bilstm.onnx", tmp_path / "models" / "bilstm.onnx")
    return tmp_path


def lint(capsys, *argv):
    code = cli.main(["lint", "--no-config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_write_then_check_reports_nothing_and_counts_the_baselined(repo):
    proc = run_subprocess("lint", "--no-config", "models", "--write-baseline", "rnnir-baseline.json", cwd=repo)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr == "rnnir: wrote rnnir-baseline.json: 3 findings in 2 models accepted\n"
    proc = run_subprocess("lint", "--no-config", "models", "--baseline", "rnnir-baseline.json", cwd=repo)
    assert proc.returncode == 0 and proc.stderr == ""
    # slices (verdicts are not baselined): clean 2 of 2, broken 1 of 2 (h0 violated), bilstm 2 of 4 (reverse halves)
    assert proc.stdout == "0 errors, 0 warnings in 3 files (3 baselined); 5 of 8 state slices verified\n"
    # near miss: without the baseline the same run fails
    assert run_subprocess("lint", "--no-config", "models", cwd=repo).returncode == 1


def test_the_file_is_versioned_sorted_and_readable(repo, capsys):
    assert lint(capsys, "models/bilstm.onnx", "models/broken.onnx", "--write-baseline", "base.json")[0] == 0
    doc = json.loads((repo / "base.json").read_text())
    assert doc["version"] == 1 and doc["tool"] == "rnnir"
    assert [(e["model"], e["code"], e["slot"], e["where"], e["count"]) for e in doc["findings"]] == [
        # a store is located at the ONNX node that produced the stored value; 'store1' (rnnir's own numbered id) is not part of it
        ("models/bilstm.onnx", "SD006", "c0", ["bilstm/Y_c", "bilstm/cn"], 1),
        ("models/bilstm.onnx", "SD006", "h0", ["bilstm/Y_h", "bilstm/hn"], 1),
        ("models/broken.onnx", "SD001", "h0", ["hand_back/hn"], 1),
    ]
    first = (repo / "base.json").read_bytes()
    assert lint(capsys, "models/broken.onnx", "models/bilstm.onnx", "--jobs", "2", "--write-baseline", "base.json")[0] == 0
    assert (repo / "base.json").read_bytes() == first  # command-line order and workers change nothing
    assert first.decode().count("\n") > 3 * len(doc["findings"])  # one key per line: diffs show whole entries


def test_only_new_findings_are_reported(repo):
    assert run_subprocess("lint", "--no-config", "models", "--write-baseline", "base.json", cwd=repo).returncode == 0
    shutil.copy(SAMPLES / "sd002_hc_swap.onnx", repo / "models" / "swap.onnx")
    proc = run_subprocess("lint", "--no-config", "models", "--baseline", "base.json", "--statistics", cwd=repo)
    assert proc.returncode == 1
    assert proc.stdout == "1  SD002  [error]  wrong-slot\n1 error, 0 warnings in 4 files (3 baselined); 5 of 10 state slices verified\n"


def test_a_second_identical_finding_is_new(repo, capsys):
    # the baseline accepts as many findings of one fingerprint as it recorded, not more
    base = Baseline.of(repo / "base.json", [("models/bilstm.onnx", d) for d in _sd006("h0")])
    base.write()
    code, out, _ = lint(capsys, "models/bilstm.onnx", "--baseline", "base.json", "--format", "json")
    doc = json.loads(out)
    assert [d["slot"] for d in doc["files"][0]["diagnostics"]] == ["c0"]
    assert doc["summary"]["baselined"] == 1 and doc["files"][0]["baselined"] == 1


def _sd006(slot: str) -> list[Diagnostic]:
    return [Diagnostic("SD006", "reverse-state-persisted", Severity.WARNING, "m", (Location("store1", "bilstm", "hn" if slot == "h0" else "cn"), Location(None, "bilstm", "Y_h" if slot == "h0" else "Y_c")), "h", slot)]


def test_the_baseline_works_from_any_working_directory(repo, monkeypatch, capsys):
    (repo / "ci").mkdir()
    assert lint(capsys, "models", "--write-baseline", "ci/base.json")[0] == 0
    assert json.loads((repo / "ci" / "base.json").read_text())["findings"][0]["model"] == "../models/bilstm.onnx"
    monkeypatch.chdir(repo / "models")
    code, out, err = lint(capsys, ".", "--baseline", "../ci/base.json")
    assert code == 0 and "(3 baselined)" in out and err == ""


def _diagnostic(message: str = "slot 'h0' never written (3 calls)", *, node: str = "store1", value: str = "hn", branch=(), slot="h0") -> Diagnostic:
    return Diagnostic("SD001", "slot-never-written", Severity.ERROR, message, (Location(node, node, value, branch),), "hint", slot)


def test_what_changes_a_fingerprint(tmp_path):
    base = fingerprint(_diagnostic(), tmp_path / "m.onnx", tmp_path)
    # not: the message and its numbers, rnnir's numbered ids, the severity
    assert fingerprint(_diagnostic("slot 'h0' never written (7 calls), reworded"), tmp_path / "m.onnx", tmp_path) == base
    assert fingerprint(_diagnostic(node="store9"), tmp_path / "m.onnx", tmp_path) == base
    import dataclasses

    assert fingerprint(dataclasses.replace(_diagnostic(), severity=Severity.WARNING), tmp_path / "m.onnx", tmp_path) == base
    # but: the value, the branch, the slot, the model's path
    assert fingerprint(_diagnostic(value="h_out"), tmp_path / "m.onnx", tmp_path) != base
    assert fingerprint(_diagnostic(branch=("if_sr.then_branch",)), tmp_path / "m.onnx", tmp_path) != base
    assert fingerprint(_diagnostic(slot="c0"), tmp_path / "m.onnx", tmp_path) != base
    assert fingerprint(_diagnostic(), tmp_path / "renamed.onnx", tmp_path) != base


# -- stale entries --------------------------------------------------------------------------------


def test_a_fixed_finding_leaves_a_stale_entry_reported_on_one_line(repo):
    assert run_subprocess("lint", "--no-config", "models", "--write-baseline", "base.json", cwd=repo).returncode == 0
    save(clean_lstm(), repo / "models" / "broken.onnx")  # the bug is fixed
    proc = run_subprocess("lint", "--no-config", "models", "--baseline", "base.json", cwd=repo)
    assert proc.returncode == 0
    assert proc.stderr == "rnnir: base.json: 1 baseline entry matches no finding any more (fixed, or moved); --write-baseline drops them\n"
    assert proc.stdout == "0 errors, 0 warnings in 3 files (2 baselined); 6 of 8 state slices verified\n"
    verbose = run_subprocess("lint", "--no-config", "models", "--baseline", "base.json", "-v", "--format", "json", cwd=repo)
    assert verbose.stderr.endswith("\n  stale: models/broken.onnx: SD001 (slot h0) at hand_back/hn\n")
    assert json.loads(verbose.stdout)["summary"]["baseline_stale"] == 1
    strict = run_subprocess("lint", "--no-config", "models", "--baseline", "base.json", "--exit-non-zero-on-stale-baseline", cwd=repo)
    assert strict.returncode == 1


def test_near_miss_models_and_rules_the_run_did_not_check_are_not_stale(repo, capsys):
    assert lint(capsys, "models", "--write-baseline", "base.json")[0] == 0
    code, out, err = lint(capsys, "models/clean.onnx", "--baseline", "base.json", "--exit-non-zero-on-stale-baseline")
    assert (code, err) == (0, "")  # broken.onnx and bilstm.onnx were not linted this time
    code, out, err = lint(capsys, "models", "--baseline", "base.json", "--ignore", "SD006", "--exit-non-zero-on-stale-baseline")
    assert (code, err) == (0, "")  # SD006 did not run: its entries are not judged
    assert "(1 baselined)" in out


# -- bad baseline files ---------------------------------------------------------------------------


def _written(repo, capsys) -> dict:
    assert lint(capsys, "models/broken.onnx", "--write-baseline", "base.json")[0] == 0
    return json.loads((repo / "base.json").read_text())


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda doc: None, "no such baseline file"),
        (lambda doc: "{", "not a baseline file: invalid JSON at line 1"),
        (lambda doc: [], "not a baseline file: expected a JSON object with 'version' and 'findings'"),
        (lambda doc: {**doc, "version": 2}, "baseline version 2 is not supported (this rnnir reads version 1)"),
        (lambda doc: {**doc, "findings": [{**doc["findings"][0], "model": "models/other.onnx"}]}, "does not match its fingerprint: it was edited by hand"),
        (lambda doc: {**doc, "findings": [{**doc["findings"][0], "slot": "c0"}]}, "does not match its fingerprint"),
        (lambda doc: {**doc, "findings": doc["findings"] * 2}, "entry 2 (models/broken.onnx: SD001 (slot h0) at hand_back/hn) is listed twice"),
        (lambda doc: {**doc, "findings": [{**doc["findings"][0], "count": 0}]}, "count must be a whole number of at least 1, not 0"),
        (lambda doc: {**doc, "findings": [{"model": "m"}]}, "entry 1: expected the keys code, count, fingerprint, model, slot, where"),
    ],
    ids=["missing", "not-json", "not-an-object", "version", "tampered-model", "tampered-slot", "duplicate", "zero-count", "keys"],
)
def test_a_bad_baseline_exits_2_naming_the_file(repo, capsys, edit, message):
    doc = _written(repo, capsys)
    new = edit(doc)
    if new is None:
        (repo / "base.json").unlink()
    else:
        (repo / "base.json").write_text(new if isinstance(new, str) else json.dumps(new))
    code, out, err = lint(capsys, "models", "--baseline", "base.json")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("rnnir: error: base.json: ") and message in err, err


def test_near_miss_lowering_a_count_or_deleting_an_entry_by_hand_is_allowed(repo, capsys):
    assert lint(capsys, "models", "--write-baseline", "base.json")[0] == 0
    doc = json.loads((repo / "base.json").read_text())
    doc["findings"] = [e for e in doc["findings"] if e["code"] != "SD001"]  # un-accept the SD001
    (repo / "base.json").write_text(json.dumps(doc))
    code, out, err = lint(capsys, "models", "--baseline", "base.json")
    assert code == 1 and err == "" and out.startswith("models/broken.onnx: hand_back: SD001 [error]")


def test_write_baseline_and_baseline_together_is_a_usage_error(repo, capsys):
    code, out, err = lint(capsys, "models", "--baseline", "a.json", "--write-baseline", "b.json")
    assert code == 2 and "not allowed with argument" in err


def test_write_baseline_with_a_model_that_failed_exits_2(repo, capsys):
    (repo / "models" / "garbage.onnx").write_bytes(b"not a model")
    code, _, err = lint(capsys, "models", "--write-baseline", "base.json")
    assert code == 2 and "garbage.onnx" in err
    assert len(json.loads((repo / "base.json").read_text())["findings"]) == 3  # the others are recorded


def test_baseline_with_jobs_matches_serial(repo, capsys):
    assert lint(capsys, "models", "--write-baseline", "base.json")[0] == 0
    shutil.copy(SAMPLES / "sd002_hc_swap.onnx", repo / "models" / "swap.onnx")
    assert lint(capsys, "models", "--baseline", "base.json", "--jobs", "2") == lint(capsys, "models", "--baseline", "base.json")


def test_docs_ci_recipe_runs_as_written(repo):
    text = (REPO / "docs" / "ci.md").read_text()
    section = text[text.index("## Adopting rnnir in CI"):]
    block = section[section.index("```sh") + 5 : section.index("```", section.index("```sh") + 5)]
    commands = [line.split("#")[0].strip() for line in textwrap.dedent(block).splitlines() if line.startswith("rnnir lint")]
    assert len(commands) >= 2
    for command in commands:
        proc = run_subprocess(*command.split()[1:], cwd=repo)
        assert proc.returncode in (0, 1), (command, proc.stderr)


# -- the library on its own: the file's exact text, every refusal of Baseline.load, counts at their limits ----------


def _fp(count: int = 1) -> dict:
    fp = Fingerprint("models/m.onnx", "SD001", "h0", ("hand_back/hn",))
    return {"model": fp.model, "code": fp.code, "slot": fp.slot, "where": list(fp.where), "count": count, "fingerprint": fp.entry_digest(count)}


def test_a_baseline_written_by_an_earlier_rnnir_still_loads_and_is_written_back_the_same(tmp_path):
    # written by rnnir at d9725af: the format (version 1, digests, layout) is a promise to files committed in CI
    text = textwrap.dedent("""\
        {
          "version": 1,
          "tool": "rnnir",
          "about": "rnnir lint --baseline: findings recorded here are not reported; regenerate with rnnir lint PATH... --write-baseline FILE",
          "findings": [
            {
              "model": "models/m.onnx",
              "code": "SD001",
              "slot": "",
              "where": [],
              "count": 1,
              "fingerprint": "%s"
            },
            {
              "model": "models/m.onnx",
              "code": "SD001",
              "slot": "h0",
              "where": [
                "hand_back/hn"
              ],
              "count": 3,
              "fingerprint": "%s"
            }
          ]
        }
        """)
    digests = ("3fd473fb485510a2", "8e178e8731733da2")
    path = tmp_path / "base.json"
    path.write_text(text % digests)
    loaded = Baseline.load(path)
    assert sorted(loaded.accepted.values()) == [1, 3]
    again = Baseline(tmp_path / "again.json", loaded.accepted)
    again.write()
    assert (tmp_path / "again.json").read_text() == text % digests


def test_a_finding_without_a_slot_round_trips(tmp_path):
    d = Diagnostic("SD009", "unverified", Severity.INFO, "m", (Location(None, "n", "v"),), "", None)
    path = tmp_path / "base.json"
    Baseline.of(path, [(str(tmp_path / "m.onnx"), d)]).write()
    assert Baseline.load(path).apply([(str(tmp_path / "m.onnx"), d)])[0] == [True]


def test_a_count_accepts_that_many_identical_findings_and_no_more(tmp_path):
    d = _diagnostic()
    model = str(tmp_path / "m.onnx")
    baseline = Baseline(tmp_path / "base.json")
    baseline.accepted[fingerprint(d, model, tmp_path)] = 2
    accepted, left = baseline.apply([(model, d)] * 3)
    assert accepted == [True, True, False] and left == {}
    accepted, left = baseline.apply([(model, d)])
    assert accepted == [True] and list(left.values()) == [1]


def test_counts_verify_up_to_the_limit_and_not_past_it():
    fp = Fingerprint("m.onnx", "SD001", "h0", ())
    assert fp.verifies(1, fp.entry_digest(MAX_BASELINE_COUNT))  # lowered by hand from the most an entry may hold
    assert not fp.verifies(1, fp.entry_digest(MAX_BASELINE_COUNT + 1))
    assert not fp.verifies(2, fp.entry_digest(1))  # raised by hand


def test_every_malformed_baseline_is_refused_with_its_reason(tmp_path):
    path = tmp_path / "base.json"
    ok = {"version": 1, "findings": [_fp()]}
    rows = [  # one test: every row is a rule of its own
        ([], "expected a JSON object with 'version' and 'findings'"),
        ("findings, version", "expected a JSON object with 'version' and 'findings'"),  # a string holding both words
        ({"findings": []}, "expected a JSON object with 'version' and 'findings'"),
        ({"version": 1}, "expected a JSON object with 'version' and 'findings'"),
        ({"version": True, "findings": []}, "baseline version True is not supported"),
        ({"version": 1, "findings": {}}, "'findings' must be a list"),
        ({"version": 1, "findings": ["x"]}, "entry 1: expected the keys code, count, fingerprint, model, slot, where, got str"),
        ({"version": 1, "findings": [{"model": "m"}]}, "got ['model']"),
        ({"version": 1, "findings": [sorted(_fp())]}, "got list"),  # a list of exactly the keys
        ({"version": 1, "findings": [{**_fp(), "model": 1}]}, "must be strings, where a list of strings"),
        ({"version": 1, "findings": [{**_fp(), "where": "hand_back/hn"}]}, "must be strings, where a list of strings"),
        ({"version": 1, "findings": [{**_fp(), "where": [1]}]}, "must be strings, where a list of strings"),
        ({"version": 1, "findings": [{**_fp(), "count": True}]}, "count must be a whole number of at least 1, not True"),
        ({"version": 1, "findings": [{**_fp(), "count": 1.0}]}, "count must be a whole number of at least 1, not 1.0"),
        ({"version": 1, "findings": [_fp(MAX_BASELINE_COUNT + 1)]}, f"count {MAX_BASELINE_COUNT + 1} is over the limit of {MAX_BASELINE_COUNT}"),
    ]
    for doc, message in rows:
        path.write_text(json.dumps(doc))
        with pytest.raises(BaselineError) as exc:
            Baseline.load(path)
        assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value), (doc, str(exc.value))
    path.write_text(json.dumps({**ok, "findings": [_fp(MAX_BASELINE_COUNT)]}))
    assert list(Baseline.load(path).accepted.values()) == [MAX_BASELINE_COUNT]


def test_an_unreadable_baseline_is_refused(tmp_path):
    path = tmp_path / "base.json"
    path.write_bytes(b'{"version": 1, "findings": ["\xff"]}')
    with pytest.raises(BaselineError, match=r"not UTF-8 \(invalid start byte at byte 29\)"):
        Baseline.load(path)
    with pytest.raises(BaselineError, match="cannot read the baseline: "):
        Baseline.load(tmp_path)  # a folder
    with open(path, "wb") as fh:
        fh.truncate(MAX_BASELINE_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(BaselineError, match="cannot read the baseline: "):
        Baseline.load(path)
