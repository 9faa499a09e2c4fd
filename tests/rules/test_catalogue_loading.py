"""Loading the code table (``rnnir.passes.rules``): a rule module that declares no ``RULE``, or whose file is not named
``<code>_<slug>.py`` after the rule it declares, is refused with a message naming the file -- never registered."""

from __future__ import annotations

import sys
import types

import pytest

from rnnir.passes.rules import CATALOGUE, Family, _load

SD001 = next(r.rule for r in CATALOGUE if r.rule.code == "SD001")
MUST_BE = "declares SD001 slot-never-written: its file must be sd001_slot_never_written.py"


def test_a_rule_module_that_does_not_match_its_rule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # (module, what it declares as RULE (None: nothing), the error, its message)
    rows = [
        ("zz998_no_declaration", None, TypeError, "rnnir/passes/rules/zz998_no_declaration.py declares no RULE = rule(...)"),
        ("zz999_not_a_rule", "SD001 slot-never-written", TypeError, "rnnir/passes/rules/zz999_not_a_rule.py declares no RULE = rule(...)"),
        ("sd002_wrong_slot", SD001, ValueError, f"rnnir/passes/rules/sd002_wrong_slot.py {MUST_BE}"),  # SD002's file
        ("sd001_slot_never_writen", SD001, ValueError, f"rnnir/passes/rules/sd001_slot_never_writen.py {MUST_BE}"),  # a letter off
    ]
    for module, declared, error, message in rows:
        fake = types.ModuleType(f"rnnir.passes.rules.{module}")
        if declared is not None:
            fake.RULE = declared  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, fake.__name__, fake)
        with pytest.raises(error) as caught:
            _load(module, Family.STORE_DESTINATIONS)
        assert str(caught.value) == message
    # the near miss: the same declaration in the file named after it loads, with the family it was registered under
    loaded = _load("sd001_slot_never_written", Family.SUPPRESSION)
    assert (loaded.rule, loaded.module, loaded.family) == (SD001, "sd001_slot_never_written", Family.SUPPRESSION)
