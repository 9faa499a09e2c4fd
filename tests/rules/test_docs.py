"""The rule docs' IR examples are programs the project parses and the passes judge (xDSL's habit: docs as tests).

Every rule about a program's state (SD, AL, OR) shows a ``Bad (IR)`` and a ``Fixed (IR)`` program in its doc,
which ``rnnir explain`` prints.  Each Bad program must get that rule and each Fixed one must get no error or
warning at all, so an example cannot drift from what the rule really finds.
"""

from __future__ import annotations

import textwrap

import pytest

from rnnir import passes
from rnnir.ir.text import parse_program
from rnnir.passes.rules import CATALOGUE, Family

#: every rule an analysis pass detects (all but RN100, which judges the model's own suppression list), from the code table
STATE_RULES = sorted(r.rule.code for r in CATALOGUE if r.family is not Family.SUPPRESSION)


def ir_example(doc: str, title: str) -> str:
    """The program under section ``title`` of a rule doc (a header at column 0, its text indented under it)."""
    lines = doc.splitlines()
    start = lines.index(title) + 1
    body: list[str] = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break
        body.append(line)
    return textwrap.dedent("\n".join(body)).strip()


def test_every_state_rule_is_covered():
    assert STATE_RULES == sorted(c for p in passes.catalogue.PASSES for c in p.codes())
    assert {"SD001", "SD010", "AL003", "OR002"} <= set(STATE_RULES) and "RN100" not in STATE_RULES


@pytest.mark.parametrize("code", STATE_RULES)
def test_the_bad_example_gets_the_rule(code):
    program = parse_program(ir_example(passes.RULES[code].doc, "Bad (IR)"))
    assert code in {d.code for d in passes.run(program)}


@pytest.mark.parametrize("code", STATE_RULES)
def test_the_fixed_example_is_clean(code):
    program = parse_program(ir_example(passes.RULES[code].doc, "Fixed (IR)"))
    assert [(d.code, d.severity.value) for d in passes.run(program) if d.severity.value != "info"] == []
    assert code not in {d.code for d in passes.run(program)}


def test_the_examples_are_what_rnnir_explain_prints(capsys):
    from rnnir import cli

    assert cli.main(["explain", "SD002"]) == 0
    out = capsys.readouterr().out
    assert ir_example(passes.RULES["SD002"].doc, "Bad (IR)").splitlines()[0] == "program @bad {"
    assert "    %sh = store<@h, token>(%cn)                        // h and c swapped" in out


def test_the_extractor_stops_at_the_next_section():
    doc = "Bad (IR)\n    program @bad {\n    }\n\nFixed (IR)\n    program @fixed {\n    }\n"
    assert ir_example(doc, "Bad (IR)") == "program @bad {\n}"
    assert ir_example(doc, "Fixed (IR)") == "program @fixed {\n}"
