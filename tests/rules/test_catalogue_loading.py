"""Loading the code table (``rnnir.passes.rules``): a rule module that declares no ``RULE``, or whose file is not named
``<code>_<slug>.py`` after the rule it declares, is refused with a message naming the file -- never registered."""

from __future__ import annotations

import sys
import types

import pytest

from rnnir.passes.rules import CATALOGUE, Family, _load


def _fake(monkeypatch: pytest.MonkeyPatch, module: str, **attrs: object) -> None:
    fake = types.ModuleType(f"rnnir.passes.rules.{module}")
    for k, v in attrs.items():
        setattr(fake, k, v)
    monkeypatch.setitem(sys.modules, fake.__name__, fake)


def test_a_rule_module_that_does_not_match_its_rule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sd001 = next(r.rule for r in CATALOGUE if r.rule.code == "SD001")
    _fake(monkeypatch, "zz998_no_declaration")
    _fake(monkeypatch, "zz999_not_a_rule", RULE="SD001 slot-never-written")
    _fake(monkeypatch, "sd002_wrong_slot", RULE=sd001)  # SD002's file declaring SD001
    _fake(monkeypatch, "sd001_slot_never_writen", RULE=sd001)  # one letter off the rule's slug
    rows = [
        ("zz998_no_declaration", TypeError, "rnnir/passes/rules/zz998_no_declaration.py declares no RULE = rule(...)"),
        ("zz999_not_a_rule", TypeError, "rnnir/passes/rules/zz999_not_a_rule.py declares no RULE = rule(...)"),
        ("sd002_wrong_slot", ValueError,
         "rnnir/passes/rules/sd002_wrong_slot.py declares SD001 slot-never-written: its file must be sd001_slot_never_written.py"),
        ("sd001_slot_never_writen", ValueError,
         "rnnir/passes/rules/sd001_slot_never_writen.py declares SD001 slot-never-written: its file must be sd001_slot_never_written.py"),
    ]
    for module, error, message in rows:
        with pytest.raises(error) as caught:
            _load(module, Family.STORE_DESTINATIONS)
        assert str(caught.value) == message
    # the near miss: the same declaration in the file named after it loads, with the family it was registered under
    _fake(monkeypatch, "sd001_slot_never_written", RULE=sd001)
    loaded = _load("sd001_slot_never_written", Family.SUPPRESSION)
    assert (loaded.rule, loaded.module, loaded.family) == (sd001, "sd001_slot_never_written", Family.SUPPRESSION)
