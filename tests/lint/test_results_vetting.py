"""``LintResult.quarantine`` looks at a file once: ``rnnir lint`` quarantines before it reports and then renders, and
a large model's record took milliseconds to encode per look.  What a file holds after it was found writable is
looked at again whenever it may have changed: a field set anew, a list grown in place, the cost switched on.

The oracle of what is writable is the json module itself (``json.dumps(..., ensure_ascii=False).encode()``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rnnir.lint import results as results_module
from rnnir.lint.results import FileResult, LintResult
from rnnir.passes.diagnostics import Diagnostic, Location, Rule, Severity
from rnnir.render import render

RULES = {"SD001": Rule("SD001", "state-not-written-back", Severity.ERROR, "a slot is read but never written back", "SD001 doc")}
BAD_TEXT = "name \udc80 is not UTF-8"  # a lone surrogate: no UTF-8 encoding


def _finding(message: str = "slot 'h0' is never written back") -> Diagnostic:
    return Diagnostic("SD001", "state-not-written-back", Severity.ERROR, message, (Location(node="r0", onnx_node="lstm", value="hn"),), "store Y_h", slot="h0")


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the records quarantine encoded, in order."""
    seen: list[str] = []
    real = results_module._renderable

    def counting(record: dict[str, object]) -> bool:
        seen.append(str(record["path"]))
        return real(record)

    monkeypatch.setattr(results_module, "_renderable", counting)
    return seen


def _result(tmp_path: Path, *files: FileResult) -> LintResult:
    return LintResult(files=list(files), rules=RULES, version="1", cwd=tmp_path)


def test_a_writable_file_is_encoded_once_over_quarantine_and_every_render(tmp_path: Path, looks: list[str]):
    good = FileResult("good.onnx", diagnostics=[_finding()], state_pairs=[{"input": "h0", "output": "hn", "slices": []}])
    result = _result(tmp_path, good)
    result.quarantine()
    for fmt in ("json", "text", "sarif", "github"):
        render(result, fmt)
    assert looks == ["good.onnx"]
    assert result.files == [good] and good.error is None


def test_a_failed_file_is_never_encoded(tmp_path: Path, looks: list[str]):
    result = _result(tmp_path, FileResult("failed.onnx", error={"type": "ModelError", "message": "no"}))
    result.quarantine()
    assert looks == []


def test_a_field_set_anew_after_a_look_is_looked_at_again(tmp_path: Path, looks: list[str]):
    good = FileResult("m.onnx", diagnostics=[_finding()])
    result = _result(tmp_path, good)
    result.quarantine()
    good.diagnostics = [_finding(BAD_TEXT)]  # same length, another list
    text = render(result, "json")
    assert looks == ["m.onnx", "m.onnx"]
    assert result.files[0].error is not None and result.files[0].error["type"] == "RenderError"
    assert "RenderError" in text and "is not UTF-8" not in text


def test_a_list_grown_in_place_after_a_look_is_looked_at_again(tmp_path: Path, looks: list[str]):
    good = FileResult("m.onnx", diagnostics=[_finding()])
    result = _result(tmp_path, good)
    result.quarantine()
    good.diagnostics.append(_finding(BAD_TEXT))  # the same list, one finding longer
    render(result, "text")
    assert len(looks) == 2 and result.files[0].error is not None


def test_each_field_a_report_writes_is_watched(tmp_path: Path, looks: list[str]):
    """A file's every written field set anew (to an equal value: the look is by identity) makes a new look."""
    changes = {
        "path": lambda f: setattr(f, "path", "".join(["m.", "onnx"])),
        "config": lambda f: setattr(f, "config", "".join(["pyproject", ".toml"])),
        "state_pairs": lambda f: setattr(f, "state_pairs", list(f.state_pairs)),
        "suggested_pairs": lambda f: setattr(f, "suggested_pairs", list(f.suggested_pairs)),
        "diagnostics": lambda f: setattr(f, "diagnostics", list(f.diagnostics)),
        "verdicts": lambda f: setattr(f, "verdicts", dict(f.verdicts or {})),
        "cost": lambda f: setattr(f, "cost", dict(f.cost or {})),
        "suggested_pairs grown": lambda f: f.suggested_pairs.append({"input": "c0"}),
        "state_pairs grown": lambda f: f.state_pairs.append({"input": "c0"}),
    }
    for what, change in changes.items():
        f = FileResult(
            "m.onnx", config="pyproject.toml", state_pairs=[{"input": "h0"}], suggested_pairs=[], diagnostics=[_finding()], verdicts={"slices": []}, cost={}
        )
        result = _result(tmp_path, f)
        result.quarantine()
        looks.clear()
        result.quarantine()
        assert looks == [], what  # nothing changed: no second look
        change(f)
        result.quarantine()
        assert looks == ["m.onnx"], what


def test_switching_the_cost_on_looks_again_and_quarantines_a_cost_json_cannot_write(tmp_path: Path, looks: list[str]):
    f = FileResult("m.onnx", cost={"note": BAD_TEXT})
    result = _result(tmp_path, f)
    result.quarantine()  # the cost is not written: writable
    assert result.files[0] is f
    result.with_cost = True
    result.quarantine()
    assert looks == ["m.onnx", "m.onnx"] and result.files[0].error is not None


def test_a_record_that_holds_itself_is_quarantined(tmp_path: Path):
    loop: dict[str, object] = {"input": "h0"}
    loop["self"] = loop
    result = _result(tmp_path, FileResult("m.onnx", state_pairs=[loop]), FileResult("ok.onnx"))
    result.quarantine()
    assert result.files[0].error is not None and result.files[0].error["type"] == "RenderError"
    assert result.files[1].error is None
