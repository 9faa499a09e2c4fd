"""The README is a newcomer's page that stays true: its rule table is the catalogue's, its Python examples run, its
links lead somewhere, and it stays short (the rest lives in docs/)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _rules_table_tool():
    spec = importlib.util.spec_from_file_location("rules_table", REPO / "tools" / "rules_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rule_table_is_the_catalogue_as_rnnir_rules_prints_it():
    # the catalogue read through the command a user runs, not through the generator
    proc = subprocess.run([sys.executable, "-m", "rnnir", "rules", "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=120)
    catalogue = [(r["code"], r["name"], r["severity"], r["summary"]) for r in json.loads(proc.stdout)["rules"]]
    rows = re.findall(r"^\| ([A-Z]{2}\d{3}) \| `([a-z0-9-]+)` \| (\w+) \| (.*) \|$", _rules_table_tool().readme_table(README), re.M)
    assert sorted(rows) == sorted(catalogue)
    assert len(rows) == len(catalogue) >= 16


def test_the_rule_table_is_what_the_generator_writes():
    tool = _rules_table_tool()
    assert tool.readme_table(README) == tool.markdown(), "run python tools/rules_table.py --write"
    assert tool.main(["--check"]) == 0


def test_the_generator_check_fails_on_a_stale_table(tmp_path, monkeypatch, capsys):
    tool = _rules_table_tool()
    stale = tmp_path / "README.md"
    stale.write_text(README.replace("| SD002 | `wrong-slot` | error |", "| SD002 | `wrong-slot` | warning |"), encoding="utf-8")
    monkeypatch.setattr(tool, "README", stale)
    assert tool.main(["--check"]) == 1 and "tools/rules_table.py --write" in capsys.readouterr().err
    assert tool.main(["--write"]) == 0 and tool.readme_table(stale.read_text(encoding="utf-8")) == tool.markdown()


def test_the_quickstart_is_two_commands_one_running_rnnir_on_the_samples_one_the_tests():
    quickstart = README[README.index("## Quickstart") :]
    block = quickstart[quickstart.index("```sh\n") + 6 : quickstart.index("```", quickstart.index("```sh\n") + 6)]
    commands = block.strip().splitlines()
    assert commands == ["pip install . && rnnir lint samples/", "pip install '.[test]' && python -m pytest -q"]


def test_the_readme_is_a_newcomers_page():
    assert len(README.splitlines()) <= 250
    for word in ("issue", "rebase", "this branch", "helper", "agent"):  # words that only make sense inside the team
        assert word not in README.lower(), word
    for heading in ("## Install", "## Quickstart", "## Command line", "## Python API", "## Rules", "## Limits and errors"):
        assert heading in README
    assert "passes.run" in README and "StatefulSession" in README and "stateful" in README


@pytest.mark.parametrize("page", sorted(p.name for p in (REPO / "docs").glob("*.md")))
def test_docs_pages_speak_to_users(page):
    text = (REPO / "docs" / page).read_text(encoding="utf-8").lower()
    for phrase in ("issue 1", "issue 9", "before its rebase", "before any rebase", "this branch", "helpers", "agents"):
        assert phrase not in text, (page, phrase)


def test_every_link_of_the_readme_and_docs_exists():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (page.parent / target).exists(), (page.name, target)
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", README))
    assert linked == {p.name for p in (REPO / "docs").glob("*.md")}  # no page a newcomer cannot find


#: runs the README's Python blocks in a fresh interpreter, as a user's script would (a process pool forked from
#: pytest, whose onnxruntime threads hold locks, could hang); the pytest example runs with the fixture's factory
_RUN_BLOCKS = """
import json, sys
from rnnir.pytest_plugin import StatefulModel
for k, block in enumerate(json.loads(sys.stdin.read())):
    namespace = {"__name__": "__readme__"}
    exec(compile(block, f"README.md python block {k}", "exec"), namespace)
    for name, test in list(namespace.items()):
        if name.startswith("test_"):
            test(lambda model, **options: StatefulModel(model, **options))
print("ran", k + 1, "blocks")
"""


def test_the_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 4
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", _RUN_BLOCKS], input=json.dumps(blocks), capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"ran {len(blocks)} blocks"
