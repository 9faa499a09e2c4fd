"""Configuration found per linted model (Ruff's hierarchical discovery) and the renamed lowering-policy flags.

Each test runs the real command: ``python -m rnnir lint ...`` in a subprocess where the text is the point,
``cli.main`` with captured output elsewhere.  The layout used throughout::

    tmp/                     (the working directory; no pyproject.toml unless a test writes one)
      a/pyproject.toml       [tool.rnnir] ignore = ["SD001"]
      a/broken.onnx          hands h0 straight back: SD001
      a/clean.onnx
      b/broken.onnx          the same model, no configuration above it
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from rnnir import cli
from tests.cli.test_cli import clean_lstm, run_subprocess, save, state_handed_back_lstm

SD001_LINE = "b/broken.onnx: hand_back: SD001 [error] slot 'h0' is written back with its own live-in value on every call path (the state is handed straight back): the recurrence never advances across calls"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save(state_handed_back_lstm(), tmp_path / "a" / "broken.onnx")
    save(clean_lstm(), tmp_path / "a" / "clean.onnx")
    save(state_handed_back_lstm(), tmp_path / "b" / "broken.onnx")
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.rnnir]\nignore = ["SD001"]\n')
    return tmp_path


def lint(capsys, *argv):
    code = cli.main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def lint_json(capsys, *argv):
    code, out, err = lint(capsys, *argv, "--format", "json")
    return code, {Path(f["path"]).as_posix(): f for f in json.loads(out)["files"]}, err


def codes(file_doc):
    return sorted(d["code"] for d in file_doc["diagnostics"])


# -- one run, each model with its own configuration -----------------------------------------


def test_each_model_gets_the_nearest_config_above_it(tree):
    proc = run_subprocess("lint", "a", "b", cwd=tree)
    assert proc.returncode == 1, proc.stderr
    # a/broken.onnx is silenced by a/pyproject.toml; b/broken.onnx, with no configuration above it, is not
    assert proc.stdout == textwrap.dedent(
        f"""\
        {SD001_LINE}
          hint: write the recurrent op's final state into 'h0', not the loaded value

        1 error, 0 warnings in 3 files; 4 of 6 state slices verified
        """
    )
    assert proc.stderr == ""


def test_near_miss_the_config_does_not_leak_to_a_sibling_folder(tree, capsys):
    code, files, _ = lint_json(capsys, "b/broken.onnx", "a/broken.onnx")
    assert code == 1
    assert codes(files["a/broken.onnx"]) == []
    assert codes(files["b/broken.onnx"]) == ["SD001"]
    assert files["a/broken.onnx"]["config"] == str(Path("a/pyproject.toml"))
    assert files["b/broken.onnx"]["config"] is None


def test_jobs_give_each_model_its_own_config_too(tree, capsys):
    serial = lint(capsys, "a", "b", "--format", "json")
    parallel = lint(capsys, "a", "b", "--format", "json", "--jobs", "2")
    assert parallel[:2] == serial[:2]
    files = {Path(f["path"]).as_posix(): f for f in json.loads(parallel[1])["files"]}
    assert codes(files["a/broken.onnx"]) == [] and codes(files["b/broken.onnx"]) == ["SD001"]


def test_model_config_wins_over_the_working_directory_config(tree, capsys):
    # the working directory's file applies only to models with none of their own above them (Ruff's fallback)
    (tree / "pyproject.toml").write_text('[tool.rnnir]\nselect = ["OR"]\n')
    code, files, _ = lint_json(capsys, "a/broken.onnx", "b/broken.onnx")
    assert codes(files["b/broken.onnx"]) == []  # select = ["OR"] from the working directory: no SD001
    assert files["b/broken.onnx"]["config"] == "pyproject.toml"
    assert files["a/broken.onnx"]["config"] == str(Path("a/pyproject.toml"))
    assert code == 0


def test_a_model_outside_the_working_directory_finds_its_own_config(tree, capsys, monkeypatch):
    (tree / "elsewhere").mkdir()
    monkeypatch.chdir(tree / "elsewhere")
    code, files, _ = lint_json(capsys, "../a/broken.onnx", "../b/broken.onnx")
    assert code == 1
    assert codes(files["../a/broken.onnx"]) == [] and codes(files["../b/broken.onnx"]) == ["SD001"]


def test_explicit_config_applies_to_every_model(tree, capsys):
    (tree / "ci.toml").write_text('[tool.rnnir]\nselect = ["OR"]\n')
    code, files, _ = lint_json(capsys, "a", "b", "--config", "ci.toml")
    assert code == 0
    assert all(f["config"] == "ci.toml" for f in files.values())
    assert all(codes(f) == [] for f in files.values())


def test_command_line_select_applies_on_top_of_each_models_config(tree, capsys):
    # --select typed on the command line overrides a/pyproject.toml's ignore, as in Ruff
    code, files, _ = lint_json(capsys, "a", "b", "--select", "SD001")
    assert code == 1
    assert codes(files["a/broken.onnx"]) == ["SD001"] and codes(files["b/broken.onnx"]) == ["SD001"]


def test_no_config_ignores_every_pyproject(tree, capsys):
    code, files, _ = lint_json(capsys, "a", "b", "--no-config")
    assert codes(files["a/broken.onnx"]) == ["SD001"]
    assert all(f["config"] is None for f in files.values())


def test_per_file_ignores_are_relative_to_the_models_own_config(tree, capsys):
    (tree / "a" / "pyproject.toml").write_text('[tool.rnnir.per-file-ignores]\n"broken.onnx" = ["SD001"]\n"b/*" = ["SD001"]\n')
    code, files, _ = lint_json(capsys, "a", "b")
    assert codes(files["a/broken.onnx"]) == []
    assert codes(files["b/broken.onnx"]) == ["SD001"]  # a's pattern "b/*" is about a/b/, not b/


def test_verbose_text_names_the_config_that_applied(tree, capsys):
    _, out, _ = lint(capsys, "a/clean.onnx", "b/broken.onnx", "-v")
    blocks = out.split("\n\n")
    assert blocks[0].startswith("a/clean.onnx\n") and blocks[0].endswith(f"\n  config: {Path('a/pyproject.toml')}")
    assert blocks[1].startswith("b/broken.onnx\n") and "config:" not in blocks[1]


def test_show_settings_prints_each_models_resolved_settings_and_lints_nothing(tree):
    (tree / "a" / "pyproject.toml").write_text('[tool.rnnir]\nignore = ["SD001"]\npairs = {h0 = "hn"}\nstrict = true\n')
    proc = run_subprocess("lint", "a/broken.onnx", "b", "--show-settings", "--extend-select", "OR", "--lower-exit", "chain", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == textwrap.dedent(
        """\
        Resolved settings for: a/broken.onnx
        Settings path: a/pyproject.toml
        select = ALL
        ignore = ["SD001"]
        pairs = {h0 = "hn"}
        lower-entry = "dynamic"
        lower-exit = "chain"
        strict = true

        Resolved settings for: b/broken.onnx
        Settings path: (none: defaults)
        select = ALL
        ignore = []
        pairs = (found in the model)
        lower-entry = "dynamic"
        lower-exit = "chain"
        strict = false
        """
    ).replace("a/pyproject.toml", str(Path("a/pyproject.toml")))


def test_a_broken_config_of_one_model_exits_2_naming_that_file(tree, capsys):
    (tree / "b" / "pyproject.toml").write_text('[tool.rnnir]\nignore = ["XX9"]\n')
    code, out, err = lint(capsys, "a", "b")
    assert code == 2
    assert str(Path("b/pyproject.toml").resolve()) in err and "'XX9'" in err and "Traceback" not in err
    # near miss: the same folders without the broken file lint normally
    (tree / "b" / "pyproject.toml").unlink()
    assert lint(capsys, "a", "b")[0] == 1


def test_a_pyproject_without_a_tool_rnnir_table_is_passed_over(tree, capsys):
    (tree / "a" / "sub").mkdir()
    save(state_handed_back_lstm(), tree / "a" / "sub" / "m.onnx")
    (tree / "a" / "sub" / "pyproject.toml").write_text('[tool.black]\nline-length = 100\n')
    code, files, _ = lint_json(capsys, "a/sub/m.onnx")
    assert codes(files["a/sub/m.onnx"]) == [] and files["a/sub/m.onnx"]["config"] == str(Path("a/pyproject.toml"))


def test_show_takes_the_config_above_its_model(tree, capsys):
    (tree / "a" / "pyproject.toml").write_text('[tool.rnnir]\npairs = {h0 = "hn"}\n')
    assert cli.main(["show", "a/clean.onnx", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["input"] for p in doc["state_pairs"]] == ["h0"]
    assert cli.main(["show", "b/broken.onnx", "--format", "json"]) == 0  # near miss: no config, both pairs found
    assert sorted(p["input"] for p in json.loads(capsys.readouterr().out)["state_pairs"]) == ["c0", "h0"]


# -- the lowering-policy options: new names, old spellings still work -------------------------


def test_lower_exit_picks_the_lowering_policy(tree):
    proc = run_subprocess("lint", "b/broken.onnx", "--lower-exit", "chain", "--select", "AL", "--statistics", cwd=tree)
    assert proc.returncode == 1
    assert proc.stdout == "2  AL001  [error]  chained-output-store\n2 errors, 0 warnings in 1 file; 0 of 2 state slices verified\n"
    assert proc.stderr == ""
    fanout = run_subprocess("lint", "b/broken.onnx", "--select", "AL", "--statistics", cwd=tree)  # near miss: the default policy
    assert fanout.returncode == 0 and fanout.stdout.startswith("0 errors, 0 warnings in 1 file")


def test_old_exit_spelling_still_works_with_a_deprecation_warning(tree):
    new = run_subprocess("lint", "b/broken.onnx", "--lower-exit", "chain", "--format", "json", cwd=tree)
    old = run_subprocess("lint", "b/broken.onnx", "--exit", "chain", "--format", "json", cwd=tree)
    assert old.returncode == new.returncode == 1
    assert old.stdout == new.stdout
    assert old.stderr == "rnnir: warning: --exit is deprecated; use --lower-exit (it picks the lowering policy for demonstrations, not an exit code)\n"
    entry = run_subprocess("show", "b/broken.onnx", "--entry", "dynamic", "--format", "json", cwd=tree)
    assert entry.returncode == 0 and "--entry is deprecated; use --lower-entry" in entry.stderr


def test_config_keys_lower_entry_and_lower_exit(tree, capsys):
    (tree / "b" / "pyproject.toml").write_text('[tool.rnnir]\nlower-exit = "chain"\n')
    code, files, err = lint_json(capsys, "b")
    assert "AL001" in codes(files["b/broken.onnx"]) and err == ""
    (tree / "b" / "pyproject.toml").write_text('[tool.rnnir]\nexit = "chain"\n')
    code, files, err = lint_json(capsys, "b")
    assert "AL001" in codes(files["b/broken.onnx"])
    assert err == f"rnnir: warning: {(tree / 'b' / 'pyproject.toml')}: [tool.rnnir] key 'exit' is deprecated; rename it to 'lower-exit' (it picks a lowering policy, not an exit code)\n"


def test_config_with_both_spellings_is_an_error(tree, capsys):
    (tree / "b" / "pyproject.toml").write_text('[tool.rnnir]\nexit = "chain"\nlower-exit = "fanout"\n')
    code, _, err = lint(capsys, "b")
    assert code == 2 and "sets both 'exit' and 'lower-exit'" in err


def test_the_finder_reads_each_pyproject_once_however_many_folders_share_it(tree, monkeypatch):
    from rnnir.lint import config

    reads: list[Path] = []
    real = config._read_toml
    monkeypatch.setattr(config, "_read_toml", lambda path: reads.append(path) or real(path))
    finder = config.ConfigFinder(config.Config())
    for sub in ("x", "y", "x/deep", "x/deep/er"):
        (tree / "a" / sub).mkdir(parents=True, exist_ok=True)
        assert finder.for_model(tree / "a" / sub / "m.onnx").path == tree / "a" / "pyproject.toml"
    assert finder.for_model(tree / "b" / "m.onnx") is finder.fallback  # near miss: nothing above b/
    assert reads.count(tree / "a" / "pyproject.toml") == 1


def test_help_shows_the_new_names_only(capsys):
    assert cli.main(["lint", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--lower-exit {fanout,chain,reuse-single-store}" in text and "lowering policy for demonstrations" in text
    assert "--exit " not in text and "--entry " not in text  # the deprecated spellings still parse, unadvertised
