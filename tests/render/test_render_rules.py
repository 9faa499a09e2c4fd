"""Rules every renderer keeps, on hand-built results: escapes at every boundary of :func:`printable`, one bad
record quarantined instead of blanking the report, a failed file rendered as its error only (nothing of its partial
results in any format), and the summary line closing the text and GitHub reports."""

from __future__ import annotations

import json
from pathlib import Path

from rnnir.passes.diagnostics import Diagnostic, Location, Rule, Severity
from rnnir.render import FORMATS, FileResult, LintResult, printable, printable_lines, render

RULES = {"SD001": Rule("SD001", "state-not-written-back", Severity.ERROR, "a slot is read but never written back", "SD001 doc")}


def _finding(message: str = "slot 'h0' is never written back", node: str = "lstm_node") -> Diagnostic:
    return Diagnostic(
        "SD001", "state-not-written-back", Severity.ERROR, message, (Location(node="recurrent0", onnx_node=node, value="hn"),), "store Y_h", slot="h0"
    )


def test_printable_escapes_each_kind_of_character_by_its_own_rule():
    """Python's repr of a str is the oracle for the escape forms (\\xNN, \\uNNNN, \\UNNNNNNNN), taken at each range edge."""
    cases = [
        ("plain name", "plain name"),
        ("a\nb\rc\td", "a\\nb\\rc\\td"),
        ("\x00\x1b\x7f", "\\x00\\x1b\\x7f"),
        ("\x85\xad", "\\x85\\xad"),  # C1 control and soft hyphen: below 0x100
        ("\u0378", "\\u0378"),  # unassigned, just past 0xff
        ("\u2028\u202e", "\\u2028\\u202e"),  # line separator, bidi override
        ("\ufffe", "\\ufffe"),  # a non-character near the top of 16 bits
        ("\U000e0001", "\\U000e0001"),  # a language tag: beyond 16 bits
        # os.fsdecode's surrogate escapes U+DC80..U+DCFF stand for the bytes 0x80..0xff: shown as those bytes
        ("\udc80", "\\x80"),
        ("\udcff", "\\xff"),
        ("\udc7f", "\\udc7f"),  # a lone surrogate just outside that range is only a code point
        ("\udd00", "\\udd00"),
        ("é✓𝄞", "é✓𝄞"),  # printable beyond ASCII stays as it is
    ]
    for text, want in cases:
        assert printable(text) == want, ascii(text)
        if text not in ("\udc80", "\udcff") and not text.isprintable():  # the independent oracle where it applies
            assert want == "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text), ascii(text)


def test_printable_defuses_a_workflow_command_after_any_spaces_only():
    assert printable("::error::x") == "\\x3a:error::x"
    assert printable("   ::set-env name=A::1") == "   \\x3a:set-env name=A::1"
    assert printable("\t::warning::x") == "\\t::warning::x"  # the tab is escaped: the line no longer starts with spaces then ::
    assert printable("a ::error::x") == "a ::error::x"  # not at the start of a line: inert
    assert printable(":x") == ":x"
    assert printable_lines("ok\n::error::x\n\x1b") == "ok\n\\x3a:error::x\n\\x1b"


def test_render_quarantines_a_record_json_cannot_write_in_every_format(tmp_path: Path):
    """A finding with a lone surrogate in its message cannot be written as UTF-8 JSON: that file becomes a
    RenderError record, the other file is reported in full, and the exit code says a file failed."""
    for fmt in FORMATS:
        bad = FileResult("bad.onnx", diagnostics=[_finding("name \udc80 is not UTF-8")], verdicts={"slices": []})
        good = FileResult("good.onnx", diagnostics=[_finding()])
        result = LintResult(files=[bad, good], rules=RULES, version="1", cwd=tmp_path)
        text = render(result, fmt)
        text.encode("utf-8")  # writable at all
        assert result.files[0].error is not None and result.files[0].error["type"] == "RenderError", fmt
        assert result.files[0].diagnostics == [] and result.files[0].verdicts is None
        assert result.files[1] is good and result.exit_code == 2
        assert "is not UTF-8" not in text and "slot 'h0' is never written back" in text, fmt


def test_a_failed_file_shows_its_error_and_nothing_it_held_in_every_format(tmp_path: Path):
    """Partial results on a failed file's record (a finding, pairs, verdicts) reach no format; its error does."""
    partial = FileResult(
        "failed.onnx",
        diagnostics=[_finding("PARTIAL-FINDING", node="PARTIAL-NODE")],
        state_pairs=[{"input": "PARTIAL-IN", "output": "PARTIAL-OUT", "source": "declared", "reason": "", "slices": []}],
        error={"type": "ModelError", "message": "cannot read it"},
    )
    ok = FileResult("ok.onnx", diagnostics=[_finding()])
    for fmt in ("text", "sarif", "github"):
        for verbose in (False, True):
            result = LintResult(files=[partial, ok], rules=RULES, version="1", cwd=tmp_path, verbose=verbose)
            text = render(result, fmt)
            assert "PARTIAL" not in text and "cannot read it" in text, (fmt, verbose)
            assert text.count("slot 'h0' is never written back") == 1, (fmt, verbose)
    sarif = json.loads(render(LintResult(files=[partial, ok], rules=RULES, version="1", cwd=tmp_path), "sarif"))
    run = sarif["runs"][0]
    assert [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]] == ["ok.onnx"]
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["descriptor"] == {"id": "ModelError"} and note["locations"][0]["physicalLocation"]["artifactLocation"]["index"] == 0


def test_the_text_and_github_reports_end_with_the_summary_line(tmp_path: Path):
    result = LintResult(files=[FileResult("a.onnx", diagnostics=[_finding()]), FileResult("b.onnx")], rules=RULES, version="1", cwd=tmp_path)
    for fmt in ("text", "github"):
        lines = render(result, fmt).split("\n")
        assert lines[-1] == "" and lines[-2] == "1 error, 0 warnings in 2 files", fmt
    gh = render(result, "github").split("\n")
    assert gh[0] == "::error file=a.onnx,line=1,title=SD001 state-not-written-back::slot 'h0' is never written back%0Ahint: store Y_h"
    assert len(gh) == 3


def test_a_sarif_rule_without_documentation_describes_itself_by_its_summary(tmp_path: Path):
    documented = Rule("SD001", "state-not-written-back", Severity.ERROR, "a slot is read but never written back", "First line\nsecond line.\n\nMore.")
    bare = Rule("SD001", "state-not-written-back", Severity.ERROR, "a slot is read but never written back", "")
    for rule, full, help_text in ((documented, "First line second line.", documented.doc), (bare, bare.summary, bare.summary)):
        result = LintResult(files=[FileResult("a.onnx", diagnostics=[_finding()])], rules={"SD001": rule}, version="1", cwd=tmp_path)
        (got,) = json.loads(render(result, "sarif"))["runs"][0]["tool"]["driver"]["rules"]
        assert got["shortDescription"] == {"text": rule.summary}
        assert got["fullDescription"] == {"text": full} and got["help"] == {"text": help_text}
        assert got["defaultConfiguration"] == {"level": "error"}


def test_sarif_of_a_hand_built_result_is_the_hand_written_document(tmp_path: Path):
    """Every field, on a run with a finding that has a hint, a slot and an IR node; one without any; a clean
    analysed file outside the working directory; a failed file.  The fingerprint is the documented recipe:
    sha256 of code, file URI, slot and the sorted logical locations joined by U+001F."""
    import hashlib

    outside = tmp_path.parent / f"{tmp_path.name}-far" / "far.onnx"
    full = Diagnostic(
        "SD001", "state-not-written-back", Severity.ERROR, "lost", (Location(node="rec0", onnx_node="lstm", value="hn", branch=("If_0.then_branch",)),),
        "store it", slot="h0",
    )
    bare = Diagnostic("SD001", "state-not-written-back", Severity.WARNING, "plain", ())
    verdicts = {"slices": [{"slice": "h0", "verdict": "verified"}]}
    files = [
        FileResult("m.onnx", diagnostics=[full, bare], verdicts=verdicts),
        FileResult(str(outside), verdicts={"slices": []}),
        FileResult("bad.onnx", error={"type": "ModelError", "message": "unreadable"}),
    ]
    result = LintResult(files=files, rules=RULES, version="1.2", cwd=tmp_path)
    doc = json.loads(render(result, "sarif"))
    run = doc["runs"][0]
    far_uri = "file://" + outside.resolve().as_posix()
    assert run["artifacts"] == [
        {"location": {"uri": "m.onnx", "uriBaseId": "%SRCROOT%"}, "properties": {"rnnirVerdicts": verdicts}},
        {"location": {"uri": far_uri}, "properties": {"rnnirVerdicts": {"slices": []}}},
        {"location": {"uri": "bad.onnx", "uriBaseId": "%SRCROOT%"}},
    ]
    here = {"artifactLocation": {"uri": "m.onnx", "uriBaseId": "%SRCROOT%", "index": 0}, "region": {"startLine": 1}}

    def fingerprint(d: Diagnostic) -> str:
        parts = [d.code, "m.onnx", d.slot or "", *sorted(loc.logical for loc in d.locations)]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    assert run["results"] == [
        {
            "ruleId": "SD001", "level": "error", "message": {"text": "lost\nHint: store it"},
            "locations": [{
                "physicalLocation": here,
                "logicalLocations": [{"fullyQualifiedName": "graph/If_0.then_branch/lstm/hn", "name": "hn", "kind": "variable"}],
                "properties": {"irNode": "rec0"},
            }],
            "partialFingerprints": {"rnnirFingerprint/v1": fingerprint(full)},
            "properties": {"name": "state-not-written-back", "hint": "store it", "slot": "h0"},
            "ruleIndex": 0,
        },
        {
            "ruleId": "SD001", "level": "warning", "message": {"text": "plain"}, "locations": [{"physicalLocation": here}],
            "partialFingerprints": {"rnnirFingerprint/v1": fingerprint(bare)},
            "properties": {"name": "state-not-written-back", "hint": ""},
            "ruleIndex": 0,
        },
    ]
    assert run["invocations"] == [{
        "executionSuccessful": False, "exitCode": 2,
        "toolExecutionNotifications": [{
            "level": "error", "message": {"text": "bad.onnx: unreadable"}, "descriptor": {"id": "ModelError"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": "bad.onnx", "uriBaseId": "%SRCROOT%", "index": 2}, "region": {"startLine": 1}}}],
        }],
    }]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.resolve().as_uri() + "/"}}
    assert run["tool"]["driver"]["version"] == run["tool"]["driver"]["semanticVersion"] == "1.2"
    # a clean run: successful, and no notifications key at all
    clean = json.loads(render(LintResult(files=[FileResult("m.onnx")], rules=RULES, version="1", cwd=tmp_path), "sarif"))
    assert clean["runs"][0]["invocations"] == [{"executionSuccessful": True, "exitCode": 0}] and clean["runs"][0]["results"] == []


def test_the_text_reports_of_a_hand_built_result_line_for_line(tmp_path: Path):
    """Concise and verbose, with and without --cost: a failed file, a clean file without pairs, a file with a pair,
    a config, a cost and findings located at an ONNX node, at a value only, and nowhere."""
    pair = {"input": "h0", "output": "hn", "source": "declared", "reason": "by the caller", "slices": []}
    at_value = Diagnostic("SD001", "state-not-written-back", Severity.ERROR, "by value", (Location(value="v0"),), "")
    nowhere = Diagnostic("SD001", "state-not-written-back", Severity.ERROR, "nowhere", (Location(),), "")
    files = [
        FileResult("bad.onnx", error={"type": "ModelError", "message": "unreadable"}),
        FileResult("clean.onnx", config="pyproject.toml"),
        FileResult("m.onnx", state_pairs=[pair], diagnostics=[_finding(), at_value, nowhere], cost={"macs": 12}),
    ]
    concise = [
        "bad.onnx: error: unreadable",
        "m.onnx: lstm_node: SD001 [error] slot 'h0' is never written back",
        "  hint: store Y_h",
        "m.onnx: v0: SD001 [error] by value",
        "m.onnx: SD001 [error] nowhere",
    ]
    summary = "3 errors, 0 warnings in 3 files; 1 could not be analysed"
    verbose = [
        "bad.onnx", "  bad.onnx: error: unreadable", "",
        "clean.onnx", "  no state pairs", "  no findings", "  config: pyproject.toml", "",
        "m.onnx", "  pair h0 -> hn (declared: by the caller)",
        "  m.onnx: SD001 [error] slot 'h0' is never written back", "    hint: store Y_h",
        "  m.onnx: SD001 [error] by value", "  m.onnx: SD001 [error] nowhere",
    ]
    cost = ["m.onnx: cost per call:", "  macs: 12"]
    def text(with_cost: bool, verbose_flag: bool) -> list[str]:
        return render(LintResult(files=files, rules=RULES, version="1", cwd=tmp_path, with_cost=with_cost, verbose=verbose_flag), "text").split("\n")

    for with_cost in (False, True):
        assert text(with_cost, False) == concise + (cost if with_cost else []) + ["", summary, ""], with_cost
        assert text(with_cost, True) == verbose + (["  cost per call:", "    macs: 12"] if with_cost else []) + ["", summary, ""], with_cost


def test_verbose_text_shows_every_slice_of_a_split_state_with_its_ports_and_the_branches_of_a_finding(tmp_path: Path):
    port = {"node": "lstm", "op": "LSTM", "port": "initial_h", "direction": None, "branch": None}
    two = {
        "input": "state", "output": None, "source": "metadata", "reason": "named",
        "slices": [
            {"slice": "state[0]", "entry": [port], "exit": [], "exit_kind": {"": "final"}},
            {"slice": "state[1]", "entry": [], "exit": [{**port, "port": "Y", "direction": "forward", "branch": "If_0.then", "step": 3}],
             "exit_kind": {"": "final", "If_0.then": "first_step"}},
        ],
    }
    one = {"input": "h", "output": "hn", "source": "declared", "reason": "", "slices": [{"slice": "h", "entry": [port], "exit": [port]}]}
    bare = {"input": "c", "output": "cn", "source": "suggested", "reason": "names"}  # a suggested pair has no slices
    info = Diagnostic("SD009", "unverified", Severity.INFO, "cannot follow", (Location(onnx_node="a", branch=("If_0.then_branch",)),
                      Location(onnx_node="b", branch=("If_0.then_branch",)), Location(onnx_node="c", branch=("If_0.else_branch", "If_1.then_branch"))))
    result = LintResult(files=[FileResult("m.onnx", state_pairs=[two], suggested_pairs=[one, bare], diagnostics=[info])], rules=RULES, version="1", cwd=tmp_path, verbose=True)
    assert render(result, "text").split("\n") == [
        "m.onnx",
        "  pair state -> <nothing> (metadata: named)",
        "    state[0]: in -> LSTM 'lstm'.initial_h; out <- nothing (final)",
        "    state[1]: in -> nothing; out <- LSTM 'lstm'.Y[forward]@3 in If_0.then (main: final, If_0.then: first_step)",
        "  suggested pair h -> hn (declared: )",  # one slice: nothing more to say
        "  suggested pair c -> cn (suggested: names)",
        "  m.onnx: SD009 [info] cannot follow",
        "    in If branch: If_0.then_branch, If_0.else_branch/If_1.then_branch",
        "",
        "0 errors, 0 warnings, 1 info in 1 file",
        "",
    ]
    result.verbose = False
    assert render(result, "text").split("\n")[0] == "m.onnx: a: SD009 [info] cannot follow (in If_0.then_branch, If_0.else_branch/If_1.then_branch)"


def test_cost_text_draws_mappings_as_keys_and_lists_of_records_as_tables():
    from rnnir.render import render_cost_text

    cost = {
        "macs": 1200, "unknown": None, "empty": {}, "dims": [1, 2], "none": [],
        "nested": {"bytes": 8, "rows": [{"op": "LSTM", "macs": 1000}, {"op": "Gather", "note": "x"}]},
        "mixed": [{"a": {"b": 1}}],
    }
    assert render_cost_text(cost) == [
        "macs: 1200", "unknown: -", "empty: {}", "dims: 1, 2", "none: -",
        "nested:", "  bytes: 8", "  rows:",
        "    op      macs  note",
        "    LSTM    1000",
        "    Gather        x",
        "mixed:", '  a',  '  {"b": 1}',
    ]
    assert render_cost_text(7) == ["7"] and render_cost_text([1, "x"]) == ["1, x"] and render_cost_text([]) == ["-"]
    assert render_cost_text([{"a": [{"b": 1}], "c": [1, 2]}]) == ["a           c", '[{"b": 1}]  1, 2']


def test_the_summary_line_says_what_was_hidden_and_how_many_slices_were_verified(tmp_path: Path):
    files = [
        FileResult("a.onnx", diagnostics=[_finding()], suppressed=2, baselined=1, verdicts={"verified": 3, "violated": 1, "unverified": 2}),
        FileResult("b.onnx", verdicts={"verified": 1}),
    ]
    line = render(LintResult(files=files, rules=RULES, version="1", cwd=tmp_path), "text").split("\n")[-2]
    assert line == "1 error, 0 warnings in 2 files (2 suppressed, 1 baselined); 4 of 7 state slices verified (2 unverified)"
    files = [FileResult("b.onnx", verdicts={"verified": 1})]
    assert render(LintResult(files=files, rules=RULES, version="1", cwd=tmp_path), "text").split("\n")[-2] == (
        "0 errors, 0 warnings in 1 file; 1 of 1 state slice verified"
    )


def test_github_annotations_name_a_file_relative_to_the_working_directory_or_absolute(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    outside = (tmp_path.parent / f"{tmp_path.name}-far" / "far, odd:name.onnx").resolve()
    files = [FileResult("sub/m.onnx", diagnostics=[_finding()]), FileResult(str(outside), diagnostics=[_finding()])]
    lines = render(LintResult(files=files, rules=RULES, version="1", cwd=tmp_path), "github").split("\n")
    assert lines[0].startswith("::error file=sub/m.onnx,line=1,")
    # a property value escapes ':' and ',' (GitHub's own escapes), so an absolute path with them stays one property
    assert lines[1].startswith("::error file=" + outside.as_posix().replace(":", "%3A").replace(",", "%2C") + ",line=1,")
