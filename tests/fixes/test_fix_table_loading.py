"""Loading the fix table (``rnnir.fixes.planners``): a planner module that does not declare its fix, or declares the
fix of another rule, or is named after no rule, is refused with a message naming the file -- never registered."""

from __future__ import annotations

import sys
import types

import pytest

from rnnir.fixes.edits import FixInfo
from rnnir.fixes.planners import PLANNERS, _load


def _fake(monkeypatch: pytest.MonkeyPatch, module: str, **attrs: object) -> None:
    fake = types.ModuleType(f"rnnir.fixes.planners.{module}")
    for k, v in attrs.items():
        setattr(fake, k, v)
    monkeypatch.setitem(sys.modules, fake.__name__, fake)


def test_a_planner_module_that_does_not_match_its_rule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = PLANNERS["SD002"].plan
    _fake(monkeypatch, "no_declaration", plan=plan)
    _fake(monkeypatch, "not_callable", FIX=FixInfo("SD002", "safe", "t"), plan="plan")
    _fake(monkeypatch, "zz999_no_such_rule", FIX=FixInfo("ZZ999", "safe", "t"), plan=plan)
    _fake(monkeypatch, "sd005_state_type_mismatch", FIX=FixInfo("SD002", "safe", "t"), plan=plan)  # SD005's file
    rows = [
        ("no_declaration", TypeError, "rnnir/fixes/planners/no_declaration.py declares no FIX = FixInfo(...) and plan(ctx, d)"),
        ("not_callable", TypeError, "rnnir/fixes/planners/not_callable.py declares no FIX = FixInfo(...) and plan(ctx, d)"),
        ("zz999_no_such_rule", ValueError, "rnnir/fixes/planners/zz999_no_such_rule.py: no rule has the file rnnir/passes/rules/zz999_no_such_rule.py"),
        ("sd005_state_type_mismatch", ValueError,
         "rnnir/fixes/planners/sd005_state_type_mismatch.py declares the fix of SD002, but sd005_state_type_mismatch is SD005"),
    ]
    for module, error, message in rows:
        with pytest.raises(error) as caught:
            _load(module)
        assert str(caught.value) == message
    _fake(monkeypatch, "sd005_state_type_mismatch", FIX=FixInfo("SD005", "unsafe", "t"), plan=plan)
    loaded = _load("sd005_state_type_mismatch")  # the near miss: a matching declaration loads
    assert (loaded.info.code, loaded.plan, loaded.module) == ("SD005", plan, "sd005_state_type_mismatch")
