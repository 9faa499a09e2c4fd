"""How a rule selector is read (:func:`rnnir.passes.catalogue.selector_code`) and judged
(:func:`rnnir.passes.catalogue.check_selectors`), in-process and through ``rnnir lint --select``: a rule name is
its code, a code or prefix is upper-cased, anything else is kept as typed so the error names it as written; a
selector is known when it is a prefix of some code (the empty selector is never one)."""

from __future__ import annotations

import json

import pytest
from onnx import save

from rnnir import cli
from rnnir.passes.catalogue import RULES, check_selectors, selector_code
from rnnir.passes.manager import SelectionError
from tests.support.onnx_models import lstm_h0c0


def test_a_selector_as_the_code_it_stands_for():
    table = [  # (typed, read as)
        ("wrong-slot", "SD002"),  # a rule name, any case, `_` for `-`
        (" Wrong_Slot ", "SD002"),
        ("sd", "SD"),  # a prefix: upper-cased
        ("sd002", "SD002"),
        ("Al001", "AL001"),
        ("sd-0", "sd-0"),  # not a code's shape: kept as typed
        ("s d", "s d"),
        ("", ""),
    ]
    assert [(typed, selector_code(typed)) for typed, _ in table] == table


def test_every_code_and_prefix_of_a_known_set_passes_and_anything_else_is_named_in_the_error():
    check_selectors(["SD", "SD002", "AL", "RN100"], "--select")  # default: the catalogue's codes
    check_selectors(["XY", "XY001"], "--select", known=["XY001"])  # a set of the caller's
    for bad, known in ((["ZZ9"], None), ([""], None), (["SD002", "SD0020"], None), (["SD"], ["XY001"])):
        with pytest.raises(SelectionError) as e:
            check_selectors(bad, "pyproject.toml: select", known=known)
        unknown = [s for s in bad if s != "SD002"]
        assert str(e.value).startswith(f"pyproject.toml: select: unknown rule code, prefix or name {', '.join(map(repr, unknown))}; known codes: ")
        assert str(e.value).endswith(f"{', '.join(sorted(known or RULES))} (or their names: `rnnir rules` lists both)")


def _lint(tmp_path, capsys, *argv):
    path = tmp_path / "lstm.onnx"
    save(lstm_h0c0(), path)
    code = cli.main(["lint", "--no-config", str(path), "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_takes_a_lower_case_prefix_and_a_rule_name_and_names_a_bad_selector_as_typed(tmp_path, capsys):
    code, out, _ = _lint(tmp_path, capsys, "--select", "sd,wrong-slot")
    assert code == 0 and json.loads(out)  # the correct fan-out: no finding, and the selectors were accepted
    code, _, err = _lint(tmp_path, capsys, "--select", "sd-0")
    assert code == 2 and "--select: unknown rule code, prefix or name 'sd-0'" in err
    code, _, err = _lint(tmp_path, capsys, "--ignore", "nosuchrule")
    assert code == 2 and "--ignore: unknown rule code, prefix or name 'NOSUCHRULE'" in err
