"""What users type from habit: ``python -m rnnir``, ``explain`` by rule name, a subcommand's own usage
on a bad flag, help text on every option, readable ``str()`` of findings and reports."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnir import __version__, cli, passes
from rnnir.cli.common import DeprecatedSpelling

REPO = Path(__file__).resolve().parents[2]


def run_module(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-m", "rnnir", *argv], capture_output=True, text=True, env=env, timeout=300)


# -- python -m rnnir ---------------------------------------------------------------------------


def test_python_dash_m_rnnir_is_the_command():
    done = run_module("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"rnnir {__version__}"
    done = run_module("lint", "--no-config", str(REPO / "samples" / "lstm_fanout.onnx"))
    assert done.returncode == 0, done.stderr
    done = run_module("lint", "--no-config", str(REPO / "samples" / "al001_chain.rnnir"))
    assert done.returncode == 1 and "AL001" in done.stdout


# -- explain by name ---------------------------------------------------------------------------


@pytest.mark.parametrize("given,code", [("wrong-slot", "SD002"), ("Wrong-Slot", "SD002"), ("unverified-state", "SD009"), ("UNVERIFIED_STATE", "SD009"), ("sd010", "SD010")])
def test_explain_takes_a_rule_name_in_any_case(capsys, given, code):
    assert cli.main(["explain", code]) == 0
    by_code = capsys.readouterr().out
    assert cli.main(["explain", given]) == 0
    out = capsys.readouterr().out
    assert out == by_code and passes.RULES[code].doc in out


def test_explain_by_name_from_python():
    assert passes.explain("wrong-slot") == passes.explain("SD002")
    assert passes.rule_for("slot-never-written").code == "SD001"


@pytest.mark.parametrize("given", ["wrong-slots", "SD0", "slot", ""])
def test_explain_unknown_rule_lists_codes_and_names(capsys, given):
    assert cli.main(["explain", given]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"unknown rule code {given!r}" in err
    for rule in passes.RULES.values():  # every code with its name, so the user can pick one
        assert f"{rule.code} {rule.name}" in err


# -- a subcommand's own usage ------------------------------------------------------------------


@pytest.mark.parametrize("command,args", [("lint", ["m.onnx"]), ("show", ["m.onnx"]), ("run", ["m.onnx"]), ("cost", ["m.onnx"]), ("rules", []), ("explain", ["SD001"])])
def test_unknown_flag_prints_the_subcommands_usage(capsys, command, args):
    assert cli.main([command, *args, "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: rnnir {command} ")
    assert f"rnnir {command}: error: unrecognized arguments: --no-such-flag" in err


def test_unknown_flag_before_the_command_is_the_top_levels(capsys):
    assert cli.main(["--no-such-flag", "rules"]) == 2
    assert capsys.readouterr().err.startswith("usage: rnnir [-h]")


def test_every_option_of_every_command_has_help_text():
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = []
    for name, command in sub.choices.items():
        for action in command._actions:
            if isinstance(action, DeprecatedSpelling):  # old spellings: hidden from --help, they warn when used
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
    assert all(action.help for action in sub._choices_actions)  # and every command


# -- str() reads like the tool -------------------------------------------------------------------


def test_str_of_a_diagnostic_is_the_finding_as_lint_prints_it():
    import rnnir

    # samples/al001_chain.expected.json: one AL001 error; the chain's stores (store1, store2 in the IR) store what
    # the node 'gru' produced, which the finding names
    (d,) = passes.run(rnnir.load(REPO / "samples" / "al001_chain.rnnir"))
    head, hint = str(d).split("\n")
    assert head == f"gru: AL001 [error] {d.message}"
    assert hint == f"  hint: {d.hint}" and d.hint
    assert repr(d).startswith("Diagnostic(code='AL001'")  # repr stays the dataclass's, for debugging


def test_str_of_a_diagnostic_without_location_or_hint():
    d = passes.Diagnostic(code="SD009", name="unverified-state", severity=passes.Severity.INFO, message="slice state[1] not followed")
    assert str(d) == "SD009 [info] slice state[1] not followed"


def test_str_of_a_multicall_report_is_the_text_report():
    from rnnir.check.multicall.check import check_multicall
    from rnnir.check.multicall.report import report_to_text

    report = check_multicall(str(REPO / "samples" / "lstm_fanout.onnx"), calls=6, chunk=2)
    text = str(report)
    assert text == report_to_text(report)
    assert text.startswith(f"{report.model}: PASS") and "MulticallReport(" not in text
    assert f"{report!r}".startswith("MulticallReport(")
